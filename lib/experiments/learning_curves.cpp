#include "lib/experiments/learning_curves.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "lib/run/config_family.h"
#include "lib/run/run_directory.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The rules a curve's point obeys wherever it is read (a run's metrics.jsonl, learning_curves.csv):
// a step >= 0, an accuracy in [0, 1] (a bits per character: finite and >= 0), val_segments >= 1.
// `where` is "FILE: line N"; the message names the field as that file spells it.
void check_curve_point(const CurvePoint& p, bool bpc, const std::string& where, const char* value_field) {
  auto out_of_range = [&](const char* field, const std::string& value, const char* range) {
    fail("{}: {} {} is out of range ({})", where, field, value, range);
  };
  if (bpc ? !(std::isfinite(p.val_acc) && p.val_acc >= 0) : !(p.val_acc >= 0 && p.val_acc <= 1))
    out_of_range(value_field, fmt::format("{}", p.val_acc), bpc ? "a finite number >= 0" : "0 to 1");
  if (p.step < 0) out_of_range("step", fmt::format("{}", p.step), ">= 0");
  if (p.val_segments < 1) out_of_range("val_segments", fmt::format("{}", p.val_segments), ">= 1");
}

}  // namespace

std::vector<CurvePoint> read_validation_curve(const std::string& metrics_path, int segments, const std::string& key) {
  std::vector<CurvePoint> points;
  const std::string text = read_file(metrics_path);
  const bool bpc = key == "val_bpc";
  size_t begin = 0;
  for (int number = 1; begin < text.size(); ++number) {
    const size_t newline = text.find('\n', begin);
    // append_line writes a line and its '\n' in one write(2): a kill leaves at most the last line
    // without its '\n' (torn), which is skipped. A damaged line anywhere else is refused: drawn
    // without it, the curve would be quietly wrong.
    const bool torn_last = newline == std::string::npos;
    const std::string line = text.substr(begin, torn_last ? std::string::npos : newline - begin);
    begin = torn_last ? text.size() : newline + 1;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}: line {}", metrics_path, number);
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (torn_last) continue;
      fail("{}: not a JSON object (a damaged line; only the last line of a run killed mid-write may be torn)", where);
    }
    if (!j.contains(key)) continue;  // a training interval's or an event's line
    const json step = j.value("step", json()), value = j[key];
    if (!step.is_number_integer()) fail("{}: step is {}, expected an integer", where, step.dump());
    if (!value.is_number()) fail("{}: {} is {}, expected a number", where, key, value.dump());
    CurvePoint p;
    p.step = step.get<int64_t>();
    p.val_acc = value.get<double>();
    p.val_segments = segments;  // where not recorded: the run's task
    if (j.contains("val_segments")) {
      if (!j["val_segments"].is_number_integer())
        fail("{}: val_segments is {}, expected an integer", where, j["val_segments"].dump());
      p.val_segments = j["val_segments"].get<int>();
    }
    check_curve_point(p, bpc, where, key.c_str());
    points.push_back(p);
  }
  return points;
}

std::vector<LearningCurve> run_curves(const SweepPlan& plan) {
  std::vector<LearningCurve> curves;
  for (const auto& run : plan.runs) {
    // A run still training would be drawn beside finished ones as if it had stopped there.
    const RunState state = run_state(run);
    if (state != RunState::done && state != RunState::failed) continue;
    const fs::path metrics = run.dir / "metrics.jsonl";
    if (!fs::exists(metrics)) continue;
    LearningCurve c;
    c.kind = run.config.model.kind;
    c.seed = run.config.train.seed;
    c.segments = run.config.segments;
    c.run_id = run.run_id;
    c.points = read_validation_curve(metrics.string(), c.segments);
    if (!c.points.empty()) curves.push_back(std::move(c));
  }
  return curves;
}

// The curve of one run directory; false for a directory without a run.
static bool curve_of_run(const fs::path& dir, std::vector<LearningCurve>& out) {
  if (!fs::is_regular_file(dir / "metrics.jsonl") || !fs::is_regular_file(dir / "config.yaml")) return false;
  const Config config = load_run_config(dir.string());
  LearningCurve c;
  c.kind = config.model.kind;
  c.seed = config.train.seed;
  c.segments = config.segments;
  c.run_id = dir.filename().string();
  c.bpc = config_family(config).validates_bpc();
  c.points = read_validation_curve((dir / "metrics.jsonl").string(), c.segments,
                                   c.bpc ? "val_bpc" : "val_acc_teacher_forced");
  if (!c.points.empty()) out.push_back(std::move(c));
  return true;
}

std::vector<LearningCurve> curves_of_dirs(const std::vector<std::string>& dirs) {
  std::vector<LearningCurve> curves;
  for (const std::string& d : dirs) {
    const fs::path dir = fs::path(d).lexically_normal();
    if (!fs::is_directory(dir)) fail("--curves {}: not a directory", d);
    if (curve_of_run(dir, curves)) continue;
    std::vector<fs::path> runs;  // a sweep directory: its run directories, by name
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) runs.push_back(e.path());
    std::sort(runs.begin(), runs.end());
    int found = 0;
    for (const fs::path& run : runs) found += curve_of_run(run, curves);
    if (found == 0)
      fail("--curves {}: no run here (a run directory has metrics.jsonl and config.yaml; a sweep directory holds "
           "run directories)", d);
  }
  for (const auto& c : curves)
    if (c.bpc != curves.front().bpc)
      fail("--curves: {} is a language model's run (bpc) and {} is not (accuracy); draw them in separate figures",
           (c.bpc ? c : curves.front()).run_id, (c.bpc ? curves.front() : c).run_id);
  return curves;
}

int hardest_segments(const std::vector<LearningCurve>& curves) {
  int hardest = 0;
  for (const auto& c : curves) hardest = std::max(hardest, c.segments);
  return hardest;
}

std::vector<LearningCurve> curves_at(const std::vector<LearningCurve>& curves, int segments) {
  std::vector<LearningCurve> at;
  for (const auto& c : curves)
    if (c.segments == segments) at.push_back(c);
  return at;
}

bool measured_at_stage_segments(const std::vector<LearningCurve>& curves) {
  for (const auto& c : curves)
    for (const auto& p : c.points)
      if (p.val_segments != c.segments) return true;
  return false;
}

std::string measured_at_text(const std::vector<LearningCurve>& curves) {
  return measured_at_stage_segments(curves) ? "at the stage's segments" : "at all the run's segments";
}

std::string curves_csv(const std::vector<LearningCurve>& curves) {
  const bool bpc = !curves.empty() && curves.front().bpc;
  std::string out = bpc ? "kind,seed,segments,run_id,step,val_bpc,val_segments\n"
                        : "kind,seed,segments,run_id,step,val_acc,val_segments\n";
  for (const auto& c : curves)
    for (const auto& p : c.points)
      out += fmt::format("{},{},{},{},{},{:.6g},{}\n", c.kind, c.seed, c.segments, c.run_id, p.step,
                         p.val_acc, p.val_segments);
  return out;
}

std::vector<LearningCurve> parse_curves_csv(const std::string& text, const std::string& origin) {
  const CsvTable csv = parse_csv(text, origin);
  const std::vector<std::string> expected = {"kind", "seed", "segments", "run_id", "step", "val_acc", "val_segments"};
  if (csv.header != expected)
    fail("{}: columns are {}, expected {}", origin, fmt::join(csv.header, ","), fmt::join(expected, ","));
  std::vector<LearningCurve> curves;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& row = csv.rows[r];
    auto number = [&](size_t c, auto& v, const char* what) {
      const std::string& s = row[c];
      auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
        fail("{}: line {}: {} '{}' is not a number", origin, csv.row_lines[r], what, s);
    };
    if (!find_model_kind(row[0])) fail("{}: line {}: '{}' is not a model kind", origin, csv.row_lines[r], row[0]);
    LearningCurve key;
    key.kind = row[0];
    number(1, key.seed, "seed");
    number(2, key.segments, "segments");
    key.run_id = row[3];
    CurvePoint p;
    number(4, p.step, "step");
    number(5, p.val_acc, "val_acc");
    number(6, p.val_segments, "val_segments");
    if (key.segments < 1) fail("{}: line {}: segments {} is out of range (>= 1)", origin, csv.row_lines[r], row[2]);
    check_curve_point(p, false, fmt::format("{}: line {}", origin, csv.row_lines[r]), "val_acc");
    if (curves.empty() || curves.back().run_id != key.run_id) curves.push_back(key);
    curves.back().points.push_back(p);
  }
  return curves;
}

std::string curves_gnuplot_script(const std::vector<LearningCurve>& curves, const std::string& out,
                                  const std::string& title, const FigureSize& size) {
  std::string s = plot_terminal(out, size);
  s += "set output " + gnuplot_string(out) + "\n";
  if (!title.empty()) s += "set title " + gnuplot_string(title) + " noenhanced\n";
  s += "set xlabel 'training step'\n";
  const bool bpc = !curves.empty() && curves.front().bpc;  // curves_of_dirs keeps them apart
  s += "set ylabel " +
       gnuplot_string(bpc ? std::string("validation bits per character")
                          : "validation accuracy (teacher-forced, " + measured_at_text(curves) + ")") +
       " noenhanced\n";
  // Steps as plain numbers: a k suffix rounded 1500 and 2500 to "2k".
  s += std::string(bpc ? "set yrange [0:*]\n" : "set yrange [0:1.05]\n") + plot_grid_line() + plot_key_line() +
       "set format x '%g'\n";
  std::vector<std::string> plots;
  bool any_stage = false;
  // Runs of several segment counts (a whole sweep) are told apart by their segments too.
  const bool several_segments = std::any_of(curves.begin(), curves.end(),
                                            [&](const LearningCurve& c) { return c.segments != curves[0].segments; });
  for (size_t i = 0; i < curves.size(); ++i) {
    const LearningCurve& c = curves[i];
    s += fmt::format("$run{} << EOD\n", i);
    for (const auto& p : c.points) s += fmt::format("{} {:.6g}\n", p.step, p.val_acc);
    s += "EOD\n";
    plots.push_back(fmt::format("$run{} using 1:2 with lines linewidth 2 linecolor {} dashtype {} title {}", i,
                                "rgb " + gnuplot_string(kind_colour(c.kind)), int((c.seed + 4) % 5) + 1,
                                gnuplot_string(several_segments ? fmt::format("{} {} seg seed {}", c.kind, c.segments, c.seed)
                                                                : fmt::format("{} seed {}", c.kind, c.seed))));
    // The curriculum's stage changes, marked on the curve: the first evaluation at a stage's
    // segments (a mastery curriculum validates at its stage's segments; a scheduled one at all).
    std::string stages;
    for (size_t k = 1; k < c.points.size(); ++k)
      if (c.points[k].val_segments != c.points[k - 1].val_segments)
        stages += fmt::format("{} {:.6g}\n", c.points[k].step, c.points[k].val_acc);
    if (stages.empty()) continue;
    s += fmt::format("$stages{} << EOD\n{}EOD\n", i, stages);
    plots.push_back(fmt::format("$stages{} using 1:2 with points pointtype 6 pointsize 1.5 linecolor {} notitle", i,
                                "rgb " + gnuplot_string(kind_colour(c.kind))));
    any_stage = true;
  }
  if (plots.empty()) fail("nothing to plot: no run has a validation curve");
  // One key entry for the marks (a point off the axes).
  if (any_stage) plots.push_back("NaN with points pointtype 6 pointsize 1.5 linecolor 'black' title 'a curriculum stage begins'");
  s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
  return s;
}

}  // namespace rmt
