#pragma once
// Quadratic equations (docs/paper.md §1, sqeq): six text blocks of 30 ids, the shown equation,
// its canonical form, the discriminant, the two root lines and the answer; trained on the next
// id over the whole row (not stacked), scored on blocks 2-6. Its record in the task table
// (tasks/task_kind.h) points here.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

constexpr int kSqeqBlock = 30, kSqeqBlocks = 6;
// The paper's range (docs/paper.md §1): roots int(uniform(-100, 100)), alpha ±round(uniform(1, 10)).
constexpr int kSqeqDefaultMaxRoot = 100, kSqeqDefaultMaxAlpha = 10;
// The largest root range whose samples all fit the 30-id blocks. Roots lie in -R..R-1 (-R when
// uniform() returns exactly -R); at R = 209 the discriminant line of roots -209 and 108,
// "D=101^2-4*1*-22572=100489=317^2", needs 31 ids. Found by enumerating every sample
// (tests/test_sqeq_range.cpp checks 208 and 209).
constexpr int kSqeqMaxRoot = 208;
// The largest multiplier range whose shown equations fit a block for roots in -max_root..max_root-1
// (the longest is the one of the double root -max_root times -max_alpha).
int sqeq_max_alpha(int max_root);
// Fails unless 2 <= max_root <= kSqeqMaxRoot and 1 <= max_alpha <= sqeq_max_alpha(max_root);
// root_key / alpha_key name the values in the message ("--max-root", "options.max_root").
void check_sqeq_range(int max_root, int max_alpha, const std::string& root_key, const std::string& alpha_key);
using SqeqText = std::array<std::string, kSqeqBlocks>;
// The six block strings for roots x1, x2 and multiplier alpha of the shown equation.
// Paper example: (6, 92, -4) -> "-4*x^2+392*x-2208=0", "x^2-98*x+552=0",
// "D=98^2-4*1*552=7396=86^2", "x=(98-86)/2=6", "x=(98+86)/2=92", "6,92".
SqeqText sqeq_text_with_roots(int x1, int x2, int alpha);
// A sample without real roots: canonical x^2 + b*x + c; root lines and answer are empty.
SqeqText sqeq_text_no_roots(int b, int c, int alpha);
// "x^2-98*x+552=0" style polynomial text for coefficients (a, b, c), following the monomial rules.
std::string sqeq_polynomial(int64_t a, int64_t b, int64_t c);
// Encodes the text into 180 ids (x) and the shifted-left target (y). Fails if a block overflows.
void sqeq_encode(const SqeqText& text, int64_t* x, int64_t* y);
std::vector<std::string> sqeq_vocab();

// The task table's functions (tasks/task_kind.h).
int sqeq_len(const TaskOptions& t);          // X and y: 180 ids
int sqeq_answer_size(const TaskOptions& t);  // blocks 2-6
std::vector<std::string> sqeq_task_vocab(const TaskOptions& t);
int64_t sqeq_max_unique(const TaskOptions& t);
void sqeq_target(const TaskOptions& t, const int64_t* x, int64_t* y);
void sqeq_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void sqeq_resolve_options(TaskOptions& t, const TaskArgs& a);
void sqeq_check_meta_options(const TaskOptions& t);
std::string sqeq_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
std::string sqeq_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
std::string sqeq_generated_summary(const TaskOptions& t);
std::vector<std::string> sqeq_generation_notes(const TaskOptions& t, const std::vector<int64_t>& X, int64_t total);

}  // namespace rmt
