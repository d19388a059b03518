#pragma once
// `rmt table` and `rmt plot`: a sweep's results.csv pivoted into model x segments, each cell the
// mean and standard deviation over seeds, optionally beside the paper's numbers
// (experiments/paper_results.yaml).
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rmt {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> row_lines;  // the file line each row starts on, for error messages
  int column(const std::string& name) const;  // -1 when absent
};
// RFC-4180 style: fields may be quoted, "" is a quote inside a quoted field. Every row must have
// the header's number of fields; header names must be non-empty and distinct; a quote left open
// or text after a closing quote is an error naming the line.
CsvTable parse_csv(const std::string& text, const std::string& origin);

struct Cell {
  double mean = 0, std = 0;  // std: sample standard deviation (n-1), 0 for one seed
  int n = 0;
};

struct PivotRow {
  std::string label;  // "rmt (mem = seg len)", "xl (cache 12)", "baseline"
  bool paper = false; // a row of the paper's numbers
  std::map<int, Cell> cells;  // segments -> cell
};

struct Pivot {
  std::string metric, source;
  std::vector<int> segments;          // the columns
  std::map<int, int> segment_length;  // segments -> longest segment (from the measured runs)
  std::vector<PivotRow> rows;
  int failed = 0;                     // runs with status failed (left out)
};

// Rows = model kind plus memory (memory tied to segment length is named as such), plus each of
// `by` (extra dotted columns, e.g. bptt); columns = segments; cells over the remaining rows
// (seeds). Only runs with status done count. Every row is checked first (status done|failed, a
// known model.kind, integer segments >= 1 and memory sizes >= 0, finite metrics, accuracies in
// [0, 1]): a bad value is an error naming the file and line.
Pivot pivot_results(const CsvTable& csv, const std::string& metric, const std::vector<std::string>& by,
                    const std::string& source);

// Adds the paper's rows from a paper_results.yaml section: each measured row is followed by the
// paper row of the same label (or, failing that, the same model kind).
void add_paper_rows(Pivot& pivot, const std::string& yaml_text, const std::string& origin,
                    const std::string& section);

// md | csv | latex
std::string format_pivot(const Pivot& pivot, const std::string& format);

// A gnuplot script drawing metric against segments, one line with error bars per measured row
// (paper rows dashed), into out (.svg or .png).
std::string gnuplot_script(const Pivot& pivot, const std::string& out, const std::string& title);

}  // namespace rmt
