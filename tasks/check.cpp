// `rmt data check`: shapes, dtype, id ranges, every task invariant, no X in two splits, sha256.
#include <filesystem>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "lib/error.h"
#include "lib/io.h"
#include "lib/npy.h"
#include "tasks/tasks.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

struct Checker {
  const DatasetMeta& meta;
  TaskOptions task;
  int max_violations;
  std::vector<std::string> violations;
  int64_t total_violations = 0;

  void add(const std::string& what) {
    total_violations++;
    if (int(violations.size()) < max_violations) violations.push_back(what);
  }
};

// Parses "a*x^2+b*x+c=0"-style text into coefficients; false if it is not of that form.
bool parse_polynomial(const std::string& s, int64_t coef[3]) {
  coef[0] = coef[1] = coef[2] = 0;
  if (s.size() < 3 || s.compare(s.size() - 2, 2, "=0") != 0) return false;
  const size_t end = s.size() - 2;
  size_t p = 0;
  bool seen[3] = {false, false, false};
  while (p < end) {
    int sign = 1;
    if (s[p] == '+' || s[p] == '-') {
      sign = s[p] == '-' ? -1 : 1;
      p++;
    } else if (p != 0) {
      return false;
    }
    int64_t value = 0;
    bool digits = false;
    while (p < end && s[p] >= '0' && s[p] <= '9') {
      value = value * 10 + (s[p] - '0');
      if (value > 1'000'000'000) return false;
      digits = true;
      p++;
    }
    int power = 0;
    if (p < end && s[p] == '*') {
      if (!digits) return false;
      p++;
      if (p >= end || s[p] != 'x') return false;
    }
    if (p < end && s[p] == 'x') {
      p++;
      power = 1;
      if (p + 1 < end + 1 && s.compare(p, 2, "^2") == 0) {
        power = 2;
        p += 2;
      }
    } else if (!digits) {
      return false;
    }
    if (seen[power]) return false;
    seen[power] = true;
    coef[2 - power] = sign * (digits ? value : 1);
  }
  return true;
}

// Text of block j of a sqeq row, or an error: ids must be text ids then only pads.
bool sqeq_block_text(const int64_t* ids, const std::vector<std::string>& vocab, std::string& text, std::string& why) {
  int n = 0;
  while (n < kSqeqBlock && ids[n] >= 2) n++;
  text.clear();
  for (int k = 0; k < n; k++) text += vocab[ids[k]];
  for (int k = n; k < kSqeqBlock; k++)
    if (ids[k] != 0) {
      why = fmt::format("id {} after the block text ends at slot {}", ids[k], n);
      return false;
    }
  return true;
}

// The expected six blocks for a row, from its shown and canonical equations; empty string = ok.
std::string check_sqeq_row(const int64_t* x, const std::vector<std::string>& vocab, bool strict) {
  SqeqText got;
  for (int j = 0; j < kSqeqBlocks; j++) {
    std::string why;
    if (!sqeq_block_text(x + j * kSqeqBlock, vocab, got[j], why)) return fmt::format("block {}: {}", j + 1, why);
  }
  int64_t shown[3], canon[3];
  if (!parse_polynomial(got[0], shown)) return fmt::format("block 1 '{}' is not a quadratic equation", got[0]);
  if (!parse_polynomial(got[1], canon) || canon[0] != 1)
    return fmt::format("block 2 '{}' is not a canonical equation x^2+b*x+c=0", got[1]);
  const int64_t alpha = shown[0], b = canon[1], c = canon[2];
  if (alpha == 0 || alpha < -10 || alpha > 10) return fmt::format("multiplier {} is not in ±1..10", alpha);
  if (shown[1] != alpha * b || shown[2] != alpha * c)
    return fmt::format("shown equation '{}' is not {} times '{}'", got[0], alpha, got[1]);
  const int64_t d = b * b - 4 * c;
  SqeqText want;
  const bool no_roots = got[3].empty() && got[4].empty() && got[5].empty();
  if (no_roots) {
    if (strict && d >= 0) return fmt::format("no root lines but D = {} >= 0", d);
    if (std::abs(b) > 100000 || std::abs(c) > 1000000000) return "coefficients out of range";
    want = sqeq_text_no_roots(int(b), int(c), int(alpha));
  } else {
    int64_t s = 0;
    while (s * s < d) s++;
    if (d < 0 || s * s != d) return fmt::format("root lines present but D = {} is not a perfect square", d);
    if ((-b - s) % 2 != 0) return fmt::format("roots of '{}' are not integers", got[1]);
    const int64_t x1 = (-b - s) / 2, x2 = (-b + s) / 2;
    if (x1 * x1 + b * x1 + c != 0 || x2 * x2 + b * x2 + c != 0) return "roots do not solve the equation";
    want = sqeq_text_with_roots(int(x1), int(x2), int(alpha));
  }
  for (int j = 0; j < kSqeqBlocks; j++)
    if (got[j] != want[j]) return fmt::format("block {} is '{}', expected '{}'", j + 1, got[j], want[j]);
  return "";
}

// Task invariants of one row; empty string when it is valid.
std::string check_row(const Checker& ck, const int64_t* x, const int64_t* y, std::vector<int64_t>& want) {
  const TaskOptions& t = ck.task;
  const int len_x = ck.meta.len_x, len_y = ck.meta.len_y;
  if (t.kind == "copy" || t.kind == "reverse") {
    for (int i = 0; i < len_x; i++)
      if (x[i] < 2 || x[i] >= 2 + t.symbols)
        return fmt::format("X[{}] = {} is not a symbol id (2..{})", i, x[i], 1 + t.symbols);
  } else if (t.kind == "retrieval") {
    bool key_used[37] = {}, value_used[10] = {};
    for (int k = 0; k < t.pairs; k++) {
      const int64_t key = x[2 * k], value = x[2 * k + 1];
      if (key < 11 || key > 36) return fmt::format("X[{}] = {} is not a letter id (11..36)", 2 * k, key);
      if (value < 0 || value > 9) return fmt::format("X[{}] = {} is not a digit id (0..9)", 2 * k + 1, value);
      if (key_used[key]) return fmt::format("key {} appears twice", ck.meta.vocab[key]);
      if (value_used[value]) return fmt::format("value {} appears twice", value);
      key_used[key] = value_used[value] = true;
    }
    const int64_t q = x[2 * t.pairs];
    if (q < 11 || q > 36 || !key_used[q]) return fmt::format("query X[{}] = {} is not one of the keys", 2 * t.pairs, q);
  } else {
    std::string why = check_sqeq_row(x, ck.meta.vocab, ck.meta.from_meta_yaml);
    if (!why.empty()) return why;
  }
  target_from_x(t, x, want.data());
  for (int i = 0; i < len_y; i++)
    if (y[i] != want[i]) return fmt::format("y[{}] = {}, expected {}", i, y[i], want[i]);
  return "";
}

}  // namespace

CheckResult check_dataset(const std::string& dir, int max_violations) {
  DatasetMeta meta = load_dataset_meta(dir);
  Checker ck{meta, {meta.task, meta.kind, meta.length, meta.symbols, meta.pairs}, max_violations, {}, 0};
  CheckResult result;
  // Layout of the stacked/sqeq row must agree with the task.
  if (meta.len_x != task_len_x(ck.task) || meta.len_y != task_len_y(ck.task))
    ck.add(fmt::format("{}: len_x {} / len_y {} do not fit task {} (expected {} / {})", dir, meta.len_x, meta.len_y,
                       meta.task, task_len_x(ck.task), task_len_y(ck.task)));
  std::vector<std::vector<int64_t>> all_x(3);
  std::unordered_map<std::string_view, std::pair<int, int64_t>> first_seen;  // X row -> (split, row)
  for (int k = 0; k < 3; k++) {
    const std::string split = kSplits[k];
    const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
    const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
    if (!fs::exists(x_path) || !fs::exists(y_path)) {
      ck.add(fmt::format("{}: missing {} split ({} / {})", dir, split, fs::path(x_path).filename().string(),
                         fs::path(y_path).filename().string()));
      continue;
    }
    const int64_t before = ck.total_violations;
    NpyArray ax, ay;
    try {
      std::string x_bytes = read_file(x_path), y_bytes = read_file(y_path);
      for (auto& [name, hex] : meta.sha256) {
        if (name == fs::path(x_path).filename() && sha256_hex(x_bytes) != hex)
          ck.add(fmt::format("{}: sha256 differs from meta.yaml", x_path));
        if (name == fs::path(y_path).filename() && sha256_hex(y_bytes) != hex)
          ck.add(fmt::format("{}: sha256 differs from meta.yaml", y_path));
      }
      ax = parse_npy(x_bytes, x_path);
      ay = parse_npy(y_bytes, y_path);
    } catch (const Error& e) {
      ck.add(e.what());
      continue;
    }
    bool shapes_ok = true;
    for (auto [a, path, cols] : {std::tuple{&ax, &x_path, meta.len_x}, std::tuple{&ay, &y_path, meta.len_y}}) {
      if (a->dtype != NpyDtype::int64) ck.add(fmt::format("{}: dtype is not int64", *path));
      if (a->shape.size() != 2 || a->shape[1] != cols) {
        ck.add(fmt::format("{}: shape is not [N, {}]", *path, cols));
        shapes_ok = false;
      }
    }
    if (!shapes_ok) continue;
    const int64_t n = ax.shape[0];
    if (ay.shape[0] != n) {
      ck.add(fmt::format("{} has {} rows but {} has {}", x_path, n, y_path, ay.shape[0]));
      continue;
    }
    const int64_t vocab = int64_t(meta.vocab.size());
    std::vector<int64_t> want(meta.len_y);
    for (int64_t r = 0; r < n && ck.total_violations - before < max_violations; r++) {
      const int64_t* x = ax.ints.data() + r * meta.len_x;
      const int64_t* y = ay.ints.data() + r * meta.len_y;
      std::string why;
      for (int i = 0; i < meta.len_x && why.empty(); i++)
        if (x[i] < 0 || x[i] >= vocab) why = fmt::format("X[{}] = {} outside the vocabulary [0, {})", i, x[i], vocab);
      for (int i = 0; i < meta.len_y && why.empty(); i++)
        if (y[i] < 0 || y[i] >= vocab) why = fmt::format("y[{}] = {} outside the vocabulary [0, {})", i, y[i], vocab);
      if (why.empty()) why = check_row(ck, x, y, want);
      if (!why.empty()) ck.add(fmt::format("{} row {}: {}", fs::path(x_path).filename().string(), r, why));
    }
    all_x[k] = std::move(ax.ints);
    for (int64_t r = 0; r < n; r++) {
      std::string_view row(reinterpret_cast<const char*>(all_x[k].data() + r * meta.len_x), size_t(meta.len_x) * 8);
      auto [it, fresh] = first_seen.emplace(row, std::pair{k, r});
      if (!fresh)
        ck.add(fmt::format("{} row {}: same X as {} row {}", fs::path(x_path).filename().string(), r,
                           fs::path(dataset_file(dir, meta.file_prefix, kSplits[it->second.first], "X")).filename().string(),
                           it->second.second));
    }
    if (ck.total_violations == before)
      result.summary.push_back(fmt::format("{} {}: OK {} rows, X [{}, {}] y [{}, {}] int64{}", meta.task, split, n, n,
                                           meta.len_x, n, meta.len_y, meta.sha256.empty() ? "" : ", sha256 ok"));
  }
  result.ok = ck.total_violations == 0;
  result.violations = ck.violations;
  if (ck.total_violations > int64_t(ck.violations.size()))
    result.violations.push_back(fmt::format("... {} violations in all", ck.total_violations));
  return result;
}

}  // namespace rmt
