// `rmt reproduce`: runs the manifest's items, each by the handler of its kind (repro_items.h),
// then puts the report (REPORT.md) together: its header and summary table, then each item's
// section. The report's fixed prose is in the templates beside the manifest (repro_templates.h).
#include "lib/experiments/reproduce.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/provenance.h"
#include "lib/experiments/repro_items.h"
#include "lib/experiments/results_heatmap.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

// The templates the report is written from (experiments/reproduce/report_templates.md).
const std::vector<std::string> kReportTemplates = {"report", "device", "item_heading", "reading", "not_run",
                                                   "in_progress", "reading_in_progress", "sweep_item", "runs_provenance", "sweep_wall_time", "length_heatmap", "from_item",
                                                   "bench_item", "wall_time", "outside_records"};

const SweepPlan& ReproContext::plan_of(const ReproItem& item) const {
  auto found = plans_.find(item.name);
  if (found == plans_.end()) {
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = options.pack > 1 ? 1 : std::max(1, cores / options.jobs);  // packed runs compute with one each
    found = plans_.emplace(item.name, plan_sweep(load_sweep(item.sweep), options.runs_dir, threads, options.device)).first;
  }
  return found->second;
}

std::string ReproContext::command_of(const ReproItem& item) const {
  return fmt::format("rmt reproduce {}{}", item.name, device_option());
}

void ReproContext::log(const std::string& line) const {
  if (!options.quiet) fmt::print(stderr, "reproduce: {}\n", line);
}

const SweepRun* ReproContext::pick_run(const ReproItem& from, const RunPick& p, const std::string& where) const {
  for (const auto& run : plan_of(from).runs)
    if (run.config.model.kind == p.model && run.config.segments == p.segments && int(run.config.train.seed) == p.seed)
      return &run;
  fail("{}: {}: sweep item {} has no {} run at {} segments with seed {}", manifest.path, where, from.name, p.model,
       p.segments, p.seed);
}

ReadingScope ReproContext::reading_scope(const ReproItem& item, const ReadingData& data) const {
  ReadingScope scope;
  auto add_run = [&](const SweepRun& run, bool segments) {
    scope.models.insert(run.config.model.kind);
    if (segments) scope.segments.insert(std::to_string(run.config.segments));
    scope.seeds.insert(std::to_string(run.config.train.seed));
  };
  if (const auto* sweep = std::get_if<SweepItem>(&item.part)) {
    for (const SweepRun& run : plan_of(item).runs) add_run(run, true);
    scope.metrics.insert(sweep->metrics.begin(), sweep->metrics.end());
  } else if (std::holds_alternative<LmItem>(item.part)) {
    for (const SweepRun& run : plan_of(item).runs) add_run(run, true);
    scope.metrics = {"bpc", "loss"};
  } else if (const auto* a = std::get_if<AttentionItem>(&item.part)) {
    // Every seed of each of its cells.
    for (const SweepRun& run : plan_of(*manifest.find(item.from)).runs)
      for (const RunPick& pick : a->runs)
        if (run.config.model.kind == pick.model && run.config.segments == pick.segments) add_run(run, true);
    scope.metrics.insert(a->measures.begin(), a->measures.end());
  } else if (const auto* l = std::get_if<LengthItem>(&item.part)) {
    // Its segments are the evaluated ones, known from its results (none yet: not checked).
    for (const SweepRun& run : plan_of(*manifest.find(item.from)).runs)
      if (l->all_runs || std::any_of(l->runs.begin(), l->runs.end(), [&](const RunPick& p) {
            return run.config.model.kind == p.model && run.config.segments == p.segments &&
                   int(run.config.train.seed) == p.seed;
          }))
        add_run(run, false);
    if (data.results)
      if (const int c = data.results->column("segments"); c >= 0)
        for (const auto& row : data.results->rows) scope.segments.insert(row[size_t(c)]);
    scope.metrics = {"acc_teacher_forced", "acc_free_running"};
  }
  return scope;
}

namespace {
std::string reading_where(const ReproManifest& manifest, const ReproItem& item) {
  return manifest.path + ": items." + item.name + ".notes";
}
}  // namespace

std::string ReproContext::reading(const ReproItem& item, const ReadingData& data) const {
  std::string s;
  const std::string where = reading_where(manifest, item);
  // Checked whether or not the item has results yet (reproduce checks it before any work too;
  // here with the segments a length item's results give).
  check_reading_scope(item.notes, reading_scope(item, data), where);
  const bool placeholders = item.notes.find("{{") != std::string::npos;
  if (!item.notes.empty() && placeholders && data.results && data.in_progress)
    s += templates.render("reading_in_progress", {});
  else if (!item.notes.empty() && (data.results || !placeholders))
    s += templates.render("reading", {{"notes", fill_reading(item.notes, data, where)}});
  if (!item.outside_records.empty()) s += templates.render("outside_records", {{"text", item.outside_records}});
  return s;
}

ItemTiming ItemHandler::timing() const { return read_timing(ctx_.out_dir(item_) / "timing.json"); }

int FromItemHandler::run() {
  ctx_.timed(item_, doing_, [&] { compute(); });
  return 0;
}

std::string FromItemHandler::section(const ItemTiming& timing) const {
  const ReportTemplates& t = ctx_.templates;
  const std::string command = ctx_.command_of(item_);
  std::string s = t.render("from_item", {{"from", item_.from}, {"command", command}});
  if (!has_results_) return s + t.render("not_run", {{"command", command}}) + ctx_.reading(item_, ReadingData());
  s += read_file(ctx_.out_dir(item_) / md_file_) + "\n";
  // A length or attention item's reading is computed from its results.csv (one row per run, and
  // per evaluated length).
  const fs::path results = ctx_.out_dir(item_) / "results.csv";
  std::optional<CsvTable> csv;
  if (fs::exists(results)) csv = parse_csv(read_file(results), results.string());
  s += ctx_.reading(item_, csv ? ReadingData{&*csv, reading_metric(), {}} : ReadingData());
  if (timing.wall_s > 0) s += t.render("wall_time", {{"wall", seconds_text(timing.wall_s)}});
  return s;
}

std::string FromItemHandler::pattern() const {
  if (!has_results_) return "not run";
  return checks_ > 0 ? fmt::format("{} of {} checks hold", holding_, checks_) : "-";
}

bool FromItemHandler::primary_there(const fs::path& primary) const {
  if (fs::exists(primary)) return true;
  std::vector<std::string> derived;
  for (const std::string& file : {md_file_, std::string("checks.json")})
    if (fs::exists(ctx_.out_dir(item_) / file)) derived.push_back(file);
  if (!derived.empty())
    ctx_.log(fmt::format("{}: {} is not there: {} (derived from it by an earlier report) not reported", item_.name,
                         primary.string(), fmt::join(derived, ", ")));
  return false;
}

bool FromItemHandler::this_config(const fs::path& primary, const std::string& why) const {
  if (why.empty()) return true;
  ctx_.log(fmt::format("{}: {} holds the results of an earlier config ({}); not reported", item_.name,
                       primary.string(), why));
  return false;
}

void FromItemHandler::found_results(const std::vector<ClaimResult>& checks) {
  has_results_ = true;
  holding_ = size_t(claims_holding(checks)), checks_ = checks.size();
  write_file_atomic(ctx_.out_dir(item_) / "checks.json",
                    nlohmann::json{{"holding", holding_}, {"total", checks_}}.dump() + "\n");
}

namespace {

// The handler of each kind.
std::unique_ptr<ItemHandler> make_handler(const ReproItem& item, ReproContext& context) {
  using Make = std::unique_ptr<ItemHandler> (*)(const ReproItem&, ReproContext&);
  static const std::map<std::string, Make> makers = {{"sweep", make_sweep_handler},
                                                     {"lm", make_lm_handler},
                                                     {"attention", make_attention_handler},
                                                     {"length", make_length_handler},
                                                     {"bench", make_bench_handler}};
  return makers.at(item.kind)(item, context);  // the manifest admits these kinds only
}

void write_report(const ReproContext& ctx, const std::vector<std::unique_ptr<ItemHandler>>& handlers) {
  const ReproOptions& o = ctx.options;
  const ReportTemplates& t = ctx.templates;
  const std::vector<ReproItem>& items = ctx.manifest.items;
  // This machine's device is described only when this call trained on it: --report-only trains
  // nothing, and may run where the device is absent ("no CUDA device" is not where runs trained).
  std::string device;
  if (ctx.other_device()) {
    const std::string device_text = o.device != "cuda" ? " (the CPU backend with its checks)"
                                    : o.report_only    ? ""
                                                       : fmt::format(" ({})", cuda_description());
    device = t.render("device", {{"device", o.device}, {"device_text", device_text}});
  }
  double total = 0;
  std::string rows;
  std::vector<ItemTiming> timings;
  for (size_t i = 0; i < items.size(); ++i) {
    timings.push_back(handlers[i]->timing());
    total += timings.back().wall_s;
    rows += fmt::format("| [{}](#{}) | {} | {} | {} |\n", items[i].name, items[i].name, items[i].title,
                        handlers[i]->pattern(), timings.back().wall_s > 0 ? seconds_text(timings.back().wall_s) : "-");
  }
  std::string s = t.render("report", {{"manifest", ctx.manifest.path},
                                      {"device", device},
                                      {"total_time", seconds_text(total)},
                                      {"summary_rows", rows}});
  if (!ctx.manifest.notes.empty()) s += ctx.manifest.notes + "\n\n";
  for (size_t i = 0; i < items.size(); ++i) {
    s += t.render("item_heading", {{"name", items[i].name}, {"title", items[i].title},
                                   {"paper_says", items[i].paper_says}});
    s += handlers[i]->section(timings[i]);
  }
  // The length items side by side: task x length (BABILong's convention).
  std::vector<std::string> length_csvs;
  for (const auto& handler : handlers)
    if (const std::string csv = handler->length_results(); !csv.empty()) length_csvs.push_back(csv);
  if (!length_csvs.empty()) {
    draw_results_heatmap(length_csvs, "acc_teacher_forced", (fs::path(o.out_dir) / "length_heatmap.png").string(),
                         "test accuracy (teacher-forced) by task and number of segments");
    s += t.render("length_heatmap", {{"image", "length_heatmap.png"}});
  }
  create_directories_or_fail(o.out_dir);
  write_file_atomic(fs::path(o.out_dir) / "REPORT.md", s);
  ctx.log(fmt::format("wrote {}", (fs::path(o.out_dir) / "REPORT.md").string()));
}

}  // namespace

int reproduce(const ReproManifest& manifest, const std::vector<std::string>& names, const ReproOptions& options) {
  for (const auto& n : names)
    if (!manifest.find(n)) {
      std::vector<std::string> all;
      for (const auto& it : manifest.items) all.push_back(it.name);
      fail("unknown reproduction '{}' (in {}: {})", n, manifest.path, fmt::join(all, ", "));
    }
  // The named items and the sweep items they read from, in manifest order.
  std::set<std::string> wanted(names.begin(), names.end());
  for (const auto& it : manifest.items)
    if (wanted.count(it.name) && !it.from.empty()) wanted.insert(it.from);
  // A device this build or machine lacks: refused before any data is generated or run started.
  if (!options.device.empty() && options.device != "cpu" && !options.report_only) {
    try {
      backend_by_name(options.device);
    } catch (const Error& e) {
      fail("{} (rmt reproduce --device {})", e.what(), options.device);
    }
  }
  // The templates are read before any work, so that a broken one costs no training.
  ReproContext ctx(manifest, options, ReportTemplates::load(report_templates_file(manifest.path), kReportTemplates));
  // So are the readings' arguments (what a reading may name is known from the plans): a typo is
  // refused before the runs, not after them.
  for (const auto& it : manifest.items)
    check_reading_scope(it.notes, ctx.reading_scope(it, ReadingData()), reading_where(manifest, it));
  std::vector<std::unique_ptr<ItemHandler>> handlers;
  for (const auto& it : manifest.items) handlers.push_back(make_handler(it, ctx));
  int failed = 0;
  for (size_t i = 0; i < manifest.items.size(); ++i) {
    if (options.report_only) break;  // the handlers' summarise reads the runs finished so far
    if (!names.empty() && !wanted.count(manifest.items[i].name)) continue;
    failed += handlers[i]->run();
  }
  // Every item with results is summarised, so the report covers all that is on disk.
  for (auto& handler : handlers) handler->summarise();
  write_report(ctx, handlers);
  return failed;
}

}  // namespace rmt
