#include "lib/experiments/repro_figures.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/model_kind.h"
#include "lib/experiments/results_table.h"

namespace rmt {

std::string lm_plot_script(const std::vector<LmRow>& rows, const std::string& out, const std::string& title) {
  std::map<std::string, std::vector<std::pair<int, double>>> lines;
  double baseline = -1;
  for (const auto& r : rows) {
    const ModelKindTraits& k = traits_of(r.model);  // a known kind: checked as the rows were read
    if (!k.has_cache && !k.has_memory) baseline = r.bpc;
    else if (!k.has_memory) lines[fmt::format("{}, cache", k.label)].push_back({r.cache, r.bpc});
    else if (!k.has_cache && k.has_write_block)  // BPTT through the memory: one line per setting
      lines[fmt::format("{}, memory, BPTT {}", k.label, r.bptt)].push_back({r.memory, r.bpc});
    else if (!k.has_cache) lines[fmt::format("{}, memory", k.label)].push_back({r.memory, r.bpc});
    else lines[fmt::format("{}, cache {}, memory", k.label, r.cache)].push_back({r.memory, r.bpc});
  }
  std::string s = "set terminal pngcairo size 900,600 enhanced font 'Helvetica,12'\n";
  s += "set output '" + out + "'\n";
  s += "set title '" + title + "' noenhanced\n";
  s += "set xlabel 'cache rows (Tr-XL) or memory tokens (RMT) per segment'\nset ylabel 'test bits per character'\n";
  s += "set logscale x 2\n" + plot_grid_line() + plot_key_line();
  std::vector<std::string> plots;
  int i = 0;
  for (auto& [name, points] : lines) {
    std::sort(points.begin(), points.end());
    s += fmt::format("$line{} << EOD\n", i);
    for (const auto& [x, y] : points) s += fmt::format("{} {:.6g}\n", x, y);
    s += "EOD\n";
    plots.push_back(fmt::format("$line{} using 1:2 with linespoints lw 2 pt 7 title '{}'", i, name));
    ++i;
  }
  if (baseline >= 0) plots.push_back(fmt::format("{:.6g} with lines dt 2 lw 2 title 'baseline (no memory)'", baseline));
  if (plots.empty()) plots.push_back("NaN notitle");
  s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
  return s;
}

}  // namespace rmt
