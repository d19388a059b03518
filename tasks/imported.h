#pragma once
// The imported kind: a user's own task, brought as NAME_{train,val,test}_{X,y}.npy and written in
// rmt's layout by `rmt data import` (tasks/import.h). X is what the model reads, y the answer it
// writes after X (stacked, as copy and retrieval), or, for aligned data, y[i] is the target at X's
// position i (as sqeq). rmt derives nothing: meta.yaml states the vocabulary, len_x, len_y, the
// answer size and the layout, and y is data, not computed from X. Its record in the task table
// (tasks/task_kind.h) points here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

int imported_len_x(const TaskOptions& t);
int imported_len_y(const TaskOptions& t);
int imported_answer_size(const TaskOptions& t);
bool imported_is_stacked(const TaskOptions& t);
// y holds -1 at positions not scored (an aligned import whose y marked them -1 or -100).
bool imported_unscored_targets(const TaskOptions& t);
std::vector<std::string> imported_vocab(const TaskOptions& t);
// An X row of nothing but the declared padding id is an empty sample.
std::string imported_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
// "X: ...   y: ..." ("y: prefix | answer" where only the end of y is scored; '·' where y is -1).
std::string imported_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
// The task's values from meta.yaml (they are the dataset's own), and their joint constraints.
void imported_finish_from_meta(TaskOptions& t, const DatasetMeta& meta);
void imported_check_meta_options(const TaskOptions& t);

// How the rules below name the values: as meta.yaml spells them, or as `rmt data import`'s flags.
enum class ImportedNames { meta_yaml, flags };
// What is wrong with an imported task's stated values (widths, answer size, layout, padding id,
// symbols); empty when they fit.
std::string imported_options_problem(const TaskOptions& t, ImportedNames names);

}  // namespace rmt
