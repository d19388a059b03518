// A sweep's eval: block (lib/experiments/sweep_eval.h): its checks, its evaluations (the numbers
// `rmt eval --data` gives), resuming from kept evaluations, and tables over multiples.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/experiments/sweep_eval.h"
#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

const std::string kData = "data: {task: copy, length: 4, symbols: 4, train: 200, val: 16, test: 16, seed: 0}\n";
const std::string kRest =
    "base:\n  model: {n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, dropout: 0.0}\n"
    "  train: {batch_size: 8, lr: 1.0e-3, schedule: constant, max_steps: 5, eval_every: 5, log_every: 5}\n"
    "grid: {model.kind: [baseline, rmt], segments: [1, 2]}\nderive: {model.num_mem_tokens: segment_length / 2 + 1}\n";

std::string parse_error(const std::string& text) {
  return error_of([&] { rmt::parse_sweep(text, "s.yaml"); });
}

}  // namespace

TEST_CASE("sweep eval: the block's mistakes are errors naming the key") {
  CHECK(parse_error(kData + kRest + "eval: {}\n").find("s.yaml: eval: expected a mapping with multiples:") == 0);
  CHECK(parse_error(kData + kRest + "eval: {multiple: [2]}\n").find("unknown key 'multiple' (did you mean 'multiples'?)") !=
        std::string::npos);
  CHECK(parse_error(kData + kRest + "eval: {multiples: [0]}\n") ==
        "s.yaml: eval.multiples: '0' is not a multiple of the trained length (an integer >= 1)");
  CHECK(parse_error(kData + kRest + "eval: {multiples: [2, 2]}\n") == "s.yaml: eval.multiples: 2 is listed twice");
  CHECK(parse_error(kData + kRest + "eval: {multiples: []}\n").find("expected a non-empty list") != std::string::npos);
  CHECK(parse_error(kData + kRest + "eval: {segment_length: 4}\n").find("give multiples:") != std::string::npos);
  CHECK(parse_error(kData + kRest + "eval: {data: [a, a]}\n") == "s.yaml: eval.data: a is listed twice");
  // Multiples need a generated dataset with a length.
  const fs::path existing = fresh_dir("rmt_test_sweep_eval", "existing") / "copy";
  REQUIRE(rmt_run(fmt::format("generate copy --length 4 --train 8 --val 4 --test 4 --out {}", existing.string())).status == 0);
  CHECK(parse_error(fmt::format("data: {{dir: {}}}\n", existing.string()) + kRest + "eval: {multiples: [2]}\n")
            .find("this sweep reads a dataset that exists") != std::string::npos);
  CHECK(parse_error("data: {task: ar_remember, pairs: 2, train: 20, val: 4, test: 4}\n" + kRest +
                    "eval: {multiples: [2]}\n")
            .find("need data.length") != std::string::npos);
  CHECK(parse_error(kData + kRest + "eval: {multiples: [2, 3], segment_length: 4}\n").empty());
}

TEST_CASE("sweep eval: every finished run at each multiple and dataset, as rmt eval --data gives it; kept, resumed") {
  const fs::path dir = fresh_dir("rmt_test_sweep_eval", "runs");
  // A dataset that exists: copy at length 12 (3x).
  const fs::path other = dir / "copy12";
  REQUIRE(rmt_run(fmt::format("generate copy --length 12 --symbols 4 --train 1 --val 1 --test 16 --seed 5 --out {}",
                              other.string())).status == 0);
  const fs::path file = dir / "study.yaml";
  rmt::write_file_atomic(file, kData + kRest + fmt::format("eval: {{multiples: [2, 5], data: [{}]}}\n", other.string()));
  const std::string runs = (dir / "runs").string();
  Run r = rmt_run(fmt::format("sweep {} --runs-dir {} -j 2", file.string(), runs));
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("12 evaluations at other lengths (0 kept)") != std::string::npos);
  const fs::path csv_path = fs::path(runs) / "study" / "length_results.csv";
  const std::string csv_text = rmt::read_file(csv_path);
  const rmt::CsvTable csv = rmt::parse_csv(csv_text, csv_path.string());
  REQUIRE(csv.rows.size() == 12);  // 4 runs x (2 multiples + 1 dataset)
  const int c_run = csv.column("trained_run"), c_multiple = csv.column("length_multiple"),
            c_length = csv.column("eval_length"), c_acc = csv.column("acc_teacher_forced"),
            c_seg = csv.column("segments"), c_trained = csv.column("trained_segments"), c_data = csv.column("eval_data"),
            c_cpu = csv.column("cpu_model"), c_commit = csv.column("git_commit");
  REQUIRE((c_run >= 0 && c_multiple >= 0 && c_length >= 0 && c_acc >= 0 && c_seg >= 0 && c_trained >= 0 && c_data >= 0 &&
           c_cpu >= 0 && c_commit >= 0));
  for (const auto& row : csv.rows) {
    CAPTURE(row[size_t(c_run)]);
    CHECK(!row[size_t(c_cpu)].empty());
    CHECK(!row[size_t(c_commit)].empty());
    const int trained = std::stoi(row[size_t(c_trained)]);
    if (row[size_t(c_data)] == "x2") CHECK((row[size_t(c_length)] == "8" && row[size_t(c_multiple)] == "2"));
    else if (row[size_t(c_data)] == "x5") CHECK((row[size_t(c_length)] == "20" && row[size_t(c_multiple)] == "5"));
    else CHECK((row[size_t(c_data)] == other.string() && row[size_t(c_length)] == "12" && row[size_t(c_multiple)] == "3"));
    // In segments of the trained length: k times the length, about k times the segments.
    CHECK(std::stoi(row[size_t(c_seg)]) > trained);
    // The number rmt eval gives for that run and dataset.
    const std::string data_dir = row[size_t(c_data)] == "x2" ? (fs::path(runs) / "study/eval_data/data/copy8").string()
                                 : row[size_t(c_data)] == "x5" ? (fs::path(runs) / "study/eval_data/data/copy20").string()
                                                              : other.string();
    Run e = rmt_run(fmt::format("eval --run {}/study/{} --data {} --threads 1", runs, row[size_t(c_run)], data_dir),
                    true);
    REQUIRE(e.status == 0);
    CHECK(e.output.find(fmt::format("\"acc_teacher_forced\":{},", row[size_t(c_acc)])) != std::string::npos);
  }
  // Again: nothing to evaluate, the same file. One kept evaluation removed: only it is redone.
  r = rmt_run(fmt::format("sweep {} --runs-dir {} -j 2", file.string(), runs));
  REQUIRE(r.status == 0);
  CHECK(r.output.find("evaluations at other lengths (") == std::string::npos);
  CHECK(rmt::read_file(csv_path) == csv_text);
  const fs::path evals = fs::path(runs) / "study" / "evals";
  const fs::path one = fs::directory_iterator(evals)->path() / "x5.json";
  REQUIRE(fs::exists(one));
  fs::remove(one);
  Run dry = rmt_run(fmt::format("sweep {} --runs-dir {} --dry-run", file.string(), runs));
  CHECK(dry.output.find("eval: 1 evaluations at other lengths") != std::string::npos);
  // --collect writes the file without the missing one and says so.
  Run collect = rmt_run(fmt::format("sweep {} --runs-dir {} --collect", file.string(), runs));
  CHECK(collect.status == 0);
  CHECK(collect.output.find("without 1 evaluations at other lengths not done yet") != std::string::npos);
  { const std::string t = rmt::read_file(csv_path); CHECK(std::count(t.begin(), t.end(), '\n') == 12); }
  r = rmt_run(fmt::format("sweep {} --runs-dir {} -j 2", file.string(), runs));
  CHECK(r.output.find("1 evaluations at other lengths (11 kept)") != std::string::npos);
  CHECK(rmt::read_file(csv_path) == csv_text);  // evaluations are deterministic: the same bytes
}

TEST_CASE("table --columns multiple: columns are multiples of the trained length, rows say the trained segments") {
  const std::string header =
      "trained_run,model.kind,model.num_mem_tokens,model.mem_len,train.seed,trained_segments,length_multiple,segments,"
      "segment_length,acc_teacher_forced,status\n";
  const std::string text = header +
                           "a,rmt,2,0,1,2,2,4,3,0.5,done\n"
                           "a,rmt,2,0,1,2,10,20,3,0.25,done\n"
                           "b,rmt,2,0,1,4,2,8,3,0.75,done\n"
                           "b,rmt,2,0,1,4,10,40,3,0.5,done\n";
  const rmt::CsvTable csv = rmt::columns_as_multiples(rmt::parse_csv(text, "l.csv"), "l.csv");
  rmt::Pivot pivot = rmt::pivot_results(csv, "acc_teacher_forced", rmt::multiples_by(csv, {}), "l.csv");
  pivot.multiples = true;
  CHECK(pivot.segments == std::vector<int>{2, 10});
  REQUIRE(pivot.rows.size() == 2);
  const std::string md = rmt::format_pivot(pivot, "md");
  CHECK(md.find("| model | 2x | 10x |") != std::string::npos);
  CHECK(md.find("trained_segments 2") != std::string::npos);
  CHECK(md.find("trained_segments 4") != std::string::npos);
  CHECK(md.find("columns: the evaluated length as a multiple of the trained one") != std::string::npos);
  // A dataset of another length is no whole multiple; a results.csv has no multiples at all.
  CHECK(error_of([&] {
          rmt::columns_as_multiples(rmt::parse_csv(header + "a,rmt,2,0,1,2,2.5,5,3,0.5,done\n", "l.csv"), "l.csv");
        }) == "l.csv: line 2: length_multiple '2.5' is not a whole multiple of the trained length (>= 1); --columns "
              "multiple lines up eval: multiples, not datasets of other lengths");
  CHECK(error_of([&] {
          rmt::columns_as_multiples(rmt::parse_csv("model.kind,segments\nrmt,2\n", "r.csv"), "r.csv");
        }).find("r.csv: --columns multiple needs the length_multiple and segments columns") == 0);
}
