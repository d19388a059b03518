// Plotting a pivot with gnuplot (results_table.h): the script and the drawing.
#include "lib/experiments/results_table.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/experiments/process.h"
#include "lib/experiments/results_table_internal.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"

namespace rmt {

using namespace results_table_internal;

std::string gnuplot_string(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) o += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
  return o + "\"";
}

std::string plot_terminal(const std::string& out) {
  std::string ext = out.size() >= 4 ? out.substr(out.size() - 4) : "";
  if (ext == ".svg") return "set terminal svg size 720,480 dynamic enhanced font 'Helvetica,13'\n";
  if (ext == ".png") return "set terminal pngcairo size 900,600 enhanced font 'Helvetica,12'\n";
  fail("--out {}: the plot file must end in .svg or .png", out);
}

std::string gnuplot_script(const Pivot& pivot, const std::string& out, const std::string& title) {
  const auto& quote = gnuplot_string;
  std::string s = plot_terminal(out);
  s += "set output " + quote(out) + "\n";
  // Where the paper ran other segment lengths, the title says so (as the table's note does).
  std::string quoted_title = quote(title);
  for (const auto& [who, lengths] : lengths_parts(pivot))  // a line each: the plot is narrower than a table
    quoted_title = quoted_title.substr(0, quoted_title.size() - 1) + "\\n" + quote(who + ": " + lengths).substr(1);
  s += "set title " + quoted_title + " noenhanced\n";
  s += "set xlabel 'number of segments'\n";
  s += "set ylabel " + quote(metric_caption(pivot.metric)) + " noenhanced\n";
  // Accuracies and rates lie in [0, 1]; a loss or bpc gets an axis from 0 that fits its values.
  const bool fraction = pivot.metric.rfind("acc", 0) == 0 || pivot.metric.rfind("solve_rate", 0) == 0 ||
                        pivot.metric.rfind("exact_match", 0) == 0;
  s += fraction ? "set yrange [0:1.05]\n" : "set yrange [0:*]\n";
  s += "set grid\nset key outside right top noenhanced\n";
  s += "set xtics (";
  for (size_t i = 0; i < pivot.segments.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", pivot.segments[i]);
  s += ")\n";
  if (!pivot.segments.empty())
    s += fmt::format("set xrange [{}:{}]\n", pivot.segments.front() - 0.5, pivot.segments.back() + 0.5);
  // One inline data block per row: segments, mean, std.
  std::vector<std::string> plots;
  std::string data;
  int color = 1;
  std::map<std::string, int> kind_color;  // a paper row takes the colour of its kind's measured rows
  for (size_t i = 0; i < pivot.rows.size(); ++i) {
    const PivotRow& r = pivot.rows[i];
    std::string block = fmt::format("$row{}", i);
    data += block + " << EOD\n";
    for (const auto& [seg, c] : r.cells)
      if (std::find(pivot.segments.begin(), pivot.segments.end(), seg) != pivot.segments.end())
        data += r.paper ? fmt::format("{} {:.6g}\n", seg, c.mean) : fmt::format("{} {:.6g} {:.6g}\n", seg, c.mean, c.std);
    data += "EOD\n";
    if (r.paper)
      plots.push_back(fmt::format("{} using 1:2 with linespoints dashtype 2 pointtype 6 linecolor {} title {}",
                                  block, kind_color.emplace(r.kind, color).second ? color++ : kind_color[r.kind],
                                  quote("paper: " + r.label)));
    else
      plots.push_back(fmt::format("{} using 1:2:3 with yerrorlines linewidth 2 pointtype 7 linecolor {} title {}",
                                  block, kind_color[r.kind] = color++, quote(r.label)));
  }
  if (plots.empty()) fail("nothing to plot: no finished runs with a value for {}", pivot.metric);
  s += data;
  s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
  return s;
}

void draw_plot(const std::string& script, const std::string& out) {
  if (find_program("gnuplot").empty())
    fail("gnuplot is not installed; install it with `sudo apt-get install gnuplot-nox` (or `make deps`), "
         "or use `rmt table` for the numbers");
  const std::filesystem::path gp = std::filesystem::path(out).concat(".gp");
  if (gp.has_parent_path()) create_directories_or_fail(gp.parent_path());
  // gnuplot writes the picture while it draws: into a temporary file beside `out`, renamed over
  // it once gnuplot succeeded, so a failed or killed plot never leaves a half-written figure
  // (nor truncates the previous one), as every other file rmt writes (write_file_atomic).
  const std::filesystem::path tmp = std::filesystem::path(out).concat(".tmp.plot");
  // The script's `set output` line naming `out` (quoted as its writer quotes: "..." or '...')
  // now names the temporary file.
  std::string text = script;
  bool found = false;
  for (size_t line = 0; line < text.size(); line = text.find('\n', line) + 1) {
    const size_t end = std::min(text.find('\n', line), text.size());
    if (text.compare(line, 11, "set output ") == 0 && text.substr(line, end - line).find(out) != std::string::npos) {
      text.replace(line, end - line, "set output " + gnuplot_string(tmp.string()));
      found = true;
      break;
    }
    if (end == text.size()) break;
  }
  if (!found) fail("the plot script does not write {} (no `set output` line naming it)", out);
  write_file_atomic(gp, text);
  const ToolResult r = run_tool("gnuplot", {gp.string()}, "", {}, 600);
  const std::string& output = r.output;
  const int status = r.started ? r.status : -1;
  std::error_code ec;
  if (status != 0 || !std::filesystem::is_regular_file(tmp)) {
    std::filesystem::remove(tmp, ec);
    fail("gnuplot failed on {}: {}", gp.string(), output);
  }
  std::filesystem::rename(tmp, out, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail("cannot rename {} to {}: {}", tmp.string(), out, ec.message());
  }
  std::filesystem::remove(gp, ec);
}

}  // namespace rmt
