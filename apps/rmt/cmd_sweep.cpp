// `rmt sweep FILE`: parses options and prints; the sweep itself is in lib/sweep.cpp.
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/error.h"
#include "lib/io.h"
#include "lib/model.h"
#include "lib/sweep.h"

namespace rmt::cli {

namespace fs = std::filesystem;

void add_sweep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "Run a grid of trainings from a sweep file (experiments/*.yaml)");
  cmd->footer(
      "A sweep file has data: (rmt generate options), base: (an rmt train config), grid: (dotted\n"
      "keys -> lists) and optionally derive: (keys -> expressions over segment_length, seq_len,\n"
      "segments). Runs go to RUNS/NAME/RUN_ID; finished runs are skipped, interrupted ones resumed.\n"
      "Results: RUNS/NAME/results.csv. Example: rmt sweep experiments/quick_copy.yaml -j 2");
  struct Args {
    std::string file, emit, runs_dir = "runs";
    int jobs = 1;
    bool dry_run = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("file", args->file, "Sweep file")->required()->check(existing_file());
  cmd->add_option("-j,--jobs", args->jobs, "Runs at a time; the cores are split between them")
      ->capture_default_str()->transform(int_range(1, kMaxThreads));
  cmd->add_flag("--dry-run", args->dry_run, "List the runs and their state; run nothing");
  cmd->add_option("--emit", args->emit, "Print one command per pending run (commands) or write a "
                  "SLURM job-array script (slurm) instead of running")->check(one_of({"commands", "slurm"}));
  cmd->add_option("--runs-dir", args->runs_dir, "Where runs go")->capture_default_str();
  cmd->callback([args] {
    if (!args->dry_run) check_output_dir("--runs-dir", args->runs_dir);
    SweepSpec spec = load_sweep(args->file);
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    // -j N splits the cores; emitted commands run elsewhere, so they take all cores there.
    int threads = args->emit.empty() ? std::max(1, cores / args->jobs) : 0;
    SweepPlan plan = plan_sweep(spec, args->runs_dir, threads);
    SweepOptions opt;
    opt.rmt_binary = fs::read_symlink("/proc/self/exe").string();
    opt.jobs = args->jobs;
    if (args->dry_run) {
      fmt::print("sweep {}: {} runs in {}\n", spec.name, plan.runs.size(), plan.sweep_dir.string());
      for (const auto& run : plan.runs)
        fmt::print("  {:<9} {}\n", run_state_name(run_state(run)), run.run_id);
      return;
    }
    if (!args->emit.empty()) {
      prepare_sweep_files(plan, opt);  // the commands need the data and the config files
      auto commands = pending_commands(plan, opt);
      if (args->emit == "commands") {
        for (const auto& c : commands) fmt::print("{}\n", c);
      } else {
        fs::path path = plan.sweep_dir / "sweep.slurm";
        write_file_atomic(path, slurm_script(plan, commands));
        fmt::print("wrote {} ({} array tasks); submit with: sbatch {}\n", path.string(), commands.size(), path.string());
      }
      return;
    }
    int failed = run_sweep(plan, opt);
    if (failed > 0) fail("{} of {} runs failed (see status/error in {})", failed, plan.runs.size(),
                         (plan.sweep_dir / "results.csv").string());
  });
}

}  // namespace rmt::cli
