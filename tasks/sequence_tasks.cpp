// copy and reverse: drawing, targets, checks (docs/paper.md §1).
#include "tasks/sequence_tasks.h"

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"

namespace rmt {

namespace {
// Readable symbol for copy/reverse symbol k (id k+2).
const char kSymbolChars[] = "0123456789abcdefghijklmnopqrstuvwxyz";
constexpr int kMaxSymbols = 36, kMaxLength = 100000;

void draw_symbols(const TaskOptions& t, TaskRng& rng, int64_t* x) {
  for (int i = 0; i < t.length; i++) x[i] = 2 + int64_t(rng.below(uint64_t(t.symbols)));
}
}  // namespace

int sequence_len_x(const TaskOptions& t) { return t.length; }
int copy_len_y(const TaskOptions& t) { return 1 + 2 * t.length; }
int reverse_len_y(const TaskOptions& t) { return 1 + t.length; }

std::vector<std::string> sequence_vocab(const TaskOptions& t) {
  std::vector<std::string> v = {"<pad>", "<go>"};
  for (int k = 0; k < t.symbols; k++) v.push_back(std::string(1, kSymbolChars[k]));
  return v;
}

int64_t sequence_max_unique(const TaskOptions& t) {
  int64_t n = 1;
  for (int i = 0; i < t.length; i++) n = saturating_mul(n, t.symbols);
  return n;
}

void copy_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  y[0] = 1;
  for (int i = 0; i < t.length; i++) y[1 + i] = y[1 + t.length + i] = x[i];
}

void reverse_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  y[0] = 1;
  for (int i = 0; i < t.length; i++) y[1 + i] = x[t.length - 1 - i];
}

void copy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  draw_symbols(t, rng, x);
  copy_target(t, x, y);
}

void reverse_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  draw_symbols(t, rng, x);
  reverse_target(t, x, y);
}

void sequence_resolve_options(TaskOptions& t, const TaskArgs& a) {
  if (a.length) {
    if (*a.length < 1) fail("--length must be at least 1 (got {})", *a.length);
    if (*a.length > kMaxLength) fail("--length must be at most {} (got {})", kMaxLength, *a.length);
    t.length = *a.length;
  }
  if (a.symbols) {
    if (*a.symbols < 1 || *a.symbols > kMaxSymbols) fail("--symbols must be in 1..{} (got {})", kMaxSymbols, *a.symbols);
    t.symbols = *a.symbols;
  }
}

std::string sequence_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t*) {
  for (int i = 0; i < meta.len_x; i++)
    if (x[i] < 2 || x[i] >= 2 + t.symbols)
      return fmt::format("X[{}] = {} is not a symbol id (2..{})", i, x[i], 1 + t.symbols);
  return "";
}

void sequence_options_from_columns(DatasetMeta& m, int64_t columns, const std::string& x_path) {
  if (columns < 1 || columns > kMaxLength)
    fail("{}: {} columns, but {} X has 1..{} columns (one per symbol)", x_path, columns, m.kind, kMaxLength);
  m.length = int(columns);
  m.symbols = m.file_prefix == m.kind ? 10 : 8;
}

std::string show_stacked_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  // y[0] is the start token ("<go>" or "?"); the answer follows it.
  return fmt::format("X: {}   y: {} | {}", decode_ids(meta, x, cx), decode_ids(meta, y, 1), decode_ids(meta, y + 1, cy - 1));
}

}  // namespace rmt
