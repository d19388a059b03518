// The items that train a sweep: `sweep` (tabulated per metric beside the paper's numbers, plotted,
// its learning curves drawn, checked against the paper's claims) and `lm` (a language-model
// sweep tabulated one row per setting, checked on claims comparing two settings' bpc).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/experiments/learning_curves.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_figures.h"
#include "lib/experiments/repro_items.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/run_records.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

std::string csv_of(const SweepPlan& plan) { return (plan.sweep_dir / "results.csv").string(); }

// Where an item's finished runs came from, counted from its results.csv: "39 runs: commit
// 74f7405c2a4f (30), 74f7405c2a4f-dirty (9); threads 1 (39); CPU unknown (39); ...". A column
// that an older results.csv lacks counts every run as unknown.
std::string runs_provenance(const CsvTable& csv) {
  const int c_status = csv.column("status");
  std::vector<const std::vector<std::string>*> done;
  for (const auto& row : csv.rows)
    if (c_status < 0 || row[size_t(c_status)] == "done") done.push_back(&row);
  std::string s = fmt::format("{} finished run{}", done.size(), done.size() == 1 ? "" : "s");
  const std::pair<const char*, const char*> columns[] = {{"git_commit", "commit"}, {"threads", "threads"},
                                                         {"cpu_model", "CPU"}, {"vector_extensions", "vector extensions"},
                                                         {"build", "build"}};
  for (const auto& [column, label] : columns) {
    const int c = csv.column(column);
    std::map<std::string, int> counts;
    for (const auto* row : done) {
      const std::string value = c < 0 || (*row)[size_t(c)].empty() ? "unknown" : (*row)[size_t(c)];
      counts[value]++;
    }
    std::vector<std::string> parts;
    for (const auto& [value, n] : counts) parts.push_back(fmt::format("{} ({})", value, n));
    s += fmt::format("; {} {}", label, fmt::join(parts, ", "));
  }
  return s;
}

// What a sweep or lm item trains and how its results are found: the part both kinds share.
class SweepItemHandler : public ItemHandler {
 public:
  using ItemHandler::ItemHandler;

  int run() override;
  ItemTiming timing() const override;
  std::string pattern() const override;
  std::string section(const ItemTiming& timing) const override;

 protected:
  // What summarise found, for the report.
  bool has_results_ = false;
  std::vector<std::pair<std::string, Pivot>> tables_;  // sweep: metric -> pivot (with paper rows)
  std::string markdown_;                               // lm: the table of runs
  std::vector<ClaimResult> claims_;
  std::vector<ClaimLine> claim_lines_;
  int failed_ = 0;
  // Learning curves drawn: the hardest cell first, then each other cell where a check fails.
  struct CurveCell {
    int segments = 0;
    int runs = 0;
    std::string png;                  // the plot's file name in the item's folder
    std::vector<std::string> checks;  // the checks failing at this cell (beyond the hardest)
    bool at_stage_segments = false;   // its curves measured at a mastery curriculum's stages
  };
  std::vector<CurveCell> curve_cells_;
  std::optional<std::pair<int, int>> progress_;  // (runs done, runs planned), once results are read
  std::string provenance_;  // where the finished runs came from: commits, threads, CPUs, builds
  ReadingData reading_data_;  // what the reading's numbers are computed from
  std::optional<CsvTable> results_;

  // Finished runs' records (run_records.h) are kept for an item that no attention or length item
  // reads from: those need the runs' checkpoints, which a record does not hold.
  bool keeps_run_records() const;
  fs::path records_dir() const { return ctx_.out_dir(item_) / "runs"; }
  // The item's sweep results.csv copied into its output folder, parsed (nothing yet: nullopt).
  std::optional<CsvTable> copy_results();
  // Whether the committed results.csv of the item holds this config's runs (its run ids).
  bool kept_results_are_this_config() const;
  bool in_progress() const { return has_results_ && progress_ && progress_->first < progress_->second; }
};

bool SweepItemHandler::keeps_run_records() const {
  return std::none_of(ctx_.manifest.items.begin(), ctx_.manifest.items.end(),
                      [&](const ReproItem& other) { return other.from == item_.name; });
}

int SweepItemHandler::run() {
  const SweepPlan& plan = ctx_.plan_of(item_);
  const ReproOptions& o = ctx_.options;
  const fs::path out = ctx_.out_dir(item_);
  const bool records = keeps_run_records();
  if (records)
    if (int restored = restore_run_records(plan, records_dir()); restored > 0)
      ctx_.log(fmt::format("{}: {} finished runs restored from their records in {}", item_.name, restored,
                           records_dir().string()));
  int pending = 0;
  for (const auto& run : plan.runs) pending += run_state(run) != RunState::done;
  const fs::path timing_file = out / "timing.json";
  // The times of an earlier config's runs (the committed results are not this config's) are not
  // this one's: they start from zero.
  const bool earlier_config = fs::exists(out / "results.csv") && !kept_results_are_this_config();
  ItemTiming timing = earlier_config ? ItemTiming() : read_timing(timing_file);
  // Nothing of it in the runs directory: a fresh start, whose time is its own (the earlier calls'
  // time went into runs that are not these).
  const bool fresh = std::none_of(plan.runs.begin(), plan.runs.end(),
                                  [](const SweepRun& run) { return fs::exists(run.dir); });
  if (fresh) timing = ItemTiming();
  // Training time from the runs themselves: right however often the item was interrupted.
  auto count_training_time = [&] {
    CsvTable csv = parse_csv(read_file(csv_of(plan)), csv_of(plan));
    timing.train_s = 0;
    const int c_wall = csv.column("wall_time_s");
    for (const auto& row : csv.rows) {
      if (c_wall < 0 || row[size_t(c_wall)].empty()) continue;
      char* end = nullptr;
      const double v = std::strtod(row[size_t(c_wall)].c_str(), &end);
      if (*end == '\0' && std::isfinite(v) && v >= 0) timing.train_s += v;  // else: not counted
    }
    timing.runs = int(plan.runs.size());
  };
  if (pending == 0) {
    ctx_.log(fmt::format("{}: all {} runs done", item_.name, plan.runs.size()));
    write_results_csv(plan);
    create_directories_or_fail(out);
    if (records) save_run_records(plan, records_dir());
    return 0;
  }
  ctx_.log(fmt::format("{}: {} of {} runs to do, {} at a time", item_.name, pending, plan.runs.size(), o.jobs));
  SweepOptions so;
  so.rmt_binary = o.rmt_binary;
  so.jobs = o.jobs;
  so.mps = o.mps;
  so.pack = o.pack;
  so.quiet = o.quiet;
  const auto t0 = std::chrono::steady_clock::now();
  const double wall_before = timing.wall_s;
  // The time so far is written after every run, so that a call stopped before its end (a
  // session's end, a kill) keeps the time up to its last finished run.
  auto record_time = [&] {
    timing.wall_s = wall_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    timing.jobs = o.jobs;
    count_training_time();
    create_directories_or_fail(out);
    write_timing(timing_file, timing);
    if (records) save_run_records(plan, records_dir());
  };
  so.on_run_end = record_time;
  const int failed = rmt::run_sweep(plan, so);  // generates the data and writes the configs first
  record_time();
  return failed;
}

bool SweepItemHandler::kept_results_are_this_config() const {
  const fs::path kept = ctx_.out_dir(item_) / "results.csv";
  if (!fs::exists(kept)) return false;
  const CsvTable csv = parse_csv(read_file(kept), kept.string());
  const int c_id = csv.column("run_id");
  std::set<std::string> ids;
  for (const auto& run : ctx_.plan_of(item_).runs) ids.insert(run.run_id);
  bool ours = c_id >= 0 && !csv.rows.empty();
  for (const auto& row : csv.rows) ours = ours && ids.count(row[size_t(c_id)]);
  return ours;
}

std::optional<CsvTable> SweepItemHandler::copy_results() {
  const SweepPlan& plan = ctx_.plan_of(item_);
  const std::string runs_csv = csv_of(plan);
  const fs::path kept = ctx_.out_dir(item_) / "results.csv";
  std::string text, origin;
  // --report-only trains nothing and writes nothing under --runs-dir (which may be an earlier
  // --out, the committed results or another device's runs): the runs finished so far are read
  // from their directories; without any, the sweep's results.csv as it is.
  const bool runs_finished = std::any_of(plan.runs.begin(), plan.runs.end(),
                                         [](const SweepRun& run) {
                                           const RunState state = run_state(run);
                                           return state == RunState::done || state == RunState::failed;
                                         });
  if (ctx_.options.report_only && runs_finished) {
    text = results_csv_text(plan), origin = runs_csv;
  } else if (fs::exists(runs_csv)) {
    text = read_file(runs_csv), origin = runs_csv;
  } else if (fs::exists(kept)) {
    // No runs here (another machine, or runs/ removed): the committed results, if they are this
    // config's runs. Results of an earlier config (other run ids) are not reported as this one's.
    if (!kept_results_are_this_config()) {
      ctx_.log(fmt::format("{}: {} holds the results of an earlier config (other run ids); not reported", item_.name,
                           kept.string()));
      return std::nullopt;
    }
    text = read_file(kept), origin = kept.string();
  } else {
    return std::nullopt;
  }
  create_directories_or_fail(ctx_.out_dir(item_));
  write_file_atomic(kept, text);
  CsvTable csv = parse_csv(text, origin);
  // How far the item is: its finished runs against its planned ones.
  const int c_status = csv.column("status");
  int done = 0;
  for (const auto& row : csv.rows) done += c_status >= 0 && row[size_t(c_status)] == "done";
  progress_ = std::pair<int, int>{done, int(plan.runs.size())};
  provenance_ = runs_provenance(csv);
  return csv;
}

ItemTiming SweepItemHandler::timing() const {
  // Without results of its config (not run, or only an earlier config's) it has no time of its own yet.
  return has_results_ ? ItemHandler::timing() : ItemTiming();
}

std::string SweepItemHandler::pattern() const {
  std::string pattern = "-";
  if (!has_results_) pattern = "not run";
  else if (!claims_.empty()) pattern = fmt::format("{} of {} checks hold", claims_holding(claims_), claims_.size());
  if (in_progress()) pattern = fmt::format("in progress ({} of {} runs): {}", progress_->first, progress_->second, pattern);
  return pattern;
}

std::string SweepItemHandler::section(const ItemTiming& timing) const {
  const ReportTemplates& t = ctx_.templates;
  const std::string cmd = ctx_.command_of(item_);
  std::string s = t.render("sweep_item", {{"sweep", item_.sweep},
                                          {"sweep_link", fs::relative(item_.sweep, ctx_.options.out_dir).string()},
                                          {"command", cmd},
                                          // the -j its runs were trained at (a --report-only
                                          // call's own -j trains nothing)
                                          {"jobs", std::to_string(timing.jobs > 0 ? timing.jobs : ctx_.options.jobs)},
                                          {"runs_dir", ctx_.options.runs_dir + ctx_.device_option()}});
  if (!has_results_) return s + t.render("not_run", {{"command", cmd}}) + ctx_.reading(item_, ReadingData());
  s += t.render("runs_provenance", {{"provenance", provenance_}});
  if (in_progress())
    s += t.render("in_progress", {{"done", std::to_string(progress_->first)},
                                  {"planned", std::to_string(progress_->second)},
                                  {"command", cmd}});
  for (const auto& [metric, pivot] : tables_) s += format_pivot(pivot, "md") + "\n";
  s += markdown_.empty() ? "" : markdown_ + "\n";
  s += fmt::format("![{}]({}/{}.png)\n\n", item_.name, item_.name, item_.name);
  for (const auto& cell : curve_cells_) {
    if (cell.runs == 0) continue;
    if (cell.checks.empty())
      s += fmt::format("Learning curves of the hardest cell ({} segment{}; {} run{}, every model and seed; "
                       "validation accuracy {}; data in [learning_curves.csv]({}/learning_curves.csv)):\n\n",
                       cell.segments, cell.segments == 1 ? "" : "s", cell.runs, cell.runs == 1 ? "" : "s",
                       cell.at_stage_segments
                           ? "at the segments of the run's curriculum stage, so a curve drops where a stage begins"
                           : "at all the run's segments, whichever its curriculum stage trains on",
                       item_.name);
    else
      s += fmt::format("Learning curves at {} segment{}, where {} \"{}\" fails ({} run{}, every model and seed):\n\n",
                       cell.segments, cell.segments == 1 ? "" : "s",
                       cell.checks.size() == 1 ? "the check" : "each of the checks",
                       fmt::join(cell.checks, "\", \""), cell.runs, cell.runs == 1 ? "" : "s");
    s += fmt::format("![{} learning curves at {} segment{}]({}/{})\n\n", item_.name, cell.segments,
                     cell.segments == 1 ? "" : "s", item_.name, cell.png);
  }
  if (!claims_.empty()) s += claims_markdown(claim_lines_, claims_, item_.beyond_the_paper) + "\n";
  if (failed_ > 0) s += fmt::format("{} runs failed (status and error in results.csv).\n\n", failed_);
  ReadingData data = reading_data_;
  data.in_progress = in_progress();
  s += ctx_.reading(item_, data);
  if (timing.runs > 0)
    s += t.render("sweep_wall_time", {{"wall", seconds_text(timing.wall_s)},
                                      {"runs", std::to_string(timing.runs)},
                                      {"jobs", std::to_string(timing.jobs)},
                                      {"train", seconds_text(timing.train_s)}});
  return s;
}

// A sweep item: a table per metric beside the paper's numbers, a plot, learning curves, checks.
class SweepHandler : public SweepItemHandler {
 public:
  SweepHandler(const ReproItem& item, ReproContext& context)
      : SweepItemHandler(item, context), part_(std::get<SweepItem>(item.part)) {}
  void summarise() override;

 private:
  const SweepItem& part_;
};

void SweepHandler::summarise() {
  const std::string csv_path = csv_of(ctx_.plan_of(item_));
  std::optional<CsvTable> results = copy_results();
  if (!results) return;
  const CsvTable& csv = *results;
  const fs::path dir = ctx_.out_dir(item_);
  const std::string& paper_file = ctx_.manifest.paper_file;
  const std::string paper_text = part_.paper_section.empty() ? "" : read_file(paper_file);
  std::string tables_md;
  std::vector<ClaimResult> claim_results(part_.claims.size());
  for (const auto& metric : part_.metrics) {
    if (csv.column(metric) < 0) fail("{}: {} has no column {}", item_.name, csv_path, metric);
    Pivot pivot = pivot_results(csv, metric, {}, (dir / "results.csv").string());
    if (pivot.rows.empty()) continue;
    // The claims and the plot use the measured numbers; the tables show the paper's beside them.
    for (size_t c = 0; c < part_.claims.size(); ++c) {
      if (part_.claims[c].metric != metric) continue;
      claim_results[c] = check_claim(part_.claims[c], pivot, ctx_.manifest.tolerance);
      // A paper value the manifest states must be the paper file's, where that has one.
      if (paper_text.empty() || part_.claims[c].paper.empty()) continue;
      Pivot with_paper = pivot;
      add_paper_rows(with_paper, paper_text, paper_file, part_.paper_section);
      if (const std::string d = paper_value_disagreement(part_.claims[c], with_paper); !d.empty())
        fail("{}: items.{}: {}", ctx_.manifest.path, item_.name, d);
    }
    // The paper reports one accuracy (free-running where the answer spans whole segments,
    // teacher-forced otherwise: docs/paper.md §3); its rows go beside the first metric only,
    // which is also the one plotted.
    if (metric == part_.metrics.front()) {
      if (!paper_text.empty()) add_paper_rows(pivot, paper_text, paper_file, part_.paper_section);
      const fs::path png = dir / (item_.name + ".png");
      draw_plot(gnuplot_script(pivot, png.string(), item_.title, kReportFigure), png.string());
    }
    tables_md += format_pivot(pivot, "md") + "\n";
    tables_.emplace_back(metric, std::move(pivot));
    has_results_ = true;
  }
  // Learning curves: of every run, from the runs where they exist, else from the CSV kept beside
  // the results (a report redrawn without the run directories). Drawn: the hardest cell, and each
  // cell where a check fails, so that a failing check's runs can be seen at their ceiling.
  const fs::path curves_file = dir / "learning_curves.csv";
  std::vector<LearningCurve> curves = run_curves(ctx_.plan_of(item_));
  if (!curves.empty()) write_file_atomic(curves_file, curves_csv(curves));
  else if (fs::exists(curves_file)) curves = parse_curves_csv(read_file(curves_file), curves_file.string());
  const int hardest = hardest_segments(curves);
  if (hardest > 0) curve_cells_.push_back({hardest, 0, item_.name + "_curves.png", {}});
  for (size_t c = 0; c < part_.claims.size(); ++c)
    for (int seg : claim_results[c].failing_segments) {
      if (seg == hardest) continue;
      auto cell = std::find_if(curve_cells_.begin(), curve_cells_.end(),
                               [&](const CurveCell& x) { return x.segments == seg; });
      if (cell == curve_cells_.end())
        cell = curve_cells_.insert(curve_cells_.end(), {seg, 0, fmt::format("{}_curves_{}seg.png", item_.name, seg), {}});
      cell->checks.push_back(part_.claims[c].text);
    }
  // A failing cell's plot from an earlier report whose check now holds is not kept.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = item_.name + "_curves_", suffix = "seg.png";
    const bool cell_plot = name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (cell_plot && std::none_of(curve_cells_.begin(), curve_cells_.end(),
                                  [&](const CurveCell& c) { return c.png == name; }))
      fs::remove(e.path());
  }
  for (auto& cell : curve_cells_) {
    const std::vector<LearningCurve> at = curves_at(curves, cell.segments);
    cell.runs = int(at.size());
    if (at.empty()) continue;  // a failing cell without curves (kept results from before they were)
    cell.at_stage_segments = measured_at_stage_segments(at);
    const fs::path png = dir / cell.png;
    draw_plot(curves_gnuplot_script(at, png.string(),
                                    fmt::format("{}: learning curves at {} segments", item_.title, cell.segments),
                                    kReportFigure),
              png.string());
  }
  claims_ = claim_results;
  claim_lines_ = claim_lines(part_.claims);
  results_ = csv;
  reading_data_ = {&*results_, part_.metrics.front(), curves};
  const int c_status = csv.column("status");
  for (const auto& row : csv.rows)
    if (c_status >= 0 && row[size_t(c_status)] == "failed") ++failed_;
  write_file_atomic(dir / "table.md", tables_md);
}

// A language-model item: one row per setting (model, cache, memory, BPTT) over its seeds.
class LmHandler : public SweepItemHandler {
 public:
  LmHandler(const ReproItem& item, ReproContext& context)
      : SweepItemHandler(item, context), part_(std::get<LmItem>(item.part)) {}
  void summarise() override;

 private:
  const LmItem& part_;
};

void LmHandler::summarise() {
  const std::string csv_path = csv_of(ctx_.plan_of(item_));
  std::optional<CsvTable> results = copy_results();
  if (!results) return;
  const CsvTable& csv = *results;
  const fs::path dir = ctx_.out_dir(item_);
  auto col = [&](const char* name) {
    const int c = csv.column(name);
    if (c < 0) fail("{}: {} has no column {}", item_.name, csv_path, name);
    return size_t(c);
  };
  const size_t c_kind = col("model.kind"), c_cache = col("model.mem_len"), c_mem = col("model.num_mem_tokens"),
               c_bptt = col("bptt"), c_bpc = col("bpc"), c_loss = col("loss"), c_wall = col("wall_time_s"),
               c_status = col("status");
  auto number = [&](const std::vector<std::string>& row, size_t c, int line) {
    char* end = nullptr;
    const double v = std::strtod(row[c].c_str(), &end);
    if (row[c].empty() || *end != '\0' || !std::isfinite(v))
      fail("{}:{}: column {}: expected a number, got '{}'", csv_path, line, csv.header[c], row[c]);
    return v;
  };
  std::vector<LmRow> rows;
  int failed = 0;
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const auto& row = csv.rows[i];
    const int line = csv.row_lines[i];
    if (row[c_status] != "done") {
      ++failed;
      continue;
    }
    LmRow r;
    r.model = row[c_kind];
    if (!find_model_kind(r.model))
      fail("{}:{}: model.kind '{}' is not one of {}", csv_path, line, r.model, model_kind_list());
    r.cache = int(number(row, c_cache, line));
    r.memory = int(number(row, c_mem, line));
    r.bptt = row[c_bptt] == "all" ? -1 : int(number(row, c_bptt, line));
    r.bpc = number(row, c_bpc, line);
    r.loss = number(row, c_loss, line);
    r.wall_s = number(row, c_wall, line);
    rows.push_back(r);
  }
  if (rows.empty()) return;  // no finished run: not run yet, as far as the report goes
  failed_ = failed;
  rows = lm_means(rows);  // one row per setting, over its seeds
  std::string md = "| model | cache | memory | BPTT | seeds | test bpc (mean ± std) | seeds' range | test loss (nats) | training time (mean) |\n"
                   "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    const bool memory = r.memory > 0;
    md += fmt::format("| {} | {} | {} | {} | {} | {:.3f} ± {:.3f} | {:.3f}-{:.3f} | {:.4f} | {} |\n", r.model,
                      r.cache > 0 ? std::to_string(r.cache) : "-", memory ? std::to_string(r.memory) : "-",
                      memory ? std::to_string(r.bptt) : "-", r.seeds, r.bpc, r.bpc_sd, r.bpc_min, r.bpc_max, r.loss,
                      seconds_text(r.wall_s));
  }
  markdown_ = md;
  for (const auto& claim : part_.claims) claims_.push_back(check_lm_claim(claim, rows));
  claim_lines_ = claim_lines(part_.claims);
  const fs::path png = dir / (item_.name + ".png");
  draw_plot(lm_plot_script(rows, png.string(), item_.title), png.string());
  write_file_atomic(dir / "table.md", md);
  results_ = csv;
  reading_data_ = {&*results_, "bpc", {}};
  has_results_ = true;
}

}  // namespace

std::unique_ptr<ItemHandler> make_sweep_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<SweepHandler>(item, context);
}

std::unique_ptr<ItemHandler> make_lm_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<LmHandler>(item, context);
}

}  // namespace rmt
