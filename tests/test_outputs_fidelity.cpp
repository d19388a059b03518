// Outputs that were silently wrong with exit 0 (issue 58): what a command wrote or printed was
// short of what it read or measured. The refusals of the same issue are catalogue cases
// (tests/catalogue_curves_results.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/experiments/bench.h"
#include "lib/experiments/learning_curves.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ROOT/run: a 2-step run of a tiny baseline on ROOT/d, a dataset made by `generate_args`
// ("copy --length 4 --symbols 4").
void train_tiny_run(const fs::path& root, const std::string& generate_args) {
  Run gen = rmt_run("generate " + generate_args + " --train 40 --val 8 --test 8 --out " + (root / "d").string());
  REQUIRE_MESSAGE(gen.status == 0, gen.output);
  rmt::write_file_atomic(root / "c.yaml", "data: " + (root / "d").string() +
                                              "\nsegments: 1\nmodel: {kind: baseline, n_layer: 1, n_head: 1, "
                                              "d_head: 4, d_model: 4, d_inner: 8}\n"
                                              "train: {batch_size: 4, max_steps: 2, eval_every: 2, threads: 1}\n");
  Run train = rmt_run("train --config " + (root / "c.yaml").string() + " --out " + (root / "run").string());
  REQUIRE_MESSAGE(train.status == 0, train.output);
}

// ROOT/run: a run directory (config.yaml of a tiny baseline) whose metrics.jsonl is `metrics`.
void run_with_metrics(const fs::path& root, const std::string& metrics) {
  fs::create_directories(root / "run");
  rmt::write_file_atomic(root / "run/config.yaml", "data: " + (root / "d").string() +
                                                       "\nsegments: 1\nmodel: {kind: baseline, n_layer: 1, n_head: 1, "
                                                       "d_head: 4, d_model: 4, d_inner: 8}\n");
  rmt::write_file_atomic(root / "run/metrics.jsonl", metrics);
}

const std::string kMetrics =
    "{\"step\":1,\"loss\":2.5,\"lr\":0.001}\n"  // a training interval: no point
    "{\"step\":2,\"val_acc_teacher_forced\":0.5}\n"
    "{\"step\":4,\"val_acc_teacher_forced\":0.75,\"val_segments\":1}\n";

}  // namespace

TEST_CASE("rmt eval --predictions: the input shown is the sample's whole X where the answer is all of y") {
  const fs::path root = fresh_dir("rmt_test_outputs_fidelity", "predictions");
  // ar_remember: the answer is all of y (the value and its '.'), so X's last id ('?') comes right
  // before it; it was dropped from every line's input.
  train_tiny_run(root, "ar_remember --pairs 2");
  const rmt::DatasetMeta meta = rmt::load_dataset_meta((root / "d").string());
  REQUIRE(meta.stacked);
  REQUIRE(meta.answer_size == meta.len_y);
  Run eval = rmt_run("eval --threads 1 --run " + (root / "run").string() + " --predictions " +
                     (root / "p.jsonl").string());
  REQUIRE_MESSAGE(eval.status == 0, eval.output);
  int64_t rows = 0, cols = 0;
  const std::vector<int64_t> x =
      rmt::read_npy_int_matrix(rmt::dataset_file((root / "d").string(), meta.file_prefix, "test", "X"), rows, cols);
  REQUIRE(cols == meta.len_x);
  std::istringstream lines(rmt::read_file(root / "p.jsonl"));
  int64_t listed = 0;
  for (std::string line; std::getline(lines, line); ++listed) {
    const json p = json::parse(line);
    REQUIRE(p["sample"] == listed);
    REQUIRE(listed < rows);
    const std::string sample_input = rmt::decode_ids(meta, x.data() + listed * cols, int(cols));
    CHECK(p["input"] == sample_input);
    CHECK(sample_input.back() == '?');  // the id that was dropped
    CHECK(p["target"].get<std::string>().size() == size_t(meta.answer_size));
  }
  CHECK(listed == rows);
}

TEST_CASE("results JSON: non_finite_samples is there when it is 0, in results.json and rmt eval's object") {
  const fs::path root = fresh_dir("rmt_test_outputs_fidelity", "results_json");
  train_tiny_run(root, "copy --length 4 --symbols 4");
  const json results = json::parse(rmt::read_file(root / "run/results.json"));
  REQUIRE(results.contains("non_finite_samples"));
  CHECK(results["non_finite_samples"] == 0);
  Run eval = rmt_run("eval --threads 1 --run " + (root / "run").string(), true);
  REQUIRE_MESSAGE(eval.status == 0, eval.output);
  const json evaluated = json::parse(eval.output);
  REQUIRE(evaluated.contains("non_finite_samples"));
  CHECK(evaluated["non_finite_samples"] == 0);
  // Counted (--count-non-finite) and none found: 0 as well.
  Run counted = rmt_run("eval --threads 1 --count-non-finite --run " + (root / "run").string(), true);
  REQUIRE_MESSAGE(counted.status == 0, counted.output);
  CHECK(json::parse(counted.output)["non_finite_samples"] == 0);
}

TEST_CASE("plot --curves --format csv --out writes the CSV to --out, whole, and prints the same to stdout without it") {
  const fs::path root = fresh_dir("rmt_test_outputs_fidelity", "curves_out");
  // A torn last line (a run killed mid-write: no '\n') is still skipped.
  run_with_metrics(root, kMetrics + "{\"step\":6,\"val_acc");
  const std::string args = "plot --curves " + (root / "run").string() + " --format csv";
  Run printed = rmt_run(args, true);
  REQUIRE_MESSAGE(printed.status == 0, printed.output);
  CHECK(printed.output ==
        "kind,seed,segments,run_id,step,val_acc,val_segments\nbaseline,1,1,run,2,0.5,1\nbaseline,1,1,run,4,0.75,1\n");
  const fs::path out = root / "curves.csv";
  Run written = rmt_run(args + " --out " + out.string(), true);
  REQUIRE_MESSAGE(written.status == 0, written.output);
  REQUIRE(fs::exists(out));
  CHECK(rmt::read_file(out) == printed.output);
  CHECK(written.output == "wrote " + out.string() + "\n");
  // Written through write_file_atomic: no temporary file left beside it.
  for (const auto& e : fs::directory_iterator(root))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp.") == std::string::npos, e.path());
}

TEST_CASE("learning curves: only the last line of metrics.jsonl may be torn") {
  const fs::path root = fresh_dir("rmt_test_outputs_fidelity", "torn");
  const fs::path file = root / "metrics.jsonl";
  rmt::write_file_atomic(file, kMetrics + "{\"step\":6,\"val_acc");
  const auto points = rmt::read_validation_curve(file.string(), 3);
  REQUIRE(points.size() == 2);
  CHECK(points[1].step == 4);
  CHECK(points[1].val_acc == 0.75);
  CHECK(points[0].val_segments == 3);  // not recorded: the run's segments
  CHECK(points[1].val_segments == 1);
  rmt::write_file_atomic(file, "{\"step\":6,\"val_acc\n" + kMetrics);
  CHECK(error_of([&] { rmt::read_validation_curve(file.string(), 3); }) ==
        file.string() + ": line 1: not a JSON object (a damaged line; only the last line of a run killed mid-write "
                        "may be torn)");
  // A language model's curve: bits per character are >= 0, not at most 1.
  rmt::write_file_atomic(file, "{\"step\":2,\"val_bpc\":3.5}\n{\"step\":4,\"val_bpc\":-1}\n");
  CHECK(error_of([&] { rmt::read_validation_curve(file.string(), 1, "val_bpc"); }) ==
        file.string() + ": line 2: val_bpc -1 is out of range (a finite number >= 0)");
  rmt::write_file_atomic(file, "{\"step\":2,\"val_bpc\":3.5}\n");
  CHECK(rmt::read_validation_curve(file.string(), 1, "val_bpc").at(0).val_acc == 3.5);
}

TEST_CASE("bench --diagonal: each schedule is warmed up, and with one thread the schedules are said to coincide") {
  const int threads_before = rmt::num_threads();
  rmt::DiagonalBenchOptions o;
  o.tiny = true;
  o.segments = 2;
  o.reps = 2;
  o.warmup = 0;  // still one untimed evaluation of each: a cold first one is no schedule's speed
  rmt::set_num_threads(1);
  const rmt::DiagonalBenchResult one = rmt::run_diagonal_bench(o);
  CHECK(one.warmup == 1);
  CHECK(one.identical);
  CHECK(one.schedules_coincide);
  CHECK(rmt::diagonal_bench_text(one).find("the two schedules coincide: with one thread the diagonal schedule runs "
                                           "each diagonal's layer-steps in turn, the sequential path") !=
        std::string::npos);
  const json j = json::parse(rmt::diagonal_bench_json(one));
  CHECK(j.at("schedules_coincide") == true);
  CHECK(j.at("warmup") == 1);
  // Two threads overlap a diagonal's layer-steps: the schedules differ, and nothing says otherwise.
  rmt::set_num_threads(2);
  o.warmup = 2;
  const rmt::DiagonalBenchResult two = rmt::run_diagonal_bench(o);
  CHECK(two.warmup == 2);
  CHECK_FALSE(two.schedules_coincide);
  CHECK(rmt::diagonal_bench_text(two).find("coincide") == std::string::npos);
  CHECK(json::parse(rmt::diagonal_bench_json(two)).at("schedules_coincide") == false);
  rmt::set_num_threads(threads_before);
}
