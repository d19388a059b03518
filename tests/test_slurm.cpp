// rmt sweep --emit slurm / --emit commands / --collect: the job-array script's text (resources
// as #SBATCH lines, threads from the allocation), its array tasks run as sbatch would run them,
// and results.csv collecting every externally run run exactly once. tests/slurm/ runs the same
// against a real SLURM (make test-slurm).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "lib/run/config.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

fs::path slurm_tmp(const std::string& name) { return fresh_dir("rmt_test_slurm", name); }


std::string write_sweep(const fs::path& dir) {
  fs::path path = dir / "tiny.yaml";
  rmt::write_file_atomic(path, kTinySweep);
  return path.string();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Runs array task `task` of a script as sbatch would: its environment, its output in the log
// file the script's #SBATCH --output names. Returns the exit status.
int run_array_task(const fs::path& script, const fs::path& sweep_dir, int task, int cpus, const std::string& job = "77") {
  std::string log = fs::absolute(sweep_dir / fmt::format("slurm-{}_{}.log", job, task)).string();
  std::string cmd = fmt::format("SLURM_ARRAY_JOB_ID={} SLURM_ARRAY_TASK_ID={} SLURM_CPUS_PER_TASK={} bash {} >{} 2>&1",
                                job, task, cpus, script.string(), log);
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

rmt::CsvTable results(const fs::path& sweep_dir) {
  return rmt::parse_csv(rmt::read_file(sweep_dir / "results.csv"), "results.csv");
}

std::vector<std::string> column(const rmt::CsvTable& csv, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& row : csv.rows) out.push_back(row[size_t(csv.column(name))]);
  return out;
}

// One run broken from outside: a garbage checkpoint beside the sweep's unresolved config makes
// its `rmt train --resume` fail.
void break_run(const rmt::SweepRun& run) {
  fs::create_directories(run.dir);
  rmt::write_file_atomic(run.dir / "config.yaml", rmt::to_yaml(run.config));
  rmt::write_file_atomic(run.dir / "state.safetensors", "not a checkpoint");
}

}  // namespace

TEST_CASE("slurm script: resources as #SBATCH lines, omitted ones left out, threads from the allocation") {
  fs::path dir = slurm_tmp("text");
  std::string file = write_sweep(dir);
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::parse_sweep(kTinySweep, file), (dir / "runs").string(), 0);
  REQUIRE(plan.runs.size() == 4);
  rmt::SweepOptions opt;
  opt.rmt_binary = "/opt/rmt bin/rmt";  // a space: the commands quote it

  SUBCASE("defaults: one core, a 24-hour limit, nothing else") {
    std::string s = rmt::slurm_script(plan, opt, rmt::SlurmOptions{});
    CHECK(s.find("#SBATCH --cpus-per-task=1\n") != std::string::npos);
    CHECK(s.find("#SBATCH --time=24:00:00\n") != std::string::npos);
    for (const char* absent : {"--mem", "--partition", "--account", "--gpus"})
      CHECK_MESSAGE(s.find(fmt::format("#SBATCH {}", absent)) == std::string::npos, absent);
  }
  SUBCASE("every option given") {
    rmt::SlurmOptions o;
    o.partition = "cpu,short";
    o.account = "proj-42";
    o.mem = "4G";
    o.time = "1-12:00:00";
    o.gpus = "a100:2";
    o.cpus_per_task = 8;
    for (auto& run : plan.runs) run.config.device = "cuda";  // GPUs are asked for runs on one
    std::string s = rmt::slurm_script(plan, opt, o);
    std::vector<std::string> sbatch;
    for (const auto& line : lines_of(s))
      if (line.rfind("#SBATCH ", 0) == 0) sbatch.push_back(line);
    const std::string log_dir = fs::absolute(plan.sweep_dir).lexically_normal().string();
    CHECK(sbatch == std::vector<std::string>{
                        "#SBATCH --job-name=rmt-tiny", "#SBATCH --array=0-3",
                        "#SBATCH --output=" + log_dir + "/slurm-%A_%a.log", "#SBATCH --cpus-per-task=8",
                        "#SBATCH --time=1-12:00:00", "#SBATCH --mem=4G", "#SBATCH --partition=cpu,short",
                        "#SBATCH --account=proj-42", "#SBATCH --gpus=a100:2"});
    // The #SBATCH block comes before the first command (sbatch stops reading at it).
    CHECK(s.find("#SBATCH --gpus") < s.find("set -euo pipefail"));
  }
  SUBCASE("each new run takes SLURM_CPUS_PER_TASK threads; a started run keeps its own") {
    // Run 2 has started: its saved config is what `train --resume` compares against.
    fs::create_directories(plan.runs[2].dir);
    rmt::write_file_atomic(plan.runs[2].dir / "config.yaml", rmt::to_yaml(plan.runs[2].config));
    std::vector<std::string> commands = rmt::pending_commands(plan, opt, "$SLURM_CPUS_PER_TASK");
    REQUIRE(commands.size() == 4);
    for (size_t i = 0; i < commands.size(); ++i) {
      CAPTURE(commands[i]);
      CHECK(commands[i].rfind("'/opt/rmt bin/rmt' train --config ", 0) == 0);
      if (i == 2) {
        CHECK(ends_with(commands[i], " --resume"));
        CHECK(commands[i].find("train.threads") == std::string::npos);
      } else {
        CHECK(ends_with(commands[i], " --set train.threads=$SLURM_CPUS_PER_TASK"));
      }
    }
    std::string s = rmt::slurm_script(plan, opt, rmt::SlurmOptions{});
    // In the array, single-quoted: the eval expands the variable when the task runs.
    CHECK(s.find("--set train.threads=$SLURM_CPUS_PER_TASK'\n") != std::string::npos);
    CHECK(s.find(": \"${SLURM_CPUS_PER_TASK:?") != std::string::npos);
    CHECK(s.find("eval \"${COMMANDS[$task]}\"") != std::string::npos);
    fs::path path = dir / "s.slurm";
    rmt::write_file_atomic(path, s);
    CHECK(std::system(("bash -n " + path.string()).c_str()) == 0);
  }
  SUBCASE("GPUs only for tasks that use one: 1 by default on cuda, refused for runs on the CPU or of both") {
    rmt::SlurmOptions o;
    o.gpus = "2";
    CHECK(error_of([&] { rmt::slurm_script(plan, opt, o); }).find("--gpus 2: no run to submit is on a GPU") == 0);
    for (auto& run : plan.runs) run.config.device = "cuda";
    CHECK(rmt::slurm_script(plan, opt, rmt::SlurmOptions{}).find("#SBATCH --gpus=1\n") != std::string::npos);
    CHECK(rmt::slurm_script(plan, opt, o).find("#SBATCH --gpus=2\n") != std::string::npos);
    plan.runs[1].config.device = "cpu";
    CHECK(error_of([&] { rmt::slurm_script(plan, opt, o); }).find("3 of the 4 runs to submit are on a GPU") == 0);
  }
  SUBCASE("a throttle, a prologue before `set -u`, the binary as $RMT") {
    rmt::SlurmOptions o;
    o.array_limit = 2;
    o.prologue = (dir / "prologue.sh").string();
    rmt::write_file_atomic(o.prologue, "module load gcc/12");  // no final newline: one is added
    std::string s = rmt::slurm_script(plan, opt, o);
    CHECK(s.find("#SBATCH --array=0-3%2\n") != std::string::npos);
    CHECK(s.find("\nmodule load gcc/12\n# (end of the prologue)\n") != std::string::npos);
    CHECK(s.find("module load") > s.rfind("#SBATCH "));
    CHECK(s.find("module load") < s.find("set -euo pipefail"));
    CHECK(s.find("RMT=${RMT:-'/opt/rmt bin/rmt'}\n") != std::string::npos);
    CHECK(s.find("  '\"$RMT\" train --config ") != std::string::npos);
    fs::path path = dir / "p.slurm";
    rmt::write_file_atomic(path, s);
    CHECK(std::system(("bash -n " + path.string()).c_str()) == 0);
    rmt::write_file_atomic(o.prologue, std::string("a\0b", 3));
    CHECK(error_of([&] { rmt::slurm_script(plan, opt, o); }).find("holds a NUL byte") != std::string::npos);
    o.prologue.clear();
    o.array_limit = 0;
    CHECK(rmt::slurm_script(plan, opt, o).find("#SBATCH --array=0-3\n") != std::string::npos);
  }
  SUBCASE("no path of this machine: relative to where rmt runs, or --chdir") {
    const fs::path before = fs::current_path();
    fs::current_path(dir);
    rmt::SweepPlan here = rmt::plan_sweep(rmt::parse_sweep(kTinySweep, "tiny.yaml"), "runs", 0);
    rmt::SweepOptions local = opt;
    local.rmt_binary = (dir / "build/rmt").string();
    const std::string s = rmt::slurm_script(here, local, rmt::SlurmOptions{});
    rmt::SlurmOptions o;
    o.chdir = dir.string();
    const std::string with_chdir = rmt::slurm_script(here, local, o);
    fs::current_path(before);
    CHECK(s.find(dir.string()) == std::string::npos);
    CHECK(s.find("#SBATCH --output=runs/tiny/slurm-%A_%a.log\n") != std::string::npos);
    CHECK(s.find("RMT=${RMT:-./build/rmt}\n") != std::string::npos);
    // the binary in this very directory: ./rmt, never a bare name the PATH would resolve
    local.rmt_binary = (dir / "rmt").string();
    fs::current_path(dir);
    const std::string beside = rmt::slurm_script(here, local, rmt::SlurmOptions{});
    fs::current_path(before);
    CHECK(beside.find("RMT=${RMT:-./rmt}\n") != std::string::npos);
    CHECK(s.find("[ -d runs/tiny ] ||") != std::string::npos);
    CHECK(with_chdir.find("#SBATCH --chdir=" + dir.string() + "\n") != std::string::npos);
  }
  SUBCASE("bad resources write nothing") {
    rmt::SlurmOptions o;
    o.mem = "4GB";
    CHECK(error_of([&] { rmt::slurm_script(plan, opt, o); }).find("--mem '4GB' is not a SLURM memory size") == 0);
  }
}

TEST_CASE("slurm options: sbatch's forms are accepted, others refused naming the option") {
  auto error = [](auto set) {
    rmt::SlurmOptions o;
    set(o);
    return error_of([&] { rmt::check_slurm_options(o); });
  };
  for (const char* t : {"0", "90", "90:30", "48:00:00", "2-0", "2-12:30", "2-12:30:59", "UNLIMITED", "infinite"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.time = t; }) == "", t);
  for (const char* t : {"", "abc", "1-24", "12:60", "1:60:00", "1:2:3:4", "2-", "-5", "1-2-3", "1.5", "1 2",
                        "12:00:00\n#SBATCH --x", "9999999999"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.time = t; }).find("is not a SLURM time limit") != std::string::npos, t);
  for (const char* m : {"4G", "4000M", "4000", "512k", "1T", "0"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.mem = m; }) == "", m);
  for (const char* m : {"4GB", "G", "-1", "4.5G", "4 G", "4G\n"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.mem = m; }).find("--mem '") == 0, m);
  for (const char* g : {"1", "a100:2", "tesla_v100:1"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.gpus = g; }) == "", g);
  for (const char* g : {"0", "a100:", ":1", "a100:0", "two", "a b:1"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.gpus = g; }).find("--gpus '") == 0, g);
  for (const char* p : {"cpu", "cpu,gpu", "short-1.x"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.partition = p; }) == "", p);
  for (const char* p : {"a b", "a;b", "a,", "cpu\n#SBATCH --x", "$(id)"})
    CHECK_MESSAGE(error([&](rmt::SlurmOptions& o) { o.partition = p; }).find("--partition '") == 0, p);
  CHECK(error([](rmt::SlurmOptions& o) { o.account = "a,b"; }).find("--account 'a,b' is not a SLURM account") == 0);
  CHECK(error([](rmt::SlurmOptions& o) { o.cpus_per_task = 0; }).find("--cpus-per-task must be from 1") == 0);
}

TEST_CASE("slurm array tasks run as sbatch runs them: allocation threads, failures recorded, each run collected once") {
  fs::path dir = slurm_tmp("array");
  std::string file = write_sweep(dir);
  std::string runs = (dir / "runs").string();
  fs::path sweep_dir = dir / "runs" / "tiny", script = sweep_dir / "sweep.slurm";
  rmt::SweepPlan plan = rmt::plan_sweep(rmt::parse_sweep(kTinySweep, file), runs, 0);
  REQUIRE(plan.runs.size() == 4);
  break_run(plan.runs[1]);

  Run emit = rmt_run("sweep " + file + " --emit slurm --cpus-per-task 3 --time 5 --runs-dir " + runs);
  REQUIRE_MESSAGE(emit.status == 0, emit.output);
  CHECK(emit.output.find("(4 array tasks, 3 cores each)") != std::string::npos);
  // The started run keeps the thread count it started with, and says so.
  CHECK(emit.output.find("note: " + plan.runs[1].run_id + " resumes with the thread count it started with (all cores), "
                         "not --cpus-per-task 3") != std::string::npos);
  std::string text = rmt::read_file(script);
  CHECK(text.find("#SBATCH --cpus-per-task=3\n#SBATCH --time=5\n") != std::string::npos);

  // Outside sbatch, the script refuses to guess a thread count.
  std::string bare = std::string("env -u SLURM_CPUS_PER_TASK SLURM_ARRAY_JOB_ID=1 SLURM_ARRAY_TASK_ID=0 bash ") +
                     script.string() + " 2>&1";
  Run no_cpus{0, ""};
  {
    FILE* p = popen(bare.c_str(), "r");
    REQUIRE(p);
    char buf[512];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) no_cpus.output.append(buf, n);
    no_cpus.status = pclose(p);
  }
  CHECK(no_cpus.status != 0);
  CHECK(no_cpus.output.find("SLURM_CPUS_PER_TASK: is not set: submit this script with sbatch") != std::string::npos);
  CHECK(!fs::exists(plan.runs[0].dir / "results.json"));

  for (int task = 0; task < 4; ++task) CHECK(run_array_task(script, sweep_dir, task, 3) == (task == 1 ? 1 : 0));
  Run collect = rmt_run("sweep " + file + " --collect --runs-dir " + runs);
  CHECK(collect.status == 1);
  CHECK(collect.output.find("sweep tiny: 3 of 4 runs done") != std::string::npos);
  CHECK(collect.output.find("1 of 4 runs are not done: " + plan.runs[1].run_id + " (failed)") != std::string::npos);
  rmt::CsvTable csv = results(sweep_dir);
  REQUIRE(csv.rows.size() == 4);
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    const auto& row = csv.rows[i];
    bool broken = row[size_t(csv.column("run_id"))] == plan.runs[1].run_id;
    CHECK(row[size_t(csv.column("status"))] == (broken ? "failed" : "done"));
    if (broken)
      CHECK(row[size_t(csv.column("error"))].find("(SLURM task 77_1, exit status 1; log ") != std::string::npos);
    else
      CHECK(row[size_t(csv.column("threads"))] == "3");  // the allocation's, not this machine's cores
  }

  // Repaired, the next emit holds only that run; it runs with the new allocation's threads.
  fs::remove_all(plan.runs[1].dir);
  Run again = rmt_run("sweep " + file + " --emit slurm --cpus-per-task 2 --runs-dir " + runs);
  REQUIRE_MESSAGE(again.status == 0, again.output);
  CHECK(again.output.find("(1 array task, 2 cores each)") != std::string::npos);
  text = rmt::read_file(script);
  CHECK(text.find("#SBATCH --array=0-0\n") != std::string::npos);
  CHECK(text.find(plan.runs[1].run_id) != std::string::npos);
  CHECK(text.find(plan.runs[0].run_id) == std::string::npos);
  CHECK(run_array_task(script, sweep_dir, 0, 2, "78") == 0);

  Run done = rmt_run("sweep " + file + " --collect --runs-dir " + runs);
  REQUIRE_MESSAGE(done.status == 0, done.output);
  CHECK(done.output.find("sweep tiny: 4 of 4 runs done") != std::string::npos);
  csv = results(sweep_dir);
  REQUIRE(csv.rows.size() == 4);
  std::vector<std::string> ids = column(csv, "run_id");
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == 4);
  CHECK(column(csv, "status") == std::vector<std::string>(4, "done"));
  CHECK(column(csv, "threads") == std::vector<std::string>{"3", "2", "3", "3"});  // plan order

  // Collecting again, or a plain sweep with nothing left to run, gives the same file.
  std::string before = rmt::read_file(sweep_dir / "results.csv");
  CHECK(rmt_run("sweep " + file + " --collect --runs-dir " + runs).status == 0);
  CHECK(rmt::read_file(sweep_dir / "results.csv") == before);
  Run plain = rmt_run("sweep " + file + " --runs-dir " + runs);
  CHECK(plain.output.find("4 done, 0 to run") != std::string::npos);
  CHECK(rmt::read_file(sweep_dir / "results.csv") == before);
  Run nothing = rmt_run("sweep " + file + " --emit slurm --runs-dir " + runs);
  CHECK(nothing.status == 0);
  CHECK(nothing.output.find("all 4 runs are done; nothing to submit") != std::string::npos);
}

TEST_CASE("sweep --emit commands: an explicit thread count per command; their runs are collected once") {
  fs::path dir = slurm_tmp("commands");
  std::string file = write_sweep(dir);
  std::string runs = (dir / "runs").string();
  fs::path sweep_dir = dir / "runs" / "tiny";

  Run one = rmt_run("sweep " + file + " --emit commands --runs-dir " + runs, true);
  REQUIRE_MESSAGE(one.status == 0, one.output);
  std::vector<std::string> lines = lines_of(one.output);
  REQUIRE(lines.size() == 4);
  for (const auto& line : lines) CHECK_MESSAGE(ends_with(line, " --set train.threads=1"), line);  // the default

  Run two = rmt_run("sweep " + file + " --emit commands --threads-per-run 2 --runs-dir " + runs, true);
  REQUIRE_MESSAGE(two.status == 0, two.output);
  lines = lines_of(two.output);
  REQUIRE(lines.size() == 4);
  for (const auto& line : lines) {
    CHECK_MESSAGE(ends_with(line, " --set train.threads=2"), line);
    CHECK(std::system((line + " >/dev/null 2>&1").c_str()) == 0);  // as `parallel` would run it
  }
  Run collect = rmt_run("sweep " + file + " --collect --runs-dir " + runs);
  REQUIRE_MESSAGE(collect.status == 0, collect.output);
  rmt::CsvTable csv = results(sweep_dir);
  REQUIRE(csv.rows.size() == 4);
  std::vector<std::string> ids = column(csv, "run_id");
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == 4);
  CHECK(column(csv, "threads") == std::vector<std::string>(4, "2"));
  CHECK(rmt_run("sweep " + file + " --emit commands --runs-dir " + runs, true).output.empty());  // nothing pending
}
