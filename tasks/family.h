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

namespace rmt {

// `rmt data show`'s options; each family refuses the other's (-n counts samples, --bytes bytes).
struct ShowRequest {
  std::optional<std::string> split;  // default: train (text: all three splits)
  std::optional<int> samples;        // -n, algorithmic (default 5)
  std::optional<int64_t> bytes;      // --bytes, text (default 400)
};

class DatasetFamily {
 public:
  virtual ~DatasetFamily() = default;
  virtual const char* name() const = 0;  // "algorithmic" | "text"
  // A language model's data: trained in streams of segment_length (config.h is_lm), not in
  // samples of `segments`.
  virtual bool language_model() const = 0;
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
