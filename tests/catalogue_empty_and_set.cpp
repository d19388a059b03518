// Catalogue of bad inputs (tests/catalogue.h), issue 58: an option given an empty value was taken
// as left out (`eval --predictions ''` wrote none, `--checkpoint ''` read the best) or failed on a
// symptom ("--data : no such directory", "-n must be an integer"): every command now refuses it
// naming the option (cli_checks.h refuse_empty_values). `rmt sweep --set` of a key the sweep sets
// itself in every run (train.threads, device with --device) was accepted and then overwritten.
// A task option beyond int stated int's range ("at most 2147483647", "[1, 2147483647]"), not
// the task table's (--key-size 1..8, length 1..100000).
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

// {dir}/s.yaml: a sweep whose grid sets segments and data.length, and derive: the memory size.
void sweep_file(const std::string& dir) {
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, symbols: 4, train: 64, val: 16, test: 16, seed: 0}\n"
                                    "base: {model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}\n"
                                    "grid: {model.kind: [rmt], segments: [1, 2], data.length: [4, 5]}\n"
                                    "derive: {model.num_mem_tokens: segment_length}\n";
}

// A sweep file of `data` and a one-point grid.
std::function<void(const std::string&)> sweep_with_data(const std::string& data) {
  return [data](const std::string& dir) {
    std::ofstream(dir + "/s.yaml") << "data: " << data << "\ngrid: {segments: [1]}\n";
  };
}

const std::string kSweep = "sweep {dir}/s.yaml --runs-dir {dir}/runs ";

}  // namespace

// ---- an empty value: refused naming the option, never read as the default ------------------
RMT_CATALOGUE({
    {"empty value", "eval --predictions ''", trained_copy_run, "eval {dir}/run --predictions ''", 1,
     "--predictions: empty value ''; give one, or leave --predictions out for its default"},
    {"empty value", "eval --checkpoint '' (was the best)", trained_copy_run, "eval {dir}/run --checkpoint ''", 1,
     "--checkpoint: empty value ''; give one, or leave --checkpoint out for its default"},
    {"empty value", "eval --data '' (was \"--data : no such directory\")", trained_copy_run, "eval {dir}/run --data ''", 1,
     "--data: empty value ''; give one, or leave --data out for its default"},
    {"empty value", "eval --split ''", trained_copy_run, "eval {dir}/run --split ''", 1,
     "--split: empty value ''; give one, or leave --split out for its default"},
    {"empty value", "eval: the run ''", nullptr, "eval ''", 1, "argument run: empty value ''; give one"},
    {"empty value", "train --out '' with a config", copy_data_and_config, "train --config {dir}/c.yaml --out ''", 1,
     "--out: empty value ''; give one"},
    {"empty value", "train --set ''", copy_data_and_config, "train --config {dir}/c.yaml --out {dir}/run --set ''", 1,
     "--set: empty value ''; give one, or leave --set out for its default"},
    {"empty value", "data show -n '' (was \"must be an integer\")", copy_data_and_config, "data show {dir}/d -n ''", 1,
     "-n: empty value ''; give one, or leave -n out for its default"},
    {"empty value", "sweep --runs-dir ''", sweep_file, "sweep {dir}/s.yaml --runs-dir '' --dry-run", 1,
     "--runs-dir: empty value ''; give one, or leave --runs-dir out for its default"},
    {"empty value", "generate --noise-text ''", nullptr, "generate memorize --noise text --noise-text '' --out {dir}/d", 1,
     "--noise-text: empty value ''; give one, or leave --noise-text out for its default"},
});

// ---- sweep --set of a key the sweep sets in every run itself --------------------------------
RMT_CATALOGUE({
    {"--set", "sweep --set train.threads (the sweep sets it)", sweep_file, kSweep + "--set train.threads=2 --dry-run",
     1, "--set train.threads=2: the sweep sets each run's train.threads (the cores split between the -j runs); "
        "give --threads N"},
    {"--set", "sweep --set device with --device", sweep_file, kSweep + "--set device=cpu --device cpu --dry-run", 1,
     "--set device=cpu: --device cpu sets the runs' device; give one of them"},
    {"--set", "sweep --set data (the sweep fills it in)", sweep_file, kSweep + "--set data={dir}/d --dry-run", 1,
     "the sweep's dataset is its data: block"},
    {"--set", "sweep --set of a grid's data key", sweep_file, kSweep + "--set data.length=6 --dry-run", 1,
     "--set data.length=6: the sweep's dataset is its data: block"},
    {"--set", "sweep --set of a grid key, spaced", sweep_file, kSweep + "--set ' segments = 3' --dry-run", 1,
     "s.yaml's grid sets segments run by run"},
});

// ---- a task option's real range, not int's ----------------------------------------------------
RMT_CATALOGUE({
    {"generate", "--key-size beyond int (was \"at most 2147483647\")", nullptr,
     "generate ar_remember --key-size 99999999999 --out {dir}/d", 1, "--key-size must be from 1 to 8 (got 99999999999)"},
    {"generate", "--value-size beyond int", nullptr, "generate ar_rewrite --value-size 99999999999 --out {dir}/d", 1,
     "--value-size must be from 1 to 8 (got 99999999999)"},
    {"generate", "--symbols beyond int", nullptr, "generate copy --symbols 3000000000 --out {dir}/d", 1,
     "--symbols must be from 1 to 36 (got 3000000000)"},
    {"generate", "--pairs beyond int", nullptr, "generate ar_remember --pairs 3000000000 --out {dir}/d", 1,
     "--pairs must be from 1 to 100000 (got 3000000000)"},
    {"sweep", "data key_size beyond int (was \"[1, 2147483647]\")",
     sweep_with_data("{task: ar_remember, key_size: 99999999999}"), kSweep + "--dry-run", 1,
     "invalid value '99999999999' for data option 'key_size': expected an integer in [1, 8]"},
    {"generate", "--noise-words beyond the most (was accepted up to int, then refused by the task)", nullptr,
     "generate memorize --noise-words 70000 --out {dir}/d", 1, "--noise-words must be from 1 to 65536 (got 70000)"},
    {"generate", "--segments beyond the longest length", nullptr,
     "generate memorize --segments 100001 --segment-length 1 --out {dir}/d", 1,
     "--segments must be from 1 to 100000 (got 100001)"},
    {"generate", "--max-alpha beyond the most of any --max-root", nullptr,
     "generate sqeq --max-alpha 250000 --out {dir}/d", 1, "--max-alpha must be from 1 to 249999 (got 250000)"},
    {"sweep", "data max_root beyond sqeq's range (was \"[1, 2147483647]\")",
     sweep_with_data("{task: sqeq, max_root: 300}"), kSweep + "--dry-run", 1,
     "invalid value '300' for data option 'max_root': expected an integer in [2, 208]"},
    {"sweep", "data distractors beyond the other people",
     sweep_with_data("{task: memorize, distractors: 8}"), kSweep + "--dry-run", 1,
     "invalid value '8' for data option 'distractors': expected an integer in [0, 7]"},
    {"sweep", "data segments: a sweep's segments are the model's",
     sweep_with_data("{task: memorize, segments: 2}"), kSweep + "--dry-run", 1, "unknown data option 'segments'"},
    {"sweep", "grid data.length beyond the tasks' lengths",
     [](const std::string& dir) {
       std::ofstream(dir + "/s.yaml") << "data: {task: copy, symbols: 4}\ngrid: {data.length: [4, 200000]}\n";
     },
     kSweep + "--dry-run", 1, "invalid value '200000' for data option 'length': expected an integer in [1, 100000]"},
});
