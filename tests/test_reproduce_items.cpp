// rmt reproduce through the CLI, the other item kinds and where runs come from: a tiny
// language-model item, a bench item (and --report-only), a call stopped after some runs, finished
// runs' records continued on another machine, and --device.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/provenance.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "tests/cli.h"
#include "tests/reproduce_project.h"

using namespace rmt;

TEST_CASE("reproduce: a tiny language-model item (table of runs, bpc plot, claims comparing runs)") {
  fs::path dir = fresh_tmp("rmt_reproduce", "lm");
  copy_report_templates(dir);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on the mat; the dog ate the log. ";
  write(dir / "corpus.txt", text);
  write(dir / "lm.yaml", R"Y(data: {task: text, input: )Y" + (dir / "corpus.txt").string() + R"Y(}
base:
  segment_length: 8
  bptt: 1
  model: {n_layer: 1, n_head: 2, d_head: 8, d_model: 16, d_inner: 32, dropout: 0.0, mem_init: normal}
  train: {batch_size: 4, lr: 1.0e-3, schedule: constant, warmup_steps: 0, clip: 1.0, max_steps: 20,
          eval_every: 20, log_every: 20}
grid:
  - {model.kind: [baseline]}
  - {model.kind: [xl], model.mem_len: [4], train.seed: [1, 2]}
  - {model.kind: [rmt], model.num_mem_tokens: [2], bptt: [0, 1]}
)Y");
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", R"Y(paper: paper.yaml
items:
  lm:
    kind: lm
    title: "a tiny LM"
    paper_says: "memory helps"
    sweep: lm.yaml
    claims:
      - {text: "RMT is within 100 bpc of the baseline", run: {model: rmt, memory: 2, bptt: 1}, below: {model: baseline}, margin: 100}
      - {text: "the baseline is 100 bpc below Tr-XL", run: {model: baseline}, below: {model: xl, cache: 4}, margin: -100}
      - {text: "an ambiguous selector", run: {model: rmt}, below: {model: baseline}}
      - {text: "a run that does not exist", run: {model: rmt, memory: 3}, below: {model: baseline}}
)Y");
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  Run r = rmt_run(base + " -j 2");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  for (const char* f : {"REPORT.md", "lm/results.csv", "lm/table.md", "lm/lm.png", "lm/timing.json"})
    CHECK_MESSAGE(fs::exists(dir / "out" / f), f);
  const std::string table = read_file(dir / "out/lm/table.md");
  CHECK(table.find("| model | cache | memory | BPTT | seeds | test bpc (mean ± std) |") != std::string::npos);
  CHECK(table.find("| xl | 4 | - | - | 2 | ") != std::string::npos);  // its two seeds: one row
  CHECK(table.find("| rmt | - | 2 | 0 | 1 | ") != std::string::npos);
  CHECK(table.find("| rmt | - | 2 | 1 | 1 | ") != std::string::npos);
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("holds: RMT is within 100 bpc of the baseline") != std::string::npos);
  CHECK(report.find("FAILS: the baseline is 100 bpc below Tr-XL") != std::string::npos);
  CHECK(report.find("the seeds' spread") != std::string::npos);  // the claim on xl's two seeds
  CHECK(report.find("no data: an ambiguous selector (test bpc; more than one run matches rmt)") != std::string::npos);
  CHECK(report.find("no data: a run that does not exist (test bpc; no finished run of rmt memory 3)") != std::string::npos);
  CHECK(report.find("1 of 4 checks hold") != std::string::npos);
}

TEST_CASE("reproduce: a bench item times this machine once; --report-only reprints the committed numbers") {
  fs::path dir = fresh_tmp("rmt_reproduce", "bench");
  copy_report_templates(dir);
  write(dir / "paper.yaml", kPaper);
  write(dir / "m.yaml", R"Y(paper: paper.yaml
items:
  diag:
    beyond_the_paper: true
    kind: bench
    title: "diagonal evaluation"
    paper_says: "(not in the paper)"
    notes: "Read from the table above."
    bench: diagonal
    threads: [1, 2]
    layers: 2
    segments: 3
    batch: 2
    reps: 1
    min_speedup: 1000
)Y");
  const std::string base = "reproduce --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string();
  Run r = rmt_run(base);
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  const nlohmann::json results = nlohmann::json::parse(read_file(dir / "out/diag/results.json"));
  REQUIRE(results.at("timings").size() == 2);
  CHECK(results.at("timings")[0].at("threads") == 1);
  CHECK(results.at("timings")[1].at("threads") == 2);
  CHECK(results.at("timings")[1].at("segments") == 3);
  CHECK(results.at("timings")[1].at("identical") == true);  // the two schedules' bits agree
  CHECK(results.at("cpu_model") == cpu_model_name());
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("| 2 | 2 layers x 3 segments of 16, batch 2, d_model 64 |") != std::string::npos);
  // The bound is out of reach: both checks fail, and the summary says so.
  CHECK(report.find("FAILS: diagonal evaluation at least 1000.00x sequential, bit for bit, at 1 threads") !=
        std::string::npos);
  CHECK(report.find("| diagonal evaluation | 0 of 2 checks hold |") != std::string::npos);
  CHECK(report.find("**Reading.** Read from the table above.") != std::string::npos);
  // --report-only times nothing: the numbers of results.json come back unchanged.
  nlohmann::json edited = results;
  edited["timings"][0]["speedup"] = 2000.0;
  write(dir / "out/diag/results.json", edited.dump(2));
  // checks.json is derived, never read back: a corrupt one is rewritten from results.json (issue 58).
  write(dir / "out/diag/checks.json", "{\"holding\": 7, \"tot");
  Run again = rmt_run(base + " --report-only");
  CAPTURE(again.output);
  REQUIRE(again.status == 0);
  CHECK(nlohmann::json::parse(read_file(dir / "out/diag/results.json")) == edited);
  const std::string reprinted = read_file(dir / "out/REPORT.md");
  CHECK(reprinted.find("holds: diagonal evaluation at least 1000.00x sequential, bit for bit, at 1 threads") !=
        std::string::npos);
  CHECK(reprinted.find("| diagonal evaluation | 1 of 2 checks hold |") != std::string::npos);
  CHECK(read_file(dir / "out/diag/checks.json") == "{\"holding\":1,\"total\":2}\n");
  // A benchmark that does not exist, and a bench item headed as the paper's, are refused.
  write(dir / "m.yaml", read_file(dir / "m.yaml").replace(read_file(dir / "m.yaml").find("bench: diagonal"), 15,
                                                           "bench: sideways"));
  Run bad = rmt_run(base + " --list");
  CHECK(bad.status != 0);
  CHECK(bad.output.find("items.diag.bench: unknown benchmark 'sideways' (benchmarks: diagonal)") != std::string::npos);
}

TEST_CASE("reproduce: a call stopped after some runs keeps their time, and the next adds to it") {
  fs::path dir = tiny_project("stopped", manifest_text());
  const std::string base = "reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string() + " -j 1";
  const fs::path timing_file = dir / "out/tiny/timing.json";
  // Killed inside its second write of timing.json (a write has 3 kill points), after its second
  // run: the first write, after the first run, stands.
  setenv(kKillAtWriteEnv, "4:timing.json", 1);
  Run r = rmt_run(base);
  unsetenv(kKillAtWriteEnv);
  CAPTURE(r.output);
  CHECK(r.status != 0);
  REQUIRE(fs::exists(timing_file));
  const nlohmann::json first = nlohmann::json::parse(read_file(timing_file));
  CAPTURE(first.dump());
  CHECK(first["wall_s"].get<double>() > 0);
  CHECK(first["runs"].get<int>() == 6);
  // A report of the item in progress: tables of the finished runs, and no reading computed from
  // them alone (its placeholders would count 2 runs as the whole, or match none and stop it).
  Run partial = rmt_run("reproduce --report-only --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                        (dir / "runs").string() + " --out " + (dir / "out").string());
  REQUIRE_MESSAGE(partial.status == 0, partial.output);
  const std::string report = read_file(dir / "out/REPORT.md");
  CHECK(report.find("*In progress: 2 of 6 runs done") != std::string::npos);
  CHECK(report.find("Written when every run is finished") != std::string::npos);
  CHECK(report.find("runs met the stopping rule; the baseline got") == std::string::npos);
  // The next call trains the rest and adds its own time.
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const nlohmann::json second = nlohmann::json::parse(read_file(timing_file));
  CAPTURE(second.dump());
  CHECK(second["wall_s"].get<double>() > first["wall_s"].get<double>());
  CHECK(second["train_s"].get<double>() >= first["train_s"].get<double>());  // 0.1 s rounding
}

TEST_CASE("reproduce: finished runs' records let another machine continue an item without training them again") {
  // Only the sweep item: no attention or length item reads its runs' checkpoints.
  const std::string text = manifest_text();
  fs::path dir = tiny_project("records", text.substr(0, text.find("  maps:")));
  const std::string base = "reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " +
                           (dir / "runs").string() + " --out " + (dir / "out").string() + " -j 2";
  Run r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const fs::path records = dir / "out/tiny/runs";
  std::vector<fs::path> kept;
  for (const auto& e : fs::directory_iterator(records)) kept.push_back(e.path());
  REQUIRE(kept.size() == 6);
  for (const auto& record : kept) {
    for (const char* f : {"config.yaml", "metrics.jsonl", "results.json"}) CHECK_MESSAGE(fs::exists(record / f), f);
    CHECK_FALSE(fs::exists(record / "best.safetensors"));  // no checkpoints
    CHECK(read_file(record / "results.json") == read_file(dir / "runs/tiny" / record.filename() / "results.json"));
  }
  const std::string csv = read_file(dir / "out/tiny/results.csv");
  const std::string report = read_file(dir / "out/REPORT.md");

  // Another machine (no runs directory): every run is restored, none trained; the same results.
  fs::remove_all(dir / "runs");
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("tiny: 6 finished runs restored from their records") != std::string::npos);
  CHECK(r.output.find("all 6 runs done") != std::string::npos);
  CHECK(read_file(dir / "out/tiny/results.csv") == csv);
  CHECK(read_file(dir / "out/REPORT.md").find("(2/2 solved, median step 30)") != std::string::npos);
  CHECK(report.find("(2/2 solved, median step 30)") != std::string::npos);

  // A record cut short (no results.json) is not a finished run: that run alone is trained again,
  // and its record is written whole.
  fs::remove_all(dir / "runs");
  fs::remove(kept[0] / "results.json");
  r = rmt_run(base);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("tiny: 5 finished runs restored") != std::string::npos);
  CHECK(r.output.find("1 of 6 runs to do") != std::string::npos);
  CHECK(fs::exists(kept[0] / "results.json"));
  CHECK(read_file(dir / "out/tiny/results.csv").size() == csv.size());
  // A run directory already here is left as it is (in progress, failed or finished).
  r = rmt_run(base);
  CHECK(r.status == 0);
  CHECK(r.output.find("restored") == std::string::npos);
}

TEST_CASE("reproduce --device: every run trains there, in directories of its own, and the report names the device") {
  const std::string text = manifest_text();
  fs::path dir = tiny_project("device", text.substr(0, text.find("  maps:")));
  // On the CPU, as committed.
  Run r = rmt_run("reproduce tiny --manifest " + (dir / "m.yaml").string() + " --runs-dir " + (dir / "runs").string() +
                  " --out " + (dir / "out").string() + " -j 2");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  // On another device (the checked CPU backend stands in for a GPU), from the project's root:
  // --runs-dir and --out default to the CPU's with the device's name added.
  const std::string cmd = "cd " + dir.string() + " && " + RMT_BINARY +
                          " reproduce tiny --manifest m.yaml -j 2 --device cpu-guarded > device.log 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, read_file(dir / "device.log"));
  const fs::path runs = dir / "runs/reproduce-cpu-guarded/tiny", out = dir / "experiments/results-cpu-guarded";
  REQUIRE(fs::exists(out / "REPORT.md"));
  CHECK_FALSE(fs::exists(dir / "experiments/results"));
  const CsvTable cpu = parse_csv(read_file(dir / "out/tiny/results.csv"), "cpu");
  const CsvTable other = parse_csv(read_file(out / "tiny/results.csv"), "device");
  REQUIRE(cpu.rows.size() == 6);
  REQUIRE(other.rows.size() == 6);
  // Other runs (other RUN_IDs), each trained on the device, none of the CPU's.
  std::set<std::string> cpu_ids;
  for (const auto& row : cpu.rows) cpu_ids.insert(row[size_t(cpu.column("run_id"))]);
  for (const auto& row : other.rows) {
    const std::string id = row[size_t(other.column("run_id"))];
    CHECK(cpu_ids.count(id) == 0);
    const auto results = nlohmann::json::parse(read_file(runs / id / "results.json"));
    CHECK(results["device"] == "cpu-guarded");
  }
  const std::string report = read_file(out / "REPORT.md");
  CHECK(report.find("The runs trained on device `cpu-guarded` (the CPU backend with its checks)") != std::string::npos);
  CHECK(read_file(dir / "out/REPORT.md").find("The runs trained on device") == std::string::npos);
  CHECK(report.find("(2/2 solved") != std::string::npos);  // the same tables, from its own runs
  CHECK(report.find("Command: `rmt reproduce tiny --device cpu-guarded` (= `rmt sweep") != std::string::npos);
  // --report-only trains nothing, and may run where the device is absent: it does not describe
  // this machine's device as the one the runs trained on (it said "no CUDA device").
  const std::string report_only = "cd " + dir.string() + " && " + RMT_BINARY +
                                  " reproduce --manifest m.yaml --report-only --device cuda > cuda.log 2>&1";
  REQUIRE_MESSAGE(std::system(report_only.c_str()) == 0, read_file(dir / "cuda.log"));
  const std::string cuda_report = read_file(dir / "experiments/results-cuda/REPORT.md");
  CHECK(cuda_report.find("The runs trained on device `cuda`, with this machine's cores") != std::string::npos);
  CHECK(cuda_report.find(rmt::cuda_description()) == std::string::npos);
}
