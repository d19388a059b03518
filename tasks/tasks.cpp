// Task definitions (presets, vocabularies, shapes) and i.i.d. sample generation.
#include "tasks/tasks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "lib/core/error.h"

namespace rmt {

namespace {

struct Preset {
  const char* name;
  const char* kind;
  int length, symbols, pairs;
};

// The paper's datasets. copy/reverse at L=24 use 10 symbols (ids 2..11); the long ones 8 (ids 2..9).
const Preset kPresets[] = {
    {"copy", "copy", 24, 10, 0},         {"reverse", "reverse", 24, 10, 0},
    {"retrieval", "retrieval", 0, 0, 4}, {"sqeq", "sqeq", 0, 0, 0},
    {"copy120", "copy", 120, 8, 0},      {"copy240", "copy", 240, 8, 0},
    {"copy360", "copy", 360, 8, 0},      {"reverse120", "reverse", 120, 8, 0},
    // BABILong-style (tasks/babilong.h): length is X's default length.
    {"memorize", "memorize", kBabiDefaultLength, 0, 0},
    {"detect_memorize", "detect_memorize", kBabiDefaultLength, 0, 0},
    {"reasoning", "reasoning", kBabiDefaultLength, 0, 0},
};

bool is_base_name(const std::string& name) {
  return name == "copy" || name == "reverse" || name == "retrieval" || name == "sqeq" || is_babilong_kind(name);
}

// Saturating multiply for counts of possible samples.
int64_t sat_mul(int64_t a, int64_t b) {
  const int64_t cap = int64_t(1) << 62;
  if (a == 0 || b == 0) return 0;
  if (a > cap / b) return cap;
  return std::min(cap, a * b);
}

// Readable symbol for copy/reverse symbol k (id k+2).
const char kSymbolChars[] = "0123456789abcdefghijklmnopqrstuvwxyz";

}  // namespace

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

TaskOptions resolve_task(const std::string& name, std::optional<int> length, std::optional<int> symbols,
                         std::optional<int> pairs, std::optional<int> max_root, std::optional<int> max_alpha) {
  TaskArgs args;
  args.length = length, args.symbols = symbols, args.pairs = pairs, args.max_root = max_root, args.max_alpha = max_alpha;
  return resolve_task(name, args);
}

// The BABILong-style options on top of the preset's defaults (tasks/babilong.h).
static void resolve_babilong_options(TaskOptions& t, const TaskArgs& a) {
  if (a.length && (a.segments || a.segment_length))
    fail("--length and --segments/--segment-length both give the length (length = segments x segment length); "
         "give one of them");
  if (a.segments.has_value() != a.segment_length.has_value())
    fail("--{} needs --{} too: the length is segments x segment length", a.segments ? "segments" : "segment-length",
         a.segments ? "segment-length" : "segments");
  if (a.segments) {
    if (*a.segments < 1 || *a.segment_length < 1)
      fail("--segments and --segment-length must be at least 1 (got {} and {})", *a.segments, *a.segment_length);
    const int64_t length = int64_t(*a.segments) * *a.segment_length;
    if (length > kBabiMaxLength)
      fail("--segments {} x --segment-length {} = {} is longer than the most, {}", *a.segments, *a.segment_length,
           length, kBabiMaxLength);
    t.length = int(length);
  }
  if (a.length) t.length = *a.length;
  t.facts = a.facts.value_or(t.kind == "reasoning" ? 2 : 1);
  t.distractors = a.distractors.value_or(t.kind == "reasoning" ? 2 : 0);
  t.noise = a.noise.value_or("filler");
  if (t.noise != "filler" && t.noise != "text") fail("--noise must be filler or text (got '{}')", t.noise);
  if (t.noise == "text" && !a.noise_text)
    fail("--noise text needs --noise-text FILE: the text whose words are the noise");
  if (t.noise == "filler" && a.noise_text)
    fail("--noise-text is the file of --noise text; add --noise text (the default noise, filler, reads no file)");
  t.noise_words = a.noise_words.value_or(t.noise == "text" ? kBabiDefaultTextWords : kBabiDefaultFillerWords);
  // Everything but the file first: a bad option is named before a big file is read.
  check_babilong_options(t, true,
                         a.segments ? fmt::format("--segments {} x --segment-length {} = {}", *a.segments,
                                                  *a.segment_length, t.length)
                                    : fmt::format("--length {}", t.length));
  if (t.noise == "filler") {
    t.noise_vocab = babilong_filler_words(t.noise_words);
  } else {
    t.noise_source = load_babilong_noise_text(*a.noise_text, t.noise_words);
    t.noise_vocab = t.noise_source->vocab;
    t.noise_text = t.noise_source->name;
    t.noise_text_sha256 = t.noise_source->sha256;
  }
}

TaskOptions resolve_task(const std::string& name, const TaskArgs& a) {
  const std::optional<int> length = a.length, symbols = a.symbols, pairs = a.pairs, max_root = a.max_root,
                           max_alpha = a.max_alpha;
  const Preset* preset = nullptr;
  for (const Preset& p : kPresets)
    if (name == p.name) preset = &p;
  if (!preset) {
    std::string known;
    for (const Preset& p : kPresets) known += fmt::format("{}{}", known.empty() ? "" : ", ", p.name);
    fail("unknown task '{}' (known: {})", name, known);
  }
  TaskOptions t{preset->name, preset->kind, preset->length, preset->symbols, preset->pairs};
  const bool seq_task = t.kind == "copy" || t.kind == "reverse", babilong = is_babilong_kind(t.kind);
  if (symbols && !seq_task) fail("--symbols is not an option of task {}", name);
  if (length && !seq_task && !babilong) fail("--length is not an option of task {}", name);
  for (auto [flag, given] : {std::pair{"--segments", a.segments.has_value()},
                             std::pair{"--segment-length", a.segment_length.has_value()},
                             std::pair{"--facts", a.facts.has_value()}, std::pair{"--distractors", a.distractors.has_value()},
                             std::pair{"--noise", a.noise.has_value()}, std::pair{"--noise-text", a.noise_text.has_value()},
                             std::pair{"--noise-words", a.noise_words.has_value()}})
    if (given && !babilong)
      fail("{} is not an option of task {} (it is one of memorize, detect_memorize and reasoning)", flag, name);
  if (pairs && t.kind != "retrieval") fail("--pairs is not an option of task {}", name);
  if ((max_root || max_alpha) && t.kind != "sqeq")
    fail("--{} is not an option of task {}", max_root ? "max-root" : "max-alpha", name);
  if ((length || symbols) && !is_base_name(name))
    fail("{} fixes length {} and {} symbols; use `{} --length N --symbols V` for other sizes", name, t.length,
         t.symbols, t.kind);
  if (babilong) {
    resolve_babilong_options(t, a);
    return t;
  }
  if (length) {
    if (*length < 1) fail("--length must be at least 1 (got {})", *length);
    if (*length > 100000) fail("--length must be at most 100000 (got {})", *length);
    t.length = *length;
  }
  if (symbols) {
    if (*symbols < 1 || *symbols > 36) fail("--symbols must be in 1..36 (got {})", *symbols);
    t.symbols = *symbols;
  }
  if (pairs) {
    if (*pairs < 1) fail("--pairs must be at least 1 (got {})", *pairs);
    if (*pairs > 10)
      fail("--pairs {} is too many: keys are distinct letters (26) and values distinct digits (10), so at most 10",
           *pairs);
    t.pairs = *pairs;
  }
  if (t.kind == "sqeq") {
    t.max_root = max_root.value_or(kSqeqDefaultMaxRoot);
    t.max_alpha = max_alpha.value_or(kSqeqDefaultMaxAlpha);
    check_sqeq_range(t.max_root, t.max_alpha, "--max-root", "--max-alpha");
  }
  return t;
}

SplitSizes default_split_sizes(const TaskOptions& t) {
  // docs/paper.md §1: copy/reverse (L=24) and retrieval 100000/5000/10000; long copy/reverse and sqeq
  // 100000/10000/20000. The BABILong-style tasks: ours (their samples are long).
  if (is_babilong_kind(t.kind)) return {20000, 500, 1000};
  if (t.kind == "sqeq" || !is_base_name(t.name)) return {100000, 10000, 20000};
  return {100000, 5000, 10000};
}

int task_len_x(const TaskOptions& t) {
  if (t.kind == "copy" || t.kind == "reverse") return t.length;
  if (t.kind == "retrieval") return 2 * t.pairs + 1;
  if (is_babilong_kind(t.kind)) return t.length;
  return kSqeqBlock * kSqeqBlocks;
}

int task_len_y(const TaskOptions& t) {
  if (t.kind == "copy") return 1 + 2 * t.length;
  if (t.kind == "reverse") return 1 + t.length;
  if (t.kind == "retrieval") return 2;
  if (is_babilong_kind(t.kind)) return 1;  // the answer, a place
  return kSqeqBlock * kSqeqBlocks;
}

// Stacked tasks predict everything after the start token; sqeq predicts the 5 solution blocks;
// the BABILong-style tasks their one answer token (y has no start token: "?" ends X).
int task_answer_size(const TaskOptions& t) {
  if (t.kind == "sqeq") return kSqeqBlock * (kSqeqBlocks - 1);
  if (is_babilong_kind(t.kind)) return 1;
  return task_len_y(t) - 1;
}

bool task_stacked(const TaskOptions& t) { return t.kind != "sqeq"; }

int task_solve_positions(const std::string& kind) { return kind == "sqeq" ? kSqeqBlock + 1 : 0; }

std::vector<std::string> task_vocab(const TaskOptions& t) {
  std::vector<std::string> v;
  if (t.kind == "copy" || t.kind == "reverse") {
    v = {"<pad>", "<go>"};
    for (int k = 0; k < t.symbols; k++) v.push_back(std::string(1, kSymbolChars[k]));
  } else if (t.kind == "retrieval") {
    for (int d = 0; d < 10; d++) v.push_back(std::string(1, char('0' + d)));
    v.push_back("?");
    for (int k = 0; k < 26; k++) v.push_back(std::string(1, char('a' + k)));
  } else if (is_babilong_kind(t.kind)) {
    v = babilong_task_words();
    v.insert(v.end(), t.noise_vocab.begin(), t.noise_vocab.end());
  } else {
    v = sqeq_vocab();
  }
  return v;
}

int64_t max_unique_samples(const TaskOptions& t) {
  if (t.kind == "copy" || t.kind == "reverse") {
    int64_t n = 1;
    for (int i = 0; i < t.length; i++) n = sat_mul(n, t.symbols);
    return n;
  }
  if (t.kind == "retrieval") {
    int64_t n = t.pairs;  // which key is queried
    for (int i = 0; i < t.pairs; i++) n = sat_mul(sat_mul(n, 26 - i), 10 - i);
    return n;
  }
  if (is_babilong_kind(t.kind)) return babilong_max_unique_samples(t);
  // sqeq: X is fixed by the shown equation. With roots: unordered root pairs from -(R-1)..R-1
  // (-R itself has probability 2^-53), times 2A multipliers; without: every (b, c) of draw_sqeq,
  // 0 <= b < 2R and b^2/4 < c < R^2, times 2A. The paper's R 100, A 10: 199*200/2*20 + ...
  const int64_t R = t.max_root, multipliers = 2 * int64_t(t.max_alpha), values = 2 * R - 1;
  int64_t n = sat_mul(values * (values + 1) / 2, multipliers);
  for (int64_t b = 0; b < 2 * R; b++) n = std::min(n + sat_mul(R * R - 1 - b * b / 4, multipliers), int64_t(1) << 62);
  return n;
}

void target_from_x(const TaskOptions& t, const int64_t* x, int64_t* y) {
  if (t.kind == "copy") {
    y[0] = 1;
    for (int i = 0; i < t.length; i++) y[1 + i] = y[1 + t.length + i] = x[i];
  } else if (t.kind == "reverse") {
    y[0] = 1;
    for (int i = 0; i < t.length; i++) y[1 + i] = x[t.length - 1 - i];
  } else if (t.kind == "retrieval") {
    const int64_t query = x[2 * t.pairs];
    y[0] = 10;
    y[1] = 0;
    for (int k = 0; k < t.pairs; k++)
      if (x[2 * k] == query) y[1] = x[2 * k + 1];
  } else if (is_babilong_kind(t.kind)) {
    babilong_target_from_x(t, x, y);
  } else {
    const int n = kSqeqBlock * kSqeqBlocks;
    for (int i = 0; i + 1 < n; i++) y[i] = x[i + 1];
    y[n - 1] = 0;
  }
}

// First k of a random permutation of 0..n-1 (partial Fisher-Yates).
static void draw_distinct(TaskRng& rng, int n, int k, int* out) {
  int pool[26];
  for (int i = 0; i < n; i++) pool[i] = i;
  for (int i = 0; i < k; i++) {
    int j = i + int(rng.below(uint64_t(n - i)));
    std::swap(pool[i], pool[j]);
    out[i] = pool[i];
  }
}

// docs/paper.md §1 with R = max_root, A = max_alpha (the paper's 100 and 10 give the same draws,
// byte for byte, as before these options existed). The no-root samples scale with R so that their
// coefficients span the rooted ones' range (|b| <= 2R, |c| <= R^2): b in 0..2R-1 and c up to
// R^2-1, the paper's 0..199 and 9999 at R = 100.
static void draw_sqeq(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const int R = t.max_root;
  const double alpha_span = double(t.max_alpha - 1);
  SqeqText text;
  if (rng.unit() < 0.2) {
    // No real roots: x^2 + b*x + c with c > b^2/4, so D = b^2 - 4c < 0.
    int b = int(rng.below(uint64_t(2 * R)));
    int c = int(rng.between(b * b / 4 + 1, int64_t(R) * R - 1));
    int sign = rng.below(2) ? 1 : -1;
    int alpha = sign * int(std::floor(1.0 + alpha_span * rng.unit() + 0.5));
    text = sqeq_text_no_roots(b, c, alpha);
  } else {
    // int(uniform(-R, R)) truncates toward zero, as the original does.
    int x1 = int(-double(R) + 2.0 * double(R) * rng.unit());
    int x2 = int(-double(R) + 2.0 * double(R) * rng.unit());
    int sign = rng.below(2) ? 1 : -1;
    int alpha = sign * int(std::floor(1.0 + alpha_span * rng.unit() + 0.5));
    text = sqeq_text_with_roots(x1, x2, alpha);
  }
  sqeq_encode(text, x, y);
}

void draw_sample(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  if (t.kind == "copy" || t.kind == "reverse") {
    for (int i = 0; i < t.length; i++) x[i] = 2 + int64_t(rng.below(uint64_t(t.symbols)));
    target_from_x(t, x, y);
  } else if (t.kind == "retrieval") {
    int keys[26], values[26];
    draw_distinct(rng, 26, t.pairs, keys);
    draw_distinct(rng, 10, t.pairs, values);
    for (int k = 0; k < t.pairs; k++) {
      x[2 * k] = 11 + keys[k];
      x[2 * k + 1] = values[k];
    }
    x[2 * t.pairs] = 11 + keys[rng.below(uint64_t(t.pairs))];
    target_from_x(t, x, y);
  } else if (is_babilong_kind(t.kind)) {
    draw_babilong_sample(t, rng, x);
    target_from_x(t, x, y);
  } else {
    draw_sqeq(t, rng, x, y);
  }
}

namespace {
// Hash set of row indices into a growing row-major matrix.
struct RowSet {
  const std::vector<int64_t>* rows;
  int len;
  size_t operator()(int64_t r) const {
    const int64_t* p = rows->data() + r * len;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < len; i++) {
      h ^= uint64_t(p[i]) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    return size_t(h);
  }
  bool operator()(int64_t a, int64_t b) const {
    return std::memcmp(rows->data() + a * len, rows->data() + b * len, size_t(len) * 8) == 0;
  }
};
}  // namespace

std::vector<int64_t> generate_unique_x(const TaskOptions& t, int64_t count, uint64_t seed) {
  const int len_x = task_len_x(t), len_y = task_len_y(t);
  const int64_t possible = max_unique_samples(t);
  if (count > possible)
    fail("{} can produce only {} distinct samples, but {} were requested", t.name, possible, count);
  std::vector<int64_t> X(size_t(count + 1) * len_x);  // +1: scratch row for the next candidate
  std::vector<int64_t> y(len_y);
  RowSet rs{&X, len_x};
  std::unordered_set<int64_t, RowSet, RowSet> seen(size_t(count) * 2, rs, rs);
  TaskRng rng(seed);
  // Rejecting duplicates is the same as drawing i.i.d. and de-duplicating; near the limit it is a
  // coupon-collector loop, so bound the draws to fail instead of spinning.
  const int64_t max_draws = std::max<int64_t>(20'000'000, 50 * count);
  int64_t n = 0, draws = 0;
  while (n < count) {
    if (++draws > max_draws)
      fail("{}: found only {} distinct samples of {} requested after {} draws", t.name, n, count, max_draws);
    draw_sample(t, rng, X.data() + n * len_x, y.data());
    if (seen.insert(n).second) n++;
  }
  X.resize(size_t(count) * len_x);
  // Shuffle the rows (Fisher-Yates) before the caller splits them.
  std::vector<int64_t> tmp(len_x);
  for (int64_t i = count - 1; i > 0; i--) {
    int64_t j = int64_t(rng.below(uint64_t(i + 1)));
    if (j == i) continue;
    std::swap_ranges(X.begin() + i * len_x, X.begin() + (i + 1) * len_x, X.begin() + j * len_x);
  }
  return X;
}

}  // namespace rmt
