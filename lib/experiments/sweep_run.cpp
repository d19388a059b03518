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
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/experiments/generated_data.h"
#include "lib/experiments/process.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/files/io.h"
#include "lib/run/run_data.h"
#include "tasks/family.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;
using sweep_internal::SweepTask;
using sweep_internal::sweep_tasks;
using sweep_internal::pack_args;
using sweep_internal::pack_log;

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

void prepare_sweep_files(const SweepPlan& plan, const SweepOptions& options) {
  for (const auto& d : plan.datasets) {
    if (d.generate_args.empty()) continue;  // data: {dir: ...}, read as it is (plan_sweep checked it)
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
    if (run_logged(options.rmt_binary, args, log) != 0)
      fail("generating {} failed: {}", d.dir, last_line(log));
  }
  fs::create_directories(plan.sweep_dir / "configs");
  for (const auto& run : plan.runs) {
    fs::path path = config_file(plan, run);
    std::string text = to_yaml(run.config);
    if (!fs::exists(path) || read_file(path) != text) write_file_atomic(path, text);
  }
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

// How a finished run ended, for its "done" line: " (solved at step 2500; test acc 0.998)", " (its
// step ceiling, 40000 steps; test acc 0.523)", " (unmastered ...)"; language models their bpc.
static std::string run_outcome(const SweepRun& run) {
  const json j = json::parse(read_file(run.dir / "results.json"), nullptr, false);
  if (!j.is_object()) return "";
  auto number = [&](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN; };
  const std::string reason = j.contains("end_reason") && j["end_reason"].is_string() ? j["end_reason"].get<std::string>() : "";
  const double steps = number("steps"), solved = number("solved_step");
  std::string how = reason == "solved" && std::isfinite(solved) ? fmt::format("solved at step {:.0f}", solved)
                    : reason == "unmastered" ? fmt::format("a curriculum stage unmastered, at step {:.0f}", steps)
                    : fmt::format("its step ceiling, {:.0f} steps", steps);
  const double bpc = number("bpc"), acc = number("acc_teacher_forced");
  const std::string score = std::isfinite(bpc) ? fmt::format("test bpc {:.4f}", bpc)
                            : std::isfinite(acc) ? fmt::format("test acc {:.3f}", acc) : "";
  return fmt::format(" ({}{}{})", how, score.empty() ? "" : "; ", score);
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

void check_finished_runs_data(const SweepPlan& plan) {
  std::map<std::string, std::string> now;  // data.dir -> its fingerprint, hashed once
  for (const auto& d : plan.datasets)
    if (d.generate_args.empty()) now[d.dir] = "";  // generated data: check_generated_dataset's
  for (const auto& run : plan.runs) {
    const auto it = now.find(run.config.data);
    if (it == now.end() || run_state(run) != RunState::done) continue;
    const std::string recorded = recorded_dataset_fingerprint(run.dir.string());
    if (recorded.empty()) continue;  // an older rmt recorded none: nothing to compare
    if (it->second.empty()) it->second = dataset_fingerprint(it->first);
    if (recorded != it->second)
      fail("sweep {}: dataset {} changed since run {} finished on it (its fingerprint is now {}, the run "
           "recorded {}): that run's results are of other data. Restore the dataset, or move the finished "
           "runs aside (or use another --runs-dir) to train them on it anew",
           plan.spec.name, it->first, run.run_id, it->second, recorded);
  }
}

void check_sweep_runnable(const SweepPlan& plan, const SweepOptions& options) {
  check_finished_runs_data(plan);
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
  // `--mps on` asks for runs on a GPU.
  if (options.mps == MpsMode::on) {
    const SweepRun* first = nullptr;
    for (const auto& run : plan.runs) {
      if (run_state(run) == RunState::done) continue;
      if (device_is_gpu(run.config.device)) {
        first = nullptr;
        break;
      }
      if (!first) first = &run;
    }
    if (first)
      fail("--mps on: no run of sweep {} to do is on a GPU (run {} is on {}); MPS shares a GPU between the "
           "runs of --device cuda", plan.spec.name, first->run_id, first->config.device);
  }
  // Data still to generate: `rmt generate --check` of each (sizes, memory, disk, the input).
  for (const auto& d : plan.datasets) {
    if (d.generate_args.empty()) continue;  // data: {dir: ...}: nothing to generate
    if (fs::exists(fs::path(d.dir) / "meta.yaml")) {
      check_generated_dataset(d.dir, d.generate_args);  // before any run starts
      continue;
    }
    std::vector<std::string> args = d.generate_args;
    args.insert(args.end(), {"--force", "--check"});
    const fs::path log = fs::temp_directory_path() / fmt::format("rmt-sweep-check.{}.log", getpid());
    fs::remove(log);
    const int status = run_logged(options.rmt_binary, args, log);
    const std::string why = last_line(log);
    fs::remove(log);
    if (status != 0) fail("generating {} would fail: {}", d.dir, why);
  }
}

int sweep_default_jobs(bool on_gpu) {
  if (!on_gpu) return 1;
  return std::clamp(int(std::thread::hardware_concurrency()), 1, kMpsMaxClients);
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
  // Runs on a GPU side by side: one MPS decision for the sweep, said in one line.
  const bool on_gpu = std::any_of(queue.begin(), queue.end(),
                                  [&](size_t i) { return device_is_gpu(plan.runs[i].config.device); });
  std::optional<MpsSession> mps;
  int jobs = options.jobs;
  if (on_gpu) {
    mps.emplace(options.mps, plan.sweep_dir.string(), options.mps_tools);
    if (!options.quiet) fmt::print(stderr, "sweep {}: {}\n", plan.spec.name, mps->line());
    if (mps->active() && jobs > kMpsMaxClients) {
      if (!options.quiet)
        fmt::print(stderr, "sweep {}: an MPS server serves at most {} processes: {} runs at a time, not {}\n",
                   plan.spec.name, kMpsMaxClients, kMpsMaxClients, jobs);
      jobs = kMpsMaxClients;
    }
  }
  const EnvChanges child_env = mps ? mps->child_env() : EnvChanges();

  // ---- Tasks: one `rmt train` process per run, or with --pack one `rmt train-pack` per group
  // of runs that share a model shape (sweep_tasks).
  const std::vector<SweepTask> tasks = sweep_tasks(plan, queue, options.pack, jobs);
  const int pack_threads = std::max(1, int(std::thread::hardware_concurrency()) / jobs);
  if (!options.quiet && options.pack > 1)
    fmt::print(stderr, "sweep {}: {} runs, {} done, {} to run in {} processes, {} at a time; a pack trains up to {} "
               "runs of one model shape in one computation, {} at a time on the CPU\n", plan.spec.name,
               plan.runs.size(), done, queue.size(), tasks.size(), jobs, options.pack, pack_threads);
  else if (!options.quiet)
    fmt::print(stderr, "sweep {}: {} runs, {} done, {} to run, {} at a time, {} threads each\n",
               plan.spec.name, plan.runs.size(), done, queue.size(), jobs,
               plan.runs.empty() ? 0 : plan.runs[0].config.train.threads);
  struct Running {
    const SweepTask* task;
    std::vector<bool> reported;  // per run of the task: its end counted and printed
  };
  std::map<pid_t, Running> running;
  size_t next = 0;
  auto last_report = std::chrono::steady_clock::now() - std::chrono::hours(1);
  const bool tty = isatty(2);
  // A run's end: counted, its error recorded, results.csv rebuilt, a line printed.
  auto run_ended = [&](const SweepRun& run, const std::string& why) {
    // train writes results.json last, so a run that has it is whole however its process ended
    // (killed just after the write, it would otherwise count failed here and done in results.csv).
    const bool ok = fs::exists(run.dir / "results.json");
    if (ok) ++done;
    else ++failed, write_file_atomic(run.dir / "sweep_error.txt", why + "\n");
    write_results_csv(plan);
    if (options.on_run_end) options.on_run_end();
    if (!options.quiet)
      fmt::print(stderr, "{}sweep: {} {}{}\n", tty ? "\r\033[K" : "", run.run_id, ok ? "done" : "FAILED: ",
                 ok ? run_outcome(run) : why);
  };
  while (next < tasks.size() || !running.empty()) {
    while (next < tasks.size() && int(running.size()) < jobs) {
      const SweepTask& task = tasks[next++];
      for (size_t i : task.runs) {
        const SweepRun& run = plan.runs[i];
        fs::create_directories(run.dir);
        wait_for_run_directory(run.dir);
        remove_stale_temps(run.dir, options.quiet);  // sweep_error.txt's (train cleans its own too)
        fs::remove(run.dir / "sweep_error.txt");
      }
      pid_t pid;
      if (!task.packed) {
        const SweepRun& run = plan.runs[task.runs[0]];
        auto args = train_args(plan, run);
        append_line(run.dir / "train.log", "$ " + command_line("rmt", args));
        pid = spawn_logged(options.rmt_binary, args, run.dir / "train.log", child_env);
      } else {
        const std::vector<std::string> args = pack_args(plan, task, options.pack, pack_threads);
        for (size_t i : task.runs)
          append_line(plan.runs[i].dir / "train.log",
                      fmt::format("$ {} (packed: {} runs, {} at a time)", command_line("rmt", args), task.runs.size(),
                                  std::min<size_t>(size_t(options.pack), task.runs.size())));
        pid = spawn_logged(options.rmt_binary, args, pack_log(plan, task), child_env);
      }
      running[pid] = Running{&task, std::vector<bool>(task.runs.size(), false)};
    }
    // Runs of a pack end one by one while the pack goes on.
    for (auto& [p, r] : running)
      for (size_t k = 0; k < r.task->runs.size(); ++k)
        if (r.task->packed && !r.reported[k] && fs::exists(plan.runs[r.task->runs[k]].dir / "results.json")) {
          r.reported[k] = true;
          run_ended(plan.runs[r.task->runs[k]], "");
        }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      Running r = running[pid];
      running.erase(pid);
      const int code = exit_code(status);
      const char* program = r.task->packed ? "rmt train-pack" : "rmt train";
      for (size_t k = 0; k < r.task->runs.size(); ++k) {
        if (r.reported[k]) continue;
        const SweepRun& run = plan.runs[r.task->runs[k]];
        std::string why;
        if (WIFSIGNALED(status)) {
          // Killed from outside (OOM killer, kill -9): its log ends in a progress line, which
          // would read as the reason.
          why = fmt::format("{} was killed by signal {} ({}) at {}; the next sweep resumes it", program,
                            WTERMSIG(status), strsignal(WTERMSIG(status)), run_progress(run));
        } else {
          why = code == 0 ? "" : last_line(run.dir / "train.log");  // a pack writes each run's error there
          if (code == 0) why = fmt::format("{} exited without writing results.json", program);
          else if (why.empty()) why = fmt::format("{} exited with status {}", program, code);
        }
        run_ended(run, why);
      }
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (!options.quiet && now - last_report >= std::chrono::seconds(tty ? 1 : 30)) {
      last_report = now;
      size_t pending = 0, in_progress = 0;
      for (size_t t = next; t < tasks.size(); ++t) pending += tasks[t].runs.size();
      for (const auto& [p, r] : running) in_progress += size_t(std::count(r.reported.begin(), r.reported.end(), false));
      std::string line = fmt::format("sweep: {} done, {} failed, {} running, {} pending", done, failed,
                                     in_progress, pending);
      for (const auto& [p, r] : running)
        for (size_t k = 0; k < r.task->runs.size(); ++k)
          if (!r.reported[k] && fs::exists(plan.runs[r.task->runs[k]].dir / "metrics.jsonl"))
            line += fmt::format(" | {}: {}", plan.runs[r.task->runs[k]].run_id, run_progress(plan.runs[r.task->runs[k]]));
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
