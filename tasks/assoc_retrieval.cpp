// The ARMT paper's associative retrieval (tasks/assoc_retrieval.h): drawing, targets, checks.
#include "tasks/assoc_retrieval.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"

namespace rmt {

namespace {

int block(const TaskOptions& t) { return t.key_size + t.value_size + 2; }  // key SEP value EOS
int64_t sep_id(const TaskOptions& t) { return t.symbols; }
int64_t gen_id(const TaskOptions& t) { return t.symbols + 1; }
int64_t eos_id(const TaskOptions& t) { return t.symbols + 2; }

bool same_key(const int64_t* a, const int64_t* b, int key_size) { return std::equal(a, a + key_size, b); }

// The last pair whose key is the query's (x's last key), or -1.
int last_pair_of_query(const TaskOptions& t, const int64_t* x) {
  const int64_t* query = x + t.pairs * block(t);
  for (int p = t.pairs - 1; p >= 0; --p)
    if (same_key(x + p * block(t), query, t.key_size)) return p;
  return -1;
}

// A key as its symbol ids, "4" or "[4, 0]".
std::string key_text(const TaskOptions& t, const int64_t* key) {
  if (t.key_size == 1) return fmt::format("{}", key[0]);
  return fmt::format("[{}]", fmt::join(key, key + t.key_size, ", "));
}

// Key number `code` (0 .. S^key_size - 1) written as key_size symbols, least significant first
// (as the authors' code writes them).
void write_key(const TaskOptions& t, uint64_t code, int64_t* out) {
  for (int j = 0; j < t.key_size; ++j, code /= uint64_t(t.symbols)) out[j] = int64_t(code % uint64_t(t.symbols));
}

uint64_t key_count(const TaskOptions& t) {  // S^key_size, exact: key_size <= 8, S <= 36
  uint64_t n = 1;
  for (int j = 0; j < t.key_size; ++j) n *= uint64_t(t.symbols);
  return n;
}

// The blocks of X: keys from `keys` (codes), values drawn; then the query key `query` and GEN.
void write_sample(const TaskOptions& t, TaskRng& rng, const std::vector<uint64_t>& keys, int query, int64_t* x,
                  int64_t* y) {
  for (int p = 0; p < t.pairs; ++p) {
    int64_t* b = x + p * block(t);
    write_key(t, keys[size_t(p)], b);
    b[t.key_size] = sep_id(t);
    for (int j = 0; j < t.value_size; ++j) b[t.key_size + 1 + j] = int64_t(rng.below(uint64_t(t.symbols)));
    b[block(t) - 1] = eos_id(t);
  }
  int64_t* q = x + t.pairs * block(t);
  write_key(t, keys[size_t(query)], q);
  q[t.key_size] = gen_id(t);
  ar_target(t, x, y);
}

// ar_remember's keys are distinct: there must be as many keys as pairs.
void check_distinct_keys_fit(const TaskOptions& t, const char* pairs, const char* key_size) {
  if (uint64_t(t.pairs) > key_count(t))
    fail("{} {} is too many for distinct keys: {} symbols in keys of {} make {}; a longer {} (the ARMT paper "
         "grows it with the pairs)", pairs, t.pairs, t.symbols, t.key_size, key_count(t), key_size);
}

}  // namespace

int ar_len_x(const TaskOptions& t) { return t.pairs * block(t) + t.key_size + 1; }
int ar_len_y(const TaskOptions& t) { return t.value_size + 1; }
int ar_answer_size(const TaskOptions& t) { return t.value_size + 1; }

std::vector<std::string> ar_vocab(const TaskOptions& t) {
  std::vector<std::string> v;
  for (int s = 0; s < t.symbols; ++s) v.push_back(std::string(1, s < 10 ? char('0' + s) : char('a' + s - 10)));
  for (const char* special : {"=", "?", "."}) v.push_back(special);  // SEP, GEN, EOS
  return v;
}

namespace {
// Values: S^(pairs * value_size); keys: ordered distinct ones, or any; then which one is queried.
int64_t max_unique(const TaskOptions& t, bool distinct_keys) {
  int64_t n = t.pairs;
  const int64_t keys = int64_t(std::min<uint64_t>(key_count(t), uint64_t(1) << 62));
  for (int p = 0; p < t.pairs; ++p) {
    n = saturating_mul(n, distinct_keys ? std::max<int64_t>(keys - p, 0) : keys);
    for (int j = 0; j < t.value_size; ++j) n = saturating_mul(n, t.symbols);
  }
  return n;
}
}  // namespace

int64_t ar_remember_max_unique(const TaskOptions& t) { return max_unique(t, true); }
int64_t ar_rewrite_max_unique(const TaskOptions& t) { return max_unique(t, false); }

void ar_remember_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  // Distinct key codes by rejection (the pairs are at most the codes; a set keeps it O(pairs log)).
  std::vector<uint64_t> keys;
  std::set<uint64_t> used;
  while (int(keys.size()) < t.pairs) {
    const uint64_t code = rng.below(key_count(t));
    if (used.insert(code).second) keys.push_back(code);
  }
  write_sample(t, rng, keys, int(rng.below(uint64_t(t.pairs))), x, y);
}

void ar_rewrite_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  std::vector<uint64_t> keys;
  for (int p = 0; p < t.pairs; ++p) keys.push_back(rng.below(key_count(t)));
  // A distinct key, uniformly: the pairs that are their key's first occurrence.
  std::vector<int> firsts;
  for (int p = 0; p < t.pairs; ++p)
    if (std::find(keys.begin(), keys.begin() + p, keys[size_t(p)]) == keys.begin() + p) firsts.push_back(p);
  write_sample(t, rng, keys, firsts[rng.below(firsts.size())], x, y);
}

void ar_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const int p = last_pair_of_query(t, x);
  for (int j = 0; j < t.value_size; ++j) y[j] = p < 0 ? 0 : x[p * block(t) + t.key_size + 1 + j];
  y[t.value_size] = eos_id(t);
}

std::string ar_rewrite_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  auto symbol = [&](int i) -> std::string {
    if (x[i] < 0 || x[i] >= t.symbols) return fmt::format("X[{}] = {} is not a symbol id (0..{})", i, x[i], t.symbols - 1);
    return "";
  };
  auto special = [&](int i, int64_t id, const char* what) -> std::string {
    return x[i] == id ? "" : fmt::format("X[{}] = {}, expected {} (id {})", i, x[i], what, id);
  };
  for (int p = 0; p <= t.pairs; ++p) {
    const int b = p * block(t);
    for (int j = 0; j < t.key_size; ++j)
      if (std::string e = symbol(b + j); !e.empty()) return e;
    if (p == t.pairs) {  // the query: its key, then GEN
      if (std::string e = special(b + t.key_size, gen_id(t), "GEN '?'"); !e.empty()) return e;
      break;
    }
    if (std::string e = special(b + t.key_size, sep_id(t), "SEP '='"); !e.empty()) return e;
    for (int j = 0; j < t.value_size; ++j)
      if (std::string e = symbol(b + t.key_size + 1 + j); !e.empty()) return e;
    if (std::string e = special(b + block(t) - 1, eos_id(t), "EOS '.'"); !e.empty()) return e;
  }
  // The cause before its symptom: without the query's key among the pairs, y has no answer to
  // be compared with (the target computed from X would be a made-up 0).
  if (last_pair_of_query(t, x) < 0) {
    const int q = t.pairs * block(t);
    const std::string where = t.key_size == 1 ? fmt::format("X[{}]", q) : fmt::format("X[{}..{}]", q, q + t.key_size - 1);
    return fmt::format("the query key {} ({}) is none of the pairs' keys", key_text(t, x + q), where);
  }
  return "";
}

std::string ar_remember_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y) {
  if (std::string e = ar_rewrite_row_problem(t, meta, x, y); !e.empty()) return e;
  for (int p = 1; p < t.pairs; ++p)
    for (int q = 0; q < p; ++q)
      if (same_key(x + p * block(t), x + q * block(t), t.key_size))
        return fmt::format("pairs {} and {} have one key; ar_remember's keys are distinct", q + 1, p + 1);
  return "";
}

std::string ar_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  return fmt::format("X: {}   y: {}", decode_ids(meta, x, cx), decode_ids(meta, y, cy));
}

void ar_rewrite_resolve_options(TaskOptions& t, const TaskArgs& a) {
  t.key_size = t.value_size = 1;  // the defaults
  if (a.pairs) {
    if (*a.pairs < 1 || *a.pairs > 100000) fail("--pairs must be in 1..100000 (got {})", *a.pairs);
    t.pairs = *a.pairs;
  }
  if (a.symbols) {
    if (*a.symbols < 2 || *a.symbols > 36) fail("--symbols must be in 2..36 (got {})", *a.symbols);
    t.symbols = *a.symbols;
  }
  for (auto [flag, given, field] : {std::tuple{"--key-size", a.key_size, &TaskOptions::key_size},
                                    std::tuple{"--value-size", a.value_size, &TaskOptions::value_size}}) {
    if (!given) continue;
    if (*given < 1 || *given > kArMaxSymbolSize) fail("{} must be in 1..{} (got {})", flag, kArMaxSymbolSize, *given);
    t.*field = *given;
  }
}

void ar_remember_resolve_options(TaskOptions& t, const TaskArgs& a) {
  ar_rewrite_resolve_options(t, a);
  check_distinct_keys_fit(t, "--pairs", "--key-size");
}

void ar_remember_check_meta_options(const TaskOptions& t) {
  check_distinct_keys_fit(t, "options.pairs", "options.key_size");
}

std::string ar_generated_summary(const TaskOptions& t) {
  return fmt::format(", {} pairs, keys of {} and values of {} of {} symbols; one pair a segment: --segments {}",
                     t.pairs, t.key_size, t.value_size, t.symbols, t.pairs + 1);
}

}  // namespace rmt
