#pragma once
// Zoology's multi-query associative recall, MQAR (Arora et al. 2023, "Zoology", arXiv 2312.04927),
// as HazyResearch/zoology's zoology/data/multiquery_ar.py makes a sample (docs/datasets.md, "MQAR"):
// with V ids and K = V / 2,
//   the pairs    positions 0 .. 2P-1: k1 v1 k2 v2 ..., keys distinct from 1..K-1, values distinct
//                from K..V-1 (id 0 is never a key: Zoology's zero filler);
//   the queries  key i again at position 2P + 2 g_i, where the gaps g_i (distinct, 0..S-1, S =
//                (L - 2P) / 2) are drawn one after another without replacement with weights
//                a * g^(a-1), g = 1..S (Zoology's power law, a = power_a: small gaps likely);
//   the target   y[2P + 2 g_i] = v_i (the value, predicted at the query key), -1 elsewhere:
//                every other position is unscored;
//   the filler   every other position: `random`, uniform over the ids that are not this sample's
//                keys (Zoology draws over all V ids, so a filler can repeat a key: its issue #29;
//                here a key occurs only in its pair and its query, so y is a function of X), or
//                `zero`, id 0 (Zoology's random_non_queries=False).
// Stored aligned (X the inputs, y the labels, one width L): X is Zoology's `inputs`, y its `labels`
// with -100 written as -1. Its record in the task table (tasks/task_kind.h) points here.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_kind.h"

namespace rmt {

// Zoology's defaults (zoology/config.py DataSegmentConfig, zoology/data/multiquery_ar.py MQARConfig).
inline constexpr int kMqarDefaultVocab = 8192, kMqarDefaultLength = 64, kMqarDefaultPairs = 8;
inline constexpr const char* kMqarDefaultPowerA = "0.01";
inline constexpr int kMqarMaxVocab = 1 << 20;

int mqar_len(const TaskOptions& t);          // X's and y's columns: the sequence length L
int mqar_answer_size(const TaskOptions& t);  // L: every position may be scored; y's -1 unscores it
std::vector<std::string> mqar_vocab(const TaskOptions& t);  // "0" .. "V-1": Zoology's own ids
int64_t mqar_max_unique(const TaskOptions& t);
void mqar_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void mqar_target(const TaskOptions& t, const int64_t* x, int64_t* y);
// Keys and values in their halves and distinct, each key queried once, at an even offset after
// the pairs, no key anywhere else, the filler of the option.
std::string mqar_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
std::string mqar_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
void mqar_resolve_options(TaskOptions& t, const TaskArgs& a);
void mqar_check_meta_options(const TaskOptions& t);
std::string mqar_generated_summary(const TaskOptions& t);
// power_a as a number (the table's options are ints and texts; meta.yaml holds its decimal text).
double mqar_power_a(const TaskOptions& t);

}  // namespace rmt
