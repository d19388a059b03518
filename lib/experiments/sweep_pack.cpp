// A sweep's packed tasks (sweep_internal.h): which runs share a pack, and the list a pack's
// `rmt train-pack` process reads.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/sweep.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/files/io.h"
#include "lib/run/train.h"

namespace rmt::sweep_internal {

namespace fs = std::filesystem;

// The runs a run can be packed with, as text; "" = it trains alone.
static std::string pack_key(const SweepRun& run) {
  std::string shape = pack_shape(run.config);
  if (shape.empty()) return "";
  if (fs::exists(run.dir / "config.yaml")) {  // a started run resumes with its own saved config
    try {
      if (load_config((run.dir / "config.yaml").string()).train.threads != 1) return "";
    } catch (const Error&) {
      return "";  // `rmt train --resume` reports a broken saved config itself
    }
  }
  return shape + " | data " + run.config.data;
}

std::vector<SweepTask> sweep_tasks(const SweepPlan& plan, const std::vector<size_t>& queue, int pack, int jobs) {
  std::vector<SweepTask> tasks;
  if (pack <= 1) {
    for (size_t i : queue) tasks.push_back({{i}, false, ""});
    return tasks;
  }
  std::vector<std::string> keys;  // groups in the order of their first run
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i : queue) {
    const std::string key = pack_key(plan.runs[i]);
    if (key.empty()) {
      tasks.push_back({{i}, false, ""});
      continue;
    }
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(i);
  }
  for (const std::string& key : keys) {
    const std::vector<size_t>& runs = groups[key];
    // At most `jobs` processes for one shape, each with at least `pack` runs where there are enough.
    const size_t n = runs.size();
    const size_t parts = std::max<size_t>(1, std::min<size_t>(size_t(jobs), n / size_t(pack)));
    for (size_t p = 0; p < parts; ++p) {
      SweepTask t;
      t.runs.assign(runs.begin() + long(p * n / parts), runs.begin() + long((p + 1) * n / parts));
      t.packed = t.runs.size() > 1;
      t.id = fmt::format("{}-pack{}", plan.runs[t.runs[0]].run_id, t.runs.size());
      tasks.push_back(t);
    }
  }
  return tasks;
}

fs::path pack_log(const SweepPlan& plan, const SweepTask& task) { return plan.sweep_dir / "packs" / (task.id + ".log"); }

std::vector<std::string> pack_args(const SweepPlan& plan, const SweepTask& task, int pack, int threads) {
  std::string list;
  for (size_t i : task.runs) {
    const SweepRun& run = plan.runs[i];
    // As train_args: a started run resumes from its own saved config.
    const std::vector<std::string> args = train_args(plan, run);
    const bool resume = std::find(args.begin(), args.end(), "--resume") != args.end();
    list += fmt::format("{}\t{}\t{}\n", args[2], run.dir.string(), resume ? "resume" : "new");
  }
  const fs::path file = plan.sweep_dir / "packs" / (task.id + ".tsv");
  fs::create_directories(file.parent_path());
  write_file_atomic(file, list);
  return {"train-pack", file.string(), "--pack", std::to_string(pack), "--threads", std::to_string(threads)};
}

}  // namespace rmt::sweep_internal
