// Fuzz harness: the results.csv reader and the paper YAML reader of `rmt table`
// (lib/results_table.*). The input is a results.csv text, then, after a NUL byte, an optional
// paper_results.yaml text (its section quick_copy is used). What is accepted is pivoted and
// printed in every format, as `rmt table` and `rmt plot` would.
#include "fuzz/harness.h"
#include <cmath>

#include "lib/experiments/results_table.h"

using namespace rmt_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = split_at_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  rmt::CsvTable csv;
  if (!accepts([&] { csv = rmt::parse_csv(parts[0], "fuzz/results.csv"); })) return 0;
  for (const auto& row : csv.rows) require(row.size() == csv.header.size(), "a row of the wrong width accepted");
  require(csv.row_lines.size() == csv.rows.size(), "row_lines out of step with rows");

  for (const char* metric : {"acc_teacher_forced", "loss"}) {
    rmt::Pivot pivot;
    const std::vector<std::string> by = csv.column("bptt") >= 0 ? std::vector<std::string>{"bptt"} : std::vector<std::string>{};
    if (!accepts([&] { pivot = rmt::pivot_results(csv, metric, by, "fuzz/results.csv"); })) continue;
    for (int seg : pivot.segments) require(seg >= 1, "a column of segments < 1");
    for (const auto& row : pivot.rows)
      for (const auto& [seg, cell] : row.cells) require(cell.n >= 1 && std::isfinite(cell.mean), "a bad cell");
    if (parts.size() > 1) accepts([&] { rmt::add_paper_rows(pivot, parts[1], "fuzz/paper.yaml", "quick_copy"); });
    for (const char* format : {"md", "latex"}) accepts([&] { rmt::format_pivot(pivot, format); });
    // `--format csv` output is CSV that reads back: 7 fields a row, whatever the labels hold.
    std::string out;
    if (accepts([&] { out = rmt::format_pivot(pivot, "csv"); })) {
      rmt::CsvTable back;
      require(accepts([&] { back = rmt::parse_csv(out, "format csv"); }), "--format csv wrote unreadable CSV:\n" + out);
      for (const auto& row : back.rows) require(row.size() == 7, "--format csv wrote a row of the wrong width");
    }
    accepts([&] { rmt::gnuplot_script(pivot, "fuzz.svg", "fuzz"); });
  }
  return 0;
}
