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
// A field as CSV writes it: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s);

struct Cell {
  double mean = 0, std = 0;  // std: sample standard deviation (n-1), 0 for one seed
  int n = 0;                 // seeds; 0 in a paper row (the paper's value only: no std, no n)
  // Runs with a target (train.target, lib/run/curriculum.h): how many of the n met it, and the
  // median step at which they did. targeted < n: some runs had none (no solve counts shown).
  int targeted = 0, solved = 0;
  std::optional<double> median_solved_step;
};

struct PivotRow {
  std::string label;  // "rmt (mem = seg len)", "xl (cache 12)", "baseline"
  std::string kind;   // the model kind (baseline, mt, xl, rmt, xl_rmt, armt): what paper rows match
  bool paper = false; // a row of the paper's numbers
  std::map<int, Cell> cells;  // segments -> cell
};

struct Pivot {
  std::string metric, source;
  std::vector<int> segments;          // the columns
  std::map<int, int> segment_length;  // segments -> longest segment (from the measured runs)
  std::vector<PivotRow> rows;
  // Columns are multiples of the trained length (columns_as_multiples), not segment counts.
  bool multiples = false;
  int failed = 0;                     // runs with status failed (left out)
  int without_metric = 0;             // finished runs with no value for the metric (left out)
  // Setting columns the rows were split by beyond `by`: runs of one cell that differed in them.
  std::vector<std::string> split_by;
  // The paper's own setup, from the paper YAML section: its task ("copy 24"), input positions
  // (0 if not given) and segments -> segment length.
  std::string paper_task;
  int paper_seq_len = 0;
  std::map<int, int> paper_segment_length;
};

// Rows = model kind plus memory, plus each of `by` (extra dotted columns, e.g. bptt); columns =
// segments; cells over the remaining rows (seeds). Runs that would share a cell but differ in a
// setting column (data.*, model.*, train.* but the seed, bptt, segment_length) are split into rows
// by it as if it were in `by` (split_by names them): a cell never pools different data or recipes. The memory (rmt, mt: num_mem_tokens) and the
// cache (xl: mem_len) are named from the runs of each kind: "mem 6" when the same in all of them,
// "mem = seg len" / "mem = 2 x seg len" / "mem = seg len/2" (integer division, as derive:
// computes it) when one ratio to the longest segment holds for all of them, else per run.
// Only runs with status done count; failed runs and finished runs without a value for the metric
// are counted (the table's note names them). A results.csv that mixes language-model runs
// (a bpc value) with algorithmic ones is refused: table each family on its own. Where results.csv has train.target, end_reason and
// solved_step (sweeps whose runs stop when solved), cells also count the seeds that met the
// target and their median solved step. Every row is checked first (status done|failed, a known
// model.kind, integer segments >= 1 and memory sizes >= 0, finite metrics, accuracies in [0, 1]):
// a bad value is an error naming the file and line.
Pivot pivot_results(const CsvTable& csv, const std::string& metric, const std::vector<std::string>& by,
                    const std::string& source);
// A sweep's length_results.csv (sweep_eval.h) with its columns the evaluated length as a whole
// multiple of the trained one (length_multiple) instead of the evaluated segments, so that runs
// trained at different lengths line up (rmt table / plot --columns multiple). Fails naming the
// file and line where there is no length_multiple column or a value is not a whole number >= 1.
// Pivot the result with pivot_results, then set Pivot::multiples.
CsvTable columns_as_multiples(CsvTable csv, const std::string& source);
// `by` for such a table: trained_segments added when its runs were trained at several segment
// counts, so that each row says which.
std::vector<std::string> multiples_by(const CsvTable& csv, std::vector<std::string> by);

// Adds the paper's rows from a paper_results.yaml section:
//   SECTION:
//     task: copy 24                 # optional: the paper's task, for the note on segment lengths
//     seq_len: 72                   # the paper's input positions, split as rmt splits them
//     segment_lengths: {4: 3}       # and/or explicit segments -> longest segment length
//     rows: {"rmt (mem = seg len)": {3: 1.00, 6: 1.00}}
// Every segment count of the rows needs a length (from segment_lengths or seq_len). Row labels
// start with the model kind; the paper rows of a kind follow the measured rows of that kind,
// whatever memory either has. Unknown keys, bad values and missing lengths are errors naming
// the file, line and key.
void add_paper_rows(Pivot& pivot, const std::string& yaml_text, const std::string& origin,
                    const std::string& section);

// md | csv | latex. Paper rows show the paper's value only. Columns are "segments x length" while
// the paper's segment lengths equal the measured ones; otherwise "N seg", and a note under the
// table gives both ("measured 3 x 6, 6 x 3; paper (copy 24, 72 positions) 3 x 24, 6 x 12").
// style.digits: decimals of means and stds (default 3; the paper's values keep at most 2);
// CSV keeps full precision. LaTeX uses booktabs (\toprule, \midrule, \bottomrule: needs
// \usepackage{booktabs}), $\pm$, \label{style.label} when given, and where every measured cell
// has the same number of seeds drops "(n)" from the cells and says "over n seeds" in the caption.
struct TableStyle {
  int digits = 3;     // 0 to 6
  std::string label;  // LaTeX only: "" = no \label
};
std::string format_pivot(const Pivot& pivot, const std::string& format, const TableStyle& style = {});
// A LaTeX label from a sweep's name: "tab:" + the name, characters other than letters, digits,
// '-' and '.' as '_'.
std::string table_label(const std::string& name);

// A gnuplot script drawing metric against segments (a log-2 axis), one line with error bars per
// measured row (paper rows dashed), into out (.svg, .png, .pdf or .eps). Rows at the same segment
// count sit a little apart (a one-column sweep spreads them across the axis); the key is under the
// plot; the y axis reaches above every error bar.
// The size of a line figure and its text, as placed in a paper (rmt plot --size, --font-size):
// the default is one column of a two-column paper at 8 pt. The report's figures (kReportFigure)
// are for a screen: 900 x 640 px with 12 px text, as they were drawn before these sizes. PDF and EPS are drawn at that size; SVG at 72 px an inch; PNG at
// 150 px an inch, text and lines scaled with it, so each reads at font_pt when shown at the size.
struct FigureSize {
  double width_in = 3.4, height_in = 3.0, font_pt = 8;
};
inline constexpr FigureSize kReportFigure{6.0, 640.0 / 150, 12.0 * 72 / 150};
// "W,H" in inches (each in (0, 40]) as --size reads it; fails naming the value.
FigureSize parse_figure_size(const std::string& text, double font_pt);
std::string gnuplot_script(const Pivot& pivot, const std::string& out, const std::string& title,
                           const FigureSize& size = {});
// A gnuplot double-quoted string.
std::string gnuplot_string(const std::string& s);
// The figure format of an output file from its ending: svg, png, pdf or eps; other endings fail
// naming the file.
std::string figure_format(const std::string& out);
// The terminal lines for a format at a size in pixels (PDF and EPS: one point a pixel), with
// `font` ("enhanced font 'Helvetica,13'"). PDF and EPS use cairo's terminals: the script first
// stops, naming the missing terminal, where this gnuplot lacks it.
std::string gnuplot_terminal(const std::string& format, int width_px, int height_px, const std::string& font);
// The terminal lines for an output file (figure_format of its ending), at `size`.
std::string plot_terminal(const std::string& out, const FigureSize& size = {});
// The key of every line plot: under the plot, entries side by side.
std::string plot_key_line();
// A light grey grid, the same in every format (gnuplot's default is black dots in PDF).
std::string plot_grid_line();
// The colour of a model kind in every figure (rmt plot, --curves, the reproduction's), fixed by
// its place in the kinds table (lib/core/model_kind.h): "#009e73" for rmt whatever else is drawn.
// Colour-blind safe (Okabe and Ito's palette); an unknown kind is black.
std::string kind_colour(const std::string& kind);
// `--row-label OLD=NEW` (rmt table, rmt plot): a row whose label is OLD, or whose model kind is
// OLD (the label's first word, kept with its memory: "xl (cache 4)" -> "Transformer-XL (cache
// 4)"), is labelled NEW; paper rows too. Fails naming an assignment without '=' or that matches
// no row.
void relabel_rows(Pivot& pivot, const std::vector<std::string>& assignments);
// Runs gnuplot on such a script (which writes `out` itself), via OUT.gp next to it. Fails with
// what to install when gnuplot is missing, and with gnuplot's own message when it fails.
void draw_plot(const std::string& script, const std::string& out);

}  // namespace rmt
