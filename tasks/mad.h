#pragma once
// MAD's synthetic tasks (Poli et al. 2024, "Mechanistic Design and Scaling of Hybrid
// Architectures", arXiv 2403.17844), as athms/mad-lab's mad/data/instances.py makes a sample, with
// the baselines of its configs/tasks/*.yml (docs/datasets.md, "MAD"). Ids are mad-lab's own, 0..V-1
// (V = vocab_size); every task is stored aligned (X the inputs, y the targets, one width) with
// mad-lab's ignore index -100 written as -1 (an unscored position). y is mad-lab's evaluation
// targets (is_training=False) by default; --targets next stores the training targets mad-lab's
// recall tasks train on (is_training=True: every next input), --key-motifs longest fuzzy recall's
// test instances (keys all k_motif_size long).
//   mad_recall, mad_noisy_recall  in-context recall (multi_query): pairs k v, keys 0..N/2-1, values
//        N/2..N-1 (N = V - noise ids), noise pairs of ids N..V-1 with probability frac_noise; the
//        last pair's key was seen before. X is mad-lab's inputs[:-1]: length - 1 columns; y scores
//        each key seen before, with its value. The two differ only in their defaults.
//   mad_fuzzy_recall  keys and values of 1..k_motif_size / 1..v_motif_size distinct ids, the
//        sequence left-padded with id V-1 to length + 1; X its first length ids; y scores the
//        tokens of a seen key's value, each at the position before it.
//   mad_selective_copy  tokens_to_copy ids 0..V-3 with blanks (V-2) scattered before them, the copy
//        token V-1, then blanks; y scores the tokens, in order, at the trailing blanks.
//   mad_memorization  pairs k I (I = V-1): y scores each k's value in a map fixed by kv_map_seed.
//   mad_compression  refused (mad_refused_task): it needs mad-lab's encoder-decoder readout.
// Their records in the task table (tasks/task_kind.h) point here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

inline constexpr int kMadMaxVocab = 1 << 20;
inline constexpr int kMadMaxMotif = 16;

// Why a MAD task rmt does not generate is refused; nullptr for any other name.
const char* mad_refused_task(const std::string& name);

// The pieces every MAD task shares.
std::vector<std::string> mad_vocab(const TaskOptions& t);  // "0" .. "V-1"
int mad_answer_size(const TaskOptions& t);                 // every position may be scored
std::string mad_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
void mad_check_meta_options(const TaskOptions& t);
std::string mad_generated_summary(const TaskOptions& t);
double mad_frac_noise(const TaskOptions& t);

// In-context recall and its noisy defaults (tasks/mad_recall.cpp).
int mad_recall_len(const TaskOptions& t);
int64_t mad_recall_max_unique(const TaskOptions& t);
void mad_recall_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void mad_recall_target(const TaskOptions& t, const int64_t* x, int64_t* y);
std::string mad_recall_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
void mad_recall_resolve_options(TaskOptions& t, const TaskArgs& a);

// Fuzzy in-context recall (tasks/mad_fuzzy.cpp).
int mad_fuzzy_len(const TaskOptions& t);
int64_t mad_fuzzy_max_unique(const TaskOptions& t);
void mad_fuzzy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void mad_fuzzy_target(const TaskOptions& t, const int64_t* x, int64_t* y);
std::string mad_fuzzy_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
void mad_fuzzy_resolve_options(TaskOptions& t, const TaskArgs& a);

// Selective copying and memorization (tasks/mad_copy.cpp).
int mad_copy_len(const TaskOptions& t);
int64_t mad_copy_max_unique(const TaskOptions& t);
void mad_copy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void mad_copy_target(const TaskOptions& t, const int64_t* x, int64_t* y);
std::string mad_copy_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
void mad_copy_resolve_options(TaskOptions& t, const TaskArgs& a);

int mad_memo_len(const TaskOptions& t);
int64_t mad_memo_max_unique(const TaskOptions& t);
void mad_memo_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void mad_memo_target(const TaskOptions& t, const int64_t* x, int64_t* y);
std::string mad_memo_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
void mad_memo_resolve_options(TaskOptions& t, const TaskArgs& a);
// memorization's map, key -> value, drawn from kv_map_seed alone (the same for every split).
std::vector<int64_t> mad_memo_map(const TaskOptions& t);

// Internal: the options' problems named as flags (--vocab-size) or as meta.yaml keys;
// mad_finish_options fails with the flags' problem, then spells frac_noise one way (0.20 -> 0.2).
std::string mad_options_problem(const TaskOptions& t, bool flags);
void mad_finish_options(TaskOptions& t);

}  // namespace rmt
