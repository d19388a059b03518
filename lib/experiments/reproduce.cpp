// `rmt reproduce`: runs the manifest's items (sweeps, attention maps, length generalisation),
// then writes each item's tables, plots and checks and the whole report (REPORT.md).
#include "lib/experiments/reproduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/core/provenance.h"
#include "lib/experiments/attention_map.h"
#include "lib/experiments/learning_curves.h"
#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_figures.h"
#include "lib/experiments/repro_length.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/run_records.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "lib/run/evaluate.h"
#include "lib/run/eval_run.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string seconds_text(double s) {
  const long long whole = std::llround(s);
  if (whole < 60) return fmt::format("{} s", whole);
  return fmt::format("{} min {:02} s", whole / 60, whole % 60);
}

// Accumulated wall time of an item over every `rmt reproduce` that did work on it.
struct ItemTiming {
  double wall_s = 0;       // reproduce wall time spent on the item
  double train_s = 0;      // sum of its runs' training wall times (results.csv)
  int runs = 0, jobs = 0;
};

ItemTiming read_timing(const fs::path& file) {
  ItemTiming t;
  if (!fs::exists(file)) return t;
  json j = json::parse(read_file(file), nullptr, false);
  auto number = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() < 0)
      fail("{}: '{}' is not a number >= 0 (delete the file to start the timing anew)", file.string(), key);
    return j[key].get<double>();
  };
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object (delete it to start the timing anew)", file.string());
  t.wall_s = number("wall_s");
  t.train_s = number("train_s");
  t.runs = int(std::min(number("runs"), 1e9));
  t.jobs = int(std::min(number("jobs"), 1e9));
  return t;
}

}  // namespace

std::string item_time(const std::string& out_dir, const std::string& item) {
  ItemTiming t;
  try {
    t = read_timing(fs::path(out_dir) / item / "timing.json");
  } catch (const Error&) {
    return "";  // a damaged record says nothing (the reproduction itself reports it)
  }
  if (t.wall_s <= 0) return "";
  return fmt::format("{} at -j {} ({} runs)", seconds_text(t.wall_s), t.jobs, t.runs);
}

namespace {

void write_timing(const fs::path& file, const ItemTiming& t) {
  json j = {{"wall_s", t.wall_s}, {"train_s", t.train_s}, {"runs", t.runs}, {"jobs", t.jobs}};
  write_file_atomic(file, j.dump(2) + "\n");
}

struct SweepOutcome {
  bool has_results = false;
  std::vector<std::pair<std::string, Pivot>> tables;  // metric -> pivot (with paper rows)
  std::vector<ClaimResult> claims;
  int failed = 0;
  std::string markdown;  // lm items: the table of runs (sweep items format their pivots)
  // Learning curves drawn: the hardest cell first, then each other cell where a check fails.
  struct CurveCell {
    int segments = 0;
    int runs = 0;
    std::string png;                  // the plot's file name in the item's folder
    std::vector<std::string> checks;  // the checks failing at this cell (beyond the hardest)
    bool at_stage_segments = false;   // its curves measured at a mastery curriculum's stages
  };
  std::vector<CurveCell> curve_cells;
};

std::string csv_of(const SweepPlan& plan) { return (plan.sweep_dir / "results.csv").string(); }

// The machine, for the report's header: cores, CPU model and the vector extensions this rmt was
// built for (what decides a run's last bits).
std::string machine_text() {
  std::string model, extensions;
  for (const auto& [key, value] : provenance()) {
    if (key == "cpu_model") model = value;
    if (key == "vector_extensions") extensions = value;
  }
  return fmt::format("{} cores{}, rmt built for {}", std::max(1u, std::thread::hardware_concurrency()),
                     model == "unknown" ? "" : ", " + model, extensions);
}

}  // namespace

namespace {

class Reproduction {
 public:
  Reproduction(const ReproManifest& m, const ReproOptions& o) : m_(m), o_(o) {}

  int run(const std::vector<std::string>& names);

 private:
  const ReproManifest& m_;
  const ReproOptions& o_;
  std::map<std::string, SweepOutcome> sweeps_;
  mutable std::map<std::string, SweepPlan> plans_;  // of each sweep item, planned once

  fs::path out_dir(const ReproItem& it) const { return fs::path(o_.out_dir) / it.name; }
  // Finished runs' records (run_records.h) are kept for an item that no attention or length item
  // reads from: those need the runs' checkpoints, which a record does not hold.
  bool keeps_run_records(const ReproItem& it) const;
  fs::path records_dir(const ReproItem& it) const { return out_dir(it) / "runs"; }
  const SweepPlan& plan_of(const ReproItem& it) const;
  int run_sweep_item(const ReproItem& it);
  // The item's sweep results.csv copied into its output folder, parsed (nothing yet: nullopt).
  std::optional<CsvTable> copy_results(const ReproItem& it);
  // Whether the committed results.csv of the item holds this config's runs (its run ids).
  bool kept_results_are_this_config(const ReproItem& it);
  std::map<std::string, std::pair<int, int>> progress_;  // item -> (runs done, runs planned)
  void summarise_sweep(const ReproItem& it);
  void summarise_lm(const ReproItem& it);
  void run_attention(const ReproItem& it);
  void run_length(const ReproItem& it);
  const SweepRun* pick_run(const ReproItem& from, const RunPick& p, const std::string& where) const;
  void write_report() const;
  std::string sweep_section(const ReproItem& it) const;
  // The command that runs an item, with the device when it is not the CPU.
  std::string command_of(const ReproItem& it) const {
    return fmt::format("rmt reproduce {}{}", it.name, device_option());
  }
  std::string device_option() const { return other_device() ? " --device " + o_.device : ""; }
  // Whether the runs train elsewhere than on the configs' own device, the CPU.
  bool other_device() const { return !o_.device.empty() && o_.device != "cpu"; }
  void log(const std::string& line) const {
    if (!o_.quiet) fmt::print(stderr, "reproduce: {}\n", line);
  }
};

const SweepPlan& Reproduction::plan_of(const ReproItem& it) const {
  auto found = plans_.find(it.name);
  if (found == plans_.end()) {
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = o_.pack > 1 ? 1 : std::max(1, cores / o_.jobs);  // packed runs compute with one each
    found = plans_.emplace(it.name, plan_sweep(load_sweep(it.sweep), o_.runs_dir, threads, o_.device)).first;
  }
  return found->second;
}

bool Reproduction::keeps_run_records(const ReproItem& it) const {
  return std::none_of(m_.items.begin(), m_.items.end(), [&](const ReproItem& other) { return other.from == it.name; });
}

int Reproduction::run_sweep_item(const ReproItem& it) {
  const SweepPlan& plan = plan_of(it);
  const bool records = keeps_run_records(it);
  if (records)
    if (int restored = restore_run_records(plan, records_dir(it)); restored > 0)
      log(fmt::format("{}: {} finished runs restored from their records in {}", it.name, restored,
                      records_dir(it).string()));
  int pending = 0;
  for (const auto& run : plan.runs) pending += run_state(run) != RunState::done;
  const fs::path timing_file = out_dir(it) / "timing.json";
  // The times of an earlier config's runs (the committed results are not this config's) are not
  // this one's: they start from zero.
  const bool earlier_config = fs::exists(out_dir(it) / "results.csv") && !kept_results_are_this_config(it);
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
  int failed = 0;
  if (pending > 0) {
    log(fmt::format("{}: {} of {} runs to do, {} at a time", it.name, pending, plan.runs.size(), o_.jobs));
    SweepOptions so;
    so.rmt_binary = o_.rmt_binary;
    so.jobs = o_.jobs;
    so.mps = o_.mps;
    so.pack = o_.pack;
    so.quiet = o_.quiet;
    const auto t0 = std::chrono::steady_clock::now();
    const double wall_before = timing.wall_s;
    // The time so far is written after every run, so that a call stopped before its end (a
    // session's end, a kill) keeps the time up to its last finished run.
    auto record_time = [&] {
      timing.wall_s = wall_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      timing.jobs = o_.jobs;
      count_training_time();
      create_directories_or_fail(out_dir(it));
      write_timing(timing_file, timing);
      if (records) save_run_records(plan, records_dir(it));
    };
    so.on_run_end = record_time;
    prepare_sweep_files(plan, so);
    failed = rmt::run_sweep(plan, so);
    record_time();
  } else {
    log(fmt::format("{}: all {} runs done", it.name, plan.runs.size()));
    write_results_csv(plan);
    create_directories_or_fail(out_dir(it));
    if (records) save_run_records(plan, records_dir(it));
  }
  return failed;
}

bool Reproduction::kept_results_are_this_config(const ReproItem& it) {
  const fs::path kept = out_dir(it) / "results.csv";
  if (!fs::exists(kept)) return false;
  const CsvTable csv = parse_csv(read_file(kept), kept.string());
  const int c_id = csv.column("run_id");
  std::set<std::string> ids;
  for (const auto& run : plan_of(it).runs) ids.insert(run.run_id);
  bool ours = c_id >= 0 && !csv.rows.empty();
  for (const auto& row : csv.rows) ours = ours && ids.count(row[size_t(c_id)]);
  return ours;
}

std::optional<CsvTable> Reproduction::copy_results(const ReproItem& it) {
  const SweepPlan& plan = plan_of(it);
  const std::string runs_csv = csv_of(plan);
  const fs::path kept = out_dir(it) / "results.csv";
  std::string text, origin;
  // --report-only trains nothing and writes nothing under --runs-dir (which may be an earlier
  // --out, the committed results or another device's runs): the runs finished so far are read
  // from their directories; without any, the sweep's results.csv as it is.
  const bool runs_finished = std::any_of(plan.runs.begin(), plan.runs.end(),
                                         [](const SweepRun& run) {
                                           const RunState state = run_state(run);
                                           return state == RunState::done || state == RunState::failed;
                                         });
  if (o_.report_only && runs_finished) {
    text = results_csv_text(plan), origin = runs_csv;
  } else if (fs::exists(runs_csv)) {
    text = read_file(runs_csv), origin = runs_csv;
  } else if (fs::exists(kept)) {
    // No runs here (another machine, or runs/ removed): the committed results, if they are this
    // config's runs. Results of an earlier config (other run ids) are not reported as this one's.
    if (!kept_results_are_this_config(it)) {
      log(fmt::format("{}: {} holds the results of an earlier config (other run ids); not reported", it.name,
                      kept.string()));
      return std::nullopt;
    }
    text = read_file(kept), origin = kept.string();
  } else {
    return std::nullopt;
  }
  create_directories_or_fail(out_dir(it));
  write_file_atomic(kept, text);
  CsvTable csv = parse_csv(text, origin);
  // How far the item is: its finished runs against its planned ones.
  const int c_status = csv.column("status");
  int done = 0;
  for (const auto& row : csv.rows) done += c_status >= 0 && row[size_t(c_status)] == "done";
  progress_[it.name] = {done, int(plan.runs.size())};
  return csv;
}

void Reproduction::summarise_sweep(const ReproItem& it) {
  SweepOutcome out;
  const std::string csv_path = csv_of(plan_of(it));
  std::optional<CsvTable> results = copy_results(it);
  if (!results) {
    sweeps_[it.name] = out;
    return;
  }
  const CsvTable& csv = *results;
  const fs::path dir = out_dir(it);
  const std::string paper_text = it.paper_section.empty() ? "" : read_file(m_.paper_file);
  std::string tables_md;
  std::vector<ClaimResult> claim_results(it.claims.size());
  for (const auto& metric : it.metrics) {
    if (csv.column(metric) < 0) fail("{}: {} has no column {}", it.name, csv_path, metric);
    Pivot pivot = pivot_results(csv, metric, {}, (dir / "results.csv").string());
    if (pivot.rows.empty()) continue;
    // The claims and the plot use the measured numbers; the tables show the paper's beside them.
    for (size_t c = 0; c < it.claims.size(); ++c)
      if (it.claims[c].metric == metric) claim_results[c] = check_claim(it.claims[c], pivot);
    // The paper reports one accuracy (free-running where the answer spans whole segments,
    // teacher-forced otherwise: docs/paper.md §3); its rows go beside the first metric only,
    // which is also the one plotted.
    if (metric == it.metrics.front()) {
      if (!paper_text.empty()) add_paper_rows(pivot, paper_text, m_.paper_file, it.paper_section);
      const fs::path png = dir / (it.name + ".png");
      draw_plot(gnuplot_script(pivot, png.string(), it.title), png.string());
    }
    tables_md += format_pivot(pivot, "md") + "\n";
    out.tables.emplace_back(metric, std::move(pivot));
    out.has_results = true;
  }
  // Learning curves: of every run, from the runs where they exist, else from the CSV kept beside
  // the results (a report redrawn without the run directories). Drawn: the hardest cell, and each
  // cell where a check fails, so that a failing check's runs can be seen at their ceiling.
  const fs::path curves_file = dir / "learning_curves.csv";
  std::vector<LearningCurve> curves = run_curves(plan_of(it));
  if (!curves.empty()) write_file_atomic(curves_file, curves_csv(curves));
  else if (fs::exists(curves_file)) curves = parse_curves_csv(read_file(curves_file), curves_file.string());
  const int hardest = hardest_segments(curves);
  if (hardest > 0) out.curve_cells.push_back({hardest, 0, it.name + "_curves.png", {}});
  for (size_t c = 0; c < it.claims.size(); ++c)
    for (int seg : claim_results[c].failing_segments) {
      if (seg == hardest) continue;
      auto cell = std::find_if(out.curve_cells.begin(), out.curve_cells.end(),
                               [&](const SweepOutcome::CurveCell& x) { return x.segments == seg; });
      if (cell == out.curve_cells.end())
        cell = out.curve_cells.insert(out.curve_cells.end(),
                                      {seg, 0, fmt::format("{}_curves_{}seg.png", it.name, seg), {}});
      cell->checks.push_back(it.claims[c].text);
    }
  // A failing cell's plot from an earlier report whose check now holds is not kept.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = it.name + "_curves_", suffix = "seg.png";
    const bool cell_plot = name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
                           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (cell_plot && std::none_of(out.curve_cells.begin(), out.curve_cells.end(),
                                  [&](const SweepOutcome::CurveCell& c) { return c.png == name; }))
      fs::remove(e.path());
  }
  for (auto& cell : out.curve_cells) {
    const std::vector<LearningCurve> at = curves_at(curves, cell.segments);
    cell.runs = int(at.size());
    if (at.empty()) continue;  // a failing cell without curves (kept results from before they were)
    cell.at_stage_segments = measured_at_stage_segments(at);
    const fs::path png = dir / cell.png;
    draw_plot(curves_gnuplot_script(at, png.string(),
                                    fmt::format("{}: learning curves at {} segments", it.title, cell.segments)),
              png.string());
  }
  out.claims = claim_results;
  out.failed = 0;
  const int c_status = csv.column("status");
  for (const auto& row : csv.rows)
    if (c_status >= 0 && row[size_t(c_status)] == "failed") ++out.failed;
  write_file_atomic(dir / "table.md", tables_md);
  sweeps_[it.name] = std::move(out);
}

void Reproduction::summarise_lm(const ReproItem& it) {
  SweepOutcome out;
  const std::string csv_path = csv_of(plan_of(it));
  std::optional<CsvTable> results = copy_results(it);
  if (!results) {
    sweeps_[it.name] = out;
    return;
  }
  const CsvTable& csv = *results;
  const fs::path dir = out_dir(it);
  auto col = [&](const char* name) {
    const int c = csv.column(name);
    if (c < 0) fail("{}: {} has no column {}", it.name, csv_path, name);
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
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const auto& row = csv.rows[i];
    const int line = csv.row_lines[i];
    if (row[c_status] != "done") {
      ++out.failed;
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
  if (rows.empty()) {
    sweeps_[it.name] = out;
    return;
  }
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
  out.markdown = md;
  for (const auto& claim : it.lm_claims) out.claims.push_back(check_lm_claim(claim, rows));
  const fs::path png = dir / (it.name + ".png");
  draw_plot(lm_plot_script(rows, png.string(), it.title), png.string());
  write_file_atomic(dir / "table.md", md);
  out.has_results = true;
  sweeps_[it.name] = std::move(out);
}

const SweepRun* Reproduction::pick_run(const ReproItem& from, const RunPick& p, const std::string& where) const {
  for (const auto& run : plan_of(from).runs)
    if (run.config.model.kind == p.model && run.config.segments == p.segments && int(run.config.train.seed) == p.seed)
      return &run;
  fail("{}: {}: sweep item {} has no {} run at {} segments with seed {}", m_.path, where, from.name, p.model,
       p.segments, p.seed);
}

void Reproduction::run_attention(const ReproItem& it) {
  const ReproItem& from = *m_.find(it.from);
  const fs::path dir = out_dir(it);
  create_directories_or_fail(dir);
  std::string md;
  for (size_t i = 0; i < it.runs.size(); ++i) {
    const RunPick& p = it.runs[i];
    const SweepRun* run = pick_run(from, p, fmt::format("items.{}.runs[{}]", it.name, i));
    if (run_state(*run) != RunState::done) {
      md += fmt::format("- {} at {} segments (seed {}): not trained yet (`{}`)\n", p.model, p.segments,
                        p.seed, command_of(from));
      continue;
    }
    TrainedRun trained = load_trained_run(run->dir.string(), "best");
    SampleSplit split = load_sample_split(trained.run.config.data, trained.run.meta, "test");
    if (p.sample >= split.n) fail("{}: sample {} is beyond the test split ({} samples)", it.name, p.sample, split.n);
    AttentionMaps maps = compute_attention_maps(*trained.model, trained.run.meta.vocab,
                                                split.input.data() + int64_t(p.sample) * split.seq_len,
                                                split.seq_len, trained.run.seg_len);
    AttentionSelection sel;
    const int nseg = int(maps.segments.size());
    if (p.segment >= nseg) fail("{}: segment {} is beyond the run's {} segments", it.name, p.segment, nseg);
    if (p.segment >= 0) sel.segments = {p.segment};
    else for (int s = 0; s < nseg; ++s) sel.segments.push_back(s);
    for (int l = 0; l < maps.layers; ++l) sel.layers.push_back(l);
    for (int h = 0; h < maps.heads; ++h) sel.heads.push_back(h);
    const std::string stem = fmt::format("{}_{}seg_seed{}", p.model, p.segments, p.seed);
    const fs::path png = dir / (stem + ".png");
    std::string title = fmt::format("{} - {}, {} segments, test sample {}", it.title, p.model, p.segments, p.sample);
    write_file_atomic(png, run_gnuplot(attention_gnuplot_script(maps, sel, "png", title)));
    md += fmt::format("**{} at {} segments** (run {}, test sample {}):\n\n![{}]({}/{})\n\n", p.model, p.segments,
                      run->run_id, p.sample, stem, it.name, png.filename().string());
    std::string order = write_order_text(maps, 0);
    if (!order.empty()) md += "Measured on this sample, " + order + ".\n\n";
  }
  write_file_atomic(dir / "maps.md", md);
}

void Reproduction::run_length(const ReproItem& it) {
  const ReproItem& from = *m_.find(it.from);
  const fs::path dir = out_dir(it);
  create_directories_or_fail(dir);
  std::map<std::string, std::string> data;
  for (const auto& [k, v] : plan_of(from).spec.data) data[k] = v;
  std::vector<const SweepRun*> runs;
  if (it.all_runs)
    for (const auto& run : plan_of(from).runs) runs.push_back(&run);
  for (size_t i = 0; i < it.runs.size(); ++i)
    runs.push_back(pick_run(from, it.runs[i], fmt::format("items.{}.runs[{}]", it.name, i)));
  // A results.csv like a sweep's (so `rmt table` / `rmt plot` read it): one row per run and
  // evaluation length; `segments` is the number of segments evaluated at the trained length.
  std::string csv = "model.kind,segments,model.num_mem_tokens,model.mem_len,train.seed,segment_length,"
                    "eval_length,trained_segments,acc_teacher_forced,acc_free_running,eval_seconds,status\n";
  const fs::path work = fs::path(o_.runs_dir) / it.name;
  bool free_running_differs = false;  // a one-token answer decodes as it is teacher-forced
  double eval_seconds = 0;
  int evals = 0;
  // The datasets (one per length), then the evaluations still to do, -j at a time, then each
  // read back in order.
  std::vector<fs::path> data_dirs;  // generated once, and only when some run is there to evaluate
  if (std::any_of(runs.begin(), runs.end(), [&](const SweepRun* r) { return run_state(*r) == RunState::done; }))
    for (int L : it.lengths) data_dirs.push_back(length_dataset(o_.rmt_binary, work / "data", data, L));
  std::vector<LengthEvalJob> jobs;
  for (const SweepRun* run : runs) {
    if (run_state(*run) != RunState::done) continue;
    for (size_t l = 0; l < it.lengths.size(); ++l)
      jobs.push_back({run, it.lengths[l], data_dirs[l],
                      work / "evals" / fmt::format("{}_{}.json", run->run_id, it.lengths[l])});
  }
  if (o_.jobs > 1) evaluate_lengths(o_.rmt_binary, jobs, o_.jobs);
  for (const LengthEvalJob& job : jobs) {
    const Config& c = job.run->config;
    const LengthEval e = evaluate_length(*job.run, job.data_dir, job.kept);
    free_running_differs |= !e.acc_free_running.empty() && std::stod(e.acc_free_running) != e.acc_teacher_forced;
    eval_seconds += e.seconds, ++evals;
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.1f},done\n", c.model.kind, e.segments,
                       c.model.num_mem_tokens, c.model.mem_len, c.train.seed, e.segment_length, job.length,
                       c.segments, e.acc_teacher_forced, e.acc_free_running, e.seconds);
  }
  write_file_atomic(dir / "results.csv", csv);
  CsvTable table = parse_csv(csv, (dir / "results.csv").string());
  std::string md;
  std::vector<ClaimResult> checks;
  for (const std::string metric : {"acc_teacher_forced", "acc_free_running"}) {
    if (metric == "acc_free_running" && !free_running_differs) continue;
    Pivot pivot = pivot_results(table, metric, {}, (dir / "results.csv").string());
    if (pivot.rows.empty()) continue;
    md += format_pivot(pivot, "md") + "\n";
    if (metric == std::string("acc_teacher_forced")) {
      const fs::path png = dir / (it.name + ".png");
      draw_plot(gnuplot_script(pivot, png.string(), it.title), png.string());
      md += fmt::format("![{}]({}/{})\n\n", it.name, it.name, png.filename().string());
      for (const Claim& claim : it.claims) checks.push_back(check_claim(claim, pivot));
    }
  }
  if (evals > 0)
    md += fmt::format("Evaluation: {} test splits (one thread each), {} in all.\n\n", evals, seconds_text(eval_seconds));
  if (!checks.empty()) md += claims_markdown(it, checks) + "\n";
  // The summary table's pattern column reads the checks back (the report may be written without
  // evaluating again).
  write_file_atomic(dir / "checks.json",
                    nlohmann::json{{"holding", claims_holding(checks)}, {"total", checks.size()}}.dump() + "\n");
  write_file_atomic(dir / "table.md", md);
}

int Reproduction::run(const std::vector<std::string>& names) {
  // The named items and the sweep items they read from, in manifest order.
  std::set<std::string> wanted(names.begin(), names.end());
  for (const auto& it : m_.items)
    if (wanted.count(it.name) && !it.from.empty()) wanted.insert(it.from);
  // A device this build or machine lacks: refused before any data is generated or run started.
  if (other_device() && !o_.report_only) {
    try {
      backend_by_name(o_.device);
    } catch (const Error& e) {
      fail("{} (rmt reproduce --device {})", e.what(), o_.device);
    }
  }
  int failed = 0;
  for (const auto& it : m_.items) {
    if (o_.report_only) continue;  // copy_results reads the runs finished so far
    if (!names.empty() && !wanted.count(it.name)) continue;
    if (it.kind == "sweep" || it.kind == "lm") {
      failed += run_sweep_item(it);
    } else {
      auto t0 = std::chrono::steady_clock::now();
      log(fmt::format("{}: {}", it.name, it.kind == "attention" ? "drawing attention maps" : "evaluating on longer data"));
      if (it.kind == "attention") run_attention(it);
      else run_length(it);
      const fs::path timing_file = out_dir(it) / "timing.json";
      ItemTiming timing;
      timing.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      write_timing(timing_file, timing);
    }
  }
  // Every sweep item with results is tabulated, so the report covers all that is on disk.
  for (const auto& it : m_.items) {
    if (it.kind == "sweep") summarise_sweep(it);
    if (it.kind == "lm") summarise_lm(it);
  }
  write_report();
  return failed;
}

std::string Reproduction::sweep_section(const ReproItem& it) const {
  const SweepOutcome& out = sweeps_.at(it.name);
  std::string s;
  const std::string cmd = command_of(it);
  s += fmt::format("Config: [`{}`]({}) (the sweep file: data, recipe, grid). ", it.sweep,
                   fs::relative(it.sweep, o_.out_dir).string());
  s += fmt::format("Command: `{}` (= `rmt sweep {} -j {} --runs-dir {}`, then `rmt table` and `rmt plot` of its "
                   "results.csv).\n\n", cmd, it.sweep, o_.jobs, o_.runs_dir + device_option());
  s += "The config's comment says which of the paper's ratios the scaled-down setting keeps.\n\n";
  if (!out.has_results) return s + fmt::format("*Not run yet: `{}`.*\n\n", cmd);
  if (auto p = progress_.find(it.name); p != progress_.end() && p->second.first < p->second.second)
    s += fmt::format("*In progress: {} of {} runs done; the tables, plots and checks below cover the "
                     "finished runs only (`{}` continues it).*\n\n", p->second.first, p->second.second, cmd);
  for (const auto& [metric, pivot] : out.tables) s += format_pivot(pivot, "md") + "\n";
  s += out.markdown.empty() ? "" : out.markdown + "\n";
  s += fmt::format("![{}]({}/{}.png)\n\n", it.name, it.name, it.name);
  for (const auto& cell : out.curve_cells) {
    if (cell.runs == 0) continue;
    if (cell.checks.empty())
      s += fmt::format("Learning curves of the hardest cell ({} segment{}; {} run{}, every model and seed; "
                       "validation accuracy {}; data in [learning_curves.csv]({}/learning_curves.csv)):\n\n",
                       cell.segments, cell.segments == 1 ? "" : "s", cell.runs, cell.runs == 1 ? "" : "s",
                       cell.at_stage_segments
                           ? "at the segments of the run's curriculum stage, so a curve drops where a stage begins"
                           : "at all the run's segments, whichever its curriculum stage trains on",
                       it.name);
    else
      s += fmt::format("Learning curves at {} segment{}, where {} \"{}\" fails ({} run{}, every model and seed):\n\n",
                       cell.segments, cell.segments == 1 ? "" : "s",
                       cell.checks.size() == 1 ? "the check" : "each of the checks",
                       fmt::join(cell.checks, "\", \""), cell.runs, cell.runs == 1 ? "" : "s");
    s += fmt::format("![{} learning curves at {} segment{}]({}/{})\n\n", it.name, cell.segments,
                     cell.segments == 1 ? "" : "s", it.name, cell.png);
  }
  if (!out.claims.empty()) {
    s += claims_markdown(it, out.claims);
    s += "\n";
  }
  if (out.failed > 0) s += fmt::format("{} runs failed (status and error in results.csv).\n\n", out.failed);
  return s;
}

void Reproduction::write_report() const {
  std::string s;
  s += "# The RMT paper's results, reproduced at CPU scale\n\n";
  s += fmt::format(
      "Written by `rmt reproduce` from `{}` (run it all with `make reproduce`; one item with "
      "`rmt reproduce NAME`). Every number below was measured by rmt (this report was written on {}). "
      "Items that took more than one session were trained on the machines of those sessions, whose vector "
      "units can differ (each run's results.json names its CPU and build): a run's last bits differ between "
      "them, and a run near a plateau's edge can end the other way. The "
      "paper's numbers (docs/paper.md §4, §7) are the rows marked `paper:` or quoted in each item; "
      "the paper trained 4-16 layer models for 100k+ steps on GPUs, these are 2-layer models trained "
      "on a CPU until solved or up to their figure's step ceiling, with the same recipe, stopping rule "
      "and ceiling for every model of a figure.\n\n",
      m_.path, machine_text());
  // This machine's device is described only when this call trained on it: --report-only trains
  // nothing, and may run where the device is absent ("no CUDA device" is not where runs trained).
  const std::string device_text = o_.device != "cuda" ? " (the CPU backend with its checks)"
                                  : o_.report_only    ? ""
                                                      : fmt::format(" ({})", cuda_description());
  if (other_device())
    s += fmt::format("The runs trained on device `{}`{}, with this machine's cores for their data; a "
                     "device rounds differently from the CPU, so its numbers are its own, not the CPU "
                     "report's.\n\n",
                     o_.device, device_text);
  // Summary table.
  double total = 0;
  std::string rows;
  std::map<std::string, ItemTiming> timing;
  for (const auto& it : m_.items) {
    // A sweep item without results of its config (not run, or only an earlier config's) has no
    // time of its own yet.
    const bool unrun = (it.kind == "sweep" || it.kind == "lm") && !sweeps_.at(it.name).has_results;
    const ItemTiming& t = timing[it.name] = unrun ? ItemTiming() : read_timing(out_dir(it) / "timing.json");
    total += t.wall_s;
    std::string pattern = "-";
    if (it.kind == "sweep" || it.kind == "lm") {
      const SweepOutcome& out = sweeps_.at(it.name);
      if (!out.has_results) pattern = "not run";
      else if (!out.claims.empty()) {
        pattern = fmt::format("{} of {} checks hold", claims_holding(out.claims), out.claims.size());
      }
      if (auto p = progress_.find(it.name); out.has_results && p != progress_.end() && p->second.first < p->second.second)
        pattern = fmt::format("in progress ({} of {} runs): {}", p->second.first, p->second.second, pattern);
    } else if (fs::exists(out_dir(it) / "checks.json")) {
      const fs::path file = out_dir(it) / "checks.json";
      try {
        const nlohmann::json checks = nlohmann::json::parse(read_file(file));
        if (checks.at("total").get<int>() > 0)
          pattern = fmt::format("{} of {} checks hold", checks.at("holding").get<int>(), checks.at("total").get<int>());
      } catch (const nlohmann::json::exception& e) {
        fail("{}: not the checks `rmt reproduce {}` writes ({}); run the item again", file.string(), it.name, e.what());
      }
    }
    rows += fmt::format("| [{}](#{}) | {} | {} | {} |\n", it.name, it.name, it.title, pattern,
                        t.wall_s > 0 ? seconds_text(t.wall_s) : "-");
  }
  s += fmt::format("Total wall time of the items: {} (each item's time is summed over the "
                   "`rmt reproduce` calls that worked on it).\n\n", seconds_text(total));
  s += "| item | paper | pattern | wall time |\n|---|---|---|---|\n" + rows + "\n";
  if (!m_.notes.empty()) s += m_.notes + "\n\n";
  for (const auto& it : m_.items) {
    s += fmt::format("## {}\n\n**{}.** The paper: {}\n\n", it.name, it.title, it.paper_says);
    const ItemTiming& t = timing.at(it.name);
    const std::string notes = it.notes.empty() ? "" : "**Reading.** " + it.notes + "\n\n";
    if (it.kind == "sweep" || it.kind == "lm") {
      s += sweep_section(it) + notes;
      if (t.runs > 0)
        s += fmt::format("Wall time: {} ({} runs, {} at a time; training time summed over runs {}).\n\n",
                         seconds_text(t.wall_s), t.runs, t.jobs, seconds_text(t.train_s));
      continue;
    }
    const fs::path md = out_dir(it) / (it.kind == "attention" ? "maps.md" : "table.md");
    s += fmt::format("From the runs of [{}](#{}). ", it.from, it.from);
    s += fmt::format("Command: `{}`.\n\n", command_of(it));
    s += fs::exists(md) ? read_file(md) + "\n" : fmt::format("*Not run yet: `{}`.*\n\n", command_of(it));
    s += notes;
    if (t.wall_s > 0) s += fmt::format("Wall time: {}.\n\n", seconds_text(t.wall_s));
  }
  create_directories_or_fail(o_.out_dir);
  write_file_atomic(fs::path(o_.out_dir) / "REPORT.md", s);
  log(fmt::format("wrote {}", (fs::path(o_.out_dir) / "REPORT.md").string()));
}

}  // namespace

int reproduce(const ReproManifest& manifest, const std::vector<std::string>& names, const ReproOptions& options) {
  for (const auto& n : names)
    if (!manifest.find(n)) {
      std::vector<std::string> all;
      for (const auto& it : manifest.items) all.push_back(it.name);
      fail("unknown reproduction '{}' (in {}: {})", n, manifest.path, fmt::join(all, ", "));
    }
  return Reproduction(manifest, options).run(names);
}

}  // namespace rmt
