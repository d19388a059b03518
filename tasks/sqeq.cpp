// Quadratic-equation samples: the six text blocks and their id encoding (docs/paper.md §1, sqeq).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/sqeq.h"

namespace rmt {

static const std::string kSqeqChars = "0123456789+-*/^=()xD;,";  // ids 2..23

std::vector<std::string> sqeq_vocab() {
  std::vector<std::string> v = {"<pad>", "<unused>"};
  for (char c : kSqeqChars) v.push_back(std::string(1, c));
  return v;
}

// One monomial coef*x^power. Rules: zero terms vanish; coefficient 1 is bare ("x^2", "+x") except
// for the constant ("+1"); -1 is "-" ("-x", "-1" for the constant); a positive coefficient carries
// "+" unless it leads (power 2); "*" joins a coefficient to x.
static std::string monomial(int64_t coef, int power) {
  if (coef == 0) return "";
  const bool leading = power == 2;
  std::string s;
  if (coef == 1) {
    s = power == 0 ? "+1" : (leading ? "" : "+");
  } else if (coef == -1) {
    s = power == 0 ? "-1" : "-";
  } else {
    s = (coef < 0 || leading) ? fmt::format("{}", coef) : fmt::format("+{}", coef);
    if (power > 0) s += "*";
  }
  if (power == 1) s += "x";
  if (power == 2) s += "x^2";
  return s;
}

std::string sqeq_polynomial(int64_t a, int64_t b, int64_t c) {
  return monomial(a, 2) + monomial(b, 1) + monomial(c, 0) + "=0";
}

SqeqText sqeq_text_with_roots(int x1, int x2, int alpha) {
  const int64_t b = -(int64_t(x1) + x2), c = int64_t(x1) * x2;
  const int64_t d = b * b - 4 * c;  // = (x1 - x2)^2
  const int64_t sqd = std::llabs(int64_t(x1) - x2);
  const int lo = std::min(x1, x2), hi = std::max(x1, x2);
  SqeqText t;
  t[0] = sqeq_polynomial(alpha, alpha * b, alpha * c);
  t[1] = sqeq_polynomial(1, b, c);
  t[2] = fmt::format("D={}^2-4*1*{}={}={}^2", std::llabs(b), c, d, sqd);
  t[3] = fmt::format("x=({}-{})/2={}", -b, sqd, lo);
  t[4] = fmt::format("x=({}+{})/2={}", -b, sqd, hi);
  t[5] = lo == hi ? fmt::format("{}", lo) : fmt::format("{},{}", lo, hi);
  return t;
}

SqeqText sqeq_text_no_roots(int b, int c, int alpha) {
  const int64_t d = int64_t(b) * b - 4 * int64_t(c);
  SqeqText t;
  t[0] = sqeq_polynomial(alpha, int64_t(alpha) * b, int64_t(alpha) * c);
  t[1] = sqeq_polynomial(1, b, c);
  t[2] = fmt::format("D={}^2-4*1*{}={}", std::abs(b), c, d);
  return t;
}

void sqeq_encode(const SqeqText& text, int64_t* x, int64_t* y) {
  const int n = kSqeqBlock * kSqeqBlocks;
  for (int i = 0; i < n; i++) x[i] = 0;
  for (int j = 0; j < kSqeqBlocks; j++) {
    if (int(text[j].size()) > kSqeqBlock)
      fail("sqeq block '{}' is longer than {} characters", text[j], kSqeqBlock);
    for (size_t k = 0; k < text[j].size(); k++) {
      size_t id = kSqeqChars.find(text[j][k]);
      if (id == std::string::npos) fail("sqeq block '{}' has a character outside the vocabulary", text[j]);
      x[j * kSqeqBlock + int(k)] = int64_t(id) + 2;
    }
  }
  // Target: the next id over the whole row.
  for (int i = 0; i + 1 < n; i++) y[i] = x[i + 1];
  y[n - 1] = 0;
}

int sqeq_max_alpha(int max_root) {
  // The shown equation of the double root -R times -A is the longest: |A*b| = 2AR and |A*c| = AR^2
  // are the largest coefficients, every term present. Its length grows with A: bisect.
  auto fits = [&](int64_t a) {
    return sqeq_text_with_roots(-max_root, -max_root, -int(a))[0].size() <= size_t(kSqeqBlock);
  };
  int64_t lo = 1, hi = std::numeric_limits<int>::max();  // fits(lo) for every root range allowed
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return int(lo);
}

void check_sqeq_range(int max_root, int max_alpha, const std::string& root_key, const std::string& alpha_key) {
  if (max_root < 2)
    fail("{} must be at least 2 (got {}): roots are int(uniform(-R, R)), so R = 1 gives only the root 0", root_key,
         max_root);
  if (max_root > kSqeqMaxRoot)
    fail("{} {} is too large: a sample must fit blocks of {} ids, and from {} on some do not (roots -{} and 108: "
         "\"D=101^2-4*1*-22572=100489=317^2\", 31 ids); at most {}",
         root_key, max_root, kSqeqBlock, kSqeqMaxRoot + 1, kSqeqMaxRoot + 1, kSqeqMaxRoot);
  if (max_alpha < 1) fail("{} must be at least 1 (got {}): the multiplier is ±round(uniform(1, A))", alpha_key, max_alpha);
  const int limit = sqeq_max_alpha(max_root);
  if (max_alpha > limit)
    fail("{} {} is too large for {} {}: the shown equation {} needs {} ids, a block holds {}; at most {}", alpha_key,
         max_alpha, root_key, max_root, sqeq_text_with_roots(-max_root, -max_root, -max_alpha)[0],
         sqeq_text_with_roots(-max_root, -max_root, -max_alpha)[0].size(), kSqeqBlock, limit);
}

// ---- the task table's functions ----------------------------------------------------------

int sqeq_len(const TaskOptions&) { return kSqeqBlock * kSqeqBlocks; }
int sqeq_answer_size(const TaskOptions&) { return kSqeqBlock * (kSqeqBlocks - 1); }
std::vector<std::string> sqeq_task_vocab(const TaskOptions&) { return sqeq_vocab(); }

int64_t sqeq_max_unique(const TaskOptions& t) {
  // X is fixed by the shown equation. With roots: unordered root pairs from -(R-1)..R-1
  // (-R itself has probability 2^-53), times 2A multipliers; without: every (b, c) of sqeq_draw,
  // 0 <= b < 2R and b^2/4 < c < R^2, times 2A. The paper's R 100, A 10: 199*200/2*20 + ...
  const int64_t R = t.max_root, multipliers = 2 * int64_t(t.max_alpha), values = 2 * R - 1;
  int64_t n = saturating_mul(values * (values + 1) / 2, multipliers);
  for (int64_t b = 0; b < 2 * R; b++) n = std::min(n + saturating_mul(R * R - 1 - b * b / 4, multipliers), int64_t(1) << 62);
  return n;
}

void sqeq_target(const TaskOptions&, const int64_t* x, int64_t* y) {
  const int n = kSqeqBlock * kSqeqBlocks;
  for (int i = 0; i + 1 < n; i++) y[i] = x[i + 1];
  y[n - 1] = 0;
}

// docs/paper.md §1 with R = max_root, A = max_alpha (the paper's 100 and 10 give the same draws,
// byte for byte, as before these options existed). The no-root samples scale with R so that their
// coefficients span the rooted ones' range (|b| <= 2R, |c| <= R^2): b in 0..2R-1 and c up to
// R^2-1, the paper's 0..199 and 9999 at R = 100.
void sqeq_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
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

void sqeq_resolve_options(TaskOptions& t, const TaskArgs& a) {
  t.max_root = a.max_root.value_or(kSqeqDefaultMaxRoot);
  t.max_alpha = a.max_alpha.value_or(kSqeqDefaultMaxAlpha);
  check_sqeq_range(t.max_root, t.max_alpha, "--max-root", "--max-alpha");
}

void sqeq_check_meta_options(const TaskOptions& t) {
  check_sqeq_range(t.max_root, t.max_alpha, "options.max_root", "options.max_alpha");
}

std::string sqeq_generated_summary(const TaskOptions& t) {
  return fmt::format(", roots -{}..{}, multiplier ±1..{}", t.max_root, t.max_root - 1, t.max_alpha);
}

std::vector<std::string> sqeq_generation_notes(const TaskOptions& t, const std::vector<int64_t>& X, int64_t total) {
  // De-duplication keeps the paper's 20% of samples without real roots only while the rooted
  // equations are plentiful; a small range runs out of them first. Say so.
  const int len_x = kSqeqBlock * kSqeqBlocks;
  int64_t none = 0;
  for (int64_t i = 0; i < total; i++) none += X[size_t(i * len_x + (kSqeqBlocks - 1) * kSqeqBlock)] == 0;
  const double share = double(none) / double(total);
  const int64_t values = 2 * int64_t(t.max_root) - 1;
  if (std::abs(share - 0.2) <= std::max(0.05, 4 * std::sqrt(0.16 / double(total)))) return {};
  return {fmt::format("{:.1f}% of the {} samples have no real roots (the paper's mix: 20%): --max-root {} --max-alpha "
                      "{} has only {} distinct equations with real roots", 100 * share, total, t.max_root, t.max_alpha,
                      values * (values + 1) / 2 * 2 * t.max_alpha)};
}

}  // namespace rmt
