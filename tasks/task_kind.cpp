// The task table: one record per kind, the presets, and resolving `rmt generate`'s task options.
#include "tasks/task_kind.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "tasks/assoc_retrieval.h"
#include "tasks/babilong.h"
#include "tasks/dataset.h"
#include "tasks/imported.h"
#include "tasks/mad.h"
#include "tasks/mqar.h"
#include "tasks/retrieval.h"
#include "tasks/sequence_tasks.h"
#include "tasks/sqeq.h"

namespace rmt {

namespace {

// A row of each type, so that each states only what it has.
TaskOptionInfo int_option(TaskOption bit, const char* key, const char* flag, std::optional<int> TaskArgs::*arg,
                          int TaskOptions::*value, int DatasetMeta::*meta_value, int lo, int hi,
                          std::optional<int> fallback, unsigned traits, const char* help) {
  return {bit, key, flag, help, arg, value, meta_value, nullptr, nullptr, nullptr, lo, hi, fallback, traits};
}
TaskOptionInfo text_option(TaskOption bit, const char* key, const char* flag, std::optional<std::string> TaskArgs::*arg,
                           std::string TaskOptions::*text, std::string DatasetMeta::*meta_text, unsigned traits,
                           const char* help) {
  return {bit, key, flag, help, nullptr, nullptr, nullptr, arg, text, meta_text, 0, 0, std::nullopt, traits};
}

}  // namespace

const std::vector<TaskOptionInfo>& task_option_info() {
  using A = TaskArgs;
  using T = TaskOptions;
  using M = DatasetMeta;
  // A kind's options go to meta.yaml in this order (ar_*: symbols, pairs, key_size, value_size).
  static const std::vector<TaskOptionInfo> options = {
      int_option(kOptLength, "length", "length", &A::length, &T::length, &M::length, 1, kBabiMaxLength, {}, 0,
                 "copy/reverse: symbols per sample L (default 24); BABILong-style: X's tokens, the model's input "
                 "positions (default 64); mqar: the sequence length, even (Zoology's input_seq_len, default 64); "
                 "mad_*: mad-lab's seq_len (recall: X has length - 1 columns; default 128, selective copy 256, "
                 "memorization 32)"),
      // --segments S --segment-length T is --length S*T (BABILong-style).
      int_option(kOptNoise, "segments", "segments", &A::segments, nullptr, nullptr, 1, kBabiMaxLength, {},
                 kNameKinds | kNotInSweep,
                 "BABILong-style: with --segment-length T, length S x T (instead of --length)"),
      int_option(kOptNoise, "segment_length", "segment-length", &A::segment_length, nullptr, nullptr, 1, kBabiMaxLength,
                 {}, kNameKinds | kNotInSweep, "BABILong-style: tokens per segment T (with --segments)"),
      int_option(kOptSymbols, "symbols", "symbols", &A::symbols, &T::symbols, &M::symbols, 1, 36, {}, 0,
                 "copy/reverse: alphabet size V, ids 2..V+1 (default 10); ar_*: 2..36 (default 16)"),
      int_option(kOptPairs, "pairs", "pairs", &A::pairs, &T::pairs, &M::pairs, 1, 100000, {}, 0,
                 "retrieval: key-value pairs K, 1..10 (default 4); ar_*: 1..100000 (default 10); mqar: Zoology's "
                 "num_kv_pairs, at most length/4 (default 8)"),
      int_option(kOptKeySize, "key_size", "key-size", &A::key_size, &T::key_size, &M::key_size, 1, kArMaxSymbolSize,
                 {}, 0, "ar_*: symbols per key (default 1)"),
      int_option(kOptValueSize, "value_size", "value-size", &A::value_size, &T::value_size, &M::value_size, 1,
                 kArMaxSymbolSize, {}, 0, "ar_*: symbols per value (default 1)"),
      // sqeq's range: R 1 gives only the root 0; from 209 on some samples do not fit a 30-id block.
      int_option(kOptMaxRoot, "max_root", "max-root", &A::max_root, &T::max_root, &M::max_root, 2, kSqeqMaxRoot,
                 kSqeqDefaultMaxRoot, kKindChecksMeta,
                 "sqeq: roots int(uniform(-R, R)) (default: the paper's 100); samples without real roots scale "
                 "with R: b in 0..2R-1, c up to R^2-1"),
      // The multiplier's most is for the smallest root range; sqeq checks the one of its R.
      int_option(kOptMaxAlpha, "max_alpha", "max-alpha", &A::max_alpha, &T::max_alpha, &M::max_alpha, 1,
                 sqeq_max_alpha(2), kSqeqDefaultMaxAlpha, kKindChecksMeta,
                 "sqeq: multiplier ±round(uniform(1, A)) (default: the paper's 10; at most 9999 for R 100, so that "
                 "the shown equation fits its 30 ids)"),
      int_option(kOptFacts, "facts", "facts", &A::facts, &T::facts, &M::facts, 1, kBabiMaxFacts, {},
                 kNameKinds | kKindChecksMeta,
                 "BABILong-style supporting facts: memorize, detect_memorize 1; reasoning 2 or 3 (default 2)"),
      // Each distractor is a fact of another person: kBabiPeople - 1 besides the question's.
      int_option(kOptDistractors, "distractors", "distractors", &A::distractors, &T::distractors, &M::distractors, 0,
                 kBabiPeople - 1, {}, kNameKinds | kKindChecksMeta,
                 "BABILong-style: facts of other people (default: memorize 0, reasoning 2)"),
      text_option(kOptNoise, "noise", "noise", &A::noise, &T::noise, &M::noise, kNameKinds,
                  "BABILong-style noise: filler (i.i.d. words w0..; default) or text (--noise-text)"),
      text_option(kOptNoise, "noise_text", "noise-text", &A::noise_text, nullptr, nullptr, kNameKinds | kReadsFile,
                  "BABILong-style --noise text: the file whose words are the noise"),
      int_option(kOptNoiseWords, "noise_words", "noise-words", &A::noise_words, &T::noise_words, &M::noise_words, 1,
                 kBabiMaxNoiseWords, {}, kNameKinds | kKindChecksMeta,
                 "BABILong-style: noise vocabulary K (filler: w0..w{K-1}, default 32; text: the K most frequent "
                 "words + <unk>, default 500)"),
      // imported: -1 (or absent) = no padding id declared; imported checks it against the vocabulary.
      int_option(kOptPadId, "pad_id", nullptr, nullptr, &T::pad_id, &M::pad_id, -1, INT_MAX, -1, 0, ""),
      // mqar (tasks/mqar.h): Zoology's vocab_size, power_a and random_non_queries.
      int_option(kOptVocabSize, "vocab_size", "vocab-size", &A::vocab_size, &T::vocab_size, &M::vocab_size, 4,
                 kMqarMaxVocab, {}, kKindChecksMeta,
                 "mqar: ids 0..V-1, keys 1..V/2-1, values V/2..V-1 (Zoology's vocab_size, default 8192); mad_*: "
                 "mad-lab's vocab_size, ids 0..V-1 (default 16; noisy recall 32, memorization 256)"),
      text_option(kOptPowerA, "power_a", "power-a", &A::power_a, &T::power_a, &M::power_a, 0,
                  "mqar: the queries' gaps drawn with weights a * g^(a-1), a in (0, 100] (Zoology's power_a, "
                  "default 0.01; 1: uniform)"),
      text_option(kOptFiller, "filler", "filler", &A::filler, &T::filler, &M::filler, 0,
                  "mqar: the positions that are neither pairs nor queries: random (uniform over the ids that are "
                  "not the sample's keys; default) or zero (id 0, Zoology's random_non_queries=False)"),
      // MAD's tasks (tasks/mad.h), mad-lab's names and meanings.
      int_option(kOptNoiseVocabSize, "noise_vocab_size", "noise-vocab-size", &A::noise_vocab_size,
                 &T::noise_vocab_size, &M::noise_vocab_size, 0, kMadMaxVocab, {}, 0,
                 "mad recall, fuzzy recall, memorization: the last noise ids before the special ones, taken from "
                 "vocab_size (mad-lab's noise_vocab_size; default 0, noisy recall 16)"),
      text_option(kOptFracNoise, "frac_noise", "frac-noise", &A::frac_noise, &T::frac_noise, &M::frac_noise, 0,
                  "mad recall, fuzzy recall, memorization: each pair is noise with this probability, in [0, 1) "
                  "(memorization [0, 1]; mad-lab's frac_noise; default 0, noisy recall 0.2)"),
      int_option(kOptMotifSize, "k_motif_size", "k-motif-size", &A::k_motif_size, &T::k_motif_size,
                 &M::k_motif_size, 1, kMadMaxMotif, {}, 0,
                 "mad_fuzzy_recall: a key is 1..K distinct key ids (mad-lab's k_motif_size, default 3)"),
      int_option(kOptMotifSize, "v_motif_size", "v-motif-size", &A::v_motif_size, &T::v_motif_size,
                 &M::v_motif_size, 1, kMadMaxMotif, {}, 0,
                 "mad_fuzzy_recall: a value is 1..K distinct value ids (mad-lab's v_motif_size, default 3)"),
      int_option(kOptTokensToCopy, "tokens_to_copy", "tokens-to-copy", &A::tokens_to_copy, &T::tokens_to_copy,
                 &M::tokens_to_copy, 1, kMadMaxVocab, {}, 0,
                 "mad_selective_copy: the tokens among the blanks, copied after the copy token (mad-lab's "
                 "num_tokens_to_copy, default 16)"),
      int_option(kOptKvMapSeed, "kv_map_seed", "kv-map-seed", &A::kv_map_seed, &T::kv_map_seed, &M::kv_map_seed, 0,
                 INT_MAX, {}, 0,
                 "mad_memorization: the seed of the fixed key-to-value map, apart from --seed (mad-lab's seed, "
                 "default 12345)"),
      text_option(kOptTargets, "targets", "targets", &A::targets, &T::targets, &M::targets, 0,
                  "mad recall, fuzzy recall: y scored (mad-lab's evaluation targets, -1 but at the answers; "
                  "default) or next (its training targets: every next input, the final value at the end)"),
      text_option(kOptKeyMotifs, "key_motifs", "key-motifs", &A::key_motifs, &T::key_motifs, &M::key_motifs, 0,
                  "mad_fuzzy_recall: keys of any size 1..K (mad-lab's training instances; default) or longest, "
                  "K ids each (its test instances)"),
  };
  return options;
}

const TaskOptionInfo* find_task_option(const std::string& key) {
  for (const TaskOptionInfo& info : task_option_info())
    if (key == info.key) return &info;
  return nullptr;
}

bool task_arg_given(const TaskArgs& args, const TaskOptionInfo& info) {
  return info.arg ? (args.*info.arg).has_value() : info.arg_text && (args.*info.arg_text).has_value();
}

const std::vector<TaskKindTraits>& task_kinds() {
  constexpr unsigned kSequence = kOptLength | kOptSymbols;
  constexpr unsigned kAr = kOptPairs | kOptSymbols | kOptKeySize | kOptValueSize;
  // The three BABILong-style kinds share their functions (tasks/babilong.h).
  auto babilong_kind = [](const char* name) {
    constexpr unsigned options = kOptLength | kOptFacts | kOptDistractors | kOptNoise | kOptNoiseWords;
    return TaskKindTraits{name, options, true, true, 0, false, true, "--noise-words, --noise-text", " (y)", false,
                          babilong_len_x, babilong_len_y, babilong_answer_size, babilong_vocab,
                          babilong_max_unique_samples, babilong_draw, babilong_target_from_x, babilong_check_row,
                          babilong_show_row, babilong_resolve_options, babilong_check_meta_options,
                          babilong_finish_from_meta, nullptr, babilong_generated_summary, nullptr};
  };
  // MAD's kinds share their vocabulary, display, meta check and summary (tasks/mad.h).
  constexpr unsigned kMadNoise = kOptVocabSize | kOptLength | kOptNoiseVocabSize | kOptFracNoise;
  constexpr unsigned kMadRecall = kMadNoise | kOptTargets;
  using Len = int (*)(const TaskOptions&);
  using Draw = void (*)(const TaskOptions&, TaskRng&, int64_t*, int64_t*);
  using Target = void (*)(const TaskOptions&, const int64_t*, int64_t*);
  using Problem = std::string (*)(const TaskOptions&, const DatasetMeta&, const int64_t*, const int64_t*);
  using Resolve = void (*)(TaskOptions&, const TaskArgs&);
  auto mad_kind = [](const char* name, unsigned options, Len len, int64_t (*max_unique)(const TaskOptions&),
                     Draw draw, Target target, Problem problem, Resolve resolve) {
    return TaskKindTraits{name, options, true, false, 0, false, false, "--vocab-size", " (@position→target)", false,
                          len, len, mad_answer_size, mad_vocab, max_unique, draw, target, problem, mad_show_row,
                          resolve, mad_check_meta_options, nullptr, nullptr, mad_generated_summary, nullptr,
                          nullptr, true};
  };
  // Columns in TaskKindTraits' order: name, options, options_required, stacked, solve_positions,
  // authors_layout, count_is_estimate, vocabulary_options, answer_note, defined_by_meta, then the
  // functions.
  static const std::vector<TaskKindTraits> kinds = {
      {"copy", kSequence, true, true, 0, true, false, "--symbols", " (after '|')", false,
       sequence_len_x, copy_len_y, nullptr, sequence_vocab, sequence_max_unique, copy_draw, copy_target,
       sequence_row_problem, show_stacked_row, sequence_resolve_options,
       nullptr, nullptr, sequence_options_from_columns, nullptr, nullptr},
      {"reverse", kSequence, true, true, 0, true, false, "--symbols", " (after '|')", false,
       sequence_len_x, reverse_len_y, nullptr, sequence_vocab, sequence_max_unique, reverse_draw, reverse_target,
       sequence_row_problem, show_stacked_row, sequence_resolve_options,
       nullptr, nullptr, sequence_options_from_columns, nullptr, nullptr},
      {"retrieval", kOptPairs, true, true, 0, true, false, "", " (after '|')", false,
       retrieval_len_x, retrieval_len_y, nullptr, retrieval_vocab, retrieval_max_unique, retrieval_draw,
       retrieval_target, retrieval_row_problem, retrieval_show_row, retrieval_resolve_options,
       retrieval_check_meta_options, nullptr, retrieval_options_from_columns, nullptr, nullptr},
      // The ARMT paper's associative retrieval: one key-value block a segment. rewrite's count of
      // distinct rows is an upper bound (its query is one of the distinct keys).
      {"ar_remember", kAr, true, true, 0, false, false, "--symbols", " (y)", false,
       ar_len_x, ar_len_y, ar_answer_size, ar_vocab, ar_remember_max_unique, ar_remember_draw, ar_target,
       ar_remember_row_problem, ar_show_row, ar_remember_resolve_options,
       ar_remember_check_meta_options, nullptr, nullptr, ar_generated_summary, nullptr},
      {"ar_rewrite", kAr, true, true, 0, false, true, "--symbols", " (y)", false,
       ar_len_x, ar_len_y, ar_answer_size, ar_vocab, ar_rewrite_max_unique, ar_rewrite_draw, ar_target,
       ar_rewrite_row_problem, ar_show_row, ar_rewrite_resolve_options,
       nullptr, nullptr, nullptr, ar_generated_summary, nullptr},
      // sqeq's solve rate: the answer block, its 30 ids and the slot before it that predicts its first id.
      {"sqeq", kOptMaxRoot | kOptMaxAlpha, false, false, kSqeqBlock + 1, true, false, "", " (blocks 2-6)", false,
       sqeq_len, sqeq_len, sqeq_answer_size, sqeq_task_vocab, sqeq_max_unique, sqeq_draw, sqeq_target,
       sqeq_row_problem, sqeq_show_row, sqeq_resolve_options,
       sqeq_check_meta_options, nullptr, nullptr, sqeq_generated_summary, sqeq_generation_notes},
      babilong_kind("memorize"),
      babilong_kind("detect_memorize"),
      babilong_kind("reasoning"),
      // Zoology's MQAR: aligned (X its inputs, y its labels), every position eligible, y -1 where unscored.
      {"mqar", kOptLength | kOptPairs | kOptVocabSize | kOptPowerA | kOptFiller, true, false, 0, false, false,
       "--vocab-size", " (@position key→value at each query)", false, mqar_len, mqar_len, mqar_answer_size,
       mqar_vocab, mqar_max_unique, mqar_draw, mqar_target, mqar_row_problem, mqar_show_row, mqar_resolve_options,
       mqar_check_meta_options, nullptr, nullptr, mqar_generated_summary, nullptr, nullptr, true},
      // MAD's tasks (tasks/mad.h): aligned, every position eligible, y -1 where mad-lab ignores it.
      mad_kind("mad_recall", kMadRecall, mad_recall_len, mad_recall_max_unique, mad_recall_draw, mad_recall_target,
               mad_recall_row_problem, mad_recall_resolve_options),
      mad_kind("mad_noisy_recall", kMadRecall, mad_recall_len, mad_recall_max_unique, mad_recall_draw,
               mad_recall_target, mad_recall_row_problem, mad_recall_resolve_options),
      mad_kind("mad_fuzzy_recall", kMadRecall | kOptMotifSize | kOptKeyMotifs, mad_fuzzy_len, mad_fuzzy_max_unique,
               mad_fuzzy_draw, mad_fuzzy_target, mad_fuzzy_row_problem, mad_fuzzy_resolve_options),
      mad_kind("mad_selective_copy", kOptVocabSize | kOptLength | kOptTokensToCopy, mad_copy_len,
               mad_copy_max_unique, mad_copy_draw, mad_copy_target, mad_copy_row_problem, mad_copy_resolve_options),
      mad_kind("mad_memorization", kMadNoise | kOptKvMapSeed, mad_memo_len, mad_memo_max_unique, mad_memo_draw,
               mad_memo_target, mad_memo_row_problem, mad_memo_resolve_options),
      // A user's own X/y arrays (`rmt data import`): meta.yaml states shapes, vocabulary and answer;
      // y is data (no target), nothing can be drawn, no authors' layout, no preset.
      {"imported", kOptPadId, false, true, 0, false, false, "--vocab", " of y (after '|' where y has more)", true,
       imported_len_x, imported_len_y, imported_answer_size, imported_vocab, nullptr, nullptr, nullptr,
       imported_row_problem, imported_show_row, nullptr,
       imported_check_meta_options, imported_finish_from_meta, nullptr, nullptr, nullptr, imported_is_stacked, false,
       imported_unscored_targets},
  };
  return kinds;
}

const TaskKindTraits* find_task_kind(const std::string& kind) {
  for (const TaskKindTraits& k : task_kinds())
    if (kind == k.name) return &k;
  return nullptr;
}

const TaskKindTraits& task_kind(const std::string& kind) {
  if (const TaskKindTraits* k = find_task_kind(kind)) return *k;
  std::string known;
  for (const TaskKindTraits& k : task_kinds()) known += fmt::format("{}{}", known.empty() ? "" : ", ", k.name);
  fail("unknown task kind '{}' (kinds: {})", kind, known);
}

// docs/paper.md §1: copy/reverse (L=24) and retrieval 100000/5000/10000; long copy/reverse and sqeq
// 100000/10000/20000. The BABILong-style tasks: ours (their samples are long). copy/reverse at
// L=24 use 10 symbols (ids 2..11); the long ones 8 (ids 2..9).
const std::vector<TaskPreset>& task_presets() {
  constexpr SplitSizes kShort = {100000, 5000, 10000}, kLong = {100000, 10000, 20000}, kBabi = {20000, 500, 1000};
  constexpr SplitSizes kAr = {20000, 1000, 1000};
  static const std::vector<TaskPreset> presets = {
      {"copy", "copy", 24, 10, 0, kShort},          {"reverse", "reverse", 24, 10, 0, kShort},
      {"retrieval", "retrieval", 0, 0, 4, kShort},  {"sqeq", "sqeq", 0, 0, 0, kLong},
      {"copy120", "copy", 120, 8, 0, kLong},        {"copy240", "copy", 240, 8, 0, kLong},
      {"copy360", "copy", 360, 8, 0, kLong},        {"reverse120", "reverse", 120, 8, 0, kLong},
      // BABILong-style (tasks/babilong.h): length is X's default length.
      {"memorize", "memorize", kBabiDefaultLength, 0, 0, kBabi},
      {"detect_memorize", "detect_memorize", kBabiDefaultLength, 0, 0, kBabi},
      {"reasoning", "reasoning", kBabiDefaultLength, 0, 0, kBabi},
      // The ARMT paper's associative retrieval (tasks/assoc_retrieval.h): 16 symbols, keys and
      // values of one (--key-size, --value-size).
      {"ar_remember", "ar_remember", 0, kArDefaultSymbols, kArDefaultPairs, kAr},
      {"ar_rewrite", "ar_rewrite", 0, kArDefaultSymbols, kArDefaultPairs, kAr},
      // Zoology's MQAR (tasks/mqar.h): its defaults; sizes at CPU scale (Zoology's Figure 2 trains on
      // 20000 to 100000 and tests on 1000).
      {"mqar", "mqar", kMqarDefaultLength, 0, kMqarDefaultPairs, {20000, 1000, 1000}},
      // MAD's tasks (tasks/mad.h): mad-lab's num_train_examples and num_test_examples (mad/configs.py:43-44,
      // configs/tasks/*.yml), its test size again for val (mad-lab has none).
      {"mad_recall", "mad_recall", 0, 0, 0, {12800, 1280, 1280}},
      {"mad_noisy_recall", "mad_noisy_recall", 0, 0, 0, {12800, 1280, 1280}},
      {"mad_fuzzy_recall", "mad_fuzzy_recall", 0, 0, 0, {12800, 1280, 1280}},
      {"mad_selective_copy", "mad_selective_copy", 0, 0, 0, {12800, 1280, 1280}},
      {"mad_memorization", "mad_memorization", 0, 0, 0, {256, 1280, 1280}},
  };
  return presets;
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const TaskPreset& p : task_presets()) names.push_back(p.name);
  return names;
}

bool is_task_name(const std::string& name) {
  for (const TaskPreset& p : task_presets())
    if (name == p.name) return true;
  return false;
}

TaskOptions resolve_task(const std::string& name, std::optional<int> length, std::optional<int> symbols,
                         std::optional<int> pairs, std::optional<int> max_root, std::optional<int> max_alpha) {
  TaskArgs args;
  args.length = length, args.symbols = symbols, args.pairs = pairs, args.max_root = max_root, args.max_alpha = max_alpha;
  return resolve_task(name, args);
}

TaskOptions resolve_task(const std::string& name, const TaskArgs& a) {
  const TaskPreset* preset = nullptr;
  for (const TaskPreset& p : task_presets())
    if (name == p.name) preset = &p;
  if (const char* why = mad_refused_task(name); !preset && why) fail("{}", why);
  if (!preset) fail("unknown task '{}' (known: {})", name, fmt::join(task_names(), ", "));
  TaskOptions t{preset->name, preset->kind, preset->length, preset->symbols, preset->pairs};
  const TaskKindTraits& kind = task_kind(t.kind);
  // Every flag given must be an option of the kind; a BABILong-style one names the kinds that take it.
  for (const TaskOptionInfo& info : task_option_info()) {
    if (!task_arg_given(a, info) || has_option(kind, info.bit)) continue;
    std::vector<std::string> takers;
    for (const TaskKindTraits& k : task_kinds())
      if (has_option(k, info.bit)) takers.push_back(k.name);
    std::string kinds = fmt::format("{}", fmt::join(takers, ", "));
    if (const size_t last = kinds.rfind(", "); last != std::string::npos) kinds.replace(last, 2, " and ");
    fail("--{} is not an option of task {}{}", info.flag, name,
         info.traits & kNameKinds ? fmt::format(" (it is one of {})", kinds) : "");
  }
  if ((a.length || a.symbols) && name != t.kind)
    fail("{} fixes length {} and {} symbols; use `{} --length N --symbols V` for other sizes", name, t.length,
         t.symbols, t.kind);
  kind.resolve_options(t, a);
  return t;
}

SplitSizes default_split_sizes(const TaskOptions& t) {
  for (const TaskPreset& p : task_presets())
    if (t.name == p.name) return p.sizes;
  fail("unknown task '{}' (known: {})", t.name, fmt::join(task_names(), ", "));
}

int task_len_x(const TaskOptions& t) { return task_kind(t.kind).len_x(t); }
int task_len_y(const TaskOptions& t) { return task_kind(t.kind).len_y(t); }
// Stacked tasks predict everything after the start token unless the kind says otherwise.
int task_answer_size(const TaskOptions& t) {
  const TaskKindTraits& k = task_kind(t.kind);
  return k.answer_size ? k.answer_size(t) : k.len_y(t) - 1;
}
bool task_unscored_targets(const TaskOptions& t) {
  const TaskKindTraits& k = task_kind(t.kind);
  return k.has_unscored_targets ? k.has_unscored_targets(t) : k.unscored_targets;
}
bool task_stacked(const TaskOptions& t) {
  const TaskKindTraits& k = task_kind(t.kind);
  return k.is_stacked ? k.is_stacked(t) : k.stacked;
}
// 0 for data of no task kind (a language model's text).
int task_solve_positions(const std::string& kind) {
  const TaskKindTraits* k = find_task_kind(kind);
  return k ? k->solve_positions : 0;
}
std::vector<std::string> task_vocab(const TaskOptions& t) { return task_kind(t.kind).vocab(t); }
int64_t max_unique_samples(const TaskOptions& t) { return task_kind(t.kind).max_unique(t); }
void draw_sample(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) { task_kind(t.kind).draw(t, rng, x, y); }
void target_from_x(const TaskOptions& t, const int64_t* x, int64_t* y) { task_kind(t.kind).target(t, x, y); }

int64_t saturating_mul(int64_t a, int64_t b) {
  const int64_t cap = int64_t(1) << 62;
  if (a == 0 || b == 0) return 0;
  if (a > cap / b) return cap;
  return std::min(cap, a * b);
}

}  // namespace rmt
