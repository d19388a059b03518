// Running a sweep (sweep.h): each run an `rmt train` subprocess, `jobs` at a time, with progress.
#include "lib/experiments/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/experiments/generated_data.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Last non-empty line of a file (a failed run's error message).
static std::string last_line(const fs::path& path) {
  if (!fs::exists(path)) return "";
  std::string text = read_file(path), last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t cr = line.rfind('\r');  // progress lines on a tty overwrite themselves
    if (cr != std::string::npos) line = line.substr(cr + 1);
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  }
  return last;
}

RunState run_state(const SweepRun& run) {
  if (fs::exists(run.dir / "results.json")) return RunState::done;
  if (fs::exists(run.dir / "sweep_error.txt")) return RunState::failed;
  if (fs::exists(run.dir / "state.safetensors")) return RunState::resumable;
  return RunState::pending;
}

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::done: return "done";
    case RunState::failed: return "failed";
    case RunState::resumable: return "resumable";
    default: return "pending";
  }
}

static fs::path config_file(const SweepPlan& plan, const SweepRun& run) {
  return plan.sweep_dir / "configs" / (run.run_id + ".yaml");
}

std::vector<std::string> train_args(const SweepPlan& plan, const SweepRun& run) {
  // A run that has started (config.yaml is its first file) resumes from its own saved config:
  // that is the text train compares against, and it keeps the thread count the run started
  // with. Without a checkpoint yet, `train --resume` restarts it from step 0.
  if (fs::exists(run.dir / "config.yaml"))
    return {"train", "--config", (run.dir / "config.yaml").string(), "--out", run.dir.string(), "--resume"};
  return {"train", "--config", config_file(plan, run).string(), "--out", run.dir.string()};
}

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string("/._-=+:,@").find(ch) != std::string::npos;
  });
  if (plain) return word;
  std::string out = "'";
  for (char ch : word) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

static std::string command_line(const std::string& binary, const std::vector<std::string>& args) {
  std::string line = shell_quote(binary);
  for (const auto& a : args) line += " " + shell_quote(a);
  return line;
}

// Removes the temp files (NAME.tmp.PID) that writers killed mid-write left in dir, whatever
// NAME is; a live process's temp file is left alone (remove_stale_temp_files).
static void remove_stale_temps(const fs::path& dir, bool quiet) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string file = it->path().filename().string();
    size_t tmp = file.rfind(".tmp.");
    if (tmp != std::string::npos && tmp > 0) names.push_back(file.substr(0, tmp));
  }
  if (names.empty()) return;
  for (const fs::path& p : remove_stale_temp_files(dir, names))
    if (!quiet) fmt::print(stderr, "sweep: removed {}, left by a write that was killed mid-way\n", p.string());
}

// Runs `binary args...` to completion with output into log; returns the exit status.
static int run_and_wait(const std::string& binary, const std::vector<std::string>& args, const fs::path& log);

void prepare_sweep_files(const SweepPlan& plan, const SweepOptions& options) {
  for (const auto& d : plan.datasets) {
    if (fs::exists(fs::path(d.dir) / "meta.yaml")) {  // meta.yaml is written last
      check_generated_dataset(d.dir, d.generate_args);
      continue;
    }
    if (!options.quiet) fmt::print(stderr, "sweep: generating {}\n", command_line("rmt", d.generate_args));
    std::vector<std::string> args = d.generate_args;
    args.push_back("--force");  // a directory without meta.yaml is an interrupted generation
    fs::create_directories(d.dir);
    remove_stale_temps(d.dir, options.quiet);
    fs::path log = fs::path(d.dir) / "generate.log";
    if (run_and_wait(options.rmt_binary, args, log) != 0)
      fail("generating {} failed: {}", d.dir, last_line(log));
  }
  fs::create_directories(plan.sweep_dir / "configs");
  for (const auto& run : plan.runs) {
    fs::path path = config_file(plan, run);
    std::string text = to_yaml(run.config);
    if (!fs::exists(path) || read_file(path) != text) write_file_atomic(path, text);
  }
}

// ---- subprocesses -----------------------------------------------------------------------------

static pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const fs::path& log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) fail("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    // A killed sweep takes its runs with it: otherwise an orphaned run would keep writing into
    // a directory that the next sweep resumes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> argv;
    std::string b = binary;
    argv.push_back(b.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    std::fprintf(stderr, "rmt sweep: cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
    _exit(127);
  }
  return pid;
}

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

static int run_and_wait(const std::string& binary, const std::vector<std::string>& args, const fs::path& log) {
  pid_t pid = spawn(binary, args, log);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return exit_code(status);
}

// "step 1200 val 0.873" from the tail of a run's metrics.jsonl.
static std::string run_progress(const SweepRun& run) {
  fs::path path = run.dir / "metrics.jsonl";
  if (!fs::exists(path)) return "starting";
  std::string text = read_file(path);
  int64_t step = 0;
  std::string val = "-";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    // A progress line only: a damaged line is skipped here and named by whoever reads the run.
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("step") && j["step"].is_number_integer()) step = std::max(step, j["step"].get<int64_t>());
    if (j.contains("val_acc_teacher_forced") && j["val_acc_teacher_forced"].is_number())
      val = fmt::format("{:.3f}", j["val_acc_teacher_forced"].get<double>());
  }
  return fmt::format("step {}/{} val {}", step, run.config.train.max_steps, val);
}

// `rmt train` holds its run directory's lock while it runs. A sweep killed a moment ago takes
// its runs with it, but a run's SIGKILL may still be on its way: wait a few seconds for such a
// run to die. A run that is still in use then (another train in that directory) fails with
// train's own message, and the sweep records it.
static void wait_for_run_directory(const fs::path& dir) {
  auto start = std::chrono::steady_clock::now();
  DirectoryLock lock;
  while (!lock.try_lock(dir) && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void check_sweep_runnable(const SweepPlan& plan, const SweepOptions& options) {
  // A device this build lacks would fail every run on it: refuse it once, before anything runs.
  std::set<std::string> checked;
  for (const auto& run : plan.runs) {
    if (run_state(run) == RunState::done || !checked.insert(run.config.device).second) continue;
    try {
      backend_by_name(run.config.device);
    } catch (const Error& e) {
      fail("{} (sweep {}, run {} and any other on that device)", e.what(), plan.spec.name, run.run_id);
    }
  }
  // Data still to generate: `rmt generate --check` of each (sizes, memory, disk, the input).
  for (const auto& d : plan.datasets) {
    if (fs::exists(fs::path(d.dir) / "meta.yaml")) {
      check_generated_dataset(d.dir, d.generate_args);  // before any run starts
      continue;
    }
    std::vector<std::string> args = d.generate_args;
    args.insert(args.end(), {"--force", "--check"});
    const fs::path log = fs::temp_directory_path() / fmt::format("rmt-sweep-check.{}.log", getpid());
    fs::remove(log);
    const int status = run_and_wait(options.rmt_binary, args, log);
    const std::string why = last_line(log);
    fs::remove(log);
    if (status != 0) fail("generating {} would fail: {}", d.dir, why);
  }
}

int run_sweep(const SweepPlan& plan, const SweepOptions& options) {
  check_sweep_runnable(plan, options);
  fs::create_directories(plan.sweep_dir);
  // One sweep per directory at a time; the lock dies with the process (even on SIGKILL).
  // A sweep killed with SIGKILL leaves the file but not the lock: the next sweep just takes it.
  fs::path lock_path = plan.sweep_dir / ".lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) fail("cannot open the sweep's lock file {}: {}", lock_path.string(), std::strerror(errno));
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    close(lock_fd);
    if (err == EWOULDBLOCK)
      fail("{}: another `rmt sweep` is running in this directory (it holds {}); wait for it to "
           "end, or stop it", plan.sweep_dir.string(), lock_path.string());
    fail("cannot lock {}: {}", lock_path.string(), std::strerror(err));
  }
  // Holding the lock, this sweep owns the files only sweeps write: what a killed one left
  // half-written goes (run directories are cleaned as their runs start).
  remove_stale_temps(plan.sweep_dir, options.quiet);
  remove_stale_temps(plan.sweep_dir / "configs", options.quiet);

  prepare_sweep_files(plan, options);
  std::vector<size_t> queue;  // runs still to do, in grid order
  int done = 0, failed = 0;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    RunState s = run_state(plan.runs[i]);
    if (s == RunState::done) ++done;
    else queue.push_back(i);  // failed runs are retried
  }
  write_results_csv(plan);
  if (!options.quiet)
    fmt::print(stderr, "sweep {}: {} runs, {} done, {} to run, {} at a time, {} threads each\n",
               plan.spec.name, plan.runs.size(), done, queue.size(), options.jobs,
               plan.runs.empty() ? 0 : plan.runs[0].config.train.threads);

  std::map<pid_t, size_t> running;
  size_t next = 0;
  auto last_report = std::chrono::steady_clock::now() - std::chrono::hours(1);
  const bool tty = isatty(2);
  while (next < queue.size() || !running.empty()) {
    while (next < queue.size() && int(running.size()) < options.jobs) {
      const SweepRun& run = plan.runs[queue[next++]];
      fs::create_directories(run.dir);
      wait_for_run_directory(run.dir);
      remove_stale_temps(run.dir, options.quiet);  // sweep_error.txt's (train cleans its own too)
      fs::remove(run.dir / "sweep_error.txt");
      auto args = train_args(plan, run);
      append_line(run.dir / "train.log", "$ " + command_line("rmt", args));
      running[spawn(options.rmt_binary, args, run.dir / "train.log")] = size_t(&run - plan.runs.data());
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const SweepRun& run = plan.runs[running[pid]];
      running.erase(pid);
      const int code = exit_code(status);
      // train writes results.json last, so a run that has it is whole however its process
      // ended (killed just after the write, it would otherwise count failed here and done in
      // results.csv).
      const bool ok = fs::exists(run.dir / "results.json");
      std::string why;
      if (ok) {
        ++done;
      } else {
        ++failed;
        if (WIFSIGNALED(status)) {
          // Killed from outside (OOM killer, kill -9): its log ends in a progress line, which
          // would read as the reason.
          why = fmt::format("rmt train was killed by signal {} ({}) at {}; the next sweep resumes it",
                            WTERMSIG(status), strsignal(WTERMSIG(status)), run_progress(run));
        } else if (code == 0) {
          why = "rmt train exited without writing results.json";
        } else {
          why = last_line(run.dir / "train.log");
          if (why.empty()) why = fmt::format("rmt train exited with status {}", code);
        }
        write_file_atomic(run.dir / "sweep_error.txt", why + "\n");
      }
      write_results_csv(plan);
      if (options.on_run_end) options.on_run_end();
      if (!options.quiet)
        fmt::print(stderr, "{}sweep: {} {}{}\n", tty ? "\r\033[K" : "", run.run_id,
                   ok ? "done" : "FAILED: ", why);
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (!options.quiet && now - last_report >= std::chrono::seconds(tty ? 1 : 30)) {
      last_report = now;
      std::string line = fmt::format("sweep: {} done, {} failed, {} running, {} pending", done, failed,
                                     running.size(), queue.size() - next);
      for (const auto& [p, i] : running) line += fmt::format(" | {}: {}", plan.runs[i].run_id, run_progress(plan.runs[i]));
      if (tty) fmt::print(stderr, "\r\033[K{}", line);
      else fmt::print(stderr, "{}\n", line);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a finished run's slot refills soon
  }
  if (!options.quiet)
    fmt::print(stderr, "{}sweep {}: {} done, {} failed; results in {}\n", tty ? "\r\033[K" : "", plan.spec.name,
               done, failed, (plan.sweep_dir / "results.csv").string());
  close(lock_fd);
  return failed;
}

std::vector<std::string> pending_commands(const SweepPlan& plan, const SweepOptions& options,
                                          const std::string& threads) {
  std::vector<std::string> out;
  for (const auto& run : plan.runs) {
    if (run_state(run) == RunState::done) continue;
    std::vector<std::string> args = train_args(plan, run);
    std::string line = command_line(options.rmt_binary, args);
    // A started run (train_args resumes it) keeps the thread count in its saved config.
    if (std::find(args.begin(), args.end(), "--resume") == args.end()) line += " --set train.threads=" + threads;
    out.push_back(line);
  }
  return out;
}

}  // namespace rmt
