#pragma once
// Dataset families (docs/datasets.md): what a dataset directory holds and what can be done with
// it before anything trains. One interface, so that `rmt data`, training and evaluation never
// ask which family they hold:
//   algorithmic  copy, reverse, retrieval, sqeq (tasks/dataset.h, tasks/task_kind.h): samples as X/y
//                .npy arrays, trained in `segments` per sample, scored on the answer positions;
//   text         bytes for language modelling (tasks/text.h): trained in streams of
//                segment_length, every position scored.
// What a family trains on (its batches, the state carried between steps, evaluation) is the
// other half of the interface, lib/run/training_data.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tasks/check.h"
#include "tasks/dataset.h"

namespace rmt {

// `rmt data show`'s options; each family refuses the other's (-n counts samples, --bytes bytes).
struct ShowRequest {
  std::optional<std::string> split;  // default: train (text: all three splits)
  std::optional<int> samples;        // -n, algorithmic (default 5)
  std::optional<int64_t> bytes;      // --bytes, text (default 400)
};

// The two families, for the tables indexed by them: a config's (lib/run/config_family.h) and a
// run's (lib/run/run_family.h). Samples: an algorithmic task's, trained in `segments` per sample;
// text: a language model's, trained in streams of segment_length.
enum class FamilyKind { samples, text };

// What a sweep needs to plan runs on a dataset that exists (data: {dir: ...}).
struct DatasetTask {
  std::string task;          // the task's name (copy, an imported task's NAME; text)
  int sample_positions = 0;  // the model's input positions of one sample (0: a text has no samples)
};

class DatasetFamily {
 public:
  virtual ~DatasetFamily() = default;
  virtual const char* name() const = 0;  // "algorithmic" | "text"
  virtual FamilyKind kind() const = 0;
  // The task in `dir` and its sample's input positions.
  virtual DatasetTask task(const std::string& dir) const = 0;
  // The dataset's meta as the samples of a task (load_dataset_meta: checked, implied values
  // filled in); a text dataset refuses, naming what it is.
  virtual DatasetMeta samples_meta(const std::string& dir) const = 0;
  // `rmt data check DIR`: every file against meta.yaml and the family's invariants. Fails
  // (rmt::Error) only when meta.yaml cannot be read at all.
  virtual CheckResult check(const std::string& dir, int max_violations) const = 0;
  // 64 hex digits identifying the data a run trains and is scored on, computed from the files.
  virtual std::string fingerprint(const std::string& dir) const = 0;
  // `rmt data show DIR`: lines to print.
  virtual std::vector<std::string> show(const std::string& dir, const ShowRequest& request) const = 0;
};

// The family of the dataset in `dir`, decided here only: meta.yaml's kind (text), otherwise the
// algorithmic tasks (with or without meta.yaml: the authors' layout has none).
const DatasetFamily& dataset_family(const std::string& dir);

// The family's check, fingerprint and show of `dir`.
CheckResult check_dataset(const std::string& dir, int max_violations = 20);
std::string dataset_fingerprint(const std::string& dir);
std::vector<std::string> show_dataset(const std::string& dir, const ShowRequest& request);

}  // namespace rmt
