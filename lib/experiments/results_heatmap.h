#pragma once
// A task x length heat map of results (BABILong's convention for length generalisation): one
// row per task and model, one column per number of segments, the colour and the number in each
// cell the mean over seeds of an accuracy. For the length items of `rmt reproduce` and
// `rmt plot --heatmap`.
#include <string>
#include <vector>

#include "lib/experiments/results_table.h"

namespace rmt {

struct HeatmapBlock {
  std::string task;  // names the block's rows ("length_detect: rmt (mem 4)"); "" = the model only
  Pivot pivot;       // its measured rows are drawn; paper rows are left out
};

// A gnuplot script drawing the blocks one under the other (a line between blocks), columns the
// union of their segment counts, into out (.svg, .png, .pdf or .eps). Cells are drawn as
// rectangles (`with image pixels`), so a vector figure stays crisp however far it is scaled.
// Fails when no block has a measured row.
std::string heatmap_gnuplot_script(const std::vector<HeatmapBlock>& blocks, const std::string& out,
                                   const std::string& title);

// Reads each results.csv (a sweep's or a length item's), pivots `metric` and draws the heat map
// into out, one block per file named by its directory (runs/NAME/results.csv -> NAME). With
// `multiples`, columns are the evaluated length as a multiple of the trained one (each file a
// sweep's length_results.csv; columns_as_multiples).
void draw_results_heatmap(const std::vector<std::string>& results_csvs, const std::string& metric,
                          const std::string& out, const std::string& title, bool multiples = false);

}  // namespace rmt
