// Kill tests of `rmt sweep -j 2` (tests/kill_harness.h): SIGKILLed at its file-write points, while
// its runs train and between runs (packed too), one of its runs killed inside it or after it
// wrote results.json; then re-run with the documented command. The outcome must equal an
// uninterrupted sweep's: every run once in results.csv and bit-identical except the fields that
// measure time, no temp file left, and no lock left that blocks the next run.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "tests/cli.h"
#include "tests/kill_harness.h"

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
