#pragma once
// `rmt generate` of the algorithmic tasks: distinct samples drawn, split, written atomically with
// meta.yaml last (docs/datasets.md).
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

struct GenerateRequest {
  TaskOptions task;
  SplitSizes sizes;
  uint64_t seed = 0;
  std::string out_dir;
  bool force = false;
  bool check_only = false;  // check what generating would need (sizes, memory, disk); write nothing
};
struct GenerateResult {
  std::vector<std::string> files;  // written, meta.yaml last
  double seconds = 0;
  std::vector<std::string> notes;  // for stderr: e.g. a small sqeq range that skews the no-root share
};
GenerateResult generate_dataset(const GenerateRequest& request);

// `count` distinct X rows, drawn i.i.d. (duplicates rejected) then shuffled. Row-major [count, len_x].
std::vector<int64_t> generate_unique_x(const TaskOptions& task, int64_t count, uint64_t seed);

}  // namespace rmt
