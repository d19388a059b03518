// The task x length heat map (results_heatmap.h).
#include "lib/experiments/results_heatmap.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/results_table_internal.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

std::string heatmap_gnuplot_script(const std::vector<HeatmapBlock>& blocks, const std::string& out,
                                   const std::string& title) {
  // Rows top to bottom: each block's measured rows; columns: every segment count of any block.
  struct Row {
    std::string label;
    const PivotRow* cells;
  };
  std::vector<Row> rows;
  std::vector<size_t> block_starts;  // the first row of every block after the first
  std::set<int> column_set;
  std::set<int> segment_lengths;  // of every column: one, and the x label says it
  for (const HeatmapBlock& b : blocks) {
    if (!rows.empty()) block_starts.push_back(rows.size());
    for (const PivotRow& r : b.pivot.rows) {
      if (r.paper) continue;
      rows.push_back({b.task.empty() ? r.label : b.task + ": " + r.label, &r});
      for (const auto& [seg, c] : r.cells) column_set.insert(seg);
    }
    for (const auto& [seg, len] : b.pivot.segment_length) segment_lengths.insert(len);
  }
  if (rows.empty()) fail("nothing to draw: no finished runs with a value for the metric");
  const std::vector<int> columns(column_set.begin(), column_set.end());
  const std::string metric = blocks.front().pivot.metric;
  const bool fraction = results_table_internal::metric_is_fraction(metric);

  size_t label_chars = 1;
  for (const Row& r : rows) label_chars = std::max(label_chars, r.label.size());
  const int width = 140 + int(label_chars) * 7 + 58 * int(columns.size());
  const int height = 130 + 26 * int(rows.size());
  std::string s = gnuplot_terminal(figure_format(out), width, height, "noenhanced font 'Helvetica,11'");
  s += "set output " + gnuplot_string(out) + "\n";
  if (!title.empty()) s += "set title " + gnuplot_string(title) + "\n";
  const bool multiples = blocks.front().pivot.multiples;
  s += "set xlabel " +
       gnuplot_string(multiples ? std::string("evaluated length / trained length")
                      : segment_lengths.size() == 1
                          ? fmt::format("number of segments (of {} tokens each)", *segment_lengths.begin())
                          : std::string("number of segments")) +
       "\n";
  // Low values red, high green; black numbers stay readable on every colour of it.
  s += "set palette defined (0 '#d73027', 0.5 '#fee08b', 1 '#1a9850')\n";
  s += fraction ? "set cbrange [0:1]\n" : "set autoscale cbfix\n";
  s += "set cblabel " + gnuplot_string(results_table_internal::metric_caption(metric)) + "\n";
  s += fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\n", columns.size() - 0.5, rows.size() - 0.5);
  s += "set xtics (";
  for (size_t j = 0; j < columns.size(); ++j)
    s += fmt::format("{}\"{}{}\" {}", j ? ", " : "", columns[j], multiples ? "x" : "", j);
  s += ") scale 0\nset ytics (";
  for (size_t i = 0; i < rows.size(); ++i) s += fmt::format("{}{} {}", i ? ", " : "", gnuplot_string(rows[i].label), i);
  s += ") scale 0\nunset key\nunset grid\n";
  for (size_t start : block_starts)
    s += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead front lw 2 lc rgb 'black'\n",
                     start - 0.5);
  // The map (NaN where a row has no value at a column: left blank) and the numbers on it.
  std::string map = "$map << EOD\n", numbers = "$numbers << EOD\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < columns.size(); ++j) {
      const auto it = rows[i].cells->cells.find(columns[j]);
      const bool has = it != rows[i].cells->cells.end() && it->second.n > 0;
      map += (j ? " " : "") + (has ? fmt::format("{:.6g}", it->second.mean) : std::string("NaN"));
      if (has) numbers += fmt::format("{} {} \"{:.2f}\"\n", j, i, it->second.mean);
    }
    map += "\n";
  }
  s += map + "EOD\n" + numbers + "EOD\n";
  s += "plot $map matrix with image pixels, $numbers using 1:2:3 with labels font ',10'\n";
  return s;
}

void draw_results_heatmap(const std::vector<std::string>& results_csvs, const std::string& metric,
                          const std::string& out, const std::string& title, bool multiples) {
  std::vector<HeatmapBlock> blocks;
  for (const std::string& path : results_csvs) {
    if (const std::string problem = not_a_regular_file(path); !problem.empty())
      fail("{}: {} (a results.csv written by rmt sweep or rmt reproduce)", path, problem);
    CsvTable csv = parse_csv(read_file(path), path);
    if (csv.column(metric) < 0) fail("--metric {}: {} has no such column", metric, path);
    if (multiples) csv = columns_as_multiples(std::move(csv), path);
    const std::string task = results_csvs.size() == 1 ? "" : fs::absolute(path).parent_path().filename().string();
    blocks.push_back({task, pivot_results(csv, metric, multiples ? multiples_by(csv, {}) : std::vector<std::string>(), path)});
    blocks.back().pivot.multiples = multiples;
  }
  draw_plot(heatmap_gnuplot_script(blocks, out, title), out);
}

}  // namespace rmt
