// Rendering a pivot as a table (results_table.h): markdown, CSV or LaTeX.
#include "lib/experiments/results_table.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/experiments/results_table_internal.h"

namespace rmt {

namespace results_table_internal {

namespace {

// Whether every run of a cell had a target: then the cell says how many met it.
bool solve_counts(const Cell& c) { return c.n > 0 && c.targeted == c.n; }

// One run has no spread: its cell shows no "± 0.000", which would read as seeds that agreed.
std::string spread_text(const Cell& c, int digits) { return c.n > 1 ? fmt::format(" ± {:.{}f}", c.std, digits) : ""; }

// "0.950 ± 0.010 (3)"; without the "(3)" when show_n is false (the caption says n instead).
std::string cell_text(const Cell& c, int digits, bool show_n) {
  if (c.n == 0) return "";
  if (!solve_counts(c))
    return fmt::format("{:.{}f}{}{}", c.mean, digits, spread_text(c, digits), show_n ? fmt::format(" ({})", c.n) : "");
  return fmt::format("{:.{}f}{} ({}/{} solved{})", c.mean, digits, spread_text(c, digits), c.solved, c.n,
                     c.median_solved_step ? fmt::format(", median step {:.0f}", *c.median_solved_step) : "");
}

// The paper gives two decimals: more would be made up.
std::string paper_text(const Cell& c, int digits) { return fmt::format("{:.{}f}", c.mean, std::min(digits, 2)); }

// The number of seeds of every measured cell when it is one and the same (and no cell counts
// solved seeds instead); 0 otherwise.
int common_seed_count(const Pivot& pivot) {
  int n = 0;
  for (const auto& r : pivot.rows)
    for (const auto& [seg, c] : r.cells) {
      if (r.paper) continue;
      if (solve_counts(c) || (n != 0 && c.n != n)) return 0;
      n = c.n;
    }
  return n;
}

// Text as LaTeX reads it: its special characters escaped, ± and " x " (\times) in math mode.
std::string latex_text(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (s.compare(i, std::string("±").size(), "±") == 0) {
      o += "$\\pm$";
      i += std::string("±").size() - 1;
    } else if (s.compare(i, 3, " x ") == 0) {  // "3 x 24", "segments x length": a product
      o += " $\\times$ ";
      i += 2;
    } else if (ch == '_' || ch == '%' || ch == '&' || ch == '#' || ch == '$') {
      o += std::string("\\") + ch;
    } else {
      o += ch;
    }
  }
  return o;
}

// "3 x 24, 6 x 12" for the segment counts in `segments` that `lengths` has.
std::string lengths_text(const std::vector<int>& segments, const std::map<int, int>& lengths) {
  std::vector<std::string> parts;
  for (int s : segments)
    if (auto it = lengths.find(s); it != lengths.end()) parts.push_back(fmt::format("{} x {}", s, it->second));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The columns where a paper row has a value: their paper segment lengths differ from the measured
// ones (or the measured ones are unknown)? Then columns are named by segments only.
std::vector<int> paper_columns(const Pivot& pivot) {
  std::vector<int> out;
  for (int s : pivot.segments) {
    bool any = false;
    for (const auto& r : pivot.rows) any = any || (r.paper && r.cells.count(s));
    if (any) out.push_back(s);
  }
  return out;
}
bool paper_lengths_differ(const Pivot& pivot) {
  for (int s : paper_columns(pivot)) {
    auto m = pivot.segment_length.find(s);
    auto p = pivot.paper_segment_length.find(s);
    if (m == pivot.segment_length.end() || p == pivot.paper_segment_length.end() || m->second != p->second) return true;
  }
  return false;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> lengths_parts(const Pivot& pivot) {
  if (!paper_lengths_differ(pivot)) return {};
  std::vector<std::string> about;
  if (!pivot.paper_task.empty()) about.push_back(pivot.paper_task);
  if (pivot.paper_seq_len > 0) about.push_back(fmt::format("{} positions", pivot.paper_seq_len));
  const std::string measured = lengths_text(pivot.segments, pivot.segment_length);
  return {{"measured", measured.empty() ? std::string("(not recorded)") : measured},
          {about.empty() ? std::string("paper") : fmt::format("paper ({})", fmt::join(about, ", ")),
           lengths_text(paper_columns(pivot), pivot.paper_segment_length)}};
}

// "Segment lengths: measured 1 x 18, 3 x 6; paper (copy 24, 72 positions) 1 x 72, 3 x 24." or "".
std::string lengths_note(const Pivot& pivot) {
  const auto parts = lengths_parts(pivot);
  if (parts.empty()) return "";
  return fmt::format("Segment lengths: {} {}; {} {}.", parts[0].first, parts[0].second, parts[1].first,
                     parts[1].second);
}

bool metric_is_fraction(const std::string& metric) {
  for (const char* prefix : {"acc", "exact_match", "solve_rate"})
    if (metric.rfind(prefix, 0) == 0) return true;
  return false;
}

namespace {

// Each metric's name on a figure's axis and in a table's caption.
struct MetricNames {
  const char* metric;
  const char* axis;
  const char* caption;  // nullptr: "test " + the metric
};
constexpr MetricNames kMetricNames[] = {
    {"acc_teacher_forced", "accuracy (teacher-forced)", "test answer accuracy, teacher-forced"},
    {"acc_free_running", "accuracy (free-running)", "test answer accuracy, free-running (greedy decoding)"},
    {"exact_match", "exact match", "test exact match (every answer position right, greedy decoding)"},
    {"exact_match_teacher_forced", "exact match (teacher-forced)", nullptr},
    {"solve_rate", "solve rate", "test solve rate (whole answer right, greedy decoding)"},
    {"solve_rate_teacher_forced", "solve rate (teacher-forced)",
     "test solve rate, teacher-forced (answer right given the true text before it)"},
    {"bpc", "bits per character", "test bits per character (language model, every position scored)"},
};

const MetricNames* metric_names(const std::string& metric) {
  for (const MetricNames& m : kMetricNames)
    if (metric == m.metric) return &m;
  return nullptr;
}

}  // namespace

std::string metric_axis_label(const std::string& metric) {
  const MetricNames* m = metric_names(metric);
  return m ? m->axis : metric;
}

std::string metric_caption(const std::string& metric) {
  const MetricNames* m = metric_names(metric);
  return m && m->caption ? m->caption : "test " + metric;
}

}  // namespace results_table_internal

using namespace results_table_internal;

std::string format_pivot(const Pivot& pivot, const std::string& format, const TableStyle& style) {
  if (style.digits < 0 || style.digits > 6) fail("--digits {}: expected 0 to 6 decimals", style.digits);
  std::string out;
  // The paper ran other segment lengths than the measured runs: name columns by segments only,
  // and say both in a note.
  const std::string note = lengths_note(pivot);
  auto column_name = [&](int seg) {
    if (pivot.multiples) return fmt::format("{}x", seg);
    auto it = pivot.segment_length.find(seg);
    return it == pivot.segment_length.end() || !note.empty() ? fmt::format("{} seg", seg)
                                                              : fmt::format("{} x {}", seg, it->second);
  };
  bool any_paper = false;
  for (const auto& r : pivot.rows) any_paper = any_paper || r.paper;
  // LaTeX, for a paper: where every cell has the same number of seeds, the caption says it once.
  const int same_n = format == "latex" ? common_seed_count(pivot) : 0;
  auto label_of = [](const PivotRow& r) { return r.paper ? "paper: " + r.label : r.label; };
  auto cell_of = [&](const PivotRow& r, int seg) {
    auto it = r.cells.find(seg);
    if (it == r.cells.end()) return std::string();
    return r.paper ? paper_text(it->second, style.digits) : cell_text(it->second, style.digits, same_n == 0);
  };
  bool any_solve_counts = false;
  for (const auto& r : pivot.rows)
    for (const auto& [seg, c] : r.cells) any_solve_counts = any_solve_counts || (!r.paper && solve_counts(c));
  const std::string over_seeds =
      same_n == 1   ? "one seed"
      : same_n > 1  ? fmt::format("mean ± std over {} seeds", same_n)
                    : fmt::format("mean ± std over seeds ({})",
                                  any_solve_counts ? "seeds whose validation accuracy met the target / seeds, and the "
                                                     "median step they met it at"
                                                   : "n");
  const std::string caption = fmt::format(
      "{}: {}{}; columns: {}", metric_caption(pivot.metric), over_seeds,
      any_paper ? ", paper rows: the paper's value" : "",
      pivot.multiples ? "the evaluated length as a multiple of the trained one"
      : note.empty()  ? "segments x longest segment length"
                      : "number of segments (segment lengths in the note)");
  std::string footnote = pivot.failed ? fmt::format("{} failed run(s) left out.", pivot.failed) : "";
  if (pivot.without_metric)
    footnote += fmt::format("{}{} finished run(s) without a value for {} left out.", footnote.empty() ? "" : " ",
                            pivot.without_metric, pivot.metric);
  if (!pivot.split_by.empty())
    footnote += fmt::format("{}Rows split by {}: runs of one cell differed in it, so they are not pooled as seeds.",
                            footnote.empty() ? "" : " ", fmt::join(pivot.split_by, ", "));
  if (!note.empty()) footnote = note + (footnote.empty() ? "" : " " + footnote);
  if (format == "md") {
    out += "**" + caption + "** (" + pivot.metric + ", from " + pivot.source + ")\n\n";
    out += "| model |";
    for (int s : pivot.segments) out += " " + column_name(s) + " |";
    out += "\n|---|";
    for (size_t i = 0; i < pivot.segments.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& r : pivot.rows) {
      out += "| " + label_of(r) + " |";
      for (int s : pivot.segments) out += " " + cell_of(r, s) + " |";
      out += "\n";
    }
    if (!footnote.empty()) out += "\n" + footnote + "\n";
  } else if (format == "csv") {
    // One line per cell; a paper cell has the paper's segment length and no std or n, a cell of
    // one run no std. Full precision whatever --digits says: CSV is for programs.
    out += std::string("model,source,segments,segment_length,mean,std,n") +
           (any_solve_counts ? ",solved,median_solved_step\n" : "\n");
    for (const auto& r : pivot.rows)
      for (const auto& [seg, c] : r.cells) {
        if (std::find(pivot.segments.begin(), pivot.segments.end(), seg) == pivot.segments.end()) continue;
        const auto& lengths = r.paper ? pivot.paper_segment_length : pivot.segment_length;
        const std::string len = lengths.count(seg) ? std::to_string(lengths.at(seg)) : "";
        const std::string label = csv_field(r.label);
        if (r.paper)
          out += fmt::format("{},paper,{},{},{:.6g},,", label, seg, len, c.mean);
        else
          out += fmt::format("{},measured,{},{},{:.6g},{},{}", label, seg, len, c.mean,
                             c.n > 1 ? fmt::format("{:.6g}", c.std) : "", c.n);
        if (any_solve_counts)
          out += !solve_counts(c) ? std::string(",,")
                                  : fmt::format(",{},{}", c.solved, c.median_solved_step
                                                                      ? fmt::format("{:.0f}", *c.median_solved_step) : "");
        out += "\n";
      }
  } else if (format == "latex") {
    // booktabs rules (\toprule, \midrule, \bottomrule), the caption and label under the table.
    out += "% needs \\usepackage{booktabs}\n";
    out += "\\begin{table}[t]\n\\centering\n\\begin{tabular}{l";
    for (size_t i = 0; i < pivot.segments.size(); ++i) out += "c";
    out += "}\n\\toprule\nmodel";
    for (int s : pivot.segments) out += " & " + latex_text(column_name(s));
    out += " \\\\\n\\midrule\n";
    for (const auto& r : pivot.rows) {
      out += latex_text(label_of(r));
      for (int s : pivot.segments) out += " & " + latex_text(cell_of(r, s));
      out += " \\\\\n";
    }
    out += "\\bottomrule\n\\end{tabular}\n\\caption{" + latex_text(caption) +
           (footnote.empty() ? "" : ". " + latex_text(footnote)) + "}\n";
    if (!style.label.empty()) out += "\\label{" + style.label + "}\n";
    out += "\\end{table}\n";
  } else {
    fail("unknown table format '{}' (md, csv or latex)", format);
  }
  return out;
}

std::string table_label(const std::string& name) {
  std::string label = "tab:";
  for (char ch : name) label += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' ? ch : '_';
  return label;
}

}  // namespace rmt
