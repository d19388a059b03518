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

std::string ReproContext::reading(const ReproItem& item, const ReadingData& data) const {
  std::string s;
  const bool placeholders = item.notes.find("{{") != std::string::npos;
  if (!item.notes.empty() && placeholders && data.results && data.in_progress)
    s += templates.render("reading_in_progress", {});
  else if (!item.notes.empty() && (data.results || !placeholders))
    s += templates.render("reading", {{"notes", fill_reading(item.notes, data, manifest.path + ": items." + item.name + ".notes")}});
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
  const fs::path md = ctx_.out_dir(item_) / md_file_;
  std::string s = t.render("from_item", {{"from", item_.from}, {"command", command}});
  s += fs::exists(md) ? read_file(md) + "\n" : t.render("not_run", {{"command", command}});
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
  const fs::path file = ctx_.out_dir(item_) / "checks.json";
  if (!fs::exists(file)) return "-";
  try {
    const nlohmann::json checks = nlohmann::json::parse(read_file(file));
    if (checks.at("total").get<int>() > 0)
      return fmt::format("{} of {} checks hold", checks.at("holding").get<int>(), checks.at("total").get<int>());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not the checks `rmt reproduce {}` writes ({}); run the item again", file.string(), item_.name, e.what());
  }
  return "-";
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
