#pragma once
// The integer expressions of a sweep's `derive:` section (`model.num_mem_tokens: segment_length / 2`).
#include <map>
#include <string>
#include <vector>

namespace rmt {

// Evaluates a derive expression: 64-bit integers, + - * / (integer division, truncating),
// unary minus and parentheses (at most 64 levels deep) over the named variables. Fails naming
// `origin` on syntax errors, unknown names, integer overflow and division by zero.
long long eval_expression(const std::string& expr, const std::map<std::string, long long>& vars,
                          const std::string& origin);
// Checks only the syntax and the names of an expression (overflow and division by zero depend on
// the values, so they are left to eval_expression).
void check_expression(const std::string& expr, const std::vector<std::string>& names, const std::string& origin);

}  // namespace rmt
