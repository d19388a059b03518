#pragma once
// The ARMT paper's associative retrieval (Rodkin et al. 2024, docs/datasets.md), as its code
// makes it: a sample is `pairs` blocks `key SEP value EOS` (keys of key_size symbols, values of
// value_size, each symbol one of `symbols`), then the query `key GEN`; y is the queried value and
// EOS. Every block is key_size + value_size + 2 positions, so the model's input (X then y, less
// the last id) splits into pairs + 1 segments of exactly one block each (the last one id short).
//   ar_remember  keys distinct; a uniformly chosen pair is queried
//   ar_rewrite   keys may repeat; a uniformly chosen distinct key is queried, and the answer is its
//                value at its last occurrence (the memory must overwrite)
// Ids: the symbols 0..S-1, then SEP (S), GEN (S+1), EOS (S+2). Their records in the task table
// (tasks/task_kind.h) point here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

inline constexpr int kArDefaultSymbols = 16, kArDefaultPairs = 10, kArMaxSymbolSize = 8;

int ar_len_x(const TaskOptions& t);
int ar_len_y(const TaskOptions& t);
int ar_answer_size(const TaskOptions& t);  // the value and EOS
std::vector<std::string> ar_vocab(const TaskOptions& t);  // 0..9 a..z (the first S), "=", "?", "."
int64_t ar_remember_max_unique(const TaskOptions& t);
int64_t ar_rewrite_max_unique(const TaskOptions& t);
void ar_remember_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void ar_rewrite_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void ar_target(const TaskOptions& t, const int64_t* x, int64_t* y);  // the query's last value, EOS
// The blocks' structure and ids, the query among the keys (and remember's keys distinct).
std::string ar_rewrite_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
std::string ar_remember_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
std::string ar_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
// --pairs, --symbols, --key-size, --value-size onto the preset's (remember: as many keys as pairs).
void ar_rewrite_resolve_options(TaskOptions& t, const TaskArgs& a);
void ar_remember_resolve_options(TaskOptions& t, const TaskArgs& a);
void ar_remember_check_meta_options(const TaskOptions& t);
std::string ar_generated_summary(const TaskOptions& t);

}  // namespace rmt
