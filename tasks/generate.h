#pragma once
// `rmt generate` of the algorithmic tasks: distinct samples drawn, split, written atomically with
// meta.yaml last (docs/datasets.md).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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

// Writing a dataset of any kind (also `rmt data import`, tasks/import.h) ----------------------

using FileSums = std::vector<std::pair<std::string, std::string>>;  // file name -> sha256 hex, in file order
// Where a dataset came from, as meta.yaml records it (provenance only: nothing reads it back).
struct MetaProvenance {
  std::optional<uint64_t> seed;  // generated: the seed (and the generator's name)
  std::string source_dir;        // imported: the directory the arrays came from, and their sums
  FileSums source_sha256;
};
// meta.yaml of a dataset of task `t` (every value from the task table) whose files have `hashes`.
std::string dataset_meta_yaml(const TaskOptions& t, const SplitSizes& sizes, const FileSums& hashes,
                              const MetaProvenance& from);
// DIR/{prefix}_{split}_X.npy and _y.npy (int64 [n, len_x], [n, len_y]), written atomically; their
// names and sums are appended to `hashes`, their paths to `written`.
void write_split_files(const std::string& out_dir, const std::string& prefix, const std::string& split, int64_t n,
                       const int64_t* x, int len_x, const int64_t* y, int len_y, FileSums& hashes,
                       std::vector<std::string>& written);

// `count` distinct X rows, drawn i.i.d. (duplicates rejected) then shuffled. Row-major [count, len_x].
std::vector<int64_t> generate_unique_x(const TaskOptions& task, int64_t count, uint64_t seed);

}  // namespace rmt
