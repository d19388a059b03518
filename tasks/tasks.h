#pragma once
// The algorithmic tasks of the RMT paper: copy, reverse, associative retrieval and quadratic
// equations (sqeq), and the BABILong-style tasks of its sequel (memorize, detect_memorize,
// reasoning: tasks/babilong.h). Generation, decoding and validation of the on-disk datasets
// (docs/paper.md §1, docs/datasets.md).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tasks/babilong.h"
#include "tasks/dataset.h"
#include "tasks/rng.h"

namespace rmt {

// A task with its options resolved. kind is copy | reverse | retrieval | sqeq | memorize |
// detect_memorize | reasoning; name is what the user asked for (copy120 ...) and becomes the file prefix.
struct TaskOptions {
  std::string name, kind;
  int length = 0;   // copy/reverse: symbols per sample; BABILong-style: X's tokens (the input positions)
  int symbols = 0;  // copy/reverse: alphabet size (ids 2 .. symbols+1)
  int pairs = 0;    // retrieval: key-value pairs
  // sqeq: roots int(uniform(-max_root, max_root)), multiplier ±round(uniform(1, max_alpha));
  // the paper's 100 and 10 by default (docs/paper.md §1). 0 for the other tasks.
  int max_root = 0, max_alpha = 0;
  // BABILong-style tasks (tasks/babilong.h); 0 / empty for the others.
  int facts = 0, distractors = 0;  // supporting facts (memorize: 1; reasoning: 2 or 3), distractor facts
  std::string noise = "";          // filler | text
  int noise_words = 0;             // K: filler words w0.., or the text's K most frequent words (+ <unk>)
  std::vector<std::string> noise_vocab = {};  // the noise words, in vocabulary order after the task's words
  std::string noise_text = "", noise_text_sha256 = "";  // text: the file's name and sha256, as meta.yaml records them
  std::shared_ptr<const BabilongNoiseText> noise_source = nullptr;  // text: the file's words (generating only)
};

// The user's explicit options of `rmt generate` (unset: the task's default, or not given).
struct TaskArgs {
  std::optional<int> length, symbols, pairs, max_root, max_alpha;
  // BABILong-style: --segments S --segment-length T is --length S*T.
  std::optional<int> segments, segment_length, facts, distractors, noise_words;
  std::optional<std::string> noise, noise_text;
};

struct SplitSizes {
  int64_t train = 0, val = 0, test = 0;
  int64_t total() const { return train + val + test; }
};

std::vector<std::string> task_names();  // copy reverse retrieval sqeq copy120 ... memorize ...
// Resolves a task name and the user's explicit options; fails for unknown tasks, options that do
// not belong to the task, and out-of-range values. --noise text reads its file here.
TaskOptions resolve_task(const std::string& name, const TaskArgs& args);
TaskOptions resolve_task(const std::string& name, std::optional<int> length = {},
                         std::optional<int> symbols = {}, std::optional<int> pairs = {},
                         std::optional<int> max_root = {}, std::optional<int> max_alpha = {});
SplitSizes default_split_sizes(const TaskOptions& task);

int task_len_x(const TaskOptions& task);
int task_len_y(const TaskOptions& task);
int task_answer_size(const TaskOptions& task);
bool task_stacked(const TaskOptions& task);
// The target positions that decide whether a sample is solved (sqeq's solve rate: the answer
// block, its 30 ids and the slot before it that predicts its first id); 0 = no solve rate.
int task_solve_positions(const std::string& kind);  // kind: copy | reverse | retrieval | sqeq ...
std::vector<std::string> task_vocab(const TaskOptions& task);
// How many distinct X rows the task can produce (saturates at 2^62).
int64_t max_unique_samples(const TaskOptions& task);

// One i.i.d. sample; x has task_len_x ids, y has task_len_y ids.
void draw_sample(const TaskOptions& task, TaskRng& rng, int64_t* x, int64_t* y);
// y is a function of X for every task; this computes it.
void target_from_x(const TaskOptions& task, const int64_t* x, int64_t* y);

// `count` distinct X rows, drawn i.i.d. (duplicates rejected) then shuffled. Row-major [count, len_x].
std::vector<int64_t> generate_unique_x(const TaskOptions& task, int64_t count, uint64_t seed);

// ---- quadratic equations ------------------------------------------------------------------
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

// ---- dataset directories ------------------------------------------------------------------
struct GenerateRequest {
  TaskOptions task;
  SplitSizes sizes;
  uint64_t seed = 0;
  std::string out_dir;
  bool force = false;
  bool check_only = false;  // check what generating would need (sizes, memory, disk); write nothing
};
struct GenerateResult {
  std::vector<std::string> files;  // written, meta.yaml last
  double seconds = 0;
  std::vector<std::string> notes;  // for stderr: e.g. a small sqeq range that skews the no-root share
};
GenerateResult generate_dataset(const GenerateRequest& request);

std::string dataset_file(const std::string& dir, const std::string& prefix, const std::string& split,
                         const std::string& which /* X or y */);
extern const std::array<const char*, 3> kSplits;  // train, val, test

// Human-readable text of a row of ids under meta's vocabulary.
std::string decode_ids(const DatasetMeta& meta, const int64_t* ids, int n);
// Lines showing the first n samples of a split (`rmt data show`; show_dataset in tasks/family.h
// for a dataset of any family).
std::vector<std::string> show_samples(const std::string& dir, const std::string& split, int n);

struct CheckResult {
  bool ok = true;
  std::vector<std::string> summary;     // one line per split
  std::vector<std::string> violations;  // "file row R: what is wrong"
};
// `rmt data check DIR`: meta.yaml against the task (every key, type and value it implies), the
// arrays' headers (dtype int64, [N, len_x] / [N, len_y], N >= 1, counts), then every row (ids in
// the vocabulary, task invariants), no X twice, sha256. Never reads an element before the shapes
// that index it are checked. Fails (rmt::Error) only when meta.yaml cannot be read at all
// (syntax, unknown / missing / mistyped key, unknown task); everything else is a violation.
// For an algorithmic task; check_dataset (tasks/family.h) checks a dataset of any family.
CheckResult check_task_dataset(const std::string& dir, int max_violations = 20);
// "DIR is not a valid dataset:\n  violation\n  ..." as `rmt data check` reports it, also
// the message of every command that refuses the dataset.
std::string invalid_dataset_message(const std::string& dir, const std::vector<std::string>& violations);

}  // namespace rmt
