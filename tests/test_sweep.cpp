// rmt sweep: sweep files (good and bad), derived values, RUN_IDs, --emit, and resume after a kill.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/core/provenance.h"
#include "lib/experiments/generated_data.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "tests/cli.h"
#include "tests/import_fixtures.h"

namespace fs = std::filesystem;

namespace {

fs::path sweep_tmp(const std::string& name) { return fresh_dir("rmt_test_sweep", name); }


std::string write_sweep(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::path path = dir / (name + ".yaml");
  rmt::write_file_atomic(path, text);
  return path.string();
}

int count_lines(const std::string& text) {
  int n = 0;
  for (char ch : text) n += ch == '\n';
  return n;
}

}  // namespace

TEST_CASE("sweep --set: every run's config gets the value, and the runs are other runs") {
  const fs::path dir = sweep_tmp("set");
  const std::string text = "data: {task: copy, length: 4, symbols: 4, train: 64, val: 16, test: 16, seed: 0}\n"
                           "base: {train: {max_steps: 50}}\ngrid: {model.kind: [baseline, rmt], segments: [1, 2]}\n";
  rmt::SweepSpec spec = rmt::parse_sweep(text, (dir / "s.yaml").string());
  const rmt::SweepPlan before = rmt::plan_sweep(spec, (dir / "runs").string(), 1);
  rmt::apply_sweep_override(spec, "train.max_steps=7");
  rmt::apply_sweep_override(spec, "model.dropout = 0.2");
  const rmt::SweepPlan after = rmt::plan_sweep(spec, (dir / "runs").string(), 1);
  REQUIRE(after.runs.size() == before.runs.size());
  for (size_t i = 0; i < after.runs.size(); ++i) {
    CHECK(after.runs[i].config.train.max_steps == 7);
    CHECK(after.runs[i].config.model.dropout == doctest::Approx(0.2));
    CHECK(after.runs[i].run_id != before.runs[i].run_id);
  }
}

TEST_CASE("sweep: derive expressions") {
  std::map<std::string, long long> vars = {{"segment_length", 24}, {"segments", 3}};
  CHECK(rmt::eval_expression("segment_length", vars, "x") == 24);
  CHECK(rmt::eval_expression("segment_length / 2", vars, "x") == 12);
  CHECK(rmt::eval_expression("(segment_length + 1) * 2 - segments", vars, "x") == 47);
  CHECK(rmt::eval_expression("7", vars, "x") == 7);
  CHECK(error_of([&] { rmt::eval_expression("segment_lenght / 2", vars, "f.yaml: derive.m"); })
            .find("f.yaml: derive.m: unknown name 'segment_lenght'") != std::string::npos);
  CHECK(error_of([&] { rmt::eval_expression("24 /", vars, "x"); }).find("unexpected end") != std::string::npos);
  CHECK(error_of([&] { rmt::eval_expression("1 / 0", vars, "x"); }).find("division by zero") != std::string::npos);
}

TEST_CASE("sweep: derive arithmetic is checked: overflow, division by zero, depth") {
  const std::map<std::string, long long> vars = {{"segment_length", 24}, {"seq_len", 72}, {"segments", 3}};
  auto error = [&](const std::string& expr) { return error_of([&] { rmt::eval_expression(expr, vars, "f.yaml: derive.k"); }); };
  // INT64_MIN / -1 raised SIGFPE; now it is an error naming the file, the key and the operator.
  CHECK(error("(0 - 9223372036854775807 - 1) / (0 - 1)").find("f.yaml: derive.k: integer overflow in '/'") == 0);
  CHECK(error("9223372036854775807 + 1").find("integer overflow in '+'") != std::string::npos);
  CHECK(error("0 - 9223372036854775807 - 2").find("integer overflow in '-'") != std::string::npos);
  CHECK(error("segment_length * 9223372036854775807").find("integer overflow in '*'") != std::string::npos);
  CHECK(error("-(0 - 9223372036854775807 - 1)").find("integer overflow in '-'") != std::string::npos);
  CHECK(error("9223372036854775808").find("integer literal too large") != std::string::npos);
  CHECK(error("seq_len / (segments - 3)") ==
        "f.yaml: derive.k: division by zero in expression 'seq_len / (segments - 3)' at column 9 "
        "(with segment_length = 24, segments = 3, seq_len = 72)");
  // Deep nesting is an error, not a stack overflow; 64 levels still work.
  CHECK(error(std::string(100000, '(') + "1" + std::string(100000, ')')).find("nesting deeper than 64 levels") != std::string::npos);
  CHECK(error(std::string(100000, '-') + "1").find("nesting deeper than 64 levels") != std::string::npos);
  CHECK(rmt::eval_expression(std::string(63, '(') + "segments" + std::string(63, ')'), vars, "x") == 3);
  CHECK(rmt::eval_expression("-(0 - 9223372036854775807)", vars, "x") == 9223372036854775807LL);
  CHECK(rmt::eval_expression("-7 / 2", vars, "x") == -3);  // truncates toward zero, like C
  CHECK(error("(1 + 2").find("missing ')'") != std::string::npos);
  CHECK(error("1 + 2)").find("unmatched ')'") != std::string::npos);
  CHECK(error(std::string("1 +\x01", 4)).find("unexpected byte 0x01") != std::string::npos);
  // The sweep file's own check is about syntax and names: values that divide by zero only at some
  // grid point are caught when that point is planned, naming the point.
  const std::string data = "data: {task: copy, length: 4, symbols: 4}\n";
  rmt::SweepSpec spec = rmt::parse_sweep(data + "grid: {segments: [1, 2]}\nderive: {train.batch_size: 8 / (segments - 1)}", "s.yaml");
  std::string message = error_of([&] { rmt::plan_sweep(spec, "/tmp/unused", 1); });
  CHECK(message.find("s.yaml: derive.train.batch_size: division by zero") == 0);
}

TEST_CASE("sweep: malformed sweep files: duplicate keys, non-scalar keys, out-of-range data options") {
  auto error = [](const std::string& text) {
    return error_of([&] { rmt::plan_sweep(rmt::parse_sweep(text, "bad.yaml"), "/tmp/unused", 1); });
  };
  const std::string data = "data: {task: copy, length: 4, symbols: 4}\n";
  CHECK(error(data + "grid: {segments: [1]}\ngrid: {segments: [2]}") == "bad.yaml: section 'grid' is given twice");
  CHECK(error("data: {task: copy, task: reverse}\ngrid: {segments: [1]}") == "bad.yaml: data.task: given twice");
  CHECK(error(data + "grid: {segments: [1], segments: [2]}") == "bad.yaml: grid.segments: given twice");
  CHECK(error(data + "grid: {segments: [1]}\nderive: {model.mem_len: segments, model.mem_len: seq_len}") ==
        "bad.yaml: derive.model.mem_len: given twice");
  CHECK(error(data + "grid: {[a, b]: [1]}") == "bad.yaml: grid: keys must be plain names, got a list");
  CHECK(error("data: {task: copy, length: 99999999999}\ngrid: {segments: [1]}") ==
        "bad.yaml: data: invalid value '99999999999' for data option 'length': expected an integer in [1, 100000]");
  CHECK(error("data: {task: copy, length: 4x}\ngrid: {segments: [1]}").find("expected an integer") != std::string::npos);
  CHECK(error(data + "grid: {data.length: [4, 99999999999], segments: [1]}").find("'99999999999' for data option 'length'") !=
        std::string::npos);
  CHECK(error("[1, 2]").find("bad.yaml: expected a mapping") == 0);
  CHECK(error("data: {task: copy\n").find("bad.yaml: malformed YAML at line") == 0);
}

TEST_CASE("sweep: plan, derived memory, RUN_IDs") {
  fs::path dir = sweep_tmp("plan");
  rmt::SweepSpec spec = rmt::parse_sweep(kTinySweep, "tiny.yaml");
  rmt::SweepPlan plan = rmt::plan_sweep(spec, dir.string(), 1);
  // copy length 4: input 4 + separator... 12 positions; 1 segment of 12, or 2 of 6.
  REQUIRE(plan.runs.size() == 4);
  std::set<std::string> ids;
  for (const auto& run : plan.runs) {
    ids.insert(run.run_id);
    if (run.config.model.kind == "rmt") CHECK(run.config.model.num_mem_tokens == run.segment_length / 2 + 1);
    else CHECK(run.config.model.num_mem_tokens == 0);  // baseline: no memory, and none in its id
    CHECK(run.config.data == (dir / "tiny" / "data").string());
    CHECK(run.config.train.threads == 1);
  }
  CHECK(ids.size() == 4);
  CHECK(plan.runs[0].run_id.rfind("baseline-seg1-", 0) == 0);
  CHECK(plan.runs[3].run_id.rfind("rmt-seg2-mem", 0) == 0);
  // The thread count is not part of RUN_ID (changing -j never orphans a run)...
  rmt::SweepPlan plan8 = rmt::plan_sweep(spec, dir.string(), 8);
  CHECK(plan8.runs[3].run_id == plan.runs[3].run_id);
  // ...but every other config value is.
  std::string other = kTinySweep;
  other.replace(other.find("max_steps: 5"), 12, "max_steps: 6");
  CHECK(rmt::plan_sweep(rmt::parse_sweep(other, "tiny.yaml"), dir.string(), 1).runs[3].run_id != plan.runs[3].run_id);
  // A run with a checkpoint resumes from its own saved config; others start from the sweep's.
  CHECK(rmt::run_state(plan.runs[0]) == rmt::RunState::pending);
  CHECK(rmt::train_args(plan, plan.runs[0]).back() == plan.runs[0].dir.string());
  fs::create_directories(plan.runs[0].dir);
  // Started but killed before its first checkpoint: `train --resume` restarts it from step 0
  // with its own saved config (the thread count it started with).
  rmt::write_file_atomic(plan.runs[0].dir / "config.yaml", "x");
  CHECK(rmt::run_state(plan.runs[0]) == rmt::RunState::pending);
  CHECK(rmt::train_args(plan, plan.runs[0]).back() == "--resume");
  rmt::write_file_atomic(plan.runs[0].dir / "state.safetensors", "x");
  CHECK(rmt::run_state(plan.runs[0]) == rmt::RunState::resumable);
  std::vector<std::string> resume = rmt::train_args(plan, plan.runs[0]);
  CHECK(resume.back() == "--resume");
  CHECK(resume[2] == (plan.runs[0].dir / "config.yaml").string());
  rmt::write_file_atomic(plan.runs[0].dir / "results.json", "{}");
  CHECK(rmt::run_state(plan.runs[0]) == rmt::RunState::done);
  // Grid points that resolve to the same config are one run (baseline ignores the memory size).
  const char* dup = R"(
data: {task: copy, length: 4, symbols: 4}
grid:
  model.kind: [baseline]
  model.num_mem_tokens: [4, 8]
)";
  CHECK(rmt::plan_sweep(rmt::parse_sweep(dup, "dup.yaml"), dir.string(), 1).runs.size() == 1);
  // A list of grids runs each in turn.
  const char* blocks = R"(
data: {task: copy, length: 4, symbols: 4}
grid:
  - {model.kind: [baseline], segments: [1, 2, 3]}
  - {model.kind: [rmt], segments: [2, 3]}
derive: {model.num_mem_tokens: segment_length}
)";
  CHECK(rmt::plan_sweep(rmt::parse_sweep(blocks, "blocks.yaml"), dir.string(), 1).runs.size() == 5);
}

TEST_CASE("sweep: RUN_IDs of the committed results stay valid; --device names another run") {
  // experiments/results/quick_copy/results.csv was made by `make run` (runs dir "runs"): the same
  // sweep file must still plan exactly those runs, or a re-run would train them again.
  const std::string source = RMT_SOURCE_DIR;
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::load_sweep(source + "/experiments/quick_copy.yaml"), "runs", 2);
  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(source + "/experiments/results/quick_copy/results.csv"),
                                     "results.csv");
  std::set<std::string> committed, planned;
  for (const auto& row : csv.rows) committed.insert(row[size_t(csv.column("run_id"))]);
  for (const auto& run : plan.runs) planned.insert(run.run_id);
  CHECK(committed.size() == 14);
  CHECK(planned == committed);
  // --device cpu is the default: the same runs. Another device: other runs, every one of them.
  rmt::SweepPlan cpu = rmt::plan_sweep(plan.spec, "runs", 2, "cpu");
  rmt::SweepPlan cuda = rmt::plan_sweep(plan.spec, "runs", 2, "cuda");
  REQUIRE(cpu.runs.size() == plan.runs.size());
  REQUIRE(cuda.runs.size() == plan.runs.size());
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    CHECK(cpu.runs[i].run_id == plan.runs[i].run_id);
    CHECK(cuda.runs[i].run_id != plan.runs[i].run_id);
    CHECK(cuda.runs[i].config.device == "cuda");
    CHECK(committed.count(cuda.runs[i].run_id) == 0);
  }
  // A grid over devices and --device at once is a contradiction.
  const char* grid = R"(
data: {task: copy, length: 4, symbols: 4}
grid:
  device: [cpu, cuda]
)";
  rmt::SweepSpec by_grid = rmt::parse_sweep(grid, "g.yaml");
  CHECK(rmt::plan_sweep(by_grid, "runs", 1).runs.size() == 2);
  try {
    rmt::plan_sweep(by_grid, "runs", 1, "cpu");
    FAIL("expected an error");
  } catch (const rmt::Error& e) {
    CHECK(std::string(e.what()).find("g.yaml: grid.device gives the runs their devices; --device cpu") == 0);
  }
}

TEST_CASE("sweep: bad sweep files are rejected naming file, key and reason") {
  auto error = [](const std::string& text) {
    return error_of([&] { rmt::plan_sweep(rmt::parse_sweep(text, "bad.yaml"), "/tmp/unused", 1); });
  };
  const std::string data = "data: {task: copy, length: 4, symbols: 4}\n";
  CHECK(error(data + "grid: {model.n_layr: [1, 2]}") ==
        "bad.yaml: grid.model.n_layr: unknown key 'model.n_layr' (did you mean 'model.n_layer'?)");
  CHECK(error(data + "base: {model: {n_heads: 2}}\ngrid: {segments: [1]}").find("did you mean 'model.n_head'") != std::string::npos);
  CHECK(error(data + "grid: {segments: []}") == "bad.yaml: grid.segments: the list is empty; give at least one value");
  CHECK(error(data + "grid: {}").find("'grid:'") != std::string::npos);
  CHECK(error(data + "grid: {model.dropout: [0.1, 1.5]}") ==
        "bad.yaml: grid.model.dropout: invalid value '1.5' for 'model.dropout': expected a number in [0, 1)");
  CHECK(error(data + "grid: {segments: [0]}").find("bad.yaml: grid.segments: invalid value '0'") != std::string::npos);
  CHECK(error(data + "grid: {segments: [2, 99]}").find("segments 99 is more than the 12 input positions") != std::string::npos);
  CHECK(error(data + "grid: {segments: [1]}\nderive: {model.num_mem_tokns: segment_length}").find("did you mean 'model.num_mem_tokens'") != std::string::npos);
  CHECK(error(data + "grid: {segments: [1]}\nderive: {model.num_mem_tokens: seg_length}").find("unknown name 'seg_length'") != std::string::npos);
  CHECK(error(data + "grid: {model.kind: [rmt], segments: [1]}\nderive: {model.num_mem_tokens: segment_length - 12}").find("needs model.num_mem_tokens > 0") != std::string::npos);
  CHECK(error("data: {task: copi}\ngrid: {segments: [1]}").find("unknown task 'copi'") != std::string::npos);
  CHECK(error("data: {task: copy, lenght: 4}\ngrid: {segments: [1]}").find("unknown data option 'lenght' (did you mean 'length'?)") != std::string::npos);
  CHECK(error(data + "grids: {segments: [1]}").find("unknown section 'grids' (did you mean 'grid'?)") != std::string::npos);
  // The BABILong-style options reach rmt generate's checks (facts, distractors, noise).
  const std::string facts = "data: {task: reasoning, length: 64, facts: 3, distractors: 0, noise: filler, noise_words: 8}\n";
  CHECK(error(facts + "grid: {segments: [4]}").empty());
  CHECK(error("data: {task: reasoning, length: 64, facts: 4}\ngrid: {segments: [4]}").find("bad.yaml: data:") != std::string::npos);
  CHECK(error("data: {task: memorize, length: 64, noise: fog}\ngrid: {segments: [4]}").find("fog") != std::string::npos);
  CHECK(error("data: {task: copy, length: 4, distractors: 1}\ngrid: {segments: [1]}").find("--distractors is not an option of task copy") != std::string::npos);
  CHECK(error("data: {task: memorize, length: 4096, distractors: 0}\ngrid: {segments: [300]}").empty());
  CHECK(error(data + "base: {data: x}\ngrid: {segments: [1]}").find("filled in by the sweep") != std::string::npos);
  // The CLI says the same before starting anything.
  fs::path dir = sweep_tmp("bad");
  std::string file = write_sweep(dir, "bad", data + "grid: {model.n_layr: [1]}");
  Run r = rmt_run("sweep " + file + " --runs-dir " + (dir / "runs").string());
  CHECK(r.status == 1);
  CHECK(r.output.find("did you mean 'model.n_layer'") != std::string::npos);
  CHECK(!fs::exists(dir / "runs" / "bad"));
}

TEST_CASE("sweep: --emit commands and --emit slurm") {
  fs::path dir = sweep_tmp("emit");
  std::string file = write_sweep(dir, "tiny", kTinySweep);
  std::string runs = (dir / "runs").string();
  Run c = rmt_run("sweep " + file + " --emit commands --runs-dir " + runs, true);
  REQUIRE_MESSAGE(c.status == 0, c.output);
  CHECK(count_lines(c.output) == 4);
  CHECK(c.output.find(" train --config " + runs + "/tiny/configs/baseline-seg1-") != std::string::npos);
  CHECK(c.output.find("--resume") == std::string::npos);
  CHECK(fs::exists(dir / "runs" / "tiny" / "data" / "meta.yaml"));  // the commands need the data
  // Each emitted command is a working `rmt train`.
  std::string first = c.output.substr(0, c.output.find('\n'));
  CHECK(std::system((first + " >/dev/null 2>&1").c_str()) == 0);
  Run c2 = rmt_run("sweep " + file + " --emit commands --runs-dir " + runs, true);
  CHECK(count_lines(c2.output) == 3);  // the finished one is no longer pending

  Run s = rmt_run("sweep " + file + " --emit slurm --runs-dir " + runs);
  REQUIRE_MESSAGE(s.status == 0, s.output);
  std::string script = rmt::read_file(dir / "runs" / "tiny" / "sweep.slurm");
  CHECK(script.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(script.find("#SBATCH --array=0-2\n") != std::string::npos);
  CHECK(script.find("eval \"${COMMANDS[$task]}\"") != std::string::npos);
  CHECK(script.find("task=$SLURM_ARRAY_TASK_ID\n") != std::string::npos);
  CHECK(script.find("rmt-seg2-mem") != std::string::npos);
  CHECK(std::system(("bash -n " + (dir / "runs" / "tiny" / "sweep.slurm").string()).c_str()) == 0);
}

TEST_CASE("sweep: a killed sweep resumes; every run finishes once, results.csv has each once") {
  fs::path dir = sweep_tmp("resume");
  std::string text = kTinySweep;
  text.replace(text.find("max_steps: 5, eval_every: 5"), 27, "max_steps: 60, eval_every: 20");
  std::string file = write_sweep(dir, "tiny", text);
  std::string runs = (dir / "runs").string();
  fs::path sweep_dir = dir / "runs" / "tiny";

  // Start the sweep, SIGKILL it once the first run has finished.
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    execl(RMT_BINARY, RMT_BINARY, "sweep", file.c_str(), "--runs-dir", runs.c_str(), (char*)nullptr);
    _exit(127);
  }
  auto finished = [&] {
    int n = 0;
    if (fs::exists(sweep_dir))
      for (const auto& e : fs::directory_iterator(sweep_dir)) n += fs::exists(e.path() / "results.json");
    return n;
  };
  auto start = std::chrono::steady_clock::now();
  while (finished() < 1 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the runs die with the sweep
  const int done_before = finished();
  REQUIRE(done_before >= 1);
  CHECK(done_before < 4);  // killed mid-sweep
  std::map<fs::path, fs::file_time_type> stamps;
  for (const auto& e : fs::directory_iterator(sweep_dir))
    if (fs::exists(e.path() / "results.json")) stamps[e.path()] = fs::last_write_time(e.path() / "results.json");
  // The csv written so far is whole: a header and one row per finished run.
  CHECK(rmt::parse_csv(rmt::read_file(sweep_dir / "results.csv"), "results.csv").rows.size() <= size_t(done_before));

  Run again = rmt_run("sweep " + file + " --runs-dir " + runs);
  REQUIRE_MESSAGE(again.status == 0, again.output);
  CHECK(again.output.find(fmt::format("{} done, {} to run", done_before, 4 - done_before)) != std::string::npos);
  CHECK(again.output.find(" done (its step ceiling, ") != std::string::npos);  // how each run ended
  CHECK(again.output.find(" steps; test acc ") != std::string::npos);
  CHECK(finished() == 4);
  for (const auto& [path, stamp] : stamps) CHECK(fs::last_write_time(path / "results.json") == stamp);  // not rerun

  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(sweep_dir / "results.csv"), "results.csv");
  REQUIRE(csv.rows.size() == 4);
  std::set<std::string> ids;
  for (const auto& row : csv.rows) {
    ids.insert(row[size_t(csv.column("run_id"))]);
    CHECK(row[size_t(csv.column("status"))] == "done");
    CHECK(row[size_t(csv.column("steps"))] == "60");
    // where the numbers came from: this machine and build
    CHECK(row[size_t(csv.column("device"))] == "cpu");
    CHECK(row[size_t(csv.column("cpu_model"))] == rmt::cpu_model_name());
    CHECK(!row[size_t(csv.column("vector_extensions"))].empty());
    CHECK(row[size_t(csv.column("build"))].find("; ") != std::string::npos);  // compiler flags; gemm
  }
  CHECK(ids.size() == 4);
  for (const char* col : {"model.kind", "segments", "model.num_mem_tokens", "model.mem_len", "bptt", "train.seed",
                          "acc_teacher_forced", "acc_free_running", "exact_match", "solve_rate", "loss", "wall_time_s",
                          "git_commit", "threads", "device", "cpu_model", "vector_extensions", "build", "error"})
    CHECK_MESSAGE(csv.column(col) >= 0, col);

  // Once more: nothing to run, the same csv.
  std::string before = rmt::read_file(sweep_dir / "results.csv");
  Run third = rmt_run("sweep " + file + " --runs-dir " + runs);
  CHECK(third.output.find("4 done, 0 to run") != std::string::npos);
  CHECK(rmt::read_file(sweep_dir / "results.csv") == before);
}

TEST_CASE("sweep: a failing run is recorded and does not stop the others") {
  fs::path dir = sweep_tmp("fail");
  std::string text = kTinySweep;
  // Every config in the file is valid, so break one run from outside: a checkpoint whose saved
  // config differs makes its `rmt train --resume` fail.
  std::string file = write_sweep(dir, "tiny", text);
  std::string runs = (dir / "runs").string();
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::parse_sweep(text, file), runs, 1);
  fs::create_directories(plan.runs[1].dir);
  rmt::write_file_atomic(plan.runs[1].dir / "state.safetensors", "not a checkpoint");
  rmt::Config changed = plan.runs[1].config;
  changed.train.max_steps = 99;  // differs from the sweep's: the resume refuses
  rmt::write_file_atomic(plan.runs[1].dir / "config.yaml", rmt::to_yaml(changed));
  Run r = rmt_run("sweep " + file + " -j 2 --runs-dir " + runs);
  CHECK(r.status == 1);
  CHECK(r.output.find("1 of 4 runs failed") != std::string::npos);
  rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(dir / "runs" / "tiny" / "results.csv"), "results.csv");
  REQUIRE(csv.rows.size() == 4);
  int failed = 0;
  for (const auto& row : csv.rows)
    if (row[size_t(csv.column("status"))] == "failed") {
      ++failed;
      CHECK(row[size_t(csv.column("run_id"))] == plan.runs[1].run_id);
      CHECK(row[size_t(csv.column("error"))].find("saved config differs") != std::string::npos);
    }
  CHECK(failed == 1);
}

TEST_CASE("sweep: a data directory generated with other options is refused, not silently reused") {
  // The data directory and the run ids do not name the data options: after the sweep file's data
  // changes, the old data (and the runs trained on it) must not count as the new sweep's.
  fs::path dir = sweep_tmp("changed_data");
  std::string file = write_sweep(dir, "tiny", kTinySweep);
  const std::string runs = (dir / "runs").string();
  Run first = rmt_run("sweep " + file + " --emit commands --runs-dir " + runs, true);  // generates the data
  REQUIRE_MESSAGE(first.status == 0, first.output);
  std::string changed = kTinySweep;
  changed.replace(changed.find("length: 4"), 9, "length: 6");
  write_sweep(dir, "tiny", changed);
  for (const char* how : {"--dry-run", "--emit commands", "-j 1", "--collect"}) {
    CAPTURE(how);
    Run r = rmt_run("sweep " + file + " " + how + " --runs-dir " + runs);
    CHECK(r.status != 0);
    CHECK(r.output.find("/tiny/data was generated with length 4, but the spec asks for length 6") != std::string::npos);
  }
  // The same options written differently pass; so does a changed seed's check name the seed.
  rmt::check_generated_dataset(dir / "runs" / "tiny" / "data",
                               {"generate", "copy", "--out", "x", "--length", "4", "--seed", "0", "--train", "200.0"});
  CHECK_THROWS_WITH(rmt::check_generated_dataset(dir / "runs" / "tiny" / "data", {"generate", "copy", "--seed", "3"}),
                    doctest::Contains("generated with seed 0, but the spec asks for seed 3"));
  CHECK_THROWS_WITH(rmt::check_generated_dataset(dir / "runs" / "tiny" / "data", {"generate", "reverse"}),
                    doctest::Contains("generated with task copy, but the spec asks for task reverse"));
}

TEST_CASE("sweep: data: {dir: ...} trains on a dataset that exists (an imported task), read and never written") {
  fs::path dir = sweep_tmp("existing_data");
  fs::create_directories(dir / "src");
  write_sort_task((dir / "src").string(), sort_task());
  const std::string data = (dir / "sort").string();
  Run imported = rmt_run("data import " + (dir / "src").string() + " --out " + data);
  REQUIRE_MESSAGE(imported.status == 0, imported.output);
  auto files_of = [&] {  // name -> bytes of every file in the dataset
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(data)) out[e.path().filename().string()] = rmt::read_file(e.path());
    return out;
  };
  const auto before = files_of();
  const std::string file = write_sweep(dir, "sorting", fmt::format(R"(data: {{dir: {}}}
base:
  model: {{n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16}}
  train: {{batch_size: 8, max_steps: 4, eval_every: 2, eval_samples: 8}}
grid:
  model.kind: [baseline, rmt]
  segments: [2]
derive:
  model.num_mem_tokens: segment_length
)", data));
  const rmt::SweepSpec spec = rmt::load_sweep(file);
  const rmt::SweepPlan plan = rmt::plan_sweep(spec, (dir / "runs").string(), 1);
  REQUIRE(plan.runs.size() == 2);
  CHECK(plan.datasets.size() == 1);
  CHECK(plan.datasets[0].generate_args.empty());  // nothing to generate
  for (const auto& run : plan.runs) CHECK(run.config.data == data);
  // The sort task's 6 + 6 ids make 11 input positions: 2 segments of at most 6.
  CHECK(plan.runs[1].config.model.num_mem_tokens == 6);
  Run swept = rmt_run("sweep " + file + " -j 1 --runs-dir " + (dir / "runs").string());
  REQUIRE_MESSAGE(swept.status == 0, swept.output);
  CHECK(swept.output.find("generating") == std::string::npos);
  CHECK(files_of() == before);  // the dataset is the user's: read only
  CHECK(!fs::exists(dir / "runs" / "sorting" / "data"));
  Run table = rmt_run("table " + (dir / "runs" / "sorting" / "results.csv").string() + " --metric exact_match");
  REQUIRE_MESSAGE(table.status == 0, table.output);
  CHECK(table.output.find("| baseline | ") != std::string::npos);
  CHECK(table.output.find("| rmt (mem 6) | ") != std::string::npos);
  // --collect and --emit take it too, and check nothing a generator would.
  CHECK(rmt_run("sweep " + file + " --collect --runs-dir " + (dir / "runs").string()).status == 0);
}

TEST_CASE("sweep: derive may set segments (one ar_remember block a segment); the run's segment length is that count's") {
  const rmt::SweepSpec spec = rmt::parse_sweep(R"(data: {task: ar_remember}
grid: {data.pairs: [3, 5]}
derive: {segments: seq_len / 4 + 1}
)", "ar.yaml");
  const rmt::SweepPlan plan = rmt::plan_sweep(spec, "runs", 1);
  REQUIRE(plan.runs.size() == 2);
  // Blocks of key = value . (4 positions): 3 pairs make 15 input positions, 5 make 23.
  CHECK(plan.runs[0].config.segments == 4);
  CHECK(plan.runs[0].segment_length == 4);
  CHECK(plan.runs[1].config.segments == 6);
  CHECK(plan.runs[1].segment_length == 4);
  CHECK_THROWS_WITH(rmt::plan_sweep(rmt::parse_sweep("data: {task: ar_remember}\ngrid: {data.pairs: [3]}\n"
                                                     "derive: {segments: seq_len + 1}\n", "ar.yaml"), "runs", 1),
                    doctest::Contains("segments 16 (derived) is more than the 15 input positions of task ar_remember"));
}
