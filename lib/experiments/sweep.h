#pragma once
// `rmt sweep`: a grid of `rmt train` runs described by one YAML file (experiments/NAME.yaml).
//
//   data:    the `rmt generate` options of the dataset (task, the task's options by their keys in
//            tasks/task_kind.h's table, train, val, test, seed); generated on demand under
//            RUNS/NAME/data. Or `dir: PATH`, a dataset
//            that exists (rmt data import, rmt generate), read as it is and never written
//   base:    an `rmt train` config (every key but `data`, which the sweep fills in)
//   grid:    dotted config keys -> lists of values; the sweep runs their cartesian product.
//            A list of such maps runs each product in turn (e.g. baseline only at 1 segment).
//            `data.OPTION` keys vary the dataset (one directory per combination under RUNS/NAME/data)
//   derive:  dotted config keys -> integer expressions over segment_length (the longest segment
//            of the input), seq_len (all input positions) and segments, e.g.
//            `model.num_mem_tokens: segment_length / 2` (the paper ties memory to segment length)
//   eval:    (optional) every finished run evaluated at other lengths once the runs are done
//            (sweep_eval.h): `multiples: [2, 10]` of the data's length (generated again),
//            `data: [DIR, ...]` datasets of the task that exist, `segment_length: N` (default:
//            each run's trained longest segment). Results: RUNS/NAME/length_results.csv
//
// Each grid point is one `rmt train` subprocess in RUNS/NAME/RUN_ID. RUN_ID is a readable prefix
// (`rmt-seg3-mem24-seed1`) plus a short hash of the resolved config, so a re-run skips finished
// runs (results.json), resumes interrupted ones (state.safetensors) and never duplicates one.
// RUNS/NAME/results.csv is rebuilt from the run directories after every finished run.
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/experiments/mps.h"
#include "lib/experiments/sweep_expr.h"  // derive: expressions
#include "lib/run/config.h"

namespace rmt {

// A sweep's eval: block (sweep_eval.h).
struct SweepEvalSpec {
  std::vector<int> multiples;     // of the data's `length` option: that task generated at k x length
  std::vector<std::string> data;  // datasets that exist, of the runs' task
  int segment_length = 0;         // evaluated segments' length; 0: each run's trained longest segment
};

struct SweepSpec {
  std::string path, name;  // the sweep file and its stem
  std::vector<std::pair<std::string, std::string>> data;  // generate option -> value text
  Config base;
  using Grid = std::vector<std::pair<std::string, std::vector<std::string>>>;  // key -> value texts
  std::vector<Grid> grids;  // one, or several run one after another
  std::vector<std::pair<std::string, std::string>> derive;            // key -> expression
  std::optional<SweepEvalSpec> eval;
};

// Reads and checks a sweep file: unknown keys (with did-you-mean), empty lists, values out of
// range and malformed expressions are errors naming the file, the key and the reason.
SweepSpec parse_sweep(const std::string& yaml_text, const std::string& path);
SweepSpec load_sweep(const std::string& path);
// `rmt sweep --set KEY=VALUE`: the value in every run's config (the base config's), refused for a
// key the sweep sets itself, which would override it: one the grid or derive: sets (run by run),
// the dataset's keys, train.threads (--threads, -j), and device when `device` (--device) is given.
void apply_sweep_override(SweepSpec& spec, const std::string& assignment, const std::string& device = "");

struct SweepRun {
  std::string run_id;
  Config config;             // resolved: grid and derived values applied, data set, kind resolved
  int segment_length = 0;    // the longest segment
  std::filesystem::path dir; // RUNS/NAME/RUN_ID
  std::map<std::string, std::string> data_options;  // this run's `rmt generate` options
};

struct SweepDataset {
  std::string dir;                        // == config.data of its runs
  std::vector<std::string> generate_args; // `rmt generate` arguments that write it; empty for
                                          // `data: {dir: ...}`, a dataset that exists
};

struct SweepPlan {
  SweepSpec spec;
  std::filesystem::path sweep_dir;  // RUNS/NAME
  std::vector<SweepDataset> datasets;
  std::vector<SweepRun> runs;       // in grid order, duplicates removed
  std::vector<std::string> columns; // grid and derived keys, for results.csv
};

// Expands the grid (no files touched). threads goes into every run's train.threads; it is not
// part of RUN_ID, so changing -j never changes which runs exist. device, when not empty, is
// every run's device (`rmt sweep --device`); RUN_ID hashes identity_yaml, which leaves the
// device out when it is cpu, so a run on another device is another run.
SweepPlan plan_sweep(const SweepSpec& spec, const std::string& runs_dir, int threads,
                     const std::string& device = "");

enum class RunState { done, failed, resumable, pending };
RunState run_state(const SweepRun& run);
const char* run_state_name(RunState s);

// The `rmt train` arguments of a run (with --resume when it has a checkpoint).
std::vector<std::string> train_args(const SweepPlan& plan, const SweepRun& run);

// Runs at a time when -j is not given: 1 on the CPU (the run takes every core), one per core when
// the runs are on a GPU (each process mostly waits on it; the GPU runs them side by side under
// MPS), at most kMpsMaxClients.
int sweep_default_jobs(bool on_gpu);

struct SweepOptions {
  std::string rmt_binary;  // the rmt executable to run (the CLI passes /proc/self/exe)
  int jobs = 1;
  bool quiet = false;      // no progress lines (tests)
  // Runs on a GPU share it through MPS (mps.h) as this says; runs on the CPU ignore it, but
  // `on` for a sweep with no run on a GPU is refused.
  MpsMode mps = MpsMode::automatic;
  MpsTools mps_tools;
  // > 1: runs of one model shape train together in one process, this many at a time, one
  // computation per step (sweep_internal.h SweepTask; lib/core/packed_backend.h). Packing is how
  // a run is trained, not what it is: it changes no RUN_ID, and a run resumes packed or alone.
  // The plan's runs must have train.threads 1 (the CLI plans them so).
  int pack = 1;
  std::function<void()> on_run_end;  // after each run ends and results.csv is rebuilt, if set
};

// Generates each dataset whose directory has no meta.yaml; writes each run's config file.
void prepare_sweep_files(const SweepPlan& plan, const SweepOptions& options);
// Runs every run that is not done, `jobs` at a time, rebuilding results.csv after each.
// Returns the number of failed runs. First refuses (backend_by_name's error) a device this
// build lacks, before anything runs.
// What would stop the sweep before any run starts: a device this build lacks, data that cannot
// be generated (rmt generate --check). run_sweep and `rmt sweep --dry-run` both check it.
void check_sweep_runnable(const SweepPlan& plan, const SweepOptions& options);
// A finished run on a dataset named by data.dir is reused only while that dataset is the one it
// trained on (the fingerprint its results.json recorded); a changed one fails naming both.
// check_sweep_runnable and --collect call it (generated data: check_generated_dataset).
void check_finished_runs_data(const SweepPlan& plan);
int run_sweep(const SweepPlan& plan, const SweepOptions& options);
// Rewrites RUNS/NAME/results.csv (atomically) from the run directories.
void write_results_csv(const SweepPlan& plan);
std::string results_csv_text(const SweepPlan& plan);

// One shell line per run that is not done. A run that has not started gets
// `--set train.threads=THREADS`, with `threads` inserted unquoted: a number, or
// `$SLURM_CPUS_PER_TASK` in the SLURM script (whose eval expands it). A started run resumes with
// its own saved config, thread count included: `rmt train --resume` refuses a different config,
// and the same thread count keeps the run bit-reproducible.
std::vector<std::string> pending_commands(const SweepPlan& plan, const SweepOptions& options,
                                          const std::string& threads);

// The resources `rmt sweep --emit slurm` requests per array task. Empty strings are not written.
inline constexpr const char* kDefaultSlurmTime = "24:00:00";
constexpr int kMaxArrayLimit = 100000;  // sbatch's --array=...%N, the tasks at once
struct SlurmOptions {
  std::string partition, account;
  std::string mem;                      // sbatch --mem: 4000, 4000M, 4G (megabytes without a suffix)
  std::string time = kDefaultSlurmTime;  // sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
  std::string gpus;                     // sbatch --gpus: N or TYPE:N (only for runs on a GPU)
  int cpus_per_task = 1;                // every run's train.threads
  int array_limit = 0;                  // sbatch --array=0-K%N: at most N tasks at once (0: no limit)
  std::string prologue;                 // a file whose lines run before the task (module loads)
  std::string chdir;                    // sbatch --chdir: where the tasks run (empty: the submit directory)
};
// Checks one value given for a SLURM option ("--time", "--mem", "--gpus", "--partition",
// "--account") as sbatch would read it, an empty one included; fails naming the option, the
// value and the forms it takes. The one check of these values (check_slurm_options, rmt sweep).
void check_slurm_option(const std::string& option, const std::string& value);
// A warning on stderr when this rmt is a -march=native build (emitting a script for other nodes).
void warn_native_build_for_cluster();
// Checks each value as sbatch would read it (and that none can break out of its #SBATCH line);
// fails naming the option, the value and the forms it takes.
void check_slurm_options(const SlurmOptions& slurm);
// A SLURM job-array script with one array task per pending run (pending_commands), each run
// taking as many threads as its task's cores (SLURM_CPUS_PER_TASK). A task whose run fails
// leaves RUN/sweep_error.txt (its log's last line), so `rmt sweep FILE --collect` lists it as
// failed. Checks `slurm` first.
std::string slurm_script(const SweepPlan& plan, const SweepOptions& options, const SlurmOptions& slurm);

// The `rmt generate` flag of a sweep's data option (underscores for dashes: a_b -> --a-b).
std::string generate_flag(const std::string& data_option);

// Quotes a word for POSIX sh when it needs it.
std::string shell_quote(const std::string& word);

}  // namespace rmt
