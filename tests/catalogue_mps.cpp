// Catalogue of bad inputs (tests/catalogue.h) for `--mps` of `rmt sweep` and `rmt reproduce`
// (lib/experiments/mps.h): a mode that is not one, `on` for runs that are not on a GPU, and
// --mps where this command trains nothing itself (--emit, --collect).
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

void cpu_sweep(const std::string& dir) {
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, symbols: 4, train: 64, val: 16, test: 16, seed: 0}\n"
                                    "base: {model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}\n"
                                    "grid: {model.kind: [baseline], segments: [1, 2]}\n";
}

const std::string kSweep = "sweep {dir}/s.yaml --runs-dir {dir}/runs ";

// A one-item manifest {dir}/m.yaml whose item is the sweep s.yaml.
void cpu_manifest(const std::string& dir) {
  cpu_sweep(dir);
  std::ofstream(dir + "/paper.yaml") << "x:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0}\n";
  std::ofstream(dir + "/m.yaml") << "paper: paper.yaml\nitems:\n  a:\n    kind: sweep\n    title: t\n"
                                    "    paper_says: p\n    sweep: s.yaml\n    metrics: [acc_teacher_forced]\n";
}

const std::string kReproduce = "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/runs --out {dir}/out ";

}  // namespace

RMT_CATALOGUE({
    {"mps", "a mode that is not one", cpu_sweep, kSweep + "--mps yes", 1, "--mps must be one of auto, on, off (got 'yes')"},
    {"mps", "on for a sweep on the CPU", cpu_sweep, kSweep + "--mps on", 1,
     "--mps on: no run of sweep s to do is on a GPU (run baseline-seg1-"},
    {"mps", "on for a sweep on the CPU, --dry-run", cpu_sweep, kSweep + "--mps on --dry-run", 1,
     "MPS shares a GPU between the runs of --device cuda"},
    {"mps", "with --emit commands", cpu_sweep, kSweep + "--mps off --emit commands", 2,
     "--mps is for the runs this command trains, not for --emit"},
    {"mps", "with --collect", cpu_sweep, kSweep + "--mps auto --collect", 2,
     "--mps is for the runs this command trains, not for --collect"},
    {"mps", "reproduce: on for runs on the CPU", cpu_manifest, kReproduce + "--mps on", 1,
     "--mps on: the runs are on the CPU; MPS shares a GPU between the runs of --device cuda"},
    {"mps", "reproduce: on for runs on cpu-guarded", cpu_manifest, kReproduce + "--device cpu-guarded --mps on", 1,
     "--mps on: the runs are on cpu-guarded"},
});
