#pragma once
// What the sweep's files share and the public interface (sweep.h) does not offer: how a sweep
// applies its values to a config and resolves its `data:` block (sweep_spec.cpp), and how it
// reads a value back out of a config (sweep_plan.cpp).
#include <filesystem>
#include <map>
#include <string>

#include "lib/experiments/sweep.h"
#include "lib/run/config.h"
#include "tasks/family.h"
#include "tasks/task_kind.h"

namespace rmt::sweep_internal {

// A grid key that varies the dataset (`data.length`) rather than the config.
inline bool is_data_key(const std::string& key) { return key.rfind("data.", 0) == 0; }

// Applies `key: value` to a config, rewording the config's own error (which has the reason and
// the did-you-mean) so that it names the sweep file and section.
void apply_value(Config& config, const std::string& key, const std::string& value, const std::string& where);

// A data block's dataset: one that `rmt generate` writes from the block's options (a task's, or
// task text's: `rmt generate text --input FILE [--split S] [--bytes N]`), or one that exists
// (`dir: PATH`, e.g. from `rmt data import`), which the sweep reads and never writes.
struct SweepData {
  std::string task;  // the task's name (copy120, an imported task's NAME; text)
  FamilyKind family = FamilyKind::samples;  // text: runs are language models
  int seq_len = 0;   // a sample's input positions (not for text)
  std::string dir;   // `dir:`'s directory; empty when the sweep generates the dataset
};
// Resolves a data block (fails like `rmt generate` would, or naming what `dir:` lacks).
SweepData resolve_data(const std::map<std::string, std::string>& data, const std::string& where);
// The family, task and sample positions of the dataset that exists in `dir` (data: {dir: ...}),
// from its files (sweep_dataset.cpp; the fuzz harnesses, which read no dataset, link a stand-in).
SweepData read_existing_dataset(const std::string& dir, const std::string& where);

// The value of one dotted key in a config, as its YAML text (via to_yaml, the one place that
// knows how each key prints).
std::string config_value(const Config& config, const std::string& key);

// What a sweep starts, one process each: a run alone (`rmt train`), or with --pack a group of
// runs of one model shape (`rmt train-pack`, lib/run/train.h train_packed) trained K at a time.
struct SweepTask {
  std::vector<size_t> runs;  // indices into plan.runs, in grid order
  bool packed = false;
  std::string id;            // a packed task's name: its list and log files are RUNS/NAME/packs/ID.*
};
// The tasks of the runs in `queue`: each its own without packing (pack <= 1); else the runs that
// can share a pack (the same pack_shape and dataset, and one thread: a run resumed with another
// thread count trains alone) in groups, each group split into at most `jobs` tasks so that -j
// processes can run one shape; a group of one run trains alone.
std::vector<SweepTask> sweep_tasks(const SweepPlan& plan, const std::vector<size_t>& queue, int pack, int jobs);
// The `rmt train-pack` arguments of a packed task (writes its list of runs first), and its log.
std::vector<std::string> pack_args(const SweepPlan& plan, const SweepTask& task, int pack, int threads);
std::filesystem::path pack_log(const SweepPlan& plan, const SweepTask& task);

}  // namespace rmt::sweep_internal
