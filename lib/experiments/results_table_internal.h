#pragma once
// What the table (results_format.cpp) and the plot (results_plot.cpp) both say about a pivot.
#include <string>
#include <utility>
#include <vector>

#include "lib/experiments/results_table.h"

namespace rmt::results_table_internal {

// {{"measured", "1 x 18, 3 x 6"}, {"paper (copy 24, 72 positions)", "1 x 72, 3 x 24"}}, or {}
// when the paper's segment lengths are the measured ones.
std::vector<std::pair<std::string, std::string>> lengths_parts(const Pivot& pivot);

// The metric in words, for the table's caption and the plot's axis.
std::string metric_caption(const std::string& metric);
// The same, short enough for a figure's axis at a column's width ("test accuracy, teacher-forced");
// the caption under the figure says the rest.
std::string metric_axis_label(const std::string& metric);
// Accuracies and rates (acc_*, exact_match*, solve_rate*) lie in [0, 1]; a loss or bpc does not.
bool metric_is_fraction(const std::string& metric);

}  // namespace rmt::results_table_internal
