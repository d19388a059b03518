#pragma once
// The reproduction manifest (experiments/reproduce/reproduce.yaml): a map of items, run in file
// order. Each item has a common part (name, kind, title, the paper's finding, the reading) and
// the part of its kind:
//   sweep:     a sweep file (experiments/reproduce/*.yaml) run like `rmt sweep`, then tabulated
//              per metric beside the paper's numbers (experiments/paper_results.yaml), plotted,
//              and checked against the paper's pattern, written as claims:
//                {text, model, segments, paper: V}       the model's mean is within the manifest's
//                                                         tolerance of the paper's value V (one per
//                                                         segment count, or one for all)
//                {text, model, segments, min | max}      the model's mean is >= min / <= max (a bound
//                                                         of the project's, where the paper has no value)
//                {text, model, segments, above: MODEL}   its mean is above the other model's by more
//                                                         than the tolerance
//              each on the item's first metric unless the claim names its own (metric: ...)
//   attention: attention maps (docs/paper.md §4, Figures 6 and 8) of chosen cells of a sweep item:
//              the measures of lib/experiments/attention_readings.h over every seed of each cell
//              and `samples` test samples, tabulated per measure (mean over seeds) and checked
//              against claims of the project's own ({text, model, segments, min | max | above,
//              metric: MEASURE}; the paper gives no numbers for its maps), and one map drawn per
//              cell (of `seed`, default the cell's lowest, and `sample`).
//   length:    runs of a sweep item evaluated on longer datasets of the same task at the trained
//              segment length (length generalisation), tabulated and plotted.
//   lm:        a language-model sweep (text data), tabulated one row per run (model, cache,
//              memory, BPTT, test bpc), plotted as bpc against the cache / memory size, and checked
//              against claims comparing two runs:
//                {text, run: SEL, below: SEL, margin: M}  run's test bpc < the other's + M (M = 0)
//              SEL = {model, cache, memory, bptt} (cache, memory, bptt optional: any)
//   bench:     a benchmark of this machine (`bench: diagonal`, armt's evaluation by diagonals
//              against segment by segment, `rmt bench --diagonal`) at each of `threads`, its
//              results.json committed; checked against the project's bound `min_speedup` at each.
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace rmt {

struct Claim {
  std::string text, model;       // model: a model kind (baseline, mt, xl, rmt, xl_rmt, armt)
  std::vector<int> segments;     // where it is checked (each one)
  std::optional<double> min, max;
  std::string above;             // another model kind
  std::string metric;            // "" = the item's first metric
  // The paper's value at each of `segments` (one value: the same at each; empty: none). With it
  // the claim holds where the measured mean is within the manifest's tolerance of it.
  std::vector<double> paper;
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
  bool seed_given = false;       // attention: without one, the map is of the cell's lowest seed
  int sample = 0, segment = -1;  // attention: the drawn map's test sample and segment (-1: all)
};

// The part of each kind.
struct SweepItem {
  std::string paper_section;         // section of the paper file ("" = none)
  std::vector<std::string> metrics;  // first = the one the claims and the plot use
  std::vector<Claim> claims;         // each with its metric filled in
};
struct LmItem {
  std::vector<LmClaim> claims;
};
struct AttentionItem {
  std::vector<RunPick> runs;         // cells: each measured over every seed of its model and segments
  int samples = 100;                 // test samples measured per run (the first ones of the split)
  std::vector<std::string> measures; // tabulated, in order (default: every measure); first = the reading's
  std::vector<Claim> claims;         // each on one of `measures` (default: the first)
};
struct LengthItem {
  std::vector<RunPick> runs;
  bool all_runs = false;             // `runs: all`, every run of the sweep
  std::vector<int> lengths;          // the task lengths (generate --length) to evaluate on
  std::vector<Claim> claims;         // on acc_teacher_forced of the evaluated segments
};

struct BenchItem {
  std::string bench;                 // diagonal (the one benchmark so far)
  std::vector<int> threads;          // each timed in turn
  int layers = 4, segments = 1024, batch = 8, reps = 3;
  double min_speedup = 1.0;          // the check at each thread count: diagonal / sequential tokens/s
};

struct ReproItem {
  std::string name, kind;        // kind: sweep | attention | length | lm | bench
  std::string title, paper_says; // the figure or table, and the paper's finding in one line
  std::string notes;             // the researcher's reading of the results (printed after them),
                                 // its numbers as placeholders filled in from the data (repro_readings.h)
  std::string outside_records;   // what the reading says of runs not in the committed records
                                 // (earlier recipes, other machines, runs by hand): not checked
  bool beyond_the_paper = false; // its claims are the project's own, not the paper's
  std::string sweep;             // sweep, lm: the sweep file the item trains ("" for the others)
  std::string from;              // attention, length: the sweep item whose runs they read ("" else)
  std::variant<SweepItem, LmItem, AttentionItem, LengthItem, BenchItem> part;
};

struct ReproManifest {
  std::string path, paper_file;  // paper_file: experiments/paper_results.yaml
  std::string notes;             // printed under the report's summary table
  // How far a measured mean may lie from the paper's value for a claim with `paper:` to hold,
  // and by how much a model must be ahead of another for an `above:` claim to hold.
  double tolerance = 0;
  std::vector<ReproItem> items;
  const ReproItem* find(const std::string& name) const;
};

// Reads and checks the manifest: unknown keys, unknown item kinds, claims without a bound,
// items that refer to a missing or later sweep item are errors naming the file and item.
ReproManifest load_manifest(const std::string& path);

}  // namespace rmt
