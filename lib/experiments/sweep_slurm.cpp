// `rmt sweep --emit slurm` (sweep.h): its options' checks and the job-array script.
#include "lib/experiments/sweep.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/provenance.h"
#include "lib/experiments/mps.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

static bool all_digits(const std::string& s, size_t max_digits = 9) {
  return !s.empty() && s.size() <= max_digits &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

static std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

// sbatch's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (or UNLIMITED / INFINITE). The
// leading field may be large (90 minutes, 48 hours); the ones after it are clock fields.
static bool slurm_time_ok(const std::string& t) {
  std::string upper = t;
  for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (upper == "UNLIMITED" || upper == "INFINITE") return true;
  std::vector<std::string> days = split(t, '-');
  if (days.size() > 2) return false;
  std::vector<std::string> clock = split(days.back(), ':');
  if (clock.size() > 3) return false;
  for (const auto& f : clock)
    if (!all_digits(f)) return false;
  if (days.size() == 2) {
    if (!all_digits(days[0]) || std::stol(clock[0]) >= 24) return false;  // D-H...: H is an hour of the day
    for (size_t k = 1; k < clock.size(); ++k)
      if (std::stol(clock[k]) >= 60) return false;
    return true;
  }
  for (size_t k = 1; k < clock.size(); ++k)
    if (std::stol(clock[k]) >= 60) return false;
  return true;
}

static bool slurm_name_ok(const std::string& s, bool list) {
  if (s.empty()) return false;
  for (const std::string& part : list ? split(s, ',') : std::vector<std::string>{s})
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
        }))
      return false;
  return true;
}

// A value as it appears in a one-line message: control characters (a newline) escaped.
static std::string printable(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch == '\n') out += "\\n";
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
    else out += ch;
  return out;
}

void check_slurm_option(const std::string& option, const std::string& v) {
  // Every value goes into an `#SBATCH --KEY=VALUE` line: besides its format, none may hold a
  // space or a newline (which would end the line and start a shell command). An empty value is
  // malformed like any other: sbatch would not read `--mem=`, and dropping it would run the job
  // with the cluster's default instead of what was asked.
  if (option == "--time") {
    if (!slurm_time_ok(v))
      fail("--time '{}' is not a SLURM time limit; give minutes (90), H:MM:SS (12:00:00) or "
           "D-HH[:MM[:SS]] (2-00:00:00), with minutes and seconds below 60", printable(v));
  } else if (option == "--mem") {
    std::string digits = v;
    if (!digits.empty() && std::string("KMGTkmgt").find(digits.back()) != std::string::npos) digits.pop_back();
    if (!all_digits(digits, 12))
      fail("--mem '{}' is not a SLURM memory size; give a whole number with an optional K, M, G "
           "or T suffix, e.g. 4G or 4000M (no suffix: megabytes)", printable(v));
  } else if (option == "--gpus") {
    size_t colon = v.rfind(':');
    std::string count = colon == std::string::npos ? v : v.substr(colon + 1);
    bool type_ok = colon == std::string::npos || slurm_name_ok(v.substr(0, colon), false);
    if (!type_ok || !all_digits(count) || std::stol(count) < 1)
      fail("--gpus '{}' is not a SLURM GPU count; give N or TYPE:N with N at least 1, e.g. 1 or a100:2 "
           "(leave --gpus out for none)", printable(v));
  } else if (option == "--partition") {
    if (!slurm_name_ok(v, true))
      fail("--partition '{}' is not a SLURM partition name (letters, digits, _ - and .; a comma-separated "
           "list for several; leave --partition out for the cluster's default)", printable(v));
  } else if (option == "--account") {
    if (!slurm_name_ok(v, false))
      fail("--account '{}' is not a SLURM account name (letters, digits, _ - and .; leave --account "
           "out for your default)", printable(v));
  } else {
    fail("internal: '{}' is not a SLURM option rmt sweep knows", option);
  }
}

void check_slurm_options(const SlurmOptions& o) {
  if (o.cpus_per_task < 1 || o.cpus_per_task > kMaxThreads)
    fail("--cpus-per-task must be from 1 to {} (got {}): each run trains with that many threads",
         kMaxThreads, o.cpus_per_task);
  if (o.array_limit < 0 || o.array_limit > kMaxArrayLimit)
    fail("--array-limit must be from 1 to {} (got {}): the array's tasks running at once", kMaxArrayLimit,
         o.array_limit);
  if (!o.chdir.empty() && (o.chdir.find_first_of("\n\r") != std::string::npos || o.chdir.find(' ') != std::string::npos))
    fail("--chdir '{}': a directory for an #SBATCH line holds no space or newline", printable(o.chdir));
  if (!o.prologue.empty()) {
    require_regular_file(o.prologue);
    const std::string text = read_file(o.prologue);
    if (text.find('\0') != std::string::npos)
      fail("--prologue {}: holds a NUL byte; give a text file of shell lines (e.g. module load ...)", o.prologue);
  }
  check_slurm_option("--time", o.time);
  // The others are optional: empty here is "not given" (the command line checks a given one).
  for (const auto& [option, value] : {std::pair{"--mem", &o.mem}, std::pair{"--gpus", &o.gpus},
                                      std::pair{"--partition", &o.partition}, std::pair{"--account", &o.account}})
    if (!value->empty()) check_slurm_option(option, *value);
}

// The GPUs a task asks for: --gpus where the runs to submit are on a GPU (1 when not given), none
// where they are on the CPU; one array asks the same of every task, so runs of both are refused.
static std::string task_gpus(const SweepPlan& plan, const SlurmOptions& slurm) {
  int on_gpu = 0, pending = 0;
  for (const auto& run : plan.runs)
    if (run_state(run) != RunState::done) ++pending, on_gpu += device_is_gpu(run.config.device);
  if (on_gpu > 0 && on_gpu < pending)
    fail("{} of the {} runs to submit are on a GPU and the others on the CPU: one job array asks the same "
         "resources of every task; emit them apart (a sweep file for each device, or --device)", on_gpu, pending);
  if (on_gpu == 0 && !slurm.gpus.empty())
    fail("--gpus {}: no run to submit is on a GPU (their device is cpu), so every task would hold GPUs it "
         "does not use; leave --gpus out, or train the runs on one with --device cuda", slurm.gpus);
  return on_gpu == 0 ? "" : slurm.gpus.empty() ? "1" : slurm.gpus;
}

// A path as the script names it: relative to where rmt runs (the tasks' working directory) when it
// lies below it, so that the script holds no absolute path of this machine; else as it is.
static std::string path_from_here(const fs::path& p) {
  const fs::path here = fs::current_path(), full = fs::absolute(p).lexically_normal();
  const fs::path rel = full.lexically_relative(here);
  return !rel.empty() && *rel.begin() != ".." ? rel.string() : full.string();
}

void warn_native_build_for_cluster() {
  for (const auto& [key, value] : provenance())
    if (key == "native_build" && value.rfind("yes", 0) == 0)
      fmt::print(stderr, "warning: this rmt is built with -march=native: on nodes with another CPU it can "
                         "stop with an illegal instruction. For a cluster build a portable one (make "
                         "NATIVE=OFF, or MARCH=x86-64-v3) and run the script with RMT=that/rmt\n");
}

std::string slurm_script(const SweepPlan& plan, const SweepOptions& options, const SlurmOptions& slurm) {
  check_slurm_options(slurm);
  const std::string gpus = task_gpus(plan, slurm);
  // The array task's own cores: sbatch sets SLURM_CPUS_PER_TASK from --cpus-per-task, and the
  // script's eval expands it inside each command; the binary is $RMT, set below.
  SweepOptions in_script = options;
  in_script.rmt_binary = "@RMT@";
  std::vector<std::string> commands = pending_commands(plan, in_script, "$SLURM_CPUS_PER_TASK");
  for (auto& c : commands) c = "\"$RMT\"" + c.substr(std::string("@RMT@").size());
  std::vector<std::string> run_dirs;
  for (const auto& run : plan.runs)
    if (run_state(run) != RunState::done) run_dirs.push_back(run.dir.string());
  // Relative to the tasks' working directory (the submit directory, or --chdir), as sbatch
  // resolves --output.
  const std::string log_dir = path_from_here(plan.sweep_dir);
  const std::string limit = slurm.array_limit > 0 ? fmt::format("%{}", slurm.array_limit) : "";
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format("# SLURM job array for sweep {} ({} runs). Submit with: sbatch {}\n", plan.spec.name,
                   commands.size(), (plan.sweep_dir / "sweep.slurm").string());
  s += slurm.chdir.empty() ? "# from the directory `rmt sweep --emit slurm` ran in (its paths are relative to it).\n"
                           : "# from anywhere: its tasks run in --chdir " + slurm.chdir + ", where its paths lead.\n";
  s += "# Each task runs one `rmt train` with one thread per core of its allocation (--cpus-per-task).\n";
  s += "# RMT=path/to/rmt sbatch ... runs another build (a portable one on a cluster of other CPUs).\n";
  s += "# A run cut off by --time resumes from its last checkpoint: emit and submit again.\n";
  s += "# Afterwards `rmt sweep " + plan.spec.path + " --collect` writes results.csv (each finished run once).\n";
  s += fmt::format("#SBATCH --job-name=rmt-{}\n", plan.spec.name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", commands.empty() ? 0 : commands.size() - 1, limit);
  if (!slurm.chdir.empty()) s += fmt::format("#SBATCH --chdir={}\n", slurm.chdir);
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.log\n", log_dir);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", slurm.cpus_per_task);
  s += fmt::format("#SBATCH --time={}\n", slurm.time);
  if (!slurm.mem.empty()) s += fmt::format("#SBATCH --mem={}\n", slurm.mem);
  if (!slurm.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", slurm.partition);
  if (!slurm.account.empty()) s += fmt::format("#SBATCH --account={}\n", slurm.account);
  if (!gpus.empty()) s += fmt::format("#SBATCH --gpus={}\n", gpus);
  if (!slurm.prologue.empty()) {  // before `set -u`: module scripts read variables that may be unset
    std::string text = read_file(slurm.prologue);
    if (!text.empty() && text.back() != '\n') text += '\n';
    s += "\n# --prologue " + slurm.prologue + ":\n" + text + "# (end of the prologue)\n";
  }
  s += "\nset -euo pipefail\n";
  s += ": \"${SLURM_CPUS_PER_TASK:?is not set: submit this script with sbatch, which sets it from --cpus-per-task}\"\n";
  s += "[ -d " + shell_quote(log_dir) + " ] || { printf 'rmt sweep: %s holds no %s: submit from the directory the "
       "script was emitted in, or emit it with --chdir\\n' \"$(pwd)\" " + shell_quote(log_dir) + " >&2; exit 1; }\n";
  // A relative binary starts with ./ (a bare name would be looked up on the PATH: Debian's rmt).
  std::string binary = path_from_here(options.rmt_binary);
  if (!fs::path(binary).is_absolute()) binary = "./" + binary;
  s += "RMT=${RMT:-" + shell_quote(binary) + "}\n";
  s += "COMMANDS=(\n";
  for (const auto& c : commands) s += "  " + shell_quote(c) + "\n";
  s += ")\n";
  s += "RUN_DIRS=(\n";
  for (const auto& d : run_dirs) s += "  " + shell_quote(d) + "\n";
  s += ")\n";
  s += "task=$SLURM_ARRAY_TASK_ID\n";
  s += "log=" + shell_quote(log_dir) + "/slurm-${SLURM_ARRAY_JOB_ID}_${task}.log\n";
  s += "rm -f \"${RUN_DIRS[$task]}/sweep_error.txt\"\n";
  s += "status=0\n";
  s += "eval \"${COMMANDS[$task]}\" || status=$?\n";
  s += "if [ \"$status\" -ne 0 ]; then\n";
  s += "  # Recorded for `rmt sweep --collect` (a failed row in results.csv); the next emit retries it.\n";
  s += "  mkdir -p \"${RUN_DIRS[$task]}\"\n";
  s += "  why=$(tail -n 1 \"$log\" 2>/dev/null || true)\n";
  s += "  printf '%s (SLURM task %s_%s, exit status %s; log %s)\\n' \"${why:-rmt train failed}\" \\\n";
  s += "    \"$SLURM_ARRAY_JOB_ID\" \"$task\" \"$status\" \"$log\" > \"${RUN_DIRS[$task]}/sweep_error.txt\"\n";
  s += "  exit \"$status\"\n";
  s += "fi\n";
  return s;
}

}  // namespace rmt
