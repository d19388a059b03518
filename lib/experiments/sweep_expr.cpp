#include "lib/experiments/sweep_expr.h"

#include <cctype>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"

namespace rmt {

namespace {

// A tiny recursive-descent parser.
// Integers are 64-bit and every operation is checked: an overflow or a division by zero is an
// error naming the expression, never a wrapped value or a SIGFPE. Nesting (parentheses and unary
// minus) is limited so that a hostile expression cannot overflow the stack.
constexpr int kMaxExpressionDepth = 64;

struct ExprParser {
  const std::string& s;
  const std::map<std::string, long long>& vars;
  const std::string& origin;
  bool syntax_only = false;  // arithmetic errors are ignored (values are placeholders)
  size_t i = 0;
  int depth = 0;

  void skip() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  [[noreturn]] void error(const std::string& what, const std::string& context = "") {
    std::string shown = s.size() > 80 ? s.substr(0, 80) + "..." : s;
    fail("{}: {} in expression '{}' at column {}{}", origin, what, shown, i + 1, context);
  }
  // An arithmetic error at the operator that caused it; 0 when only the syntax is checked.
  long long arithmetic_error(const std::string& what, size_t at) {
    if (syntax_only) return 0;
    i = at;
    std::string values;
    for (const auto& [k, v] : vars) values += fmt::format(", {} = {}", k, v);
    error(what, " (with" + values.substr(1) + ")");
  }
  long long apply(char op, long long a, long long b, size_t at) {
    long long r = 0;
    switch (op) {
      case '+':
        if (__builtin_add_overflow(a, b, &r)) return arithmetic_error("integer overflow in '+'", at);
        return r;
      case '-':
        if (__builtin_sub_overflow(a, b, &r)) return arithmetic_error("integer overflow in '-'", at);
        return r;
      case '*':
        if (__builtin_mul_overflow(a, b, &r)) return arithmetic_error("integer overflow in '*'", at);
        return r;
      default:  // '/': integer division, truncating toward zero
        if (b == 0) return arithmetic_error("division by zero", at);
        if (a == std::numeric_limits<long long>::min() && b == -1)
          return arithmetic_error("integer overflow in '/'", at);
        return a / b;
    }
  }
  void enter() {
    if (++depth > kMaxExpressionDepth)
      error(fmt::format("nesting deeper than {} levels", kMaxExpressionDepth));
  }
  long long expr() {
    enter();
    long long v = term();
    for (skip(); i < s.size() && (s[i] == '+' || s[i] == '-'); skip()) {
      size_t at = i;
      char op = s[i++];
      long long r = term();
      v = apply(op, v, r, at);
    }
    --depth;
    return v;
  }
  long long term() {
    long long v = factor();
    for (skip(); i < s.size() && (s[i] == '*' || s[i] == '/'); skip()) {
      size_t at = i;
      char op = s[i++];
      long long r = factor();
      v = apply(op, v, r, at);
    }
    return v;
  }
  long long factor() {
    skip();
    if (i >= s.size()) error("unexpected end");
    if (s[i] == '(') {
      ++i;
      long long v = expr();
      skip();
      if (i >= s.size() || s[i] != ')') error("missing ')'");
      ++i;
      return v;
    }
    if (s[i] == '-') {
      size_t at = i++;
      enter();
      long long v = factor();
      --depth;
      return apply('-', 0, v, at);
    }
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      size_t start = i;
      long long v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (__builtin_mul_overflow(v, 10LL, &v) || __builtin_add_overflow(v, (long long)(s[i] - '0'), &v)) {
          i = start;
          error("integer literal too large (the limit is 9223372036854775807)");
        }
        ++i;
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      std::string name = s.substr(start, i - start);
      auto it = vars.find(name);
      if (it == vars.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : vars) names.push_back(k);
        i = start;
        if (name.size() > 40) name = name.substr(0, 40) + "...";
        error(fmt::format("unknown name '{}' (known: {})", name, fmt::join(names, ", ")));
      }
      return it->second;
    }
    if (std::isprint(static_cast<unsigned char>(s[i]))) error(fmt::format("unexpected '{}'", s[i]));
    error(fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned char>(s[i])));
  }
  long long parse_all() {
    long long v = expr();
    skip();
    if (i != s.size()) {
      if (s[i] == ')') error("unmatched ')'");
      if (std::isprint(static_cast<unsigned char>(s[i]))) error(fmt::format("unexpected '{}'", s[i]));
      error(fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned char>(s[i])));
    }
    return v;
  }
};

}  // namespace

long long eval_expression(const std::string& expr, const std::map<std::string, long long>& vars,
                          const std::string& origin) {
  ExprParser p{expr, vars, origin};
  return p.parse_all();
}

void check_expression(const std::string& expr, const std::vector<std::string>& names, const std::string& origin) {
  std::map<std::string, long long> vars;
  for (const auto& name : names) vars[name] = 1;
  ExprParser p{expr, vars, origin};
  p.syntax_only = true;
  p.parse_all();
}

}  // namespace rmt
