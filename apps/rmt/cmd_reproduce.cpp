// `rmt reproduce [NAME...]`: parses options and prints; the reproduction is in lib/experiments/reproduce.cpp.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/experiments/reproduce.h"
#include "lib/experiments/sweep.h"

namespace rmt::cli {

namespace fs = std::filesystem;

void add_reproduce_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "reproduce", "Reproduce the paper's algorithmic results at CPU scale into one report (REPORT.md)");
  cmd->footer(
      "Runs the items of the manifest (experiments/reproduce/reproduce.yaml): sweeps of Figures 4, 5\n"
      "and 7 and Table 1, attention maps (Figures 6 and 8) and length generalisation, then writes\n"
      "OUT/REPORT.md with each item's tables beside the paper's numbers, plots, configs, commands,\n"
      "wall times, its checks against the paper's values (within the manifest's tolerance) and a\n"
      "reading whose numbers are computed from the results. Resumable: finished runs are skipped,\n"
      "interrupted ones resumed. With NAMEs, runs only those (and the sweeps they read from);\n"
      "the report always covers every item that has results.\n"
      "With --device cuda the same recipes train on a GPU, into their own directories\n"
      "(runs/reproduce-cuda, experiments/results-cuda unless --runs-dir / --out say otherwise).\n"
      "Example: rmt reproduce -j 2          rmt reproduce fig4_reverse --list\n"
      "         rmt reproduce table1_sqeq --device cuda -j 3");
  struct Args {
    std::vector<std::string> names;
    std::string manifest = "experiments/reproduce/reproduce.yaml", runs_dir = "runs/reproduce",
                out_dir = "experiments/results", device, mps = "auto";
    int jobs = 0, pack = 1;
    bool list = false, report_only = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("names", args->names, "Items to run (default: all)");
  add_jobs_option(cmd, args->jobs);
  cmd->add_option("--manifest", args->manifest, "The list of reproductions")->capture_default_str();
  auto* runs_dir = cmd->add_option("--runs-dir", args->runs_dir, "Where the runs go")->capture_default_str();
  auto* out_dir = cmd->add_option("--out", args->out_dir, "Where REPORT.md, tables and plots go")->capture_default_str();
  add_device_option(cmd, args->device, "the configs' own, cpu; another device's runs are other runs, and "
                    "--runs-dir and --out default to their names with -DEVICE added");
  add_mps_option(cmd, args->mps);
  add_pack_option(cmd, args->pack);
  cmd->add_flag("--list", args->list, "List the items, how long each took (as recorded under --out) and what "
                "each reproduces; run nothing");
  cmd->add_flag("--report-only", args->report_only,
                "Train nothing: rewrite REPORT.md, tables and plots from the runs finished so far (and, for "
                "items without runs here, from the committed results of the same config)");
  cmd->callback([args, runs_dir, out_dir] {
    if (std::string why = existing_file()(args->manifest); !why.empty()) fail("--manifest {}", why);
    ReproManifest manifest = load_manifest(args->manifest);
    for (const auto& name : args->names)  // --list NAME lists that item; an unknown one is refused
      if (!manifest.find(name)) {
        std::vector<std::string> all;
        for (const auto& it : manifest.items) all.push_back(it.name);
        fail("unknown reproduction '{}' (in {}: {})", name, manifest.path, fmt::join(all, ", "));
      }
    // Another device's runs are other runs (other RUN_IDs): their own sweeps, results and report,
    // beside the CPU's rather than over them.
    if (args->device == "cpu") args->device.clear();
    if (!args->device.empty()) {
      if (runs_dir->count() == 0) args->runs_dir += "-" + args->device;
      if (out_dir->count() == 0) args->out_dir += "-" + args->device;
    }
    if (args->list) {  // each item, and how long it took where --out records it
      size_t name_width = 22;  // the names in a column, however long the longest
      for (const auto& it : manifest.items) name_width = std::max(name_width, it.name.size());
      for (const auto& it : manifest.items)
        if (args->names.empty() || std::count(args->names.begin(), args->names.end(), it.name)) {
          const std::string time = item_time(args->out_dir, it.name);
          fmt::print("{:<{}} {:<9} {:<34} {}\n", it.name, name_width, it.kind, time.empty() ? "-" : time, it.title);
        }
      return;
    }
    check_output_dir("--runs-dir", args->runs_dir);
    check_output_dir("--out", args->out_dir);
    check_outputs_safe({{"--out", (fs::path(args->out_dir) / "REPORT.md").string()}},
                       {{"--manifest", args->manifest}});
    ReproOptions opt;
    opt.rmt_binary = fs::read_symlink("/proc/self/exe").string();
    opt.runs_dir = args->runs_dir;
    opt.out_dir = args->out_dir;
    opt.jobs = args->jobs > 0 ? args->jobs : sweep_default_jobs(device_is_gpu(args->device));
    opt.mps = parse_mps_mode(args->mps);
    opt.pack = args->pack;
    if (opt.mps == MpsMode::on && !device_is_gpu(args->device) && !opt.report_only)
      fail("--mps on: the runs are on {}; MPS shares a GPU between the runs of --device cuda",
           args->device.empty() ? "the CPU" : args->device);
    opt.report_only = args->report_only;
    opt.device = args->device;
    if (opt.report_only && !args->names.empty())
      fail("--report-only rewrites the whole report; leave out the item names ({})", fmt::join(args->names, " "));
    const int failed = reproduce(manifest, args->names, opt);
    if (failed > 0) fail("{} runs failed (see status and error in the results.csv files under {})", failed, args->runs_dir);
  });
}

}  // namespace rmt::cli
