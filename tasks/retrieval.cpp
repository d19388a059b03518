// Associative retrieval: drawing, targets, checks (docs/paper.md §1).
#include "tasks/retrieval.h"

#include <algorithm>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/sequence_tasks.h"

namespace rmt {

namespace {
constexpr int kFirstKey = 11, kLetters = 26, kDigits = 10, kQuestion = 10;

// First k of a random permutation of 0..n-1 (partial Fisher-Yates).
void draw_distinct(TaskRng& rng, int n, int k, int* out) {
  int pool[kLetters];
  for (int i = 0; i < n; i++) pool[i] = i;
  for (int i = 0; i < k; i++) {
    int j = i + int(rng.below(uint64_t(n - i)));
    std::swap(pool[i], pool[j]);
    out[i] = pool[i];
  }
}
}  // namespace

int retrieval_len_x(const TaskOptions& t) { return 2 * t.pairs + 1; }
int retrieval_len_y(const TaskOptions&) { return 2; }

std::vector<std::string> retrieval_vocab(const TaskOptions&) {
  std::vector<std::string> v;
  for (int d = 0; d < kDigits; d++) v.push_back(std::string(1, char('0' + d)));
  v.push_back("?");
  for (int k = 0; k < kLetters; k++) v.push_back(std::string(1, char('a' + k)));
  return v;
}

int64_t retrieval_max_unique(const TaskOptions& t) {
  int64_t n = t.pairs;  // which key is queried
  for (int i = 0; i < t.pairs; i++) n = saturating_mul(saturating_mul(n, kLetters - i), kDigits - i);
  return n;
}

void retrieval_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const int64_t query = x[2 * t.pairs];
  y[0] = kQuestion;
  y[1] = 0;
  for (int k = 0; k < t.pairs; k++)
    if (x[2 * k] == query) y[1] = x[2 * k + 1];
}

void retrieval_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  int keys[kLetters], values[kLetters];
  draw_distinct(rng, kLetters, t.pairs, keys);
  draw_distinct(rng, kDigits, t.pairs, values);
  for (int k = 0; k < t.pairs; k++) {
    x[2 * k] = kFirstKey + keys[k];
    x[2 * k + 1] = values[k];
  }
  x[2 * t.pairs] = kFirstKey + keys[rng.below(uint64_t(t.pairs))];
  retrieval_target(t, x, y);
}

void retrieval_resolve_options(TaskOptions& t, const TaskArgs& a) {
  if (!a.pairs) return;
  if (*a.pairs < 1) fail("--pairs must be at least 1 (got {})", *a.pairs);
  if (*a.pairs > kDigits)
    fail("--pairs {} is too many: keys are distinct letters (26) and values distinct digits (10), so at most 10",
         *a.pairs);
  t.pairs = *a.pairs;
}

void retrieval_check_meta_options(const TaskOptions& t) {
  if (t.pairs > kDigits)
    fail("options.pairs {} is too many: keys are distinct letters (26) and values distinct digits (10), so at most "
         "10", t.pairs);
}

std::string retrieval_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t*) {
  bool key_used[kFirstKey + kLetters] = {}, value_used[kDigits] = {};
  for (int k = 0; k < t.pairs; k++) {
    const int64_t key = x[2 * k], value = x[2 * k + 1];
    if (key < kFirstKey || key > 36) return fmt::format("X[{}] = {} is not a letter id (11..36)", 2 * k, key);
    if (value < 0 || value > 9) return fmt::format("X[{}] = {} is not a digit id (0..9)", 2 * k + 1, value);
    if (key_used[key]) return fmt::format("key {} appears twice", meta.vocab[key]);
    if (value_used[value]) return fmt::format("value {} appears twice", value);
    key_used[key] = value_used[value] = true;
  }
  const int64_t q = x[2 * t.pairs];
  if (q < kFirstKey || q > 36 || !key_used[q]) return fmt::format("query X[{}] = {} is not one of the keys", 2 * t.pairs, q);
  return "";
}

void retrieval_options_from_columns(DatasetMeta& m, int64_t columns, const std::string& x_path) {
  if (columns < 3 || columns > 21 || columns % 2 == 0)
    fail("{}: {} columns, but retrieval X has 2 * pairs + 1 columns with 1..10 pairs (3, 5, ..., 21)", x_path, columns);
  m.pairs = int(columns - 1) / 2;
}

std::string retrieval_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  if (cx % 2 == 0) return show_stacked_row(meta, x, cx, y, cy);  // not retrieval's shape: shown as it is
  // Key-value pairs, then the query key; y = "?" then the queried value.
  std::string pairs;
  for (int k = 0; k + 1 < cx; k += 2) pairs += decode_ids(meta, x + k, 2) + " ";
  return fmt::format("X: {}query {}   y: {} | {}", pairs, decode_ids(meta, x + cx - 1, 1), decode_ids(meta, y, 1),
                     decode_ids(meta, y + 1, cy - 1));
}

}  // namespace rmt
