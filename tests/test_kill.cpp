// Kill tests: `rmt train` and `rmt sweep -j 2` SIGKILLed at every file-write point (the
// RMT_TEST_KILL_AT_WRITE hook of lib/files/io.h: inside a write, between its temp file and the rename,
// and just after) and at moments between writes, then resumed with the documented command.
// The outcome must equal an uninterrupted run's: every file bit-identical except the fields that
// measure time, no metrics line lost or duplicated, every sweep run once in results.csv, no temp
// file left, and no lock left that blocks the next run.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "lib/files/safetensors.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// ---- running rmt --------------------------------------------------------------------------------

// Starts `rmt ARGS` with stdout and stderr appended to `log`; with kill_at set, the process
// SIGKILLs itself at that write point (lib/files/io.h: "N" or "N:PATH_TEXT").
pid_t start_rmt(const std::vector<std::string>& args, const fs::path& log, const std::string& kill_at = "") {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!kill_at.empty()) setenv(rmt::kKillAtWriteEnv, kill_at.c_str(), 1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    argv.push_back(const_cast<char*>(RMT_BINARY));
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(RMT_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

struct Outcome {
  bool killed = false;  // by SIGKILL
  int status = -1;      // exit status otherwise
};

Outcome wait_rmt(pid_t pid) {
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
  Outcome o;
  if (WIFSIGNALED(ws)) o.killed = WTERMSIG(ws) == SIGKILL;
  else if (WIFEXITED(ws)) o.status = WEXITSTATUS(ws);
  return o;
}

Outcome run_rmt(const std::vector<std::string>& args, const fs::path& log, const std::string& kill_at = "") {
  return wait_rmt(start_rmt(args, log, kill_at));
}

std::string text_of(const fs::path& path) { return fs::exists(path) ? rmt::read_file(path) : ""; }

// Files named like write_file_atomic's temp files (NAME.tmp.PID) anywhere under dir.
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Waits until no process has `text` in its command line (the runs of a killed sweep die with it).
bool no_process_mentions(const std::string& text) {
  for (int attempt = 0; attempt < 250; ++attempt) {
    bool found = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(e.path() / "cmdline", std::ios::binary);
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmdline.find(text) != std::string::npos) found = true;
    }
    if (!found) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// This process's own scratch directory: other test processes on the machine (another worktree's
// suite) must not share it, and /proc is searched for its path.
fs::path kill_tmp(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("rmt_test_kill.{}", getpid()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The pids of processes whose command line holds all of `words`.
std::vector<pid_t> processes_with(const std::vector<std::string>& words) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bool all = !cmdline.empty();
    for (const auto& w : words) all = all && cmdline.find(w) != std::string::npos;
    if (all) out.push_back(pid_t(std::stol(name)));
  }
  return out;
}

// A process's state letter from /proc/<pid>/stat ('R' running, 'T' stopped, 'Z' exited...), or
// 0 once it is gone.
char process_state(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(") ");  // the command name in parentheses may hold spaces
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

// A fixed-seed generator for choosing kill points (the same choice every time).
struct Lcg {
  uint64_t state;
  uint64_t below(uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  }
};

// ---- what must be identical ---------------------------------------------------------------------

// metrics.jsonl without tokens_per_s (timing); a torn line shows up as "<torn>".
std::string metrics_without_timing(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) return out + "<torn, no newline>\n";
    json j = json::parse(text.substr(start, end - start), nullptr, false);
    if (j.is_discarded()) {
      out += "<torn>\n";
    } else {
      j.erase("tokens_per_s");
      out += j.dump() + "\n";
    }
    start = end + 1;
  }
  return out;
}

// state.safetensors without its wall_time_s metadata: tensors and the other counters.
std::string state_without_timing(const fs::path& path) {
  rmt::SafetensorsFile f = rmt::load_safetensors(path.string());
  std::string out;
  for (const auto& [key, value] : f.metadata)
    if (key != "wall_time_s") out += key + "=" + value + "\n";
  for (const auto& [name, t] : f.tensors) {
    out += name + "\n";
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  }
  return out;
}

// A run directory's files as they must match: bytes, except the timing fields.
std::map<std::string, std::string> run_files(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "train.log" || name == "sweep_error.txt") continue;  // a sweep's own notes
    std::string bytes = rmt::read_file(e.path());
    if (name == "metrics.jsonl") {
      bytes = metrics_without_timing(bytes);
    } else if (name == "results.json") {
      json j = json::parse(bytes, nullptr, false);
      if (!j.is_discarded()) {
        j.erase("wall_time_s");
        j.erase("peak_rss_mb");  // measured, varies by a few pages between runs
      }
      bytes = j.dump();
    } else if (name == "state.safetensors") {
      bytes = state_without_timing(e.path());
    }
    files[name] = bytes;
  }
  return files;
}

// Checks that run directory `got` holds exactly the files of `want`, with equal contents.
void check_same_run(const fs::path& want, const fs::path& got, const std::string& context) {
  CAPTURE(context);
  auto a = run_files(want), b = run_files(got);
  std::set<std::string> names;
  for (const auto& [k, v] : a) names.insert(k);
  for (const auto& [k, v] : b) names.insert(k);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK_MESSAGE(a.count(name), "unexpected file " << (got / name).string());
    CHECK_MESSAGE(b.count(name), "missing file " << (got / name).string());
    if (a.count(name) && b.count(name)) {
      if (name == "metrics.jsonl") CHECK(a[name] == b[name]);  // prints both on failure
      else CHECK_MESSAGE(a[name] == b[name], "differs from the uninterrupted run: " << name);
    }
  }
}

// ---- rmt train ----------------------------------------------------------------------------------

// A tiny run: 8 steps, a log line every 2, an evaluation and checkpoint every 4 (so kills land
// before the first checkpoint, between checkpoints and inside each checkpoint's three files).
struct TinyTrain {
  fs::path root, config, reference;
  TinyTrain() {
    root = kill_tmp("train");
    const fs::path data = root / "data";
    Run g = rmt_run("generate copy --length 5 --symbols 4 --train 300 --val 40 --test 40 --out " + data.string());
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root / "tiny.yaml";
    std::ofstream(config) << "data: " << data.string() << "\n"
                          << "segments: 3\n"
                          << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, dropout: 0.1, num_mem_tokens: 2}\n"
                          << "train: {batch_size: 8, lr: 1.0e-3, max_steps: 8, eval_every: 4, "
                             "log_every: 2, seed: 3, threads: 1}\n";
    reference = root / "uninterrupted";
    Outcome o = train(reference);
    REQUIRE_MESSAGE(o.status == 0, text_of(root / "log"));
  }
  ~TinyTrain() { fs::remove_all(root.parent_path()); }
  Outcome train(const fs::path& out, bool resume = false, const std::string& kill_at = "",
                const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"train", "--config", config.string(), "--out", out.string()};
    if (resume) args.push_back("--resume");
    args.insert(args.end(), extra.begin(), extra.end());
    return run_rmt(args, root / "log", kill_at);
  }
  // Resumes a killed run with the documented command and checks it against the reference.
  void resume_and_check(const fs::path& out, const std::string& context) const {
    fs::remove(root / "log");
    Outcome o = train(out, true);
    CAPTURE(context);
    REQUIRE_MESSAGE(o.status == 0, "rmt train --resume failed: " << text_of(root / "log"));
    CHECK_MESSAGE(temp_files(out).empty(), "temp files left: " << fmt::format("{}", fmt::join(temp_files(out), " ")));
    check_same_run(reference, out, context);
  }
};

const TinyTrain& tiny_train() {
  static TinyTrain t;
  return t;
}

}  // namespace

TEST_CASE("kill: rmt train killed at every write point resumes bit-identical") {
  const TinyTrain& t = tiny_train();
  const fs::path out = t.root / "killed";
  // Point n of a fresh run: 1 inside config.yaml's write, ..., the last just after results.json.
  int points = 0;
  for (int n = 1;; ++n) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, std::to_string(n));
    if (!o.killed) {
      REQUIRE_MESSAGE(o.status == 0, text_of(t.root / "log"));
      break;  // n is past the last write point: the run finished
    }
    ++points;
    t.resume_and_check(out, fmt::format("killed at write point {}", n));
  }
  // config.yaml, 4 log lines, 2 evaluation lines, 2 checkpoints of last/best/state (best only
  // when it improves), results.json: three points each.
  CHECK(points >= 3 * (1 + 4 + 2 + 2 * 2 + 1));
  MESSAGE("rmt train: " << points << " kill points");
}

TEST_CASE("kill: rmt train killed between writes, and killed again while resuming") {
  const TinyTrain& t = tiny_train();
  const fs::path out = t.root / "twice";
  // Between checkpoints: after steps that write nothing or only a log line, before the first
  // checkpoint and after the last (before results.json).
  for (int step : {1, 2, 3, 5, 6, 8}) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, "", {"--abort-after-step", std::to_string(step)});
    REQUIRE(o.status == 86);
    t.resume_and_check(out, fmt::format("died after step {}", step));
  }
  // A resume killed inside its first rewrite of metrics.jsonl (the lines after the checkpoint
  // are dropped), then resumed again.
  for (int m = 1; m <= 3; ++m) {
    fs::remove_all(out);
    REQUIRE(t.train(out, false, "", {"--abort-after-step", "7"}).status == 86);
    REQUIRE(t.train(out, true, fmt::format("{}:metrics.jsonl", m)).killed);
    t.resume_and_check(out, fmt::format("resume killed at metrics.jsonl point {}", m));
  }
  // Pairs of kill points with a fixed seed: the run killed at one, its resume at another.
  Lcg rng{20240};
  int pairs = 0;
  for (int i = 0; i < 8; ++i) {
    const int first = 1 + int(rng.below(42)), second = 1 + int(rng.below(30));
    fs::remove_all(out);
    if (!t.train(out, false, std::to_string(first)).killed) continue;
    t.train(out, true, std::to_string(second));  // killed, or finished if past its last point
    ++pairs;
    t.resume_and_check(out, fmt::format("killed at point {}, its resume at point {}", first, second));
  }
  CHECK(pairs >= 6);
  MESSAGE("rmt train: 6 between-write kills, 3 + " << pairs << " double kills");
}

// ---- rmt train of a language model ------------------------------------------------------------

namespace {

// A tiny language model: xl_rmt with bptt 2 (three carried states, cache and memory), dropout,
// 4 streams of 4 segments per pass, 10 steps: the streams start over at steps 4 and 8, and the
// checkpoints at steps 3, 6, 9 and 10 fall mid-pass, with states stored. A log line every step
// (the loss logged averages the steps since the last line, which a resume cannot restore when a
// checkpoint falls between two lines).
struct TinyLmTrain {
  fs::path root, config, reference;
  TinyLmTrain() {
    root = kill_tmp("lm");
    std::string text;
    uint64_t x = 7;
    for (int i = 0; i < 620; ++i) {  // deterministic letters and spaces
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text += "abcdefgh ij\n"[(x >> 33) % 12];
    }
    rmt::write_file_atomic(root / "text.txt", text);
    const fs::path data = root / "data";
    Run g = rmt_run("generate text --input " + (root / "text.txt").string() + " --out " + data.string());
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root / "lm.yaml";
    // train split 558 bytes: 4 streams of 139, (139 - 1) / 32 = 4 segments per pass
    std::ofstream(config) << "data: " << data.string() << "\n"
                          << "segment_length: 32\nbptt: 2\n"
                          << "model: {kind: xl_rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, dropout: 0.1, num_mem_tokens: 2, mem_len: 40}\n"
                          << "train: {batch_size: 4, lr: 1.0e-3, max_steps: 10, eval_every: 3, "
                             "log_every: 1, seed: 3, threads: 1}\n";
    reference = root / "uninterrupted";
    Outcome o = train(reference);
    REQUIRE_MESSAGE(o.status == 0, text_of(root / "log"));
  }
  ~TinyLmTrain() { fs::remove_all(root.parent_path()); }
  Outcome train(const fs::path& out, bool resume = false, const std::string& kill_at = "",
                const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"train", "--config", config.string(), "--out", out.string()};
    if (resume) args.push_back("--resume");
    args.insert(args.end(), extra.begin(), extra.end());
    return run_rmt(args, root / "log", kill_at);
  }
  void resume_and_check(const fs::path& out, const std::string& context) const {
    fs::remove(root / "log");
    Outcome o = train(out, true);
    CAPTURE(context);
    REQUIRE_MESSAGE(o.status == 0, "rmt train --resume failed: " << text_of(root / "log"));
    CHECK_MESSAGE(temp_files(out).empty(), "temp files left: " << fmt::format("{}", fmt::join(temp_files(out), " ")));
    check_same_run(reference, out, context);
  }
};

}  // namespace

TEST_CASE("kill: a language model killed at every write point and between steps resumes bit-identical") {
  const TinyLmTrain t;
  // The state file carries the streams' states: at the last checkpoint (step 10) the streams
  // are at segment 2 of their third pass, with the states entering segments 1 and 2 stored.
  rmt::SafetensorsFile state = rmt::load_safetensors((t.reference / "state.safetensors").string());
  CHECK(state.metadata.at("lm.next_segment") == "2");
  CHECK(state.metadata.at("lm.states") == "2");
  CHECK(state.tensors.count("lm.state.1.cache.0") == 1);
  CHECK(state.tensors.count("lm.state.1.mem") == 1);
  const fs::path out = t.root / "killed";
  int points = 0;
  for (int n = 1;; ++n) {
    fs::remove_all(out);
    Outcome o = t.train(out, false, std::to_string(n));
    if (!o.killed) {
      REQUIRE_MESSAGE(o.status == 0, text_of(t.root / "log"));
      break;
    }
    ++points;
    t.resume_and_check(out, fmt::format("killed at write point {}", n));
  }
  // config.yaml, 10 log lines, 4 evaluation lines, 4 checkpoints of last/best/state (best only
  // when it improves), results.json: three points each.
  CHECK(points >= 3 * (1 + 10 + 4 + 4 * 2 + 1));
  for (int step : {1, 3, 4, 5, 7, 8, 10}) {
    fs::remove_all(out);
    REQUIRE(t.train(out, false, "", {"--abort-after-step", std::to_string(step)}).status == 86);
    t.resume_and_check(out, fmt::format("died after step {}", step));
  }
  MESSAGE("rmt train (language model): " << points << " kill points, 7 between-step kills");
}

// ---- rmt sweep ----------------------------------------------------------------------------------

namespace {

// Four tiny runs (two kinds x two segment counts), run two at a time.
const char* kKillSweep = R"(
data: {task: copy, length: 4, symbols: 4, train: 200, val: 16, test: 16, seed: 0}
base:
  model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, dropout: 0.1}
  train: {batch_size: 8, lr: 1.0e-3, schedule: constant, max_steps: 8, eval_every: 4, log_every: 2}
grid:
  model.kind: [baseline, rmt]
  segments: [1, 2]
derive:
  model.num_mem_tokens: segment_length / 2 + 1
)";

// results.csv without wall_time_s, one line per row; fails unless every run is there once, done.
std::string csv_without_timing(const fs::path& path) {
  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(path), path.string());
  const int wall = csv.column("wall_time_s"), id = csv.column("run_id"), status = csv.column("status");
  REQUIRE(wall >= 0);
  std::set<std::string> ids;
  std::string out;
  for (const auto& row : csv.rows) {
    CHECK_MESSAGE(ids.insert(row[size_t(id)]).second, "run listed twice: " << row[size_t(id)]);
    CHECK(row[size_t(status)] == "done");
    for (size_t i = 0; i < row.size(); ++i)
      if (int(i) != wall) out += row[i] + ",";
    out += "\n";
  }
  return out;
}

struct TinySweep {
  fs::path root, file, runs, sweep_dir, reference;
  TinySweep() {
    root = kill_tmp("sweep");
    file = root / "tiny.yaml";
    rmt::write_file_atomic(file, kKillSweep);
    // Every scenario uses the same runs directory, so RUN_IDs (which hash the dataset's path)
    // and the saved configs equal the reference's.
    runs = root / "runs";
    sweep_dir = runs / "tiny";
    Outcome o = sweep();
    REQUIRE_MESSAGE(o.status == 0, text_of(root / "log"));
    reference = root / "reference";
    fs::copy(sweep_dir, reference, fs::copy_options::recursive);
    REQUIRE(rmt::parse_csv(rmt::read_file(reference / "results.csv"), "results.csv").rows.size() == 4);
  }
  ~TinySweep() { fs::remove_all(root.parent_path()); }
  // extra: more `rmt sweep` options (--pack K)
  std::vector<std::string> args(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {"sweep", file.string(), "-j", "2", "--runs-dir", runs.string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  Outcome sweep(const std::string& kill_at = "", const std::vector<std::string>& extra = {}) const {
    return run_rmt(args(extra), root / "log", kill_at);
  }
  void clear() const {
    fs::remove_all(runs);
    fs::remove(root / "log");
  }
  // After a kill: a plain re-run completes the sweep as if nothing had happened. With
  // check_runs_died, first checks that the runs died with the sweep; without, the re-run starts
  // at once, while they may still be dying.
  void rerun_and_check(const std::string& context, bool check_runs_died = true,
                       const std::vector<std::string>& extra = {}) const {
    CAPTURE(context);
    if (check_runs_died) CHECK_MESSAGE(no_process_mentions(runs.string()), "a run outlived its killed sweep");
    fs::remove(root / "log");
    Outcome o = sweep("", extra);
    REQUIRE_MESSAGE(o.status == 0, "the re-run failed: " << text_of(root / "log"));
    CHECK_MESSAGE(temp_files(sweep_dir).empty(),
                  "temp files left: " << fmt::format("{}", fmt::join(temp_files(sweep_dir), " ")));
    CHECK(csv_without_timing(sweep_dir / "results.csv") == csv_without_timing(reference / "results.csv"));
    for (const auto& e : fs::directory_iterator(reference))
      if (fs::exists(e.path() / "results.json"))
        check_same_run(e.path(), sweep_dir / e.path().filename(), context + ", run " + e.path().filename().string());
  }
};

const TinySweep& tiny_sweep() {
  static TinySweep t;
  return t;
}

// Polls `ready` every 5 ms for up to 60 s.
template <typename Ready>
bool wait_for(Ready ready) {
  auto start = std::chrono::steady_clock::now();
  while (!ready()) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// How many run directories hold `name`.
int runs_with(const fs::path& sweep_dir, const std::string& name) {
  int n = 0;
  if (fs::exists(sweep_dir))
    for (const auto& e : fs::directory_iterator(sweep_dir)) n += fs::exists(e.path() / name);
  return n;
}

}  // namespace

TEST_CASE("kill: rmt sweep -j 2 killed at write points resumes with every run once") {
  const TinySweep& t = tiny_sweep();
  // The sweep's own writes: results.csv is rebuilt once at the start and after each of the 4
  // runs (points 1-3: the first rebuild, before any run; 4-6: after the first run, while
  // another trains; 13-15: the last); a run's config file; a run's command line in train.log.
  const std::vector<std::string> points = {"1:results.csv",  "2:results.csv", "3:results.csv",
                                           "4:results.csv",  "5:results.csv", "9:results.csv",
                                           "14:results.csv", "2:configs/",    "3:train.log"};
  for (const auto& point : points) {
    t.clear();
    Outcome o = t.sweep(point);
    CHECK_MESSAGE(o.killed, point << ": " << text_of(t.root / "log"));
    t.rerun_and_check("sweep killed at " + point);
  }
  // Killed twice: inside a results.csv rebuild, then its re-run inside another.
  t.clear();
  CHECK(t.sweep("5:results.csv").killed);
  CHECK(t.sweep("2:results.csv").killed);
  t.rerun_and_check("killed at 5:results.csv, its re-run at 2:results.csv");
  // The dataset generation killed inside a write (the sweep regenerates a dataset that has no
  // meta.yaml).
  t.clear();
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::parse_sweep(kKillSweep, t.file.string()), t.runs.string(), 1);
  REQUIRE(plan.datasets.size() == 1);
  fs::create_directories(plan.datasets[0].dir);
  CHECK(run_rmt(plan.datasets[0].generate_args, t.root / "log", "2").killed);
  t.rerun_and_check("generate killed at write point 2");
  MESSAGE("rmt sweep: " << points.size() + 2 << " write-point kills");
}

TEST_CASE("kill: rmt sweep -j 2 killed while runs train and between runs") {
  const TinySweep& t = tiny_sweep();
  const std::string lock_message = "another `rmt sweep` is running";
  // While runs train (a run has logged but none has finished), and between runs (one has
  // finished); the first also checks that the lock stops a second sweep while one runs.
  for (const char* moment : {"training", "between runs"}) {
    t.clear();
    pid_t pid = start_rmt(t.args(), t.root / "log");
    bool reached = wait_for([&] {
      return std::string(moment) == "training" ? runs_with(t.sweep_dir, "metrics.jsonl") > 0
                                               : runs_with(t.sweep_dir, "results.json") > 0;
    });
    if (std::string(moment) == "training") {
      Run second = rmt_run("sweep " + t.file.string() + " -j 2 --runs-dir " + t.runs.string());
      CHECK(second.status == 1);
      CHECK_MESSAGE(second.output.find(lock_message) != std::string::npos, second.output);
    }
    kill(pid, SIGKILL);
    wait_rmt(pid);
    REQUIRE_MESSAGE(reached, moment);
    CHECK(runs_with(t.sweep_dir, "results.json") < 4);  // killed mid-sweep
    CHECK(fs::exists(t.sweep_dir / ".lock"));           // left behind, and must not block
    t.rerun_and_check(std::string("sweep killed ") + moment, false);
  }
  // Killed at pseudo-random moments (fixed seed): 0-1.5 s after the start.
  Lcg rng{7};
  for (int i = 0; i < 3; ++i) {
    t.clear();
    const int ms = int(rng.below(1500));
    pid_t pid = start_rmt(t.args(), t.root / "log");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    kill(pid, SIGKILL);
    wait_rmt(pid);
    t.rerun_and_check(fmt::format("sweep killed after {} ms", ms), false);
  }
  MESSAGE("rmt sweep: 2 kills at chosen moments, 3 at random moments");
}

TEST_CASE("kill: a packed sweep killed while its runs train resumes, packed or alone, as the unpacked sweep") {
  const TinySweep& t = tiny_sweep();
  // The reference sweep trains every run alone with one thread (-j 2 on 2 cores); packed runs
  // compute with one thread each, so on another core count only the RUN_IDs (not the bits)
  // are the reference's: there the packed sweep is its own reference.
  const bool two_cores = std::thread::hardware_concurrency() == 2;
  const std::vector<std::string> packed = {"--pack", "3"};
  t.clear();
  Outcome whole = t.sweep("", packed);
  REQUIRE_MESSAGE(whole.status == 0, text_of(t.root / "log"));
  CHECK(text_of(t.root / "log").find("a pack trains up to 3 runs of one model shape") != std::string::npos);
  CHECK(fs::exists(t.sweep_dir / "packs"));  // the baseline runs share a pack
  if (two_cores) CHECK(csv_without_timing(t.sweep_dir / "results.csv") == csv_without_timing(t.reference / "results.csv"));
  for (const bool rerun_packed : {true, false}) {
    t.clear();
    pid_t pid = start_rmt(t.args(packed), t.root / "log");
    const bool reached = wait_for([&] { return runs_with(t.sweep_dir, "metrics.jsonl") > 0; });
    kill(pid, SIGKILL);
    wait_rmt(pid);
    REQUIRE(reached);
    CHECK(runs_with(t.sweep_dir, "results.json") < 4);
    if (two_cores)
      t.rerun_and_check(rerun_packed ? "packed sweep killed, resumed packed" : "packed sweep killed, resumed alone",
                        true, rerun_packed ? packed : std::vector<std::string>{});
    else
      CHECK(t.sweep("", rerun_packed ? packed : std::vector<std::string>{}).status == 0);
  }
}

TEST_CASE("kill: a run killed inside a running sweep is recorded as failed, then resumed") {
  const TinySweep& t = tiny_sweep();
  t.clear();
  pid_t pid = start_rmt(t.args(), t.root / "log");
  // Kill one `rmt train` of the sweep (as the OOM killer would) once it has logged a step and
  // before it has written results.json (after that the run is whole, and counts as done). It is
  // stopped first, so that it cannot write the file between the check and the kill.
  std::string victim;
  bool killed = wait_for([&] {
    if (runs_with(t.sweep_dir, "metrics.jsonl") == 0) return false;
    for (pid_t p : processes_with({"train", t.sweep_dir.string()})) {
      std::ifstream in(fmt::format("/proc/{}/cmdline", p), std::ios::binary);
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t out = cmdline.find(std::string("--out") + '\0');
      if (out == std::string::npos || kill(p, SIGSTOP) != 0) continue;
      wait_for([&] { char c = process_state(p); return c != 'R' && c != 'S' && c != 'D'; });
      if (process_state(p) != 'T') continue;  // it ended before the stop reached it
      const fs::path dir = cmdline.c_str() + out + 6;
      if (fs::exists(dir / "results.json")) {
        kill(p, SIGCONT);
        continue;
      }
      kill(p, SIGKILL);
      victim = dir.filename().string();
      return true;
    }
    return false;
  });
  Outcome o = wait_rmt(pid);
  REQUIRE(killed);
  REQUIRE(!victim.empty());
  CAPTURE(victim);
  // The sweep goes on with the others and reports the killed one as failed, saying why.
  CHECK(o.status == 1);
  CHECK(text_of(t.root / "log").find("1 of 4 runs failed") != std::string::npos);
  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(t.sweep_dir / "results.csv"), "results.csv");
  REQUIRE(csv.rows.size() == 4);
  int failed = 0;
  for (const auto& row : csv.rows)
    if (row[size_t(csv.column("status"))] == "failed") {
      ++failed;
      CHECK(row[size_t(csv.column("run_id"))] == victim);
      CHECK(row[size_t(csv.column("error"))].find("killed by signal 9") != std::string::npos);
    }
  CHECK(failed == 1);
  // The next sweep resumes it: every run once, as if never killed.
  t.rerun_and_check("a run killed inside the sweep");
}

TEST_CASE("kill: a run killed after it wrote results.json is done, in the sweep's count and in results.csv") {
  // train writes results.json last; a process killed after that (a SIGKILL racing its exit)
  // left a whole run. A wrapper kills each `rmt train` with SIGKILL once it has finished.
  const TinySweep& t = tiny_sweep();
  const fs::path dir = kill_tmp("killed-after-results");
  const fs::path wrapper = dir / "rmt-killed-at-exit";
  rmt::write_file_atomic(wrapper, fmt::format("#!/bin/sh\n\"{}\" \"$@\"\nstatus=$?\n"
                                              "if [ \"$1\" = train ]; then kill -9 $$; fi\nexit $status\n",
                                              RMT_BINARY));
  fs::permissions(wrapper, fs::perms::owner_all);
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::parse_sweep(rmt::read_file(t.file), t.file.string()),
                                        (dir / "runs").string(), 0);
  rmt::SweepOptions opt;
  opt.rmt_binary = wrapper.string();
  opt.jobs = 2;
  opt.quiet = true;
  CHECK(rmt::run_sweep(plan, opt) == 0);
  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(plan.sweep_dir / "results.csv"), "results.csv");
  REQUIRE(csv.rows.size() == 4);
  for (const auto& row : csv.rows) CHECK(row[size_t(csv.column("status"))] == "done");
  for (const auto& run : plan.runs) CHECK_FALSE(fs::exists(run.dir / "sweep_error.txt"));
}
