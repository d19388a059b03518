#pragma once
// Internal to tasks/: the parts of `rmt data check` (check.cpp) that every reader of a dataset
// shares, so that show, the training loader and the checker agree on what a valid dataset is.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/dataset.h"
#include "tasks/tasks.h"

namespace rmt {

// Collected violations: the first `max` kept in full, all counted.
struct Violations {
  int max = 20;
  std::vector<std::string> list;
  int64_t total = 0;
  void add(std::string what) {
    total++;
    if (int(list.size()) < max) list.push_back(std::move(what));
  }
};

// The task a meta names, with its options resolved (a preset's own values; a base task's from meta).
TaskOptions task_of_meta(const DatasetMeta& meta);
// `raw` with every value the task implies: kind, options, vocab, len_x, len_y, input_length,
// answer_size, stacked. What every reader indexes the arrays with.
DatasetMeta implied_meta(const DatasetMeta& raw);
// One violation per value of meta.yaml that contradicts the task, naming the key, the value in
// meta.yaml and the value implied. Nothing for the authors' layout (its meta is inferred).
void check_meta_values(const std::string& dir, const DatasetMeta& raw, const DatasetMeta& implied, Violations& v);
// The .npy headers of one split against `meta` (implied values): both files present, dtype int64,
// 2-D, [N, len_x] and [N, len_y], N >= 1 and equal, the data length the shape describes (sizes
// overflow-checked), N equal to meta.yaml's count. Reads no element. Returns N, or -1 after adding
// violations.
int64_t check_split_layout(const std::string& dir, const DatasetMeta& meta, const std::string& split, Violations& v);

// Reads the int64 [n, cols] array of an .npy file whose header check_split_layout accepted straight
// into `out` (no second copy of the bytes), and returns the sha256 of the whole file, computed on
// the way. Fails if the file no longer has that header and size.
std::string read_checked_matrix(const std::string& path, int64_t n, int cols, std::vector<int64_t>& out);

}  // namespace rmt
