#pragma once
// `rmt data check` of an algorithmic task's dataset (tasks/family.h checks a dataset of any family).
#include <string>
#include <vector>

namespace rmt {

struct CheckResult {
  bool ok = true;
  std::vector<std::string> summary;     // one line per split
  std::vector<std::string> violations;  // "file row R: what is wrong"
};
// `rmt data check DIR`: meta.yaml against the task (every key, type and value it implies), the
// arrays' headers (dtype int64, [N, len_x] / [N, len_y], N >= 1, counts), then every row (ids in
// the vocabulary, the task kind's invariants), no X twice, sha256. Never reads an element before
// the shapes that index it are checked. Fails (rmt::Error) only when meta.yaml cannot be read at
// all (syntax, unknown / missing / mistyped key, unknown task); everything else is a violation.
CheckResult check_task_dataset(const std::string& dir, int max_violations = 20);
// "DIR is not a valid dataset:\n  violation\n  ..." as `rmt data check` reports it, also
// the message of every command that refuses the dataset.
std::string invalid_dataset_message(const std::string& dir, const std::vector<std::string>& violations);

}  // namespace rmt
