#pragma once
// copy and reverse (docs/paper.md §1): X is `length` symbols of an alphabet of `symbols` (ids
// 2 .. symbols+1); y is the start token <go> (id 1) then the answer: X twice (copy) or X reversed
// (reverse). Their records in the task table (tasks/task_kind.h) point here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

int sequence_len_x(const TaskOptions& t);
int copy_len_y(const TaskOptions& t);
int reverse_len_y(const TaskOptions& t);
std::vector<std::string> sequence_vocab(const TaskOptions& t);  // <pad> <go> 0 1 ... (symbols)
int64_t sequence_max_unique(const TaskOptions& t);
void copy_target(const TaskOptions& t, const int64_t* x, int64_t* y);
void reverse_target(const TaskOptions& t, const int64_t* x, int64_t* y);
void copy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void reverse_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void sequence_resolve_options(TaskOptions& t, const TaskArgs& a);
std::string sequence_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
// The authors' layout: the length is X's column count; 10 symbols for the base names, 8 for the
// long presets (docs/paper.md §1).
void sequence_options_from_columns(DatasetMeta& m, int64_t columns, const std::string& x_path);
// "X: ...   y: <go> | answer": the line of a stacked row whose y starts with one start token.
std::string show_stacked_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);

}  // namespace rmt
