// Plotting a pivot with gnuplot (results_table.h): the script and the drawing.
#include "lib/experiments/results_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
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

std::string figure_format(const std::string& out) {
  const std::string ext = std::filesystem::path(out).extension().string();
  for (const char* format : {"svg", "png", "pdf", "eps"})
    if (ext == std::string(".") + format) return format;
  fail("--out {}: the figure file must end in .svg, .png, .pdf or .eps", out);
}

std::string plot_key_line() {
  // Under the plot, entries side by side: a key at the right took about 40% of the width. One
  // line of height more keeps the key clear of the x label.
  // The sample before its text, left-aligned: long labels keep their samples inside the figure.
  return "set key outside bottom center horizontal noenhanced reverse Left height 1\n";
}

std::string plot_grid_line() { return "set grid linecolor rgb '#d9d9d9' linewidth 1 dashtype solid\n"; }

std::string kind_colour(const std::string& kind) {
  // Okabe-Ito, in the kinds table's order: baseline, mt, xl, rmt, xl_rmt, armt, deltanet,
  // gated_deltanet.
  static const char* colours[] = {"#7f7f7f", "#56b4e9", "#e69f00", "#009e73", "#cc79a7", "#0072b2", "#d55e00", "#000000"};
  static_assert(sizeof(colours) / sizeof(colours[0]) == kNumModelKinds, "one colour per model kind");
  const std::vector<std::string> names = model_kind_names();
  const auto it = std::find(names.begin(), names.end(), kind);
  return it == names.end() ? "#000000" : colours[it - names.begin()];
}

void relabel_rows(Pivot& pivot, const std::vector<std::string>& assignments) {
  for (const std::string& a : assignments) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      fail("--row-label {}: expected OLD=NEW (a row's label or a model kind, then its new name)", a);
    const std::string from = a.substr(0, eq), to = a.substr(eq + 1);
    bool matched = false;
    for (PivotRow& r : pivot.rows) {
      if (r.label == from) r.label = to, matched = true;
      else if (r.kind == from && r.label.rfind(from, 0) == 0) r.label = to + r.label.substr(from.size()), matched = true;
    }
    if (!matched) {
      std::vector<std::string> labels;
      for (const PivotRow& r : pivot.rows) labels.push_back(r.label);
      fail("--row-label {}: no row is labelled {} or of model kind {} (rows: {})", a, from, from, fmt::join(labels, "; "));
    }
  }
}

std::string gnuplot_terminal(const std::string& format, int width_px, int height_px, const std::string& font) {
  if (format == "svg") return fmt::format("set terminal svg size {},{} dynamic {}\n", width_px, height_px, font);
  if (format == "png") return fmt::format("set terminal pngcairo size {},{} {}\n", width_px, height_px, font);
  if (format != "pdf" && format != "eps") fail("unknown figure format '{}' (svg, png, pdf or eps)", format);
  // PDF and EPS come from cairo's terminals, which a gnuplot built without cairo lacks: the script
  // stops with a message naming the terminal rather than gnuplot's "unknown terminal type".
  // Sizes in points, one per pixel of the SVG (72 points an inch).
  const std::string terminal = format + "cairo";
  return fmt::format(
      "if (strstrt(GPVAL_TERMINALS, '{0}') == 0) {{\n"
      "  print \"this gnuplot has no {0} terminal, which a .{1} figure needs: install a gnuplot built with cairo \""
      " . \"(sudo apt-get install gnuplot-nox), or draw .svg or .png\"\n"
      "  exit status 3\n}}\n"
      "set terminal {0} size {2:.3f}in,{3:.3f}in {4}\n",
      terminal, format, width_px / 72.0, height_px / 72.0, font);
}

std::string plot_terminal(const std::string& out, const FigureSize& size) {
  const std::string format = figure_format(out);
  const double px_per_in = format == "png" ? 150 : 72;  // cairo's PDF, EPS: points; SVG: px as points
  const double scale = px_per_in / 72;
  return gnuplot_terminal(format, int(std::lround(size.width_in * px_per_in)), int(std::lround(size.height_in * px_per_in)),
                          // line widths of the plots' commands (2) at about 1 pt
                          fmt::format("enhanced font 'Helvetica,{:.3g}' linewidth {:.3g}", size.font_pt * scale,
                                      0.5 * scale)) +
         "set pointsize 0.7\n";
}

FigureSize parse_figure_size(const std::string& text, double font_pt) {
  FigureSize size;
  const size_t comma = text.find(',');
  auto inches = [&](const std::string& part) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || !(v > 0 && v <= 40))
      fail("--size {}: expected WIDTH,HEIGHT in inches, each above 0 and at most 40 (e.g. 3.4,3 for a column)", text);
    return v;
  };
  if (comma == std::string::npos) inches("");  // fails with the message
  size.width_in = inches(text.substr(0, comma));
  size.height_in = inches(text.substr(comma + 1));
  if (!(font_pt >= 4 && font_pt <= 40)) fail("--font-size {}: expected points from 4 to 40", font_pt);
  size.font_pt = font_pt;
  return size;
}

namespace {

// How far (in octaves of the log-2 axis) row i of n is moved beside the others at the same
// segment count, so that their points and error bars do not hide each other. One column
// spreads the rows across the axis: there is nothing to its sides.
double dodge_octaves(size_t i, size_t n, bool one_column) {
  const double step = one_column ? std::min(0.25, 1.2 / double(std::max<size_t>(n, 1))) : 0.04;
  return (double(i) - (double(n) - 1) / 2) * step;
}

// The y axis: accuracies and rates from 0 to 1.05, or higher where a mean + std reaches above
// it (an error bar is never clipped); a loss or bpc from 0 to what fits its values.
std::string y_range(const Pivot& pivot) {
  if (!metric_is_fraction(pivot.metric)) return "set yrange [0:*]\n";
  double top = 1.05;
  for (const auto& r : pivot.rows)
    for (const auto& [seg, c] : r.cells) top = std::max(top, c.mean + c.std + 0.02);
  return top == 1.05 ? "set yrange [0:1.05]\n" : fmt::format("set yrange [0:{:.3f}]\n", top);
}

}  // namespace

std::string gnuplot_script(const Pivot& pivot, const std::string& out, const std::string& title,
                           const FigureSize& size) {
  const auto& quote = gnuplot_string;
  std::string s = plot_terminal(out, size);
  s += "set output " + quote(out) + "\n";
  // Where the paper ran other segment lengths, the title says so (as the table's note does).
  std::string quoted_title = quote(title);
  for (const auto& [who, lengths] : lengths_parts(pivot))  // a line each: the plot is narrower than a table
    quoted_title = quoted_title.substr(0, quoted_title.size() - 1) + "\\n" + quote(who + ": " + lengths).substr(1);
  if (!title.empty() || quoted_title != quote(title)) s += "set title " + quoted_title + " noenhanced\n";
  s += pivot.multiples ? "set xlabel 'evaluated length / trained length'\n" : "set xlabel 'number of segments'\n";
  s += "set ylabel " + quote(metric_axis_label(pivot.metric)) + " noenhanced\n";
  s += y_range(pivot);
  s += plot_grid_line() + plot_key_line();
  // Segment counts on a log-2 axis (1, 2, 4 ... 512 evenly apart), ticks at the measured ones.
  s += "set logscale x 2\nset xtics (";
  for (size_t i = 0; i < pivot.segments.size(); ++i)
    s += pivot.multiples ? fmt::format("{}\"{}x\" {}", i ? ", " : "", pivot.segments[i], pivot.segments[i])
                         : fmt::format("{}{}", i ? ", " : "", pivot.segments[i]);
  s += ")\n";
  const bool one_column = pivot.segments.size() == 1;
  if (!pivot.segments.empty()) {
    const double margin = one_column ? 1.0 : 0.35;  // octaves beyond the first and last column
    s += fmt::format("set xrange [{:.6g}:{:.6g}]\n", pivot.segments.front() * std::exp2(-margin),
                     pivot.segments.back() * std::exp2(margin));
  }
  // One inline data block per row: segments, mean, std.
  std::vector<std::string> plots;
  std::string data;
  // A colour per model kind (kind_colour); the rows of one kind (memory sizes, split settings)
  // apart by their marker and dash; the paper's rows dashed with open circles.
  std::map<std::string, int> rows_of_kind;
  for (size_t i = 0; i < pivot.rows.size(); ++i) {
    const PivotRow& r = pivot.rows[i];
    std::string block = fmt::format("$row{}", i);
    data += block + " << EOD\n";
    for (const auto& [seg, c] : r.cells)
      if (std::find(pivot.segments.begin(), pivot.segments.end(), seg) != pivot.segments.end())
        data += r.paper ? fmt::format("{} {:.6g}\n", seg, c.mean) : fmt::format("{} {:.6g} {:.6g}\n", seg, c.mean, c.std);
    data += "EOD\n";
    const std::string x = fmt::format("($1*{:.6g})", std::exp2(dodge_octaves(i, pivot.rows.size(), one_column)));
    const std::string colour = "rgb " + quote(kind_colour(r.kind));
    if (r.paper) {
      plots.push_back(fmt::format("{} using {}:2 with linespoints dashtype 2 pointtype 6 linecolor {} title {}", block, x,
                                  colour, quote("paper: " + r.label)));
    } else {
      static const int markers[] = {7, 5, 9, 11, 13, 15};  // filled circle, square, triangles, diamond, pentagon
      const int k = rows_of_kind[r.kind]++;
      plots.push_back(fmt::format("{} using {}:2:3 with yerrorlines linewidth 2 pointtype {} dashtype {} linecolor {} title {}",
                                  block, x, markers[k % 6], k % 4 + 1, colour, quote(r.label)));
    }
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
