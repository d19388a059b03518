#pragma once
// The task kinds, stated once (docs/paper.md §1, docs/datasets.md). One record per kind: its
// options, shapes, vocabulary, how a sample is drawn and its target computed, the row invariants
// `rmt data check` enforces, how `rmt data show` prints a row. Everything that depends on the kind
// (generation, meta.yaml, checking, showing, training, evaluation) asks this table instead of
// comparing names; adding a task is one record (task_kind.cpp) and its own file of functions.
//   copy, reverse      tasks/sequence_tasks.h
//   retrieval          tasks/retrieval.h
//   ar_remember, ar_rewrite   tasks/assoc_retrieval.h (the ARMT paper's associative retrieval)
//   sqeq               tasks/sqeq.h
//   memorize, detect_memorize, reasoning   tasks/babilong.h
//   mqar               tasks/mqar.h (Zoology's multi-query associative recall)
//   mad_recall, mad_noisy_recall, mad_fuzzy_recall, mad_selective_copy, mad_memorization
//                      tasks/mad.h (MAD's synthetic tasks; mad_compression is refused there)
//   imported           tasks/imported.h (a user's own X/y arrays: `rmt data import`, tasks/import.h)
// The presets (copy120 ...) are named datasets of a kind with fixed options: task_presets().
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tasks/rng.h"

namespace rmt {

struct BabilongNoiseText;
struct DatasetMeta;

// A task with its options resolved. kind is a TaskKindTraits::name; name is what the user asked
// for (copy120 ...) and becomes the file prefix.
struct TaskOptions {
  std::string name, kind;
  int length = 0;   // copy/reverse: symbols per sample; BABILong-style: X's tokens (the input positions)
  int symbols = 0;  // copy/reverse: alphabet size (ids 2 .. symbols+1)
  int pairs = 0;    // retrieval, ar_*: key-value pairs
  // sqeq: roots int(uniform(-max_root, max_root)), multiplier ±round(uniform(1, max_alpha));
  // the paper's 100 and 10 by default (docs/paper.md §1). 0 for the other tasks.
  int max_root = 0, max_alpha = 0;
  int key_size = 0, value_size = 0;  // ar_*: symbols per key and per value
  // BABILong-style tasks (tasks/babilong.h); 0 / empty for the others.
  int facts = 0, distractors = 0;  // supporting facts (memorize: 1; reasoning: 2 or 3), distractor facts
  std::string noise = "";          // filler | text
  int noise_words = 0;             // K: filler words w0.., or the text's K most frequent words (+ <unk>)
  std::vector<std::string> noise_vocab = {};  // the noise words, in vocabulary order after the task's words
  std::string noise_text = "", noise_text_sha256 = "";  // text: the file's name and sha256, as meta.yaml records them
  std::shared_ptr<const BabilongNoiseText> noise_source = nullptr;  // text: the file's words (generating only)
  // imported (tasks/imported.h): the dataset states these (meta.yaml); rmt derives none of them.
  int columns_x = 0, columns_y = 0, answer_positions = 0;
  bool stacked_layout = true;
  std::vector<std::string> id_symbols = {};  // id -> symbol
  int pad_id = -1;                        // the padding id the user declared; -1: none
  bool unscored = false;                  // y holds -1 at positions not scored (meta.yaml unscored_targets)
  // mqar (tasks/mqar.h): ids 0..vocab_size-1; power_a as its decimal text; filler random | zero.
  int vocab_size = 0;
  std::string power_a = "", filler = "";
  // MAD's tasks (tasks/mad.h), mad-lab's names: noise ids, the fraction of noise as its decimal
  // text, the fuzzy motifs' longest sizes, selective copying's tokens, memorization's fixed map.
  int noise_vocab_size = 0, k_motif_size = 0, v_motif_size = 0, tokens_to_copy = 0, kv_map_seed = 0;
  std::string frac_noise = "";
  std::string targets = "", key_motifs = "";  // recall: scored | next; fuzzy: any | longest
};

// The user's explicit options of `rmt generate` (unset: the task's default, or not given).
struct TaskArgs {
  std::optional<int> length, symbols, pairs, max_root, max_alpha, key_size, value_size;
  // BABILong-style: --segments S --segment-length T is --length S*T.
  std::optional<int> segments, segment_length, facts, distractors, noise_words;
  std::optional<std::string> noise, noise_text;
  std::optional<int> vocab_size;  // mqar
  std::optional<std::string> power_a, filler;
  std::optional<int> noise_vocab_size, k_motif_size, v_motif_size, tokens_to_copy, kv_map_seed;  // MAD
  std::optional<std::string> frac_noise, targets, key_motifs;                                    // MAD
};

struct SplitSizes {
  int64_t train = 0, val = 0, test = 0;
  int64_t total() const { return train + val + test; }
};

// The options a kind takes, as bits; task_option_info's rows name each (a flag, a meta.yaml key).
enum TaskOption : unsigned {
  kOptLength = 1u << 0,
  kOptSymbols = 1u << 1,
  kOptPairs = 1u << 2,
  kOptMaxRoot = 1u << 3,
  kOptMaxAlpha = 1u << 4,
  kOptFacts = 1u << 5,
  kOptDistractors = 1u << 6,
  kOptNoise = 1u << 7,
  kOptNoiseWords = 1u << 8,
  kOptPadId = 1u << 9,
  kOptKeySize = 1u << 10,
  kOptValueSize = 1u << 11,
  kOptVocabSize = 1u << 12,
  kOptPowerA = 1u << 13,
  kOptFiller = 1u << 14,
  kOptNoiseVocabSize = 1u << 15,  // MAD (tasks/mad.h)
  kOptFracNoise = 1u << 16,
  kOptMotifSize = 1u << 17,       // k_motif_size and v_motif_size
  kOptTokensToCopy = 1u << 18,
  kOptKvMapSeed = 1u << 19,
  kOptTargets = 1u << 20,
  kOptKeyMotifs = 1u << 21,
};

// What a row says beyond its columns (TaskOptionInfo::traits).
enum TaskOptionTrait : unsigned {
  // "--X is not an option of task T (it is one of K1, K2 and K3)": the flag's name does not say
  // which tasks take it (the BABILong-style options).
  kNameKinds = 1u << 0,
  // Not a data key of a sweep (--segments, --segment-length: a sweep's segments are the model's;
  // its data block gives length).
  kNotInSweep = 1u << 1,
  // The value is a file that generate reads (--noise-text): it must not be one of its outputs.
  kReadsFile = 1u << 2,
  // meta.yaml's reader takes any int; the kind's check_meta_options checks the range, saying why
  // (sqeq's 30-id blocks, bAbI's eight people).
  kKindChecksMeta = 1u << 3,
};

// One task option, stated once: its `rmt generate` flag, its key (meta.yaml options.KEY, a sweep's
// data KEY), where its value lives, its range and its help. Everything that names a task option
// (generate's CLI flags and its checks, meta.yaml, a sweep's data keys, the length items of `rmt
// reproduce`) reads this table, so a new option is one row here and its members in TaskArgs,
// TaskOptions and DatasetMeta. Rows without a DatasetMeta member are generate's alone: --segments
// and --segment-length give the length, --noise-text the file of --noise text (meta.yaml records
// its name and sha256 beside noise). pad_id has no flag: `rmt data import --pad-id` sets it.
struct TaskOptionInfo {
  TaskOption bit;    // the kinds that take it: those with this bit (--segments: kOptNoise's)
  const char* key;   // meta.yaml options.KEY, a sweep's data KEY
  const char* flag;  // rmt generate --FLAG; nullptr: not an option of generate
  const char* help;  // generate --help's line
  // An int option has the three int members, a text option the three string ones; the others are
  // nullptr. arg: the user's value (TaskArgs); value: the task's (TaskOptions); meta_value: meta.yaml's.
  std::optional<int> TaskArgs::*arg;
  int TaskOptions::*value;
  int DatasetMeta::*meta_value;
  std::optional<std::string> TaskArgs::*arg_text;
  std::string TaskOptions::*text;
  std::string DatasetMeta::*meta_text;
  // An int option's real range: what every task taking it allows, checked (with this range named)
  // by generate, a sweep's data block and meta.yaml's reader; a task checks its narrower one after
  // (reasoning's facts 2..3, retrieval's pairs 1..10, sqeq's max_alpha for its max_root).
  int lo, hi;
  std::optional<int> fallback;  // the value of a meta.yaml written before the option existed
  unsigned traits;              // TaskOptionTrait bits
};
// Every option; meta.yaml's options are written in this order.
const std::vector<TaskOptionInfo>& task_option_info();
// The row of `key` (meta.yaml's and a sweep's name, "key_size"); nullptr for any other name.
const TaskOptionInfo* find_task_option(const std::string& key);
// Whether `args` holds the user's value of the row's option.
bool task_arg_given(const TaskArgs& args, const TaskOptionInfo& info);
// Whether meta.yaml records it as options.KEY (not --segments, --segment-length, --noise-text).
inline bool in_meta(const TaskOptionInfo& info) { return info.meta_value || info.meta_text; }

struct TaskKindTraits {
  const char* name;        // meta.yaml kind, and the base task of that name
  unsigned options;        // TaskOption bits
  bool options_required;   // false: meta.yaml may omit them (sqeq's range: the paper's)
  bool stacked;            // input = concat(X, y)[:-1], target = concat(X, y)[1:]; else input X, target y
                           // (is_stacked below, where the dataset says which)
  // The target positions that decide whether a sample is solved (sqeq's solve rate); 0 = none.
  int solve_positions;
  // The authors' layout (no meta.yaml) names such a dataset by its file prefix (copy*, ...); a
  // kind without it needs meta.yaml (its options and vocabulary are recorded only there).
  bool authors_layout;
  // The count of distinct samples (max_unique) is an estimate: only drawing them shows there are
  // enough, so `generate --check` draws them too.
  bool count_is_estimate;
  const char* vocabulary_options;  // the generate options that set its vocabulary, for advice ("" none)
  const char* answer_note;         // how `rmt data show` marks the answer ("after '|'")
  // meta.yaml defines the task (imported data): its name is the dataset's own (any plain name, no
  // preset), its shapes and vocabulary are what meta.yaml records; rmt derives none of them.
  bool defined_by_meta;

  int (*len_x)(const TaskOptions&);        // X's columns
  int (*len_y)(const TaskOptions&);        // y's columns
  int (*answer_size)(const TaskOptions&);  // scored positions at the end of the target
  std::vector<std::string> (*vocab)(const TaskOptions&);
  // nullptr for data rmt cannot generate (imported): never a preset, so `rmt generate` never asks.
  int64_t (*max_unique)(const TaskOptions&);  // distinct X rows it can produce (saturates at 2^62)
  void (*draw)(const TaskOptions&, TaskRng&, int64_t* x, int64_t* y);  // one i.i.d. sample
  // y as a function of X; nullptr where y is data (imported): the checker compares y only where
  // the kind computes it.
  void (*target)(const TaskOptions&, const int64_t* x, int64_t* y);
  // What is wrong with a row beyond its target (ids, structure); empty when valid. The target
  // itself is compared by the checker.
  std::string (*row_problem)(const TaskOptions&, const DatasetMeta&, const int64_t* x, const int64_t* y);
  // `rmt data show`'s line for a row (x: cx ids, y: cy ids), after "#i ".
  std::string (*show_row)(const DatasetMeta&, const int64_t* x, int cx, const int64_t* y, int cy);
  // The kind's explicit `rmt generate` options onto the preset's values, checked (the flags that
  // are not the kind's are refused before).
  void (*resolve_options)(TaskOptions&, const TaskArgs&);
  // Optional hooks (nullptr: nothing to do):
  // the options' joint constraints, named as meta.yaml spells them (from a meta.yaml);
  void (*check_meta_options)(const TaskOptions&);
  // the rest of the options from a meta (text noise's vocabulary);
  void (*finish_from_meta)(TaskOptions&, const DatasetMeta&);
  // the authors' layout: options from X's column count (copy: length; meta.file_prefix is set);
  void (*options_from_columns)(DatasetMeta&, int64_t columns, const std::string& x_path);
  // `rmt generate`'s summary of the options (", roots -100..99 ...");
  std::string (*generated_summary)(const TaskOptions&);
  // notes on generated data (X: every row, [total, len_x]).
  std::vector<std::string> (*generation_notes)(const TaskOptions&, const std::vector<int64_t>& X, int64_t total);
  // whether the task is stacked, where the dataset says (imported); nullptr: `stacked` above.
  bool (*is_stacked)(const TaskOptions&);
  // y holds -1 at the answer positions that are not scored (mqar: every position but the
  // queries'), so every reader allows -1 in y and the metrics skip those positions
  // (docs/training.md, "Which positions are scored"). false: every answer position is scored.
  bool unscored_targets = false;
  // whether y holds such -1s, where the dataset says (imported); nullptr: unscored_targets above.
  bool (*has_unscored_targets)(const TaskOptions&) = nullptr;
};

const std::vector<TaskKindTraits>& task_kinds();
// The record of `kind` (TaskOptions::kind, DatasetMeta::kind); fails naming the kinds otherwise.
const TaskKindTraits& task_kind(const std::string& kind);
const TaskKindTraits* find_task_kind(const std::string& kind);
inline bool has_option(const TaskKindTraits& k, TaskOption o) { return (k.options & o) != 0; }

// A named dataset of a kind: the base tasks (copy ...) and the paper's fixed sizes (copy120 ...).
struct TaskPreset {
  const char* name;
  const char* kind;
  int length, symbols, pairs;
  SplitSizes sizes;  // `rmt generate`'s default split sizes
};
const std::vector<TaskPreset>& task_presets();
std::vector<std::string> task_names();  // copy reverse retrieval sqeq copy120 ... memorize ...
bool is_task_name(const std::string& name);

// Resolves a task name and the user's explicit options; fails for unknown tasks, options that do
// not belong to the task, and out-of-range values. --noise text reads its file here.
TaskOptions resolve_task(const std::string& name, const TaskArgs& args);
TaskOptions resolve_task(const std::string& name, std::optional<int> length = {},
                         std::optional<int> symbols = {}, std::optional<int> pairs = {},
                         std::optional<int> max_root = {}, std::optional<int> max_alpha = {});
SplitSizes default_split_sizes(const TaskOptions& task);

// The table's values for a task.
int task_len_x(const TaskOptions& task);
int task_len_y(const TaskOptions& task);
int task_answer_size(const TaskOptions& task);
bool task_stacked(const TaskOptions& task);
bool task_unscored_targets(const TaskOptions& task);  // y holds -1 where a position is not scored
int task_solve_positions(const std::string& kind);
std::vector<std::string> task_vocab(const TaskOptions& task);
int64_t max_unique_samples(const TaskOptions& task);
// One i.i.d. sample; x has task_len_x ids, y has task_len_y ids.
void draw_sample(const TaskOptions& task, TaskRng& rng, int64_t* x, int64_t* y);
// y as a function of X, for every kind that computes it (not imported).
void target_from_x(const TaskOptions& task, const int64_t* x, int64_t* y);

// Saturating multiply for counts of possible samples (at most 2^62).
int64_t saturating_mul(int64_t a, int64_t b);

}  // namespace rmt
