// Quadratic-equation samples: the six text blocks and their id encoding (docs/paper.md §1, sqeq).
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "lib/error.h"
#include "tasks/tasks.h"

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

}  // namespace rmt
