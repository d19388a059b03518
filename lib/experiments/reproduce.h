#pragma once
// `rmt reproduce`: the paper's algorithmic results at CPU scale, from one manifest
// (experiments/reproduce/reproduce.yaml), into one report (experiments/results/REPORT.md).
//
// The manifest and its item kinds: repro_manifest.h. Each kind has its handler (repro_items.h).
// Everything is resumable: sweeps skip finished runs and resume interrupted ones; tables, plots,
// maps and the report are rewritten (atomically) from what is on disk, so a killed reproduction
// loses nothing and a re-run only does what is missing. Finished runs of an item that no attention
// or length item reads from keep their records beside its results (run_records.h), so a re-run on
// another machine restores them instead of training them again.
#include <string>
#include <vector>

#include "lib/experiments/mps.h"
#include "lib/experiments/repro_manifest.h"

namespace rmt {

struct ReproOptions {
  std::string rmt_binary;          // the executable the sweeps run (the CLI passes /proc/self/exe)
  std::string runs_dir = "runs/reproduce";
  std::string out_dir = "experiments/results";
  int jobs = 1;
  bool quiet = false;
  // Every run's device ("" = each config's own, the CPU). A run on another device is another run
  // (its RUN_ID differs, sweep.h), so its records never mix with the CPU's; the CLI gives such a
  // reproduction its own runs and output directories, and the report names the device.
  std::string device;
  MpsMode mps = MpsMode::automatic;  // how runs on a GPU share it (mps.h)
  int pack = 1;                      // runs packed per process (SweepOptions::pack)
  // Train nothing: rewrite the tables, plots and REPORT.md from the runs on disk (finished runs
  // of items in progress too) and, where an item has no runs here, from its committed results.
  bool report_only = false;
};

// Runs the named items (all when empty; an item's `from` item runs first), then writes every
// item's outputs that have results and the whole report. Returns the number of failed runs.
int reproduce(const ReproManifest& manifest, const std::vector<std::string>& names,
              const ReproOptions& options);

// How long item `item` took where its timing is recorded (OUT/ITEM/timing.json, written as it
// trains): "12 min 37 s at -j 2 (39 runs)", or "" where it has none (not run, or an item that
// reads another's runs). `rmt reproduce --list` shows it.
std::string item_time(const std::string& out_dir, const std::string& item);

}  // namespace rmt
