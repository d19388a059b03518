#pragma once
// The items of `rmt reproduce`, one handler per kind (sweep, lm, attention, length, bench), and what
// they share (ReproContext). reproduce.cpp runs the handlers in manifest order and puts their
// sections together into REPORT.md.
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/experiments/repro_claims.h"
#include "lib/experiments/repro_readings.h"
#include "lib/experiments/repro_templates.h"
#include "lib/experiments/repro_timing.h"
#include "lib/experiments/reproduce.h"
#include "lib/experiments/sweep.h"

namespace rmt {

// What every handler reads: the manifest, the options, the report's templates, and each sweep
// item's plan (planned once, on first use).
class ReproContext {
 public:
  ReproContext(const ReproManifest& manifest, const ReproOptions& options, ReportTemplates templates)
      : manifest(manifest), options(options), templates(std::move(templates)) {}

  const ReproManifest& manifest;
  const ReproOptions& options;
  const ReportTemplates templates;

  const SweepPlan& plan_of(const ReproItem& item) const;
  std::filesystem::path out_dir(const ReproItem& item) const { return std::filesystem::path(options.out_dir) / item.name; }
  // The command that runs an item, with the device when it is not the CPU.
  std::string command_of(const ReproItem& item) const;
  std::string device_option() const { return other_device() ? " --device " + options.device : ""; }
  // Whether the runs train elsewhere than on the configs' own device, the CPU.
  bool other_device() const { return !options.device.empty() && options.device != "cpu"; }
  void log(const std::string& line) const;
  // The researcher's reading of an item's results, as its section ends, its numbers filled in
  // from `data` (repro_readings.h; a reading with placeholders is left out while the item has no
  // results), then what it says outside the committed records; "" when it has neither.
  std::string reading(const ReproItem& item, const ReadingData& data) const;
  // What the item's placeholders may name (its planned runs, its metrics): repro_readings.h.
  ReadingScope reading_scope(const ReproItem& item, const ReadingData& data) const;
  // The run of sweep item `from` that `pick` names; fails naming `where` (items.X.runs[i]).
  const SweepRun* pick_run(const ReproItem& from, const RunPick& pick, const std::string& where) const;
  // An item that reads another's runs, computed in this call: its wall time into its timing.json.
  template <class Work>
  void timed(const ReproItem& item, const std::string& what, Work work) const;

 private:
  mutable std::map<std::string, SweepPlan> plans_;
};

// One kind of item.
class ItemHandler {
 public:
  virtual ~ItemHandler() = default;
  // Trains or computes what the item needs (never under --report-only); returns its failed runs.
  virtual int run() = 0;
  // After every item ran: reads its results back from disk and writes its tables and plots.
  virtual void summarise() {}
  // Its time as the report counts it (a sweep without results of its config has none yet).
  virtual ItemTiming timing() const;
  // Its cell in the report's summary table: how many of its checks hold ("-" when none).
  virtual std::string pattern() const = 0;
  // Its section of the report, below the heading that every item has.
  virtual std::string section(const ItemTiming& timing) const = 0;
  // An item that measures accuracy against length: its results.csv, a block of the report's task
  // x length heat map; empty for the others and before it has results.
  virtual std::string length_results() const { return ""; }

 protected:
  ItemHandler(const ReproItem& item, ReproContext& context) : item_(item), ctx_(context) {}
  const ReproItem& item_;
  ReproContext& ctx_;
};

// The handler of `item`'s kind.
std::unique_ptr<ItemHandler> make_sweep_handler(const ReproItem& item, ReproContext& context);
std::unique_ptr<ItemHandler> make_lm_handler(const ReproItem& item, ReproContext& context);
std::unique_ptr<ItemHandler> make_attention_handler(const ReproItem& item, ReproContext& context);
std::unique_ptr<ItemHandler> make_length_handler(const ReproItem& item, ReproContext& context);
std::unique_ptr<ItemHandler> make_bench_handler(const ReproItem& item, ReproContext& context);

// An item that computes its results in this call (attention and length, from another's runs;
// bench, of this machine), timed. Its summarise reads its primary results (results.csv or
// results.json) back and finds whether they are this config's; only then has it results: its
// section is where its runs come from, its command, the markdown it wrote (`md_file` in its
// folder), the reading and the wall time, and its pattern is how many of the checks computed from
// those results hold. Without them it is "not run", whatever an earlier report derived (tables,
// checks.json: written for readers of the folder, never read back).
class FromItemHandler : public ItemHandler {
 public:
  int run() override;
  ItemTiming timing() const override { return has_results_ ? ItemHandler::timing() : ItemTiming(); }
  std::string pattern() const override;
  std::string section(const ItemTiming& timing) const override;

 protected:
  FromItemHandler(const ReproItem& item, ReproContext& context, std::string doing, std::string md_file)
      : ItemHandler(item, context), doing_(std::move(doing)), md_file_(std::move(md_file)) {}
  virtual void compute() const = 0;  // writes the item's files under its folder
  // The metric of its reading's test values unless a placeholder names one (results.csv's column).
  virtual std::string reading_metric() const { return "acc_teacher_forced"; }
  // Whether `primary` is there; logs what an earlier report derived from it that is not reported.
  bool primary_there(const std::filesystem::path& primary) const;
  // `why` ("" = they are this config's): logs that the results in `primary` are not reported.
  bool this_config(const std::filesystem::path& primary, const std::string& why) const;
  // Summarise found results of this config with these checks: counted, and written to checks.json.
  void found_results(const std::vector<ClaimResult>& checks);
  bool has_results_ = false;

 private:
  std::string doing_, md_file_;  // what compute does, for the log; the markdown it writes
  size_t holding_ = 0, checks_ = 0;
};

template <class Work>
void ReproContext::timed(const ReproItem& item, const std::string& what, Work work) const {
  const auto t0 = std::chrono::steady_clock::now();
  log(item.name + ": " + what);
  work();
  ItemTiming timing;
  timing.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_timing(out_dir(item) / "timing.json", timing);
}

}  // namespace rmt
