#pragma once
// What a run trains on, decided once: samples of an algorithmic task cut into `segments`
// (docs/paper.md §1-5), or a text's bytes read as train.batch_size streams in segments of
// segment_length (a language model, docs/paper.md §7). Everything that differs between the two
// is a method here (how the run is set up on its dataset, the data a step reads, evaluation, the
// results JSON, the memory estimate, descriptions, what other commands accept), so that no other
// code asks which one a run is. The dataset's family (tasks/family.h) decides a new run's
// (prepare_run); a run directory's config records it (segment_length set: text), checked against
// the dataset when the run was prepared.
#include <memory>
#include <string>

#include "lib/core/model.h"
#include "lib/run/config.h"
#include "lib/run/evaluate.h"
#include "tasks/family.h"

namespace rmt {

class Engine;
class TrainingData;
struct EvalRunRequest;
struct RunSetup;

class RunFamily {
 public:
  virtual ~RunFamily() = default;
  virtual const char* name() const = 0;  // "samples" | "text"

  // The run `config` describes on its dataset, whose meta the family reads (load_dataset_meta,
  // load_text_meta). check_splits (text): that every split gives each stream a target and the
  // train split a whole segment (training; evaluation checks the split it reads).
  virtual RunSetup prepare(Config config, bool check_splits = true) const = 0;
  // The run as `rmt eval` reads it, from its run directory's config (lib/run/eval_run.h).
  virtual RunSetup prepare_eval(const EvalRunRequest& request, Config config, const std::string& config_path) const = 0;
  // Refuses a config whose settings belong to the other family (segment_length on a task's
  // samples, `segments` or a curriculum on text); `data` names the dataset in the message.
  virtual void check_config(const Config& config, const std::string& data, const std::string& task) const = 0;

  // `rmt train`'s first line: what trains on what, how, in how much memory; "resuming ... (from
  // step N)" when start_step > 0.
  virtual std::string start_line(const RunSetup& run, int64_t params, int64_t start_step, int threads) const = 0;
  // What `rmt train` of the run keeps in memory, its largest over the curriculum, its description
  // ("training (rmt model, batch 32, 9 segments)"), and a batch of `batch` in messages.
  virtual Workload train_workload(const RunSetup& run) const = 0;
  virtual MemoryEstimate train_memory_estimate(const RunSetup& run) const = 0;
  virtual std::string training_description(const RunSetup& run) const = 0;
  virtual std::string batch_text(int batch) const = 0;  // "batch 32" | "32 streams"
  // What `rmt eval` of the run keeps in memory, evaluating `split` in batches (streams) of `batch`.
  virtual Workload eval_workload(const RunSetup& run, int batch, const std::string& split) const = 0;
  // Bytes of a split's files (0 where missing).
  virtual double split_file_bytes(const RunSetup& run, const std::string& split) const = 0;

  // The run's train and val splits (the test split is read at the end, by test()).
  virtual std::unique_ptr<TrainingData> open_training_data(const RunSetup& run) const = 0;
  // `split` in full, or its first `samples` samples (text: positions), in batches (streams) of
  // `batch`: what rmt eval reports and training's test.
  // on_predictions (samples only): each batch's predictions, for `rmt eval --predictions`.
  // schedule (samples only; evaluate_run refuses diagonal for any kind but armt): the
  // teacher-forced pass's order (EvalOptions::schedule). count_non_finite (samples only):
  // EvalOptions::count_non_finite.
  virtual EvalResult evaluate_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                                    int64_t samples, const PredictionCallback& on_predictions = {},
                                    EvalSchedule schedule = EvalSchedule::sequential,
                                    bool count_non_finite = false) const = 0;
  // `rmt eval`'s JSON object (shared with results.json).
  virtual std::string result_json(const EvalResult& r, const std::vector<int>& seg_len) const = 0;
  // Whether runs of the same pack_shape can train packed, one computation per step
  // (lib/run/train.h); a language model's step carries state, so it trains alone.
  virtual bool can_pack() const = 0;
  // Refuses `command` ("rmt attn", "rmt sample", "rmt eval --predictions") on a run of this family
  // where it does not apply, naming why.
  virtual void check_command(const std::string& command, const std::string& run_dir, const Config& config) const = 0;
};

const RunFamily& samples_family();
const RunFamily& text_family();
// The family of kind `kind`.
const RunFamily& run_family(FamilyKind kind);
// The family a run's config records (lib/run/config_family.h's decision: segment_length set).
const RunFamily& family_of(const Config& config);
// The family of the dataset in `dir` (tasks/family.h's decision).
const RunFamily& family_of_data(const std::string& dir);

}  // namespace rmt
