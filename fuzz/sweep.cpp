// Fuzz harness: the sweep file loader and its derive: expressions (lib/sweep.*). Each input is
// tried both as a sweep file (parsed, then planned: the grid expanded and every derive
// expression evaluated, no file touched) and as a bare derive expression.
#include "fuzz/harness.h"
#include "lib/experiments/sweep.h"

using namespace rmt_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  // As an expression, over variables of every sign and size (overflow must be caught).
  const std::map<std::string, long long> vars = {
      {"segment_length", 9}, {"seq_len", -9223372036854775807LL - 1}, {"segments", 9223372036854775807LL}};
  accepts([&] { rmt::eval_expression(text, vars, "fuzz: derive.key"); });
  const bool syntax_ok = accepts([&] { rmt::check_expression(text, {"segment_length", "seq_len", "segments"}, "fuzz"); });
  const std::map<std::string, long long> small = {{"segment_length", 3}, {"seq_len", 3}, {"segments", 1}};
  long long value = 0;
  const bool small_ok = accepts([&] { value = rmt::eval_expression(text, small, "fuzz"); });
  require(!small_ok || syntax_ok, "an expression evaluates but its syntax check rejects it");

  // As a sweep file.
  rmt::SweepSpec spec;
  if (!accepts([&] { spec = rmt::parse_sweep(text, "fuzz/sweep.yaml"); })) return 0;
  // Expanding a huge grid is slow but correct; keep the fuzzer fast.
  size_t points = 0;
  for (const auto& grid : spec.grids) {
    size_t n = 1;
    for (const auto& [key, values] : grid) n *= values.size();
    points += n;
  }
  if (points > 16) return 0;
  rmt::SweepPlan plan;
  if (!accepts([&] { plan = rmt::plan_sweep(spec, "/nonexistent/rmt-fuzz-runs", 1); })) return 0;
  require(!plan.runs.empty(), "a sweep plan with no runs");
  for (const auto& run : plan.runs) require(run.config.segments >= 1 && run.segment_length >= 1, "bad run accepted");
  return 0;
}
