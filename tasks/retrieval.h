#pragma once
// Associative retrieval (docs/paper.md §1): X is `pairs` key-value pairs (keys distinct letters,
// ids 11..36; values distinct digits, ids 0..9) then a query key; y is "?" (id 10) then the
// query's value. Its record in the task table (tasks/task_kind.h) points here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

int retrieval_len_x(const TaskOptions& t);
int retrieval_len_y(const TaskOptions& t);
std::vector<std::string> retrieval_vocab(const TaskOptions& t);  // 0..9 ? a..z
int64_t retrieval_max_unique(const TaskOptions& t);
void retrieval_target(const TaskOptions& t, const int64_t* x, int64_t* y);
void retrieval_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void retrieval_resolve_options(TaskOptions& t, const TaskArgs& a);
void retrieval_check_meta_options(const TaskOptions& t);  // pairs <= 10
std::string retrieval_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
// The authors' layout: pairs from X's column count (2 * pairs + 1).
void retrieval_options_from_columns(DatasetMeta& m, int64_t columns, const std::string& x_path);
std::string retrieval_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);

}  // namespace rmt
