// Catalogue of bad inputs (tests/catalogue.h): what a sweep's runs leave behind, read back
// wrongly with exit 0 or as an internal error. A truncated results.json was a run that went to
// its max_steps; a string where a number belongs (or the reverse) was an internal error; a row of
// results.csv present twice was counted twice; a solved_step beyond the run's steps went into a
// median; two reproduce items whose sweep files share a name read each other's runs; and a
// curriculum of 2^31 - 1 stages hung before training started.
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

// {dir}/s.yaml: a sweep of two 2-step runs of a tiny baseline, trained into {dir}/runs.
void swept(const std::string& dir) {
  rmt::write_file_atomic(dir + "/s.yaml",
                         "data: {task: copy, length: 4, symbols: 4, train: 40, val: 8, test: 8, seed: 0}\n"
                         "base:\n  model: {kind: baseline, n_layer: 1, n_head: 1, d_head: 4, d_model: 4, d_inner: 8}\n"
                         "  train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1}\n"
                         "grid:\n  - {segments: [1], train.seed: [1, 2]}\n");
  Run r = rmt_run("sweep " + dir + "/s.yaml --runs-dir " + dir + "/runs");
  REQUIRE_MESSAGE(r.status == 0, r.output);
}

// The results.json of the sweep's first run.
fs::path first_results(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir + "/runs/s"))
    if (fs::exists(e.path() / "results.json") && e.path().filename().string().find("seed1") != std::string::npos)
      return e.path() / "results.json";
  FAIL("no run of seed 1 in " << dir);
  return {};
}

// swept, then the first run's results.json with `key` set to `value`.
std::function<void(const std::string&)> results_with(std::string key, nlohmann::json value) {
  return [key, value](const std::string& dir) {
    swept(dir);
    const fs::path file = first_results(dir);
    nlohmann::json j = nlohmann::json::parse(rmt::read_file(file));
    j[key] = value;
    rmt::write_file_atomic(file, j.dump(2));
  };
}

const char* kSweepAgain = "sweep {dir}/s.yaml --runs-dir {dir}/runs";

// {dir}/r.csv: a stopping sweep's results.csv with `rows` under its header.
std::function<void(const std::string&)> results_csv(std::string rows) {
  return [rows](const std::string& dir) {
    rmt::write_file_atomic(dir + "/r.csv",
                           "model.kind,segments,model.num_mem_tokens,model.mem_len,train.target,acc_teacher_forced,"
                           "run_id,status,steps,end_reason,solved_step\n" + rows);
  };
}

// {dir}/m.yaml: two sweep items whose sweep files are both named s.yaml, in {dir}/a and {dir}/b.
void same_named_sweeps(const std::string& dir) {
  std::ofstream(dir + "/paper.yaml") << "x:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0}\n";
  for (const char* sub : {"a", "b"}) {
    fs::create_directories(dir + "/" + sub);
    std::ofstream(dir + "/" + sub + "/s.yaml") << "data: {task: copy, length: 4, train: 20, val: 5, test: 5}\n"
                                                  "base: {}\ngrid:\n  - {model.kind: [baseline], segments: [1]}\n";
  }
  std::ofstream(dir + "/m.yaml") << "paper: paper.yaml\nitems:\n"
                                    "  one: {kind: sweep, title: t, paper_says: p, sweep: a/s.yaml, metrics: [loss]}\n"
                                    "  two: {kind: sweep, title: t, paper_says: p, sweep: b/s.yaml, metrics: [loss]}\n";
}

// {dir}/d: a tiny copy dataset; {dir}/c.yaml: a run on it with `train` as its train: block.
std::function<void(const std::string&)> config_with_train(std::string train) {
  return [train](const std::string& dir) {
    Run r = rmt_run("generate copy --length 4 --symbols 4 --train 40 --val 8 --test 8 --out " + dir + "/d");
    REQUIRE_MESSAGE(r.status == 0, r.output);
    rmt::write_file_atomic(dir + "/c.yaml", "data: " + dir + "/d\nsegments: 2\nmodel: {kind: baseline, n_layer: 1, "
                                            "n_head: 1, d_head: 4, d_model: 4, d_inner: 8}\ntrain: " + train + "\n");
  };
}

}  // namespace

RMT_CATALOGUE({
    // ---- results.json read back by the sweep (results.csv is rebuilt from it) ---------------
    {"results.json", "truncated: no run that went to its max_steps", [](const std::string& dir) {
       swept(dir);
       const fs::path file = first_results(dir);
       rmt::write_file_atomic(file, rmt::read_file(file).substr(0, 60));
     },
     kSweepAgain, 1, "results.json: not a complete JSON object (truncated or damaged)"},
    {"results.json", "a string where a number belongs", results_with("wall_time_s", "fast"), kSweepAgain, 1,
     "results.json: \"wall_time_s\" is a string, expected a number"},
    {"results.json", "a metric that is a string", results_with("acc_teacher_forced", "0.5"), kSweepAgain, 1,
     "results.json: \"acc_teacher_forced\" is a string, expected a number"},
    {"results.json", "a number where a string belongs", results_with("git_commit", 5), kSweepAgain, 1,
     "results.json: \"git_commit\" is a number, expected a string"},
    {"results.json", "end_reason an object", results_with("end_reason", nlohmann::json::object()), kSweepAgain, 1,
     "results.json: \"end_reason\" is an object, expected a string"},
    {"results.json", "dataset_fingerprint a number (rmt eval)", results_with("dataset_fingerprint", 7),
     "eval --run {dir}/runs/s/baseline-seg1-seed1-*", 1, "results.json: \"dataset_fingerprint\" is a number, expected a string"},
    // ---- results.csv rows counted as they are ------------------------------------------------
    {"results.csv", "a row present twice (3/3 solved from 2 runs)",
     results_csv("rmt,1,1,0,0.9,1.0,r1,done,10,solved,4\nrmt,1,1,0,0.9,1.0,r2,done,10,solved,6\n"
                 "rmt,1,1,0,0.9,1.0,r1,done,10,solved,4\n"),
     "table {dir}/r.csv", 1, "r.csv: line 4: run r1 is also on line 2; each run is listed once"},
    {"results.csv", "solved_step beyond the run's steps",
     results_csv("rmt,1,1,0,0.9,1.0,r1,done,10,solved,4\nrmt,1,1,0,0.9,1.0,r2,done,10,solved,4000\n"),
     "table {dir}/r.csv", 1, "r.csv: line 3: solved_step 4000 is beyond the run's 10 steps"},
    {"results.csv", "a language-model row among algorithmic ones (was only a field count)",
     [](const std::string& dir) {
       rmt::write_file_atomic(dir + "/r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,loss,status\n"
                                              "rmt,1,1,0,0.5,done\nxl,1,0,8,0.9,1.3,done\n");
     },
     "table {dir}/r.csv --metric loss", 1,
     "r.csv: mixes language-model and algorithmic rows: line 3 is a language-model run's row (with bpc) in a file of "
     "algorithmic runs"},
    {"results.csv", "an algorithmic row among language-model ones",
     [](const std::string& dir) {
       rmt::write_file_atomic(dir + "/r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,loss,bpc,status\n"
                                              "xl,1,0,8,0.9,1.3,done\nrmt,1,1,0,0.5,done\n");
     },
     "table {dir}/r.csv --metric bpc", 1,
     "r.csv: mixes language-model and algorithmic rows: line 3 is an algorithmic run's row (without bpc) in a file "
     "of language-model runs"},
    // ---- reproduce: one runs directory per item ----------------------------------------------
    {"reproduce", "two items' sweep files share a file name (and so a runs directory)", same_named_sweeps,
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.two.sweep: {dir}/b/s.yaml has the file name of items.one.sweep ({dir}/a/s.yaml); their runs would share one "
     "directory, s/ under --runs-dir: rename one"},
    // ---- values bounded where the config is read ---------------------------------------------
    {"config", "train.curriculum 2^31 - 1 (the memory estimate walked every stage)",
     config_with_train("{batch_size: 4, max_steps: 2, eval_every: 2, threads: 1, curriculum: 2147483647}"),
     "train --config {dir}/c.yaml --out {dir}/run", 1, "train.curriculum"},
});
