// `rmt data check`: shapes, dtype, id ranges, every task invariant, no X in two splits, sha256.
#include <filesystem>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/tasks.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

struct Checker {
  const DatasetMeta& meta;  // every value as the task implies it
  TaskOptions task;
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
// strict (a dataset with meta.yaml, so rmt's own): no-root rows have D < 0, and roots and
// coefficients lie in the range meta.yaml records (max_root R, max_alpha A; tasks/tasks.cpp
// draw_sqeq): roots -R..R-1, no-root b in 0..2R-1 and c up to R^2-1, multiplier ±1..A. The
// authors' data (no meta.yaml) is held to the multiplier range only, as before.
std::string check_sqeq_row(const int64_t* x, const std::vector<std::string>& vocab, bool strict, int max_root,
                           int max_alpha) {
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
  if (alpha == 0 || alpha < -max_alpha || alpha > max_alpha)
    return fmt::format("multiplier {} is not in ±1..{}{}", alpha, max_alpha, strict ? " (meta.yaml options.max_alpha)" : "");
  if (shown[1] != alpha * b || shown[2] != alpha * c)
    return fmt::format("shown equation '{}' is not {} times '{}'", got[0], alpha, got[1]);
  const int64_t d = b * b - 4 * c;
  SqeqText want;
  const bool no_roots = got[3].empty() && got[4].empty() && got[5].empty();
  if (no_roots) {
    if (strict && d >= 0) return fmt::format("no root lines but D = {} >= 0", d);
    const int64_t R = max_root;
    if (strict && (b < 0 || b > 2 * R - 1))
      return fmt::format("'{}' has b = {}, outside 0..{} (no-root equations' b for meta.yaml options.max_root {})",
                         got[1], b, 2 * R - 1, R);
    if (strict && c > R * R - 1)
      return fmt::format("'{}' has c = {}, above {} (no-root equations' c for meta.yaml options.max_root {})", got[1], c,
                         R * R - 1, R);
    if (std::abs(b) > 100000 || std::abs(c) > 1000000000) return "coefficients out of range";
    want = sqeq_text_no_roots(int(b), int(c), int(alpha));
  } else {
    int64_t s = 0;
    while (s * s < d) s++;
    if (d < 0 || s * s != d) return fmt::format("root lines present but D = {} is not a perfect square", d);
    if ((-b - s) % 2 != 0) return fmt::format("roots of '{}' are not integers", got[1]);
    const int64_t x1 = (-b - s) / 2, x2 = (-b + s) / 2;
    if (x1 * x1 + b * x1 + c != 0 || x2 * x2 + b * x2 + c != 0) return "roots do not solve the equation";
    if (strict && (x1 < -max_root || x2 > max_root - 1))
      return fmt::format("root {} of '{}' is outside {}..{} (meta.yaml options.max_root {})", x1 < -max_root ? x1 : x2,
                         got[1], -max_root, max_root - 1, max_root);
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
  } else if (is_babilong_kind(t.kind)) {
    std::string why = babilong_row_problem(t, x);
    if (!why.empty()) return why;
    target_from_x(t, x, want.data());
    if (y[0] != want[0])
      return fmt::format("y[0] = {} ('{}'), but the facts say {} ('{}')", y[0], ck.meta.vocab[size_t(y[0])], want[0],
                         ck.meta.vocab[size_t(want[0])]);
  } else {
    std::string why = check_sqeq_row(x, ck.meta.vocab, ck.meta.from_meta_yaml, t.max_root, t.max_alpha);
    if (!why.empty()) return why;
  }
  target_from_x(t, x, want.data());
  for (int i = 0; i < len_y; i++)
    if (y[i] != want[i]) return fmt::format("y[{}] = {}, expected {}", i, y[i], want[i]);
  return "";
}

}  // namespace

CheckResult check_task_dataset(const std::string& dir, int max_violations) {
  const DatasetMeta raw = read_dataset_meta(dir);
  const DatasetMeta meta = implied_meta(raw);  // what the rows are indexed and judged with
  Violations v;
  v.max = max_violations;
  check_meta_values(dir, raw, meta, v);
  const Checker ck{meta, task_of_meta(meta)};
  CheckResult result;
  std::vector<std::vector<int64_t>> all_x(3);
  std::unordered_map<std::string_view, std::pair<int, int64_t>> first_seen;  // X row -> (split, row)
  for (int k = 0; k < 3; k++) {
    const std::string split = kSplits[k];
    const std::string x_path = dataset_file(dir, meta.file_prefix, split, "X");
    const std::string y_path = dataset_file(dir, meta.file_prefix, split, "y");
    const int64_t before = v.total;
    // Headers first: nothing below reads an element unless dtype and shapes fit the task.
    const int64_t n = check_split_layout(dir, meta, split, v);
    if (n < 0) continue;
    std::vector<int64_t> xs, ys;
    try {
      const std::string x_sum = read_checked_matrix(x_path, n, meta.len_x, xs);
      const std::string y_sum = read_checked_matrix(y_path, n, meta.len_y, ys);
      for (auto& [name, hex] : raw.sha256)
        for (auto [path, got] : {std::pair{&x_path, &x_sum}, std::pair{&y_path, &y_sum}})
          if (name == fs::path(*path).filename() && *got != hex)
            v.add(fmt::format("{}: sha256 differs from meta.yaml (meta.yaml {}..., file {}...)", *path,
                              hex.substr(0, 12), got->substr(0, 12)));
    } catch (const Error& e) {
      v.add(e.what());
      continue;
    }
    const int64_t vocab = int64_t(meta.vocab.size());
    std::vector<int64_t> want(size_t(meta.len_y));
    for (int64_t r = 0; r < n && v.total - before < max_violations; r++) {
      const int64_t* x = xs.data() + r * meta.len_x;
      const int64_t* y = ys.data() + r * meta.len_y;
      std::string why;
      const std::string* file = &x_path;  // the file at fault: y's for an id of y, else X's
      for (int i = 0; i < meta.len_x && why.empty(); i++)
        if (x[i] < 0 || x[i] >= vocab) why = fmt::format("X[{}] = {} outside the vocabulary [0, {})", i, x[i], vocab);
      for (int i = 0; i < meta.len_y && why.empty(); i++)
        if (y[i] < 0 || y[i] >= vocab) {
          why = fmt::format("y[{}] = {} outside the vocabulary [0, {})", i, y[i], vocab);
          file = &y_path;
        }
      if (why.empty()) why = check_row(ck, x, y, want);
      if (!why.empty()) v.add(fmt::format("{} row {}: {}", fs::path(*file).filename().string(), r, why));
    }
    all_x[k] = std::move(xs);
    for (int64_t r = 0; r < n; r++) {
      std::string_view row(reinterpret_cast<const char*>(all_x[k].data() + r * meta.len_x), size_t(meta.len_x) * 8);
      auto [it, fresh] = first_seen.emplace(row, std::pair{k, r});
      if (!fresh)
        v.add(fmt::format("{} row {}: same X as {} row {}", fs::path(x_path).filename().string(), r,
                          fs::path(dataset_file(dir, meta.file_prefix, kSplits[it->second.first], "X")).filename().string(),
                          it->second.second));
    }
    if (v.total == before)
      result.summary.push_back(fmt::format("{} {}: OK {} rows, X [{}, {}] y [{}, {}] int64{}", meta.task, split, n, n,
                                           meta.len_x, n, meta.len_y, raw.sha256.empty() ? "" : ", sha256 ok"));
  }
  result.ok = v.total == 0;
  result.violations = v.list;
  if (v.total > int64_t(v.list.size())) result.violations.push_back(fmt::format("... {} violations in all", v.total));
  return result;
}

}  // namespace rmt
