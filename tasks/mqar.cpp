// Zoology's MQAR (tasks/mqar.h): drawing, the target from X, the checks, the options.
#include "tasks/mqar.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"

namespace rmt {

namespace {

int key_half(const TaskOptions& t) { return t.vocab_size / 2; }   // K: keys 1..K-1, values K..V-1
int query_start(const TaskOptions& t) { return 2 * t.pairs; }     // the first position after the pairs
int gap_count(const TaskOptions& t) { return (t.length - 2 * t.pairs) / 2; }  // S: the even offsets

// k distinct ids, uniformly and in draw order, from lo .. lo+n-1: by rejection where they are
// few of n, else a partial Fisher-Yates shuffle (n ids held only then).
void distinct_ids(TaskRng& rng, int64_t lo, int64_t n, int k, std::vector<int64_t>& out) {
  out.clear();
  if (int64_t(k) * 2 <= n) {
    std::unordered_set<int64_t> used;
    while (int(out.size()) < k) {
      const int64_t id = lo + int64_t(rng.below(uint64_t(n)));
      if (used.insert(id).second) out.push_back(id);
    }
    return;
  }
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[size_t(i)] = lo + i;
  for (int i = 0; i < k; ++i) {
    const int64_t j = i + int64_t(rng.below(uint64_t(n - i)));
    std::swap(all[size_t(i)], all[size_t(j)]);
    out.push_back(all[size_t(i)]);
  }
}

// Zoology's problems with the options, named as flags (--pairs) or as meta.yaml keys.
std::string options_problem(const TaskOptions& t, bool flags) {
  auto name = [&](const char* key, const char* flag) {
    return flags ? fmt::format("--{}", flag) : fmt::format("options.{}", key);
  };
  const int K = key_half(t);
  if (t.vocab_size < 4)
    return fmt::format("{} {} is too small: keys are 1..V/2-1 and values V/2..V-1, so at least 4", name("vocab_size", "vocab-size"), t.vocab_size);
  if (t.length % 2 != 0)
    return fmt::format("{} {} must be even: the queries sit at even offsets after the pairs (Zoology asserts it)",
                       name("length", "length"), t.length);
  if (4 * int64_t(t.pairs) > t.length)
    return fmt::format("{} {} is too many for {} {}: the pairs take 2 positions each and their queries need "
                       "as many after them, so at most {}", name("pairs", "pairs"), t.pairs, name("length", "length"),
                       t.length, t.length / 4);
  if (t.pairs > K - 1)
    return fmt::format("{} {} is too many for {} {}: the keys are distinct ids 1..{} ({} of them)",
                       name("pairs", "pairs"), t.pairs, name("vocab_size", "vocab-size"), t.vocab_size, K - 1, K - 1);
  if (t.pairs > t.vocab_size - K)
    return fmt::format("{} {} is too many for {} {}: the values are distinct ids {}..{}", name("pairs", "pairs"),
                       t.pairs, name("vocab_size", "vocab-size"), t.vocab_size, K, t.vocab_size - 1);
  if (t.filler == "zoology")  // Zoology's random_non_queries=True draws over every id, keys included
    return fmt::format("{} zoology is not offered: Zoology's filler may repeat a sample's key, so a query cannot "
                       "be told from filler (its issue #29); random is uniform over the ids that are not the "
                       "sample's keys", name("filler", "filler"));
  if (t.filler != "random" && t.filler != "zero")
    return fmt::format("{} '{}' is not one of random, zero", name("filler", "filler"), t.filler);
  const char* s = t.power_a.c_str();
  char* end = nullptr;
  errno = 0;
  const double a = std::strtod(s, &end);
  if (t.power_a.empty() || *end != '\0' || errno != 0 || !std::isfinite(a) || a <= 0 || a > 100)
    return fmt::format("{} '{}' must be a number in (0, 100] (Zoology's power law a * g^(a-1); 0.01 its default, "
                       "1 uniform)", name("power_a", "power-a"), t.power_a);
  return "";
}

}  // namespace

double mqar_power_a(const TaskOptions& t) { return std::strtod(t.power_a.c_str(), nullptr); }

int mqar_len(const TaskOptions& t) { return t.length; }
int mqar_answer_size(const TaskOptions& t) { return t.length; }

std::vector<std::string> mqar_vocab(const TaskOptions& t) {
  std::vector<std::string> v;
  for (int id = 0; id < t.vocab_size; ++id) v.push_back(fmt::format("{}", id));
  return v;
}

// Ordered distinct keys x ordered distinct values x the gaps' order, times the filler's choices.
int64_t mqar_max_unique(const TaskOptions& t) {
  const int K = key_half(t), P = t.pairs, S = gap_count(t);
  int64_t n = 1;
  for (int i = 0; i < P; ++i) {
    n = saturating_mul(n, K - 1 - i);
    n = saturating_mul(n, t.vocab_size - K - i);
    n = saturating_mul(n, S - i);
  }
  if (t.filler == "random")
    for (int i = 0; i < t.length - 3 * P; ++i) n = saturating_mul(n, t.vocab_size - P);
  return n;
}

void mqar_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const int K = key_half(t), P = t.pairs, S = gap_count(t), L = t.length, q0 = query_start(t);
  std::vector<int64_t> keys, values;
  distinct_ids(rng, 1, K - 1, P, keys);                 // np.random.choice(1..K-1, P, replace=False)
  distinct_ids(rng, K, t.vocab_size - K, P, values);    // np.random.choice(K..V-1, P, replace=False)
  // Gap i of key i: weighted draws without replacement, as numpy's choice(replace=False, p=...)
  // gives them (each next distinct gap in proportion to the weights of those left).
  const double a = mqar_power_a(t);
  std::vector<double> weight(static_cast<size_t>(S));
  double left = 0;
  for (int g = 0; g < S; ++g) left += weight[size_t(g)] = a * std::pow(double(g + 1), a - 1);
  std::fill(x, x + L, int64_t(-1));  // -1: a filler position, until the filler is drawn
  for (int i = 0; i < P; ++i) {
    x[2 * i] = keys[size_t(i)];
    x[2 * i + 1] = values[size_t(i)];
    double u = rng.unit() * left;
    int g = 0;
    while (g < S - 1 && (weight[size_t(g)] == 0 || u >= weight[size_t(g)])) u -= weight[size_t(g++)];
    while (weight[size_t(g)] == 0) --g;  // rounding ran past the last gap left: the last one
    left -= weight[size_t(g)];
    weight[size_t(g)] = 0;
    x[q0 + 2 * g] = keys[size_t(i)];
  }
  // The filler: ids that are not this sample's keys (random: the r-th such id), or 0.
  std::vector<int64_t> sorted_keys = keys;
  std::sort(sorted_keys.begin(), sorted_keys.end());
  for (int p = 0; p < L; ++p) {
    if (x[p] >= 0) continue;
    if (t.filler == "zero") {
      x[p] = 0;
      continue;
    }
    int64_t id = int64_t(rng.below(uint64_t(t.vocab_size - P)));
    for (int64_t k : sorted_keys) id += k <= id;
    x[p] = id;
  }
  mqar_target(t, x, y);
}

// The value of the key at each position after the pairs that holds one (the queries: no key is
// anywhere else), -1 elsewhere.
void mqar_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  std::map<int64_t, int64_t> value_of;
  for (int i = 0; i < t.pairs; ++i) value_of.emplace(x[2 * i], x[2 * i + 1]);
  for (int p = 0; p < t.length; ++p) {
    const auto it = p >= query_start(t) ? value_of.find(x[p]) : value_of.end();
    y[p] = it == value_of.end() ? -1 : it->second;
  }
}

std::string mqar_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  const int K = key_half(t), q0 = query_start(t);
  std::map<int64_t, int> pair_of;  // key -> its pair
  std::vector<int64_t> seen_values;
  for (int i = 0; i < t.pairs; ++i) {
    const int64_t k = x[2 * i], v = x[2 * i + 1];
    if (k < 1 || k >= K) return fmt::format("X[{}] = {} (pair {}'s key) is not a key id (1..{})", 2 * i, k, i + 1, K - 1);
    if (v < K) return fmt::format("X[{}] = {} (pair {}'s value) is not a value id ({}..{})", 2 * i + 1, v, i + 1, K, t.vocab_size - 1);
    if (auto [it, fresh] = pair_of.emplace(k, i); !fresh)
      return fmt::format("pairs {} and {} have one key, {}; a sample's keys are distinct", it->second + 1, i + 1, k);
    if (std::find(seen_values.begin(), seen_values.end(), v) != seen_values.end())
      return fmt::format("pair {}'s value {} is an earlier pair's; a sample's values are distinct", i + 1, v);
    seen_values.push_back(v);
  }
  std::vector<int> queried(size_t(t.pairs), -1);  // pair -> its query's position
  for (int p = q0; p < t.length; ++p) {
    const auto it = pair_of.find(x[p]);
    if (it == pair_of.end()) {
      if (t.filler == "zero" && x[p] != 0) return fmt::format("X[{}] = {}: filler zero, expected 0 or a query key", p, x[p]);
      continue;
    }
    const int i = it->second;
    if ((p - q0) % 2 != 0)
      return fmt::format("X[{}] = {} (pair {}'s key) at an odd offset after the pairs: a query sits at an even one, "
                         "and the filler is never a key", p, x[p], i + 1);
    if (queried[size_t(i)] >= 0)
      return fmt::format("X[{}] and X[{}] both hold key {}: each key is queried once, and the filler is never a key",
                         queried[size_t(i)], p, x[p]);
    queried[size_t(i)] = p;
  }
  for (int i = 0; i < t.pairs; ++i)
    if (queried[size_t(i)] < 0) return fmt::format("pair {}'s key {} is never queried", i + 1, x[2 * i]);
  return "";
}

// "pairs 12:4100 7:5000 | queries @8 7→5000 @12 12→4100 | 6 filler": what the row asks.
std::string mqar_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  auto sym = [&](int64_t id) { return decode_ids(meta, &id, 1); };
  std::string pairs, queries;
  const int q0 = 2 * meta.pairs;
  for (int i = 0; i < meta.pairs && 2 * i + 1 < cx; ++i) pairs += fmt::format(" {}:{}", sym(x[2 * i]), sym(x[2 * i + 1]));
  int filler = 0;
  for (int p = q0; p < std::min(cx, cy); ++p) {
    if (y[p] < 0) {
      ++filler;
      continue;
    }
    queries += fmt::format(" @{} {}→{}", p, sym(x[p]), sym(y[p]));
  }
  return fmt::format("pairs{} | queries{} | {} filler", pairs, queries, filler);
}

void mqar_resolve_options(TaskOptions& t, const TaskArgs& a) {
  t.vocab_size = a.vocab_size.value_or(kMqarDefaultVocab);
  t.length = a.length.value_or(kMqarDefaultLength);
  t.pairs = a.pairs.value_or(kMqarDefaultPairs);
  t.power_a = a.power_a.value_or(kMqarDefaultPowerA);
  t.filler = a.filler.value_or("random");
  if (const std::string problem = options_problem(t, true); !problem.empty()) fail("{}", problem);
  t.power_a = fmt::format("{}", mqar_power_a(t));  // one spelling of the number in meta.yaml (0.010 -> 0.01)
}

void mqar_check_meta_options(const TaskOptions& t) {
  if (const std::string problem = options_problem(t, false); !problem.empty()) fail("{}", problem);
}

std::string mqar_generated_summary(const TaskOptions& t) {
  return fmt::format(", length {}, {} pairs (keys 1..{}, values {}..{}), power_a {}, filler {}", t.length, t.pairs,
                     key_half(t) - 1, key_half(t), t.vocab_size - 1, t.power_a, t.filler);
}

}  // namespace rmt
