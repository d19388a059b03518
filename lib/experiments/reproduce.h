#pragma once
// `rmt reproduce`: the paper's algorithmic results at CPU scale, from one manifest
// (experiments/reproduce/reproduce.yaml), into one report (experiments/results/REPORT.md).
//
// The manifest is a map of items, run in file order. Each item is one of:
//   sweep:     a sweep file (experiments/reproduce/*.yaml) run like `rmt sweep`, then tabulated
//              per metric beside the paper's numbers (experiments/paper_results.yaml), plotted,
//              and checked against the paper's pattern, written as claims:
//                {text, model, segments, min | max}      the model's mean is >= min / <= max
//                {text, model, segments, above: MODEL}   its mean is above the other model's
//              each on the item's first metric unless the claim names its own (metric: ...)
//   attention: attention maps (docs/paper.md §4, Figures 6 and 8) of chosen runs of a sweep item.
//   length:    runs of a sweep item evaluated on longer datasets of the same task at the trained
//              segment length (length generalisation), tabulated and plotted.
//   lm:        a language-model sweep (text data), tabulated one row per run (model, cache,
//              memory, BPTT, test bpc), plotted as bpc against the cache / memory size, and checked
//              against claims comparing two runs:
//                {text, run: SEL, below: SEL, margin: M}  run's test bpc < the other's + M (M = 0)
//              SEL = {model, cache, memory, bptt} (cache, memory, bptt optional: any)
// Everything is resumable: sweeps skip finished runs and resume interrupted ones; tables, plots,
// maps and the report are rewritten (atomically) from what is on disk, so a killed reproduction
// loses nothing and a re-run only does what is missing. Finished runs of an item that no attention
// or length item reads from keep their records beside its results (run_records.h), so a re-run on
// another machine restores them instead of training them again.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/experiments/mps.h"

namespace rmt {

struct Claim {
  std::string text, model;       // model: a model kind (baseline, mt, xl, rmt, xl_rmt)
  std::vector<int> segments;     // where it is checked (each one)
  std::optional<double> min, max;
  std::string above;             // another model kind
  std::string metric;            // "" = the item's first metric
};

struct LmSelector {              // runs of an lm item: -1 / unset = any
  std::string model;
  int cache = -1, memory = -1;
  std::optional<int> bptt;
};

struct LmClaim {
  std::string text;
  LmSelector run, below;
  double margin = 0;
};

struct RunPick {                 // one run of a sweep item
  std::string model;             // model kind
  int segments = 0;
  int seed = 1;
  int sample = 0, segment = -1;  // attention: which test sample, which segment (-1: all)
};

struct ReproItem {
  std::string name, kind;        // kind: sweep | attention | length | lm
  std::string title, paper_says; // the figure or table, and the paper's finding in one line
  std::string notes;             // the researcher's reading of the results (printed after them)
  // sweep
  std::string sweep;             // the sweep file
  std::string paper_section;     // section of the paper file ("" = none)
  std::vector<std::string> metrics;  // first = the one the claims and the plot use
  std::vector<Claim> claims;
  std::vector<LmClaim> lm_claims;  // lm items
  // attention and length
  std::string from;              // the sweep item whose runs are used
  std::vector<RunPick> runs;
  bool all_runs = false;         // length: `runs: all`, every run of the sweep
  std::vector<int> lengths;      // length: the task lengths (generate --length) to evaluate on
};

struct ReproManifest {
  std::string path, paper_file;  // paper_file: experiments/paper_results.yaml
  std::string notes;             // printed under the report's summary table
  std::vector<ReproItem> items;
  const ReproItem* find(const std::string& name) const;
};

// Reads and checks the manifest: unknown keys, unknown item kinds, claims without a bound,
// items that refer to a missing or later sweep item are errors naming the file and item.
ReproManifest load_manifest(const std::string& path);

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

// Claim check on a pivoted table: "holds" / "fails" / "no data" and the numbers it used.
struct ClaimResult {
  enum State { holds, fails, no_data } state = no_data;
  std::string detail;
  std::vector<int> failing_segments;  // the claim's segment counts where it fails
};
struct Pivot;
ClaimResult check_claim(const Claim& claim, const Pivot& pivot);

}  // namespace rmt
