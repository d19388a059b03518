// `rmt table` and `rmt plot`: read a sweep's results.csv, print a table or draw a figure.
// The pivoting is in lib/experiments/results_table.cpp; this file parses options, runs gnuplot and prints.

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "lib/experiments/learning_curves.h"
#include "lib/experiments/results_heatmap.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"

namespace rmt::cli {

namespace fs = std::filesystem;

namespace {
struct ReportArgs {
  std::string csv, metric, format = "md", paper, paper_section, out;  // metric "": see add_common
  std::vector<std::string> by;
  std::string columns = "segments";  // segments | multiple (a sweep's length_results.csv)
  std::vector<std::string> row_labels;  // --row-label OLD=NEW
  std::string title;                    // rmt plot --title: none by default
  std::string size;                     // rmt plot --size W,H (inches); "" = FigureSize's default
  double font_pt = FigureSize().font_pt;
  TableStyle style;  // rmt table: --digits, --label
};

// runs/NAME/results.csv -> NAME (the paper section and the plot title default to it)
std::string sweep_name(const std::string& csv) {
  return fs::absolute(csv).parent_path().filename().string();
}

Pivot load_pivot(const ReportArgs& a) {
  if (!fs::exists(a.csv)) fail("{} does not exist (run `rmt sweep` first)", a.csv);
  if (fs::is_directory(a.csv)) fail("{} is a directory; give its results.csv", a.csv);
  CsvTable csv = parse_csv(read_file(a.csv), a.csv);
  const bool multiples = a.columns == "multiple";
  if (multiples) csv = columns_as_multiples(std::move(csv), a.csv);
  // The options name columns of the file: say which option is wrong and what the file has.
  auto need_column = [&](const char* option, const std::string& name) {
    if (csv.column(name) < 0)
      fail("{} {}: {} has no such column (columns: {})", option, name, a.csv, fmt::join(csv.header, ", "));
  };
  // The default: bits per character for a language-model sweep, else the answer accuracy.
  const std::string metric = !a.metric.empty() ? a.metric : csv.column("bpc") >= 0 ? "bpc" : "acc_teacher_forced";
  need_column("--metric", metric);
  for (const auto& b : a.by) need_column("--by", b);
  Pivot pivot = pivot_results(csv, metric, multiples ? multiples_by(csv, a.by) : a.by, a.csv);
  pivot.multiples = multiples;
  relabel_rows(pivot, a.row_labels);
  if (!a.paper.empty()) {
    if (multiples) fail("--paper is for columns of segments: the paper's rows have no trained length to take multiples of");
    if (!fs::exists(a.paper)) fail("--paper {} does not exist", a.paper);
    if (fs::is_directory(a.paper)) fail("--paper {} is a directory, expected a YAML file", a.paper);
    add_paper_rows(pivot, read_file(a.paper), a.paper, a.paper_section.empty() ? sweep_name(a.csv) : a.paper_section);
  }
  return pivot;
}

// What `--curves DIR...` reads: each run's metrics.jsonl and config.yaml, of DIR itself (a run)
// and of the directories in it (a sweep's runs). An --out among them would destroy a run.
std::vector<NamedPath> curve_inputs(const std::vector<std::string>& dirs) {
  std::vector<NamedPath> inputs;
  auto add_run = [&](const fs::path& run) {
    for (const char* f : {"metrics.jsonl", "config.yaml"}) inputs.push_back({"--curves", (run / f).string()});
  };
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;  // curves_of_dirs names it
    add_run(d);
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory(ec)) add_run(e.path());
  }
  return inputs;
}

void add_common(CLI::App* cmd, ReportArgs& a) {
  cmd->add_option("results", a.csv, "results.csv written by rmt sweep")->required();
  cmd->add_option("--metric", a.metric,
                  "acc_teacher_forced | acc_free_running | exact_match | exact_match_teacher_forced | solve_rate | "
                  "solve_rate_teacher_forced | loss | bpc, or any other numeric column of results.csv "
                  "(default: bpc for a language-model sweep, else acc_teacher_forced)");
  cmd->add_option("--paper", a.paper,
                  "Show the paper's numbers too (experiments/paper_results.yaml): its value only, at its own "
                  "segment lengths (noted under the table where they differ), beside the measured rows of the same "
                  "model kind");
  cmd->add_option("--paper-section", a.paper_section, "Section of the --paper file (default: the sweep's name)");
  cmd->add_option("--by", a.by, "Also split rows by this column (e.g. bptt); repeatable");
  cmd->add_option("--columns", a.columns,
                  "segments (the evaluated segments) | multiple (the evaluated length as a multiple of the trained "
                  "one: a sweep's length_results.csv, from its eval: block)")
      ->capture_default_str()
      ->check(one_of({"segments", "multiple"}));
  cmd->add_option("--row-label", a.row_labels,
                  "OLD=NEW: name a row (by its label, or every row of a model kind: xl=Transformer-XL) as NEW; "
                  "repeatable");
}
}  // namespace

void add_report_commands(CLI::App& app) {
  auto targs = std::make_shared<ReportArgs>();
  auto* table = app.add_subcommand("table", "Print a sweep's results as model x segments (mean ± std over seeds)");
  add_common(table, *targs);
  table->add_option("--format", targs->format, "md | csv | latex")->capture_default_str()
      ->check(one_of({"md", "csv", "latex"}));
  table->add_option("--digits", targs->style.digits, "Decimals of means and stds in md and latex (0 to 6; csv keeps "
                                                     "full precision)")
      ->capture_default_str()->transform(an_int());
  table->add_option("--label", targs->style.label, "LaTeX \\label of the table (default: tab:SWEEP, the sweep's name)");
  table->footer("For a paper: rmt table runs/NAME/results.csv --format latex --digits 2 (booktabs rules: "
                "\\usepackage{booktabs}; \"(n)\" leaves the cells for the caption when every cell has the same n).");
  table->callback([targs] {
    if (targs->style.digits < 0 || targs->style.digits > 6)
      fail("--digits {}: expected a number of decimals from 0 to 6", targs->style.digits);
    if (targs->style.label.find_first_of(" {}\\%#$") != std::string::npos)
      fail("--label '{}': a LaTeX label holds no spaces, braces, backslashes, %, # or $", targs->style.label);
    if (targs->style.label.empty()) targs->style.label = table_label(sweep_name(targs->csv));
    fmt::print("{}", format_pivot(load_pivot(*targs), targs->format, targs->style));
  });

  auto pargs = std::make_shared<ReportArgs>();
  auto curves = std::make_shared<std::vector<std::string>>();
  auto curves_format = std::make_shared<std::string>("plot");
  auto heatmap = std::make_shared<std::vector<std::string>>();
  auto* plot = app.add_subcommand("plot", "Draw accuracy against segments, one line per model (needs gnuplot); "
                                          "with --curves, validation accuracy against step of any runs");
  add_common(plot, *pargs);
  plot->get_option("results")->required(false);
  plot->add_option("--title", pargs->title, "A title above the figure (default: none)");
  plot->add_option("--size", pargs->size,
                   fmt::format("WIDTH,HEIGHT in inches, the size the figure is placed at (default {:g},{:g}: a column of a "
                               "two-column paper)", FigureSize().width_in, FigureSize().height_in));
  plot->add_option("--font-size", pargs->font_pt, "Text size in points at that size (4 to 40)")->capture_default_str();
  plot->footer("Learning curves of your runs: rmt plot --curves runs/quick_copy --out curves.png (one line per run;\n"
               "RUN_DIR or SWEEP_DIR, several allowed); --format csv gives the points instead (to --out, else stdout), for pandas.\n"
               "Task x length heat map: rmt plot --heatmap experiments/results/length_*/results.csv --out lengths.pdf\n"
               "For a paper: --out FIG.pdf or FIG.eps (vector, needs gnuplot's cairo terminals).");
  auto* curves_opt = plot->add_option("--curves", *curves,
                                      "Run or sweep directories: draw each run's validation accuracy against step "
                                      "instead of a results.csv");
  plot->add_option("--format", *curves_format,
                   "With --curves: plot (the figure, --out) | csv (the points, to --out or else stdout)")
      ->capture_default_str()->check(one_of({"plot", "csv"}))->needs(curves_opt);
  auto* heatmap_opt = plot->add_option("--heatmap", *heatmap,
                                       "results.csv files: draw a heat map instead, rows each file's models (named "
                                       "by its directory), columns segments, colour and number the mean of --metric");
  heatmap_opt->excludes(curves_opt);
  plot->add_option("--out", pargs->out, "Figure file: .svg, .png, .pdf or .eps");
  plot->callback([pargs, curves, curves_format, heatmap, plot] {
    const FigureSize figure = parse_figure_size(
        pargs->size.empty() ? fmt::format("{},{}", FigureSize().width_in, FigureSize().height_in) : pargs->size,
        pargs->font_pt);
    if (!heatmap->empty()) {
      if (!pargs->csv.empty())
        throw CLI::RequiresError("--heatmap draws its own results.csv files; give them there, not also as results",
                                 CLI::ExitCodes::RequiresError);
      for (const char* o : {"--paper", "--paper-section", "--by", "--row-label", "--size"})
        if (plot->count(o) > 0)
          throw CLI::RequiresError(fmt::format("{} is not for --heatmap", o), CLI::ExitCodes::RequiresError);
      if (pargs->out.empty()) throw CLI::RequiredError("--out");
      check_output_file("--out", pargs->out);
      std::vector<NamedPath> inputs;
      for (const std::string& h : *heatmap) inputs.push_back({"--heatmap", h});
      check_outputs_safe({{"--out", pargs->out}}, inputs);
      figure_format(pargs->out);  // .svg, .png, .pdf or .eps, checked before any work
      const std::string metric = pargs->metric.empty() ? "acc_teacher_forced" : pargs->metric;
      draw_results_heatmap(*heatmap, metric, pargs->out, pargs->title, pargs->columns == "multiple");
      fmt::print("wrote {}\n", pargs->out);
      return;
    }
    if (!curves->empty()) {
      if (!pargs->csv.empty())
        throw CLI::RequiresError("--curves draws run directories; give it or a results.csv, not both",
                                 CLI::ExitCodes::RequiresError);
      for (const char* o : {"--metric", "--paper", "--paper-section", "--by", "--columns", "--row-label"})
        if (plot->count(o) > 0)
          throw CLI::RequiresError(fmt::format("{} is for a results.csv, not --curves", o), CLI::ExitCodes::RequiresError);
      const bool csv = *curves_format == "csv";
      if (!csv && pargs->out.empty()) throw CLI::RequiredError("--out (or --format csv)");
      if (!pargs->out.empty()) {  // checked before any work
        check_output_file("--out", pargs->out);
        check_outputs_safe({{"--out", pargs->out}}, curve_inputs(*curves));
        if (!csv) figure_format(pargs->out);  // .svg, .png, .pdf or .eps
      }
      const std::vector<LearningCurve> c = curves_of_dirs(*curves);
      if (csv) {
        // To stdout, or (--out) written whole like every other output, never half a file.
        if (pargs->out.empty()) {
          fmt::print("{}", curves_csv(c));
        } else {
          write_file_atomic(pargs->out, curves_csv(c));
          fmt::print("wrote {}\n", pargs->out);
        }
        return;
      }
      draw_plot(curves_gnuplot_script(c, pargs->out, pargs->title, figure), pargs->out);
      fmt::print("wrote {}\n", pargs->out);
      return;
    }
    if (pargs->csv.empty()) throw CLI::RequiredError("results (a results.csv, or --curves DIR)");
    if (pargs->out.empty()) throw CLI::RequiredError("--out");
    check_output_file("--out", pargs->out);
    std::vector<NamedPath> inputs{{"results", pargs->csv}};
    if (!pargs->paper.empty()) inputs.push_back({"--paper", pargs->paper});
    check_outputs_safe({{"--out", pargs->out}}, inputs);
    figure_format(pargs->out);  // .svg, .png, .pdf or .eps, checked before any work
    Pivot pivot = load_pivot(*pargs);
    draw_plot(gnuplot_script(pivot, pargs->out, pargs->title, figure), pargs->out);
    fmt::print("wrote {}\n", pargs->out);
  });
}

}  // namespace rmt::cli
