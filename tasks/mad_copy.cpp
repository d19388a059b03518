// MAD's selective copying and memorization (tasks/mad.h): mad-lab's generate_copying_instance with
// selective=True (mad/data/instances.py:514-567, :572-600) and generate_memorization_instance with
// its generate_kv_map (:352-459).
#include <algorithm>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/mad.h"

namespace rmt {

namespace {

// Selective copying's ids (:542-545): the tokens 0..V-3, the blank V-2, the copy token V-1.
int64_t copy_blank(const TaskOptions& t) { return t.vocab_size - 2; }
int64_t copy_token(const TaskOptions& t) { return t.vocab_size - 1; }
int blanks_among_tokens(const TaskOptions& t) { return t.length - 2 * t.tokens_to_copy - 1; }  // :549

// Memorization's ids (:409-411, :371-372): N = V - 1 - noise ids, keys 0..N/2-1, values N/2..N-1,
// the noise ids N..V-2, the insert token V-1.
struct MemoIds {
  int64_t keys, plain, insert;
  explicit MemoIds(const TaskOptions& t)
      : keys((t.vocab_size - 1 - t.noise_vocab_size) / 2), plain(t.vocab_size - 1 - t.noise_vocab_size),
        insert(t.vocab_size - 1) {}
};

}  // namespace

int mad_copy_len(const TaskOptions& t) { return t.length; }

// The tokens' ids, times the ways to put the blanks into the n gaps before the tokens:
// (V-2)^n * C(blanks + n - 1, n - 1).
int64_t mad_copy_max_unique(const TaskOptions& t) {
  const int n = t.tokens_to_copy, blanks = blanks_among_tokens(t);
  int64_t count = 1;
  for (int i = 0; i < n; ++i) count = saturating_mul(count, t.vocab_size - 2);
  long double ways = 1;
  for (int i = 1; i < n && ways < 0x1p62L; ++i) ways = ways * (blanks + i) / i;
  return saturating_mul(count, ways >= 0x1p62L ? int64_t(1) << 62 : int64_t(ways + 0.5L));
}

void mad_copy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const int n = t.tokens_to_copy, blanks = blanks_among_tokens(t);
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  for (int64_t& id : tokens) id = int64_t(rng.below(uint64_t(t.vocab_size - 2)));  // :550, with replacement
  // np.insert(tokens, randint(0, n, blanks), blank) (:556-557): each blank goes before a token drawn
  // uniformly, never after the last. mad-lab draws these from numpy's global generator, not the
  // seeded rng, so its samples do not follow from its seed; here they come from the task's rng.
  std::vector<int> before(static_cast<size_t>(n), 0);
  for (int b = 0; b < blanks; ++b) ++before[size_t(rng.below(uint64_t(n)))];
  int p = 0;
  for (int i = 0; i < n; ++i) {
    for (int b = 0; b < before[size_t(i)]; ++b) x[p++] = copy_blank(t);
    x[p++] = tokens[size_t(i)];
  }
  x[p++] = copy_token(t);                                // :558
  for (int i = 0; i < n; ++i) x[p++] = copy_blank(t);   // :559
  mad_copy_target(t, x, y);
}

// :563-564: the tokens, in order, at the blanks after the copy token; -1 before them.
void mad_copy_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const int n = t.tokens_to_copy, start = t.length - n;
  std::fill(y, y + t.length, int64_t(-1));
  int q = start;
  for (int p = 0; p < start - 1 && q < t.length; ++p)
    if (x[p] != copy_blank(t)) y[q++] = x[p];
}

std::string mad_copy_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  const int n = t.tokens_to_copy, start = t.length - n;
  if (x[start - 1] != copy_token(t))
    return fmt::format("X[{}] = {}, expected the copy token {} ({} positions from the end)", start - 1, x[start - 1],
                       copy_token(t), n + 1);
  for (int p = start; p < t.length; ++p)
    if (x[p] != copy_blank(t))
      return fmt::format("X[{}] = {} after the copy token, expected the blank {}", p, x[p], copy_blank(t));
  int tokens = 0;
  for (int p = 0; p < start - 1; ++p) {
    if (x[p] == copy_token(t))
      return fmt::format("X[{}] = {}, the copy token, before its place X[{}]", p, x[p], start - 1);
    tokens += x[p] != copy_blank(t);
  }
  if (tokens != n) return fmt::format("{} tokens before the copy token, expected {} (tokens_to_copy)", tokens, n);
  if (x[start - 2] == copy_blank(t))
    return fmt::format("X[{}] is a blank: mad-lab puts the blanks only before tokens, so the last token is right "
                       "before the copy token", start - 2);
  return "";
}

void mad_copy_resolve_options(TaskOptions& t, const TaskArgs& a) {
  // configs/tasks/selective-copying.yml's baseline.
  t.vocab_size = a.vocab_size.value_or(16);
  t.length = a.length.value_or(256);
  t.tokens_to_copy = a.tokens_to_copy.value_or(16);
  mad_finish_options(t);
}

// generate_kv_map (:352-375): the keys shuffled, the values shuffled, the i-th key to the i-th
// value (zip stops at the keys: there are at least as many values), from kv_map_seed alone.
std::vector<int64_t> mad_memo_map(const TaskOptions& t) {
  const MemoIds ids(t);
  TaskRng rng(uint64_t(t.kv_map_seed));
  auto shuffled = [&](int64_t lo, int64_t count) {
    std::vector<int64_t> v(static_cast<size_t>(count));
    std::iota(v.begin(), v.end(), lo);
    for (int64_t i = count - 1; i > 0; --i) std::swap(v[size_t(i)], v[size_t(rng.below(uint64_t(i + 1)))]);
    return v;
  };
  const std::vector<int64_t> keys = shuffled(0, ids.keys), values = shuffled(ids.keys, ids.plain - ids.keys);
  std::vector<int64_t> value_of(size_t(ids.keys));
  for (size_t i = 0; i < keys.size(); ++i) value_of[size_t(keys[i])] = values[i];
  return value_of;
}

namespace {
// The map of the options last asked for: every row of a dataset shares it.
const std::vector<int64_t>& memo_map(const TaskOptions& t) {
  thread_local std::vector<int> key;
  thread_local std::vector<int64_t> map;
  const std::vector<int> want = {t.vocab_size, t.noise_vocab_size, t.kv_map_seed};
  if (want != key) map = mad_memo_map(t), key = want;
  return map;
}
}  // namespace

int mad_memo_len(const TaskOptions& t) { return t.length; }

// A lower bound: each sequence of keys gives another X.
int64_t mad_memo_max_unique(const TaskOptions& t) {
  const MemoIds ids(t);
  int64_t n = 1;
  for (int i = 0; i < t.length / 2; ++i) n = saturating_mul(n, ids.keys);
  return n;
}

void mad_memo_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const MemoIds ids(t);
  const int pairs = t.length / 2;  // :433
  const double frac = mad_frac_noise(t);
  const int kept = int(rng.below(uint64_t(pairs)));  // not_noise_idx (:434): at least one key
  for (int i = 0; i < pairs; ++i) {
    const bool noise = frac > 0 && i != kept && rng.unit() < frac;  // :438
    if (noise) {                                                    // :441-444
      x[2 * i] = ids.plain + int64_t(rng.below(uint64_t(t.noise_vocab_size)));
      x[2 * i + 1] = ids.plain + int64_t(rng.below(uint64_t(t.noise_vocab_size)));
    } else {  // :448-452: a key drawn uniformly, then the insert token
      x[2 * i] = int64_t(rng.below(uint64_t(ids.keys)));
      x[2 * i + 1] = ids.insert;
    }
  }
  mad_memo_target(t, x, y);
}

// :454-455: at each insert token, the map's value of the key before it; -1 elsewhere.
void mad_memo_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const MemoIds ids(t);
  const std::vector<int64_t>& value_of = memo_map(t);
  std::fill(y, y + t.length, int64_t(-1));
  for (int p = 0; p + 1 < t.length; p += 2)
    if (x[p + 1] == ids.insert && x[p] < ids.keys) y[p + 1] = value_of[size_t(x[p])];
}

std::string mad_memo_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  const MemoIds ids(t);
  const bool noisy = mad_frac_noise(t) > 0;
  int keys = 0;
  for (int p = 0; p + 1 < t.length; p += 2) {
    const int64_t a = x[p], b = x[p + 1];
    if (a < ids.keys && b == ids.insert) {
      ++keys;
      continue;
    }
    const bool noise_pair = a >= ids.plain && a < ids.insert && b >= ids.plain && b < ids.insert;
    if (noise_pair && !noisy) return fmt::format("X[{}..{}] is a noise pair, but frac_noise is 0", p, p + 1);
    if (!noise_pair)
      return fmt::format("X[{}..{}] = {} {} is neither a key (0..{}) and the insert token {} nor two noise ids "
                         "({}..{})", p, p + 1, a, b, ids.keys - 1, ids.insert, ids.plain, ids.insert - 1);
  }
  if (keys == 0) return "no key in the row: mad-lab keeps one pair free of noise (not_noise_idx)";
  return "";
}

void mad_memo_resolve_options(TaskOptions& t, const TaskArgs& a) {
  // configs/tasks/memorization.yml's baseline; the map's seed is MADConfig.seed (mad/configs.py:69, :89-94).
  t.vocab_size = a.vocab_size.value_or(256);
  t.length = a.length.value_or(32);
  t.noise_vocab_size = a.noise_vocab_size.value_or(0);
  t.frac_noise = a.frac_noise.value_or("0");
  t.kv_map_seed = a.kv_map_seed.value_or(12345);
  mad_finish_options(t);
}

}  // namespace rmt
