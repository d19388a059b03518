// Checking and showing sqeq rows: each block's text parsed back and compared with the blocks its
// equation implies (`rmt data check`, `rmt data show`).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tasks/dataset.h"
#include "tasks/sequence_tasks.h"
#include "tasks/sqeq.h"

namespace rmt {

namespace {

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
// coefficients lie in the range meta.yaml records (max_root R, max_alpha A; tasks/sqeq.cpp
// sqeq_draw): roots -R..R-1, no-root b in 0..2R-1 and c up to R^2-1, multiplier ±1..A. The
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

// Text of one sqeq block for display: the ids up to the first pad.
std::string sqeq_block(const DatasetMeta& meta, const int64_t* ids) {
  int n = 0;
  while (n < kSqeqBlock && ids[n] != 0) n++;
  return decode_ids(meta, ids, n);
}

}  // namespace

std::string sqeq_row_problem(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t*) {
  return check_sqeq_row(x, meta.vocab, meta.from_meta_yaml, t.max_root, t.max_alpha);
}

std::string sqeq_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  if (cx != kSqeqBlock * kSqeqBlocks) return show_stacked_row(meta, x, cx, y, cy);  // not sqeq's shape: as it is
  // Blocks joined by " / "; the answer (what the model predicts) starts after "|".
  std::string text = sqeq_block(meta, x) + "  |  ";
  for (int j = 1; j < kSqeqBlocks; j++) text += (j > 1 ? " / " : "") + sqeq_block(meta, x + j * kSqeqBlock);
  return text;
}

}  // namespace rmt
