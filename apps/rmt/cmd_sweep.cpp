// `rmt sweep FILE`: parses options and prints; the sweep itself is in lib/experiments/sweep.cpp.
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/experiments/generated_data.h"
#include "lib/experiments/sweep.h"
#include "lib/experiments/sweep_eval.h"
#include "lib/files/io.h"
#include "lib/run/config.h"

namespace rmt::cli {

namespace fs = std::filesystem;

// A resumed run keeps the thread count it started with (it is part of its saved config); say so
// where that differs from what this emit gives new runs.
static void note_resumed_threads(const SweepPlan& plan, int threads, const std::string& what) {
  for (const auto& run : plan.runs) {
    if (run_state(run) == RunState::done || !fs::exists(run.dir / "config.yaml")) continue;
    int saved = 0;
    try {
      saved = load_config((run.dir / "config.yaml").string()).train.threads;
    } catch (const Error&) {
      continue;  // `rmt train --resume` reports a broken saved config itself
    }
    if (saved != threads)
      fmt::print(stderr, "sweep: note: {} resumes with the thread count it started with ({}), not {}: a "
                 "run's thread count is part of its saved config and keeps it bit-reproducible\n", run.run_id,
                 saved == 0 ? std::string("all cores") : std::to_string(saved), what);
  }
}

void add_sweep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "Run a grid of trainings from a sweep file (experiments/*.yaml)");
  cmd->footer(fmt::format(
      "A sweep file has data: (rmt generate options, or dir: a dataset that exists, e.g. from rmt\n"
      "data import), base: (an rmt train config), grid: (dotted keys -> lists) and optionally\n"
      "derive: (keys -> expressions over segment_length, seq_len, segments). Runs go to RUNS/NAME/RUN_ID; finished runs are skipped, interrupted ones resumed.\n"
      "Results: RUNS/NAME/results.csv. Example: rmt sweep experiments/quick_copy.yaml -j 2\n"
      "An eval: block (multiples: [2, 10] of data.length, data: [DIR...]) evaluates every finished run at\n"
      "other lengths once the runs are done, kept and resumable: RUNS/NAME/length_results.csv, for\n"
      "`rmt table ... --columns multiple` (docs/experiments.md).\n"
      "\n"
      "Elsewhere: --emit commands prints one `rmt train` line per pending run, each with\n"
      "--threads-per-run threads (default 1), e.g. `rmt sweep F --emit commands | parallel -j 8`.\n"
      "--emit slurm writes RUNS/NAME/sweep.slurm, a job array with one task per pending run; each\n"
      "run trains with its task's --cpus-per-task threads (default 1); --time defaults to {};\n"
      "--partition, --account and --mem are written only when given, --gpus only for runs on a GPU\n"
      "(1 by default there); --array-limit, --prologue and --chdir fit it to a cluster, whose nodes\n"
      "may need a portable build (make NATIVE=OFF; RMT=that/rmt sbatch ...). Afterwards\n"
      "`rmt sweep F --collect` writes results.csv from the run directories (each finished run once)\n"
      "and names the runs not finished; emitting again covers exactly those (a run cut off by\n"
      "--time resumes from its last checkpoint).",
      kDefaultSlurmTime));
  struct Args {
    std::string file, emit, runs_dir = "runs", device, mps = "auto";
    std::vector<std::string> sets;
    int jobs = 0, threads_per_run = 1, pack = 1, threads = -1;
    bool dry_run = false, collect = false;
    SlurmOptions slurm;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("file", args->file, "Sweep file")->required()->check(existing_file());
  add_jobs_option(cmd, args->jobs);
  add_mps_option(cmd, args->mps);
  add_pack_option(cmd, args->pack);
  cmd->add_option("--set", args->sets,
                  "Override a config key in every run: --set train.max_steps=100 (repeatable; not a key the "
                  "grid or derive: sets; the runs are then other runs, with other RUN_IDs)");
  cmd->add_option("--threads", args->threads,
                  "Threads of each run (default: the cores split between the -j runs; 1 with --pack). Not part "
                  "of a RUN_ID; a started run resumes with the thread count it started with")
      ->transform(int_range(0, kMaxThreads));
  auto* dry_run = cmd->add_flag("--dry-run", args->dry_run, "List the runs and their state; run nothing");
  auto* emit = cmd->add_option("--emit", args->emit, "Print one command per pending run (commands) or write a "
                  "SLURM job-array script (slurm) instead of running")->check(one_of({"commands", "slurm"}));
  cmd->add_flag("--collect", args->collect, "Write results.csv from the run directories (after runs "
                "started by --emit finished); run nothing")->excludes(dry_run)->excludes(emit);
  cmd->add_option("--runs-dir", args->runs_dir, "Where runs go")->capture_default_str();
  add_device_option(cmd, args->device, "the sweep file's device, cpu unless it sets one; a run on "
                    "another device than cpu is another run (another RUN_ID)");
  const std::string commands_group = "--emit commands", slurm_group = "--emit slurm (sbatch resources per run)";
  cmd->add_option("--threads-per-run", args->threads_per_run, "Threads of each emitted command")
      ->capture_default_str()->transform(int_range(1, kMaxThreads))->group(commands_group);
  cmd->add_option("--cpus-per-task", args->slurm.cpus_per_task, "Cores per run; its train.threads")
      ->capture_default_str()->transform(int_range(1, kMaxThreads))->group(slurm_group);
  // The SLURM values' empty form is checked with their other forms (check_slurm_option).
  checks_own_empty_value(cmd->add_option("--time", args->slurm.time, "Time limit per run: MM, HH:MM:SS or D-HH:MM:SS")
                             ->capture_default_str()->group(slurm_group));
  checks_own_empty_value(cmd->add_option("--mem", args->slurm.mem, "Memory per run, e.g. 4G or 4000M")->group(slurm_group));
  checks_own_empty_value(cmd->add_option("--partition", args->slurm.partition, "Partition(s)")->group(slurm_group));
  checks_own_empty_value(cmd->add_option("--account", args->slurm.account, "Account to charge")->group(slurm_group));
  checks_own_empty_value(cmd->add_option("--gpus", args->slurm.gpus, "GPUs per run: N or TYPE:N (only requests them; "
                                         "the runs use one with --device cuda; default 1 for runs on cuda, "
                                         "refused for runs on the CPU)")->group(slurm_group));
  cmd->add_option("--array-limit", args->slurm.array_limit, "At most N of the array's tasks at once (sbatch --array=...%N)")
      ->transform(int_range(1, kMaxArrayLimit))->group(slurm_group);
  cmd->add_option("--prologue", args->slurm.prologue, "A file of shell lines each task runs first (module loads, "
                  "a virtual environment), copied into the script")->check(existing_file())->group(slurm_group);
  cmd->add_option("--chdir", args->slurm.chdir, "This directory as the nodes see it (sbatch --chdir): the script's "
                  "paths are relative to the directory rmt sweep runs in; default: the one sbatch is called from")
      ->group(slurm_group);
  cmd->callback([args, cmd] {
    // Options of one output mode given with another: a command line of the wrong shape (exit 2).
    for (const char* name : {"--cpus-per-task", "--time", "--mem", "--partition", "--account", "--gpus",
                             "--array-limit", "--prologue", "--chdir"})
      if (cmd->count(name) > 0 && args->emit != "slurm")
        throw CLI::RequiresError(fmt::format("{} is for --emit slurm only{}", name,
                                             std::string(name) == "--cpus-per-task"
                                                 ? " (--emit commands takes --threads-per-run; -j N splits this machine's cores)"
                                                 : ""),
                                 CLI::ExitCodes::RequiresError);
    if (cmd->count("--pack") > 0 && (!args->emit.empty() || args->collect))
      throw CLI::RequiresError(fmt::format("--pack is for the runs this command trains, not for {}",
                                           args->collect ? "--collect" : "--emit"),
                               CLI::ExitCodes::RequiresError);
    if (cmd->count("--mps") > 0 && (!args->emit.empty() || args->collect))
      throw CLI::RequiresError(fmt::format("--mps is for the runs this command trains, not for {} (start an MPS "
                                           "daemon where those runs go: nvidia-cuda-mps-control -d)",
                                           args->collect ? "--collect" : "--emit"),
                               CLI::ExitCodes::RequiresError);
    if (cmd->count("--threads-per-run") > 0 && args->emit != "commands")
      throw CLI::RequiresError(args->emit == "slurm"
                                   ? "--threads-per-run is for --emit commands only (under SLURM each run takes "
                                     "its task's cores: --cpus-per-task)"
                                   : "--threads-per-run is for --emit commands only (-j N splits this machine's cores)",
                               CLI::ExitCodes::RequiresError);
    if (args->emit == "slurm") {  // before any file is written
      // A value given on the command line is checked as given, an empty one too (in SlurmOptions
      // empty means "not given", which would drop `--mem ''` silently).
      const SlurmOptions& o = args->slurm;
      for (const auto& [name, value] : {std::pair{"--time", &o.time}, std::pair{"--mem", &o.mem},
                                        std::pair{"--partition", &o.partition}, std::pair{"--account", &o.account},
                                        std::pair{"--gpus", &o.gpus}})
        if (cmd->count(name) > 0) check_slurm_option(name, *value);
      check_slurm_options(o);
    }
    if (!args->dry_run) check_output_dir("--runs-dir", args->runs_dir);
    SweepSpec spec = load_sweep(args->file);
    for (const std::string& assignment : args->sets) apply_sweep_override(spec, assignment, args->device);
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    if (args->jobs == 0)
      args->jobs = sweep_default_jobs(device_is_gpu(args->device.empty() ? spec.base.device : args->device));
    // -j N splits the cores; emitted commands set their thread count on their command line.
    // Packed runs compute with one thread each (the pack runs several at a time).
    int threads = !args->emit.empty() ? 0 : args->pack > 1 ? 1 : std::max(1, cores / args->jobs);
    if (args->threads >= 0) {
      if (!args->emit.empty())
        throw CLI::RequiresError("--threads is for the runs this command trains (--emit commands takes "
                                 "--threads-per-run, --emit slurm --cpus-per-task)", CLI::ExitCodes::RequiresError);
      if (args->pack > 1 && args->threads != 1)
        fail("--threads {} with --pack {}: a packed run computes with one thread", args->threads, args->pack);
      check_threads(args->threads, "--threads");
      threads = args->threads;
    }
    SweepPlan plan = plan_sweep(spec, args->runs_dir, threads, args->device);
    // The sweep's own files must not be written over the sweep file (a sweep file kept beside
    // its results, or named as one of them).
    check_outputs_not_inputs({{"--runs-dir", (plan.sweep_dir / "results.csv").string()},
                              {"--runs-dir", (plan.sweep_dir / "sweep.slurm").string()}},
                             {{"the sweep file", args->file}});
    SweepOptions opt;
    opt.rmt_binary = fs::read_symlink("/proc/self/exe").string();
    opt.jobs = args->jobs;
    opt.mps = parse_mps_mode(args->mps);
    opt.pack = args->pack;
    if (args->dry_run) {
      check_sweep_runnable(plan, opt);
      fmt::print("sweep {}: {} runs in {}\n", spec.name, plan.runs.size(), plan.sweep_dir.string());
      for (const auto& run : plan.runs)
        fmt::print("  {:<9} {}\n", run_state_name(run_state(run)), run.run_id);
      if (spec.eval)
        fmt::print("eval: {} evaluations at other lengths of the finished runs still to do (more as runs "
                   "finish)\n", pending_evaluations(plan));
      return;
    }
    if (args->collect) {
      // Runs started elsewhere (an emitted array or commands) each finished into their own
      // directory; results.csv is rebuilt from those, so each run is in it once. Not from runs
      // trained on data the sweep file no longer asks for.
      for (const auto& d : plan.datasets)
        if (!d.generate_args.empty() && fs::exists(fs::path(d.dir) / "meta.yaml"))
          check_generated_dataset(d.dir, d.generate_args);
      check_finished_runs_data(plan);
      write_results_csv(plan);
      std::vector<std::string> unfinished;
      for (const auto& run : plan.runs)
        if (RunState s = run_state(run); s != RunState::done)
          unfinished.push_back(fmt::format("{} ({})", run.run_id, run_state_name(s)));
      fs::path csv = plan.sweep_dir / "results.csv";
      fmt::print("sweep {}: {} of {} runs done; wrote {}\n", spec.name, plan.runs.size() - unfinished.size(),
                 plan.runs.size(), csv.string());
      if (spec.eval) {
        const size_t missing = write_length_results(plan);
        fmt::print("sweep {}: wrote {}{}\n", spec.name, (plan.sweep_dir / "length_results.csv").string(),
                   missing == 0 ? "" : fmt::format(" without {} evaluations at other lengths not done yet (`rmt sweep {}` "
                                                   "evaluates them once the runs are done)", missing, args->file));
      }
      if (!unfinished.empty()) {
        const size_t shown = std::min<size_t>(unfinished.size(), 10);
        std::string names = fmt::format("{}", fmt::join(unfinished.begin(), unfinished.begin() + long(shown), ", "));
        if (shown < unfinished.size()) names += fmt::format(" and {} more", unfinished.size() - shown);
        fail("{} of {} runs are not done: {}; failed ones have their error in {} (emit again to run them)",
             unfinished.size(), plan.runs.size(), names, csv.string());
      }
      return;
    }
    if (!args->emit.empty()) {
      const bool slurm = args->emit == "slurm";
      const int run_threads = slurm ? args->slurm.cpus_per_task : args->threads_per_run;
      prepare_sweep_files(plan, opt);  // the commands need the data and the config files
      note_resumed_threads(plan, run_threads, slurm ? fmt::format("--cpus-per-task {}", run_threads)
                                                    : fmt::format("--threads-per-run {}", run_threads));
      if (!slurm) {
        for (const auto& c : pending_commands(plan, opt, std::to_string(run_threads))) fmt::print("{}\n", c);
        return;
      }
      size_t pending = 0;
      for (const auto& run : plan.runs) pending += run_state(run) != RunState::done;
      if (pending == 0) {
        fmt::print("sweep {}: all {} runs are done; nothing to submit. `rmt sweep {} --collect` writes "
                   "results.csv\n", spec.name, plan.runs.size(), args->file);
        return;
      }
      fs::path path = plan.sweep_dir / "sweep.slurm";
      write_file_atomic(path, slurm_script(plan, opt, args->slurm));
      warn_native_build_for_cluster();
      fmt::print("wrote {} ({} array task{}, {} core{} each); submit with: sbatch {}\n", path.string(), pending,
                 pending == 1 ? "" : "s", run_threads, run_threads == 1 ? "" : "s", path.string());
      return;
    }
    int failed = run_sweep(plan, opt);
    // eval: every finished run at other lengths, one thread each, as many at a time as cores or -j.
    run_sweep_evaluations(plan, args->jobs > 0 ? args->jobs : int(std::max(1u, std::thread::hardware_concurrency())),
                          false);
    if (failed > 0) fail("{} of {} runs failed (see status/error in {})", failed, plan.runs.size(),
                         (plan.sweep_dir / "results.csv").string());
  });
}

}  // namespace rmt::cli
