// Catalogue of bad inputs (tests/catalogue.h): learning curves that `rmt plot --curves` drew
// silently wrong with exit 0 (issue 58). A damaged line in the middle of a run's metrics.jsonl was
// skipped (only a torn last line, a run killed mid-write, may be), and a value its own
// learning_curves.csv reader refuses (an accuracy of 7.5, a negative step) was drawn
// (lib/experiments/learning_curves.cpp read_validation_curve); and the CSV of --format csv
// could be written over the run it was read from.
#include <filesystem>
#include <functional>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

// {dir}/run: a run directory (config.yaml of copy_data_and_config's 2-step run) whose
// metrics.jsonl holds `lines` exactly as given.
std::function<void(const std::string&)> run_with_metrics(std::string lines) {
  return [lines](const std::string& dir) {
    copy_data_and_config(dir);
    fs::create_directories(dir + "/run");
    fs::copy_file(dir + "/c.yaml", dir + "/run/config.yaml");
    rmt::write_file_atomic(dir + "/run/metrics.jsonl", lines);
  };
}

// The evaluation lines of a run: validation accuracy at steps 2 and 4.
const std::string kEval2 = "{\"step\":2,\"val_acc_teacher_forced\":0.5}\n";
const std::string kEval4 = "{\"step\":4,\"val_acc_teacher_forced\":0.75}\n";

}  // namespace

RMT_CATALOGUE({
    // ---- metrics.jsonl: damage before the last line -------------------------------------
    {"metrics.jsonl", "plot --curves: a torn line in the middle (a later line follows it)",
     run_with_metrics(kEval2 + "{\"step\":3,\"val_ac\n" + kEval4), "plot --curves {dir}/run --format csv", 1,
     "{dir}/run/metrics.jsonl: line 2: not a JSON object (a damaged line; only the last line of a run killed "
     "mid-write may be torn)"},
    {"metrics.jsonl", "plot --curves: a damaged line, drawing a figure", run_with_metrics(kEval2 + "garbage\n" + kEval4),
     "plot --curves {dir}/run --out {dir}/c.svg", 1, "{dir}/run/metrics.jsonl: line 2: not a JSON object"},
    {"metrics.jsonl", "plot --curves: a damaged last line that ends in a newline (not torn by a kill)",
     run_with_metrics(kEval2 + "{\"step\":4,\"val_acc\n"), "plot --curves {dir}/run --format csv", 1,
     "{dir}/run/metrics.jsonl: line 2: not a JSON object"},
    {"metrics.jsonl", "plot --curves: a JSON array where an object belongs", run_with_metrics(kEval2 + "[1, 2]\n" + kEval4),
     "plot --curves {dir}/run --format csv", 1, "{dir}/run/metrics.jsonl: line 2: not a JSON object"},
    // ---- metrics.jsonl: values learning_curves.csv's reader refuses --------------------------
    {"metrics.jsonl", "plot --curves: an accuracy of 7.5",
     run_with_metrics(kEval2 + "{\"step\":3,\"val_acc_teacher_forced\":7.5}\n" + kEval4),
     "plot --curves {dir}/run --format csv", 1,
     "{dir}/run/metrics.jsonl: line 2: val_acc_teacher_forced 7.5 is out of range (0 to 1)"},
    {"metrics.jsonl", "plot --curves: a negative accuracy, drawing a figure",
     run_with_metrics(kEval2 + "{\"step\":3,\"val_acc_teacher_forced\":-0.25}\n"), "plot --curves {dir}/run --out {dir}/c.svg",
     1, "{dir}/run/metrics.jsonl: line 2: val_acc_teacher_forced -0.25 is out of range (0 to 1)"},
    {"metrics.jsonl", "plot --curves: a negative step",
     run_with_metrics("{\"step\":-2,\"val_acc_teacher_forced\":0.5}\n" + kEval4), "plot --curves {dir}/run --format csv", 1,
     "{dir}/run/metrics.jsonl: line 1: step -2 is out of range (>= 0)"},
    {"metrics.jsonl", "plot --curves: val_segments 0",
     run_with_metrics(kEval2 + "{\"step\":4,\"val_acc_teacher_forced\":0.5,\"val_segments\":0}\n"),
     "plot --curves {dir}/run --format csv", 1, "{dir}/run/metrics.jsonl: line 2: val_segments 0 is out of range (>= 1)"},
    {"metrics.jsonl", "plot --curves: an accuracy given as text",
     run_with_metrics(kEval2 + "{\"step\":4,\"val_acc_teacher_forced\":\"0.5\"}\n"), "plot --curves {dir}/run --format csv",
     1, "{dir}/run/metrics.jsonl: line 2: val_acc_teacher_forced is \"0.5\", expected a number"},
    {"metrics.jsonl", "plot --curves: an evaluation without its step",
     run_with_metrics(kEval2 + "{\"val_acc_teacher_forced\":0.5}\n"), "plot --curves {dir}/run --format csv", 1,
     "{dir}/run/metrics.jsonl: line 2: step is null, expected an integer"},
    {"metrics.jsonl", "plot --curves: a fractional step", run_with_metrics(kEval2 + "{\"step\":2.5,\"val_acc_teacher_forced\":0.5}\n"),
     "plot --curves {dir}/run --format csv", 1, "{dir}/run/metrics.jsonl: line 2: step is 2.5, expected an integer"},
    // A sweep directory's runs are read the same way.
    {"metrics.jsonl", "plot --curves: a sweep directory whose run has an accuracy of 7.5",
     [](const std::string& dir) {
       run_with_metrics(kEval2 + "{\"step\":3,\"val_acc_teacher_forced\":7.5}\n")(dir);
       fs::create_directories(dir + "/sweep");
       fs::rename(dir + "/run", dir + "/sweep/run");
     },
     "plot --curves {dir}/sweep --format csv", 1,
     "{dir}/sweep/run/metrics.jsonl: line 2: val_acc_teacher_forced 7.5 is out of range (0 to 1)"},
    // ---- --format csv --out: written, so it must not be what the curves are read from ---------
    {"outputs", "plot --curves --format csv: --out is the run's metrics.jsonl", run_with_metrics(kEval2),
     "plot --curves {dir}/run --format csv --out {dir}/run/metrics.jsonl", 1,
     "--out {dir}/run/metrics.jsonl: is also the input --curves {dir}/run/metrics.jsonl; writing it would destroy "
     "the input"},
    {"outputs", "plot --curves --format csv: --out is a sweep run's config.yaml",
     [](const std::string& dir) {
       run_with_metrics(kEval2)(dir);
       fs::create_directories(dir + "/sweep");
       fs::rename(dir + "/run", dir + "/sweep/run");
     },
     "plot --curves {dir}/sweep --format csv --out {dir}/sweep/run/config.yaml", 1,
     "is also the input --curves {dir}/sweep/run/config.yaml"},
    {"outputs", "plot --curves --format csv: --out in a directory that is a file", run_with_metrics(kEval2),
     "plot --curves {dir}/run --format csv --out {dir}/c.yaml/x.csv", 1, "--out {dir}/c.yaml/x.csv"},
});
