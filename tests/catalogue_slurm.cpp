// Catalogue of bad inputs (tests/catalogue.h) for `rmt sweep --emit slurm|commands` and
// `--collect`. Two categories:
//   sweep-emit-usage (exit 2): an option of one output mode given with another (--partition
//     without --emit slurm, --threads-per-run with --emit slurm, --collect with --emit).
//   sweep-emit-value (exit 1): a SLURM resource sbatch would not read (or that would break out
//     of its #SBATCH line), a thread count out of range, a collect that finds runs not done.
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

void tiny_sweep(const std::string& dir) {
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, symbols: 4, train: 64, val: 16, test: 16, seed: 0}\n"
                                    "base: {model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}\n"
                                    "grid: {model.kind: [baseline], segments: [1, 2]}\n";
}

const std::string kSweep = "sweep {dir}/s.yaml --runs-dir {dir}/runs ";
const std::string kSlurm = kSweep + "--emit slurm ";

}  // namespace

RMT_CATALOGUE({
    // ---- options of the wrong output mode: exit 2 --------------------------------------------
    {"sweep-emit-usage", "--partition without --emit", tiny_sweep, kSweep + "--partition cpu", 2,
     "--partition is for --emit slurm only; see 'rmt sweep --help'"},
    {"sweep-emit-usage", "--mem with --emit commands", tiny_sweep, kSweep + "--emit commands --mem 4G", 2,
     "--mem is for --emit slurm only"},
    {"sweep-emit-usage", "--time with --dry-run", tiny_sweep, kSweep + "--dry-run --time 10", 2,
     "--time is for --emit slurm only"},
    {"sweep-emit-usage", "--account without --emit", tiny_sweep, kSweep + "--account proj", 2,
     "--account is for --emit slurm only"},
    {"sweep-emit-usage", "--gpus without --emit", tiny_sweep, kSweep + "--gpus 1", 2, "--gpus is for --emit slurm only"},
    {"sweep-emit-usage", "--cpus-per-task without --emit", tiny_sweep, kSweep + "--cpus-per-task 2", 2,
     "--cpus-per-task is for --emit slurm only (--emit commands takes --threads-per-run"},
    {"sweep-emit-usage", "--threads-per-run with --emit slurm", tiny_sweep, kSlurm + "--threads-per-run 2", 2,
     "--threads-per-run is for --emit commands only (under SLURM each run takes its task's cores: --cpus-per-task)"},
    {"sweep-emit-usage", "--threads-per-run without --emit", tiny_sweep, kSweep + "--threads-per-run 2", 2,
     "--threads-per-run is for --emit commands only (-j N splits this machine's cores)"},
    {"sweep-emit-usage", "--collect with --emit", tiny_sweep, kSlurm + "--collect", 2, "excludes"},
    {"sweep-emit-usage", "--collect with --dry-run", tiny_sweep, kSweep + "--collect --dry-run", 2, "excludes"},
    {"sweep-emit-usage", "--time without a value", tiny_sweep, kSlurm + "--time", 2, "--time needs a value"},

    // ---- values sbatch would not read: exit 1 -----------------------------------------------
    {"sweep-emit-value", "--time hour 24 after days", tiny_sweep, kSlurm + "--time 1-24", 1,
     "--time '1-24' is not a SLURM time limit; give minutes (90), H:MM:SS (12:00:00) or D-HH[:MM[:SS]]"},
    {"sweep-emit-value", "--time minutes 60", tiny_sweep, kSlurm + "--time 12:60:00", 1,
     "--time '12:60:00' is not a SLURM time limit"},
    {"sweep-emit-value", "--time four fields", tiny_sweep, kSlurm + "--time 1:2:3:4", 1, "--time '1:2:3:4' is not"},
    {"sweep-emit-value", "--time a word", tiny_sweep, kSlurm + "--time tomorrow", 1, "--time 'tomorrow' is not"},
    {"sweep-emit-value", "--time empty", tiny_sweep, kSlurm + "--time ''", 1, "--time '' is not a SLURM time limit"},
    // Empty values: refused like --time '' (one check, sweep.h check_slurm_option), not dropped.
    {"sweep-emit-value", "--mem empty", tiny_sweep, kSlurm + "--mem ''", 1,
     "--mem '' is not a SLURM memory size; give a whole number"},
    {"sweep-emit-value", "--partition empty", tiny_sweep, kSlurm + "--partition ''", 1,
     "--partition '' is not a SLURM partition name"},
    {"sweep-emit-value", "--account empty", tiny_sweep, kSlurm + "--account ''", 1,
     "--account '' is not a SLURM account name"},
    {"sweep-emit-value", "--gpus empty", tiny_sweep, kSlurm + "--gpus ''", 1,
     "--gpus '' is not a SLURM GPU count"},
    {"sweep-emit-value", "--partition a list with an empty name", tiny_sweep, kSlurm + "--partition a,,b", 1,
     "--partition 'a,,b' is not a SLURM partition name"},
    {"sweep-emit-value", "--mem GB suffix", tiny_sweep, kSlurm + "--mem 4GB", 1,
     "--mem '4GB' is not a SLURM memory size; give a whole number with an optional K, M, G or T suffix, e.g. 4G or 4000M"},
    {"sweep-emit-value", "--mem fraction", tiny_sweep, kSlurm + "--mem 1.5G", 1, "--mem '1.5G' is not"},
    {"sweep-emit-value", "--mem negative", tiny_sweep, kSlurm + "--mem=-1", 1, "--mem '-1' is not"},
    {"sweep-emit-value", "--cpus-per-task 0", tiny_sweep, kSlurm + "--cpus-per-task 0", 1,
     "--cpus-per-task must be from 1 to 1024 (got 0)"},
    {"sweep-emit-value", "--cpus-per-task not a number", tiny_sweep, kSlurm + "--cpus-per-task all", 1, "--cpus-per-task"},
    {"sweep-emit-value", "--cpus-per-task beyond the thread limit", tiny_sweep, kSlurm + "--cpus-per-task 5000", 1,
     "--cpus-per-task must be from 1 to 1024 (got 5000)"},
    {"sweep-emit-value", "--gpus 0", tiny_sweep, kSlurm + "--gpus 0", 1,
     "--gpus '0' is not a SLURM GPU count; give N or TYPE:N with N at least 1"},
    {"sweep-emit-value", "--gpus type without count", tiny_sweep, kSlurm + "--gpus a100:", 1, "--gpus 'a100:' is not"},
    {"sweep-emit-value", "--partition with a space", tiny_sweep, kSlurm + "--partition 'a b'", 1,
     "--partition 'a b' is not a SLURM partition name"},
    {"sweep-emit-value", "--partition with a newline", tiny_sweep, kSlurm + "--partition \"$(printf 'a\\nsleep 9')\"", 1,
     "--partition 'a\\nsleep 9' is not a SLURM partition name"},  // one line: the newline escaped
    {"sweep-emit-value", "--account with a semicolon", tiny_sweep, kSlurm + "--account 'p;id'", 1,
     "--account 'p;id' is not a SLURM account name"},
    {"sweep-emit-value", "--threads-per-run 0", tiny_sweep, kSweep + "--emit commands --threads-per-run 0", 1,
     "--threads-per-run must be from 1 to 1024 (got 0)"},
    {"sweep-emit-value", "--collect before any run finished", tiny_sweep, kSweep + "--collect", 1,
     "2 of 2 runs are not done: baseline-seg1-"},
    // ---- issue 60: a script for a cluster ------------------------------------------------------
    {"sweep-emit-usage", "--array-limit without --emit", tiny_sweep, kSweep + "--array-limit 2", 2,
     "--array-limit is for --emit slurm only"},
    {"sweep-emit-usage", "--prologue with --emit commands", tiny_sweep, kSweep + "--emit commands --prologue {dir}/s.yaml", 2,
     "--prologue is for --emit slurm only"},
    {"sweep-emit-value", "--array-limit 0", tiny_sweep, kSlurm + "--array-limit 0", 1,
     "--array-limit must be from 1 to 100000 (got 0)"},
    {"sweep-emit-value", "--prologue that does not exist", tiny_sweep, kSlurm + "--prologue {dir}/modules.sh", 1,
     "--prologue {dir}/modules.sh: no such file"},
    {"sweep-emit-value", "--prologue with a NUL byte",
     [](const std::string& dir) { tiny_sweep(dir); std::ofstream(dir + "/p.sh") << std::string("a\0b", 3); },
     kSlurm + "--prologue {dir}/p.sh", 1, "--prologue {dir}/p.sh: holds a NUL byte"},
    {"sweep-emit-value", "--chdir with a space", tiny_sweep, kSlurm + "--chdir '/a b'", 1,
     "--chdir '/a b': a directory for an #SBATCH line holds no space or newline"},
    {"sweep-emit-value", "--gpus for runs on the CPU (every task held GPUs it did not use)", tiny_sweep,
     kSlurm + "--gpus 1", 1, "--gpus 1: no run to submit is on a GPU (their device is cpu)"},
});
