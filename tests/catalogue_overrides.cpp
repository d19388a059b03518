// Catalogue of bad inputs (tests/catalogue.h) for the one-line overrides of issue 44: `rmt sweep
// --set` (a key the grid or derive: sets, the dataset's keys, unknown keys), `--threads` on sweep
// and train (with --emit, with --pack, out of range), and `rmt eval RUN` (the run twice, or not
// at all).
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

void sweep_file(const std::string& dir) {
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, symbols: 4, train: 64, val: 16, test: 16, seed: 0}\n"
                                    "base: {model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}\n"
                                    "grid: {model.kind: [rmt], segments: [1, 2]}\n"
                                    "derive: {model.num_mem_tokens: segment_length}\n";
}

const std::string kSweep = "sweep {dir}/s.yaml --runs-dir {dir}/runs ";

}  // namespace

RMT_CATALOGUE({
    {"--set", "sweep --set of a grid key", sweep_file, kSweep + "--set segments=3 --dry-run", 1,
     "--set segments=3: {dir}/s.yaml's grid sets segments run by run"},
    {"--set", "sweep --set of a derived key", sweep_file, kSweep + "--set model.num_mem_tokens=2 --dry-run", 1,
     "--set model.num_mem_tokens=2: {dir}/s.yaml's derive: sets model.num_mem_tokens (segment_length)"},
    {"--set", "sweep --set of the dataset", sweep_file, kSweep + "--set data.length=5 --dry-run", 1,
     "--set data.length=5: the sweep's dataset is its data: block"},
    {"--set", "sweep --set of an unknown key", sweep_file, kSweep + "--set train.max_step=5 --dry-run", 1,
     "unknown key 'train.max_step' (did you mean 'train.max_steps'?)"},
    {"--set", "sweep --set without a value", sweep_file, kSweep + "--set train.max_steps --dry-run", 1,
     "--set train.max_steps: expected key=value"},
    {"cli-usage", "sweep --threads with --emit", sweep_file, kSweep + "--threads 2 --emit commands", 2,
     "--threads is for the runs this command trains"},
    {"cli-value", "sweep --threads 2 with --pack", sweep_file, kSweep + "--threads 2 --pack 2", 1,
     "--threads 2 with --pack 2: a packed run computes with one thread"},
    {"cli-value", "sweep --threads out of range", sweep_file, kSweep + "--threads 5000", 1,
     "--threads must be from 0 to 1024 (got 5000)"},
    {"cli-value", "train --threads negative", nullptr, "train --out {dir}/r --threads -1", 1,
     "--threads must be from 0 to 1024 (got -1)"},
    {"cli-usage", "eval: the run given twice", nullptr, "eval {dir} --run {dir}", 2, "excludes"},
    {"cli-usage", "eval: no run", nullptr, "eval", 2, "missing argument RUN (or --run)"},
});

// `rmt plot --curves` (issue 44): what it draws, and what it is not given with.
RMT_CATALOGUE({
    {"cli-value", "plot --curves: a directory without runs", nullptr, "plot --curves {dir} --format csv", 1,
     "--curves {dir}: no run here"},
    {"cli-value", "plot --curves: not a directory", nullptr, "plot --curves {dir}/none --format csv", 1,
     "--curves {dir}/none: not a directory"},
    {"cli-usage", "plot: a results.csv and --curves", nullptr, "plot {dir}/r.csv --curves {dir} --out {dir}/x.png", 2,
     "--curves draws run directories; give it or a results.csv, not both"},
    {"cli-usage", "plot --curves with --metric", nullptr, "plot --curves {dir} --metric loss --out {dir}/x.png", 2,
     "--metric is for a results.csv, not --curves"},
    {"cli-usage", "plot --format without --curves", nullptr, "plot {dir}/r.csv --format csv", 2, "--format requires --curves"},
    {"cli-usage", "plot with neither", nullptr, "plot --out {dir}/x.png", 2,
     "missing argument results (a results.csv, or --curves DIR)"},
});
