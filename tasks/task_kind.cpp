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
#include "tasks/retrieval.h"
#include "tasks/sequence_tasks.h"
#include "tasks/sqeq.h"

namespace rmt {

const std::vector<TaskOptionInfo>& task_option_info() {
  static const std::vector<TaskOptionInfo> options = {
      // bit             key            flag           TaskOptions          DatasetMeta       meta.yaml range
      {kOptLength, "length", "length", &TaskOptions::length, nullptr, &DatasetMeta::length, nullptr, 1, 100000, {}},
      {kOptSymbols, "symbols", "symbols", &TaskOptions::symbols, nullptr, &DatasetMeta::symbols, nullptr, 1, 36, {}},
      {kOptPairs, "pairs", "pairs", &TaskOptions::pairs, nullptr, &DatasetMeta::pairs, nullptr, 1, 100000, {}},
      {kOptMaxRoot, "max_root", "max-root", &TaskOptions::max_root, nullptr, &DatasetMeta::max_root, nullptr,
       INT_MIN, INT_MAX, kSqeqDefaultMaxRoot},
      {kOptMaxAlpha, "max_alpha", "max-alpha", &TaskOptions::max_alpha, nullptr, &DatasetMeta::max_alpha, nullptr,
       INT_MIN, INT_MAX, kSqeqDefaultMaxAlpha},
      {kOptFacts, "facts", "facts", &TaskOptions::facts, nullptr, &DatasetMeta::facts, nullptr, INT_MIN, INT_MAX, {}},
      {kOptDistractors, "distractors", "distractors", &TaskOptions::distractors, nullptr, &DatasetMeta::distractors,
       nullptr, INT_MIN, INT_MAX, {}},
      {kOptNoise, "noise", "noise", nullptr, &TaskOptions::noise, nullptr, &DatasetMeta::noise, 0, 0, {}},
      {kOptNoiseWords, "noise_words", "noise-words", &TaskOptions::noise_words, nullptr, &DatasetMeta::noise_words,
       nullptr, INT_MIN, INT_MAX, {}},
      // imported: -1 (or absent) = no padding id declared.
      {kOptPadId, "pad_id", "pad-id", &TaskOptions::pad_id, nullptr, &DatasetMeta::pad_id, nullptr, -1, INT_MAX, -1},
      {kOptKeySize, "key_size", "key-size", &TaskOptions::key_size, nullptr, &DatasetMeta::key_size, nullptr, 1,
       kArMaxSymbolSize, {}},
      {kOptValueSize, "value_size", "value-size", &TaskOptions::value_size, nullptr, &DatasetMeta::value_size, nullptr,
       1, kArMaxSymbolSize, {}},
  };
  return options;
}

std::optional<std::pair<int, int>> task_option_bounds(const std::string& key) {
  for (const TaskOptionInfo& info : task_option_info())
    if (info.value && key == info.key && info.lo > INT_MIN && info.hi < INT_MAX) return std::pair{info.lo, info.hi};
  return std::nullopt;
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
      // A user's own X/y arrays (`rmt data import`): meta.yaml states shapes, vocabulary and answer;
      // y is data (no target), nothing can be drawn, no authors' layout, no preset.
      {"imported", kOptPadId, false, true, 0, false, false, "--vocab", " of y (after '|' where y has more)", true,
       imported_len_x, imported_len_y, imported_answer_size, imported_vocab, nullptr, nullptr, nullptr,
       imported_row_problem, imported_show_row, nullptr,
       imported_check_meta_options, imported_finish_from_meta, nullptr, nullptr, nullptr, imported_is_stacked},
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
  if (!preset) fail("unknown task '{}' (known: {})", name, fmt::join(task_names(), ", "));
  TaskOptions t{preset->name, preset->kind, preset->length, preset->symbols, preset->pairs};
  const TaskKindTraits& kind = task_kind(t.kind);
  // Every flag given must be an option of the kind. --segments and --segment-length give the
  // length of the kinds whose samples are noise around facts; the message names those kinds.
  std::string noise_kinds;
  for (const TaskKindTraits& k : task_kinds())
    if (has_option(k, kOptNoise)) noise_kinds += fmt::format("{}{}", noise_kinds.empty() ? "" : ", ", k.name);
  if (const size_t last = noise_kinds.rfind(", "); last != std::string::npos) noise_kinds.replace(last, 2, " and ");
  struct Flag {
    const char* flag;
    bool given;
    unsigned option;
    bool name_kinds;  // say which kinds it belongs to
  };
  const Flag flags[] = {
      {"--symbols", a.symbols.has_value(), kOptSymbols, false},
      {"--length", a.length.has_value(), kOptLength, false},
      {"--segments", a.segments.has_value(), kOptNoise, true},
      {"--segment-length", a.segment_length.has_value(), kOptNoise, true},
      {"--facts", a.facts.has_value(), kOptFacts, true},
      {"--distractors", a.distractors.has_value(), kOptDistractors, true},
      {"--noise", a.noise.has_value(), kOptNoise, true},
      {"--noise-text", a.noise_text.has_value(), kOptNoise, true},
      {"--noise-words", a.noise_words.has_value(), kOptNoiseWords, true},
      {"--pairs", a.pairs.has_value(), kOptPairs, false},
      {"--key-size", a.key_size.has_value(), kOptKeySize, false},
      {"--value-size", a.value_size.has_value(), kOptValueSize, false},
      {"--max-root", a.max_root.has_value(), kOptMaxRoot, false},
      {"--max-alpha", a.max_alpha.has_value(), kOptMaxAlpha, false},
  };
  for (const Flag& f : flags)
    if (f.given && !(kind.options & f.option))
      fail("{} is not an option of task {}{}", f.flag, name,
           f.name_kinds ? fmt::format(" (it is one of {})", noise_kinds) : "");
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
