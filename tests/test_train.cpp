// `rmt train` / `rmt eval` as a user runs them: outputs, resume after a kill, bit-identical
// reproducibility, and clear errors.
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "lib/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A tiny copy dataset and a tiny config, shared by the tests below.
struct TinyRun {
  std::string root, data, config;
  TinyRun() {
    root = fresh_tmp("rmt_test_train", "root");
    fs::create_directories(root);
    data = root + "/data";
    Run g = rmt_run("generate copy --length 5 --symbols 4 --train 300 --val 40 --test 40 --out " + data);
    REQUIRE_MESSAGE(g.status == 0, g.output);
    config = root + "/tiny.yaml";
    std::ofstream(config) << "data: " << data << "\n"
                          << "segments: 3\n"
                          << "model: {kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, "
                             "d_inner: 16, dropout: 0.1, num_mem_tokens: 2}\n"
                          << "train: {batch_size: 8, lr: 1.0e-3, max_steps: 30, eval_every: 10, "
                             "log_every: 5, seed: 3, threads: 1}\n";
  }
  Run train(const std::string& out, const std::string& extra = "") const {
    return rmt_run("train --config " + config + " --out " + root + "/" + out + " " + extra);
  }
  std::string file(const std::string& run, const std::string& name) const {
    return rmt::read_file(root + "/" + run + "/" + name);
  }
};

// metrics.jsonl without the timing fields, which legitimately differ between runs.
std::string metrics_without_timing(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    json j = json::parse(text.substr(start, end - start));
    j.erase("tokens_per_s");
    out += j.dump() + "\n";
    start = end + 1;
  }
  return out;
}

const TinyRun& tiny() {
  static TinyRun t;
  return t;
}

}  // namespace

TEST_CASE("rmt train writes the run directory and rmt eval reproduces its test metrics") {
  const TinyRun& t = tiny();
  Run r = t.train("full");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  for (const char* f : {"config.yaml", "metrics.jsonl", "last.safetensors", "best.safetensors",
                        "state.safetensors", "results.json"})
    CHECK(fs::exists(t.root + "/full/" + f));
  json results = json::parse(t.file("full", "results.json"));
  CHECK(results["steps"] == 30);
  CHECK(results["segments"] == 3);
  CHECK(results["segment_lengths"] == json::array({5, 5, 5}));  // 5 + 11 - 1 = 15 positions
  CHECK(results["acc_free_running"].is_null() == false);
  CHECK(results["solve_rate"].is_null());
  // metrics: a log line every 5 steps and an eval line every 10
  std::string metrics = t.file("full", "metrics.jsonl");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 6 + 3);

  Run e = rmt_run("eval --run " + t.root + "/full");
  REQUIRE_MESSAGE(e.status == 0, e.output);
  json ev = json::parse(e.output);
  CHECK(ev["loss"] == results["loss"]);
  CHECK(ev["acc_teacher_forced"] == results["acc_teacher_forced"]);
  CHECK(ev["samples"] == 40);
  // length generalisation: evaluate on a different number of segments
  Run e5 = rmt_run("eval --run " + t.root + "/full --segments 5 --split val");
  REQUIRE_MESSAGE(e5.status == 0, e5.output);
  CHECK(json::parse(e5.output)["segments"] == 5);
}

TEST_CASE("same config, seed and threads give bit-identical runs") {
  const TinyRun& t = tiny();
  // Run directories of different name lengths move the heap, so buffers land at different
  // alignments: no result may depend on that (Eigen's vectorised reductions once did).
  const std::string a = "repeat_a", b = "repeat_" + std::string(40, 'b');
  REQUIRE(t.train(a, "--set model.d_head=16").status == 0);
  REQUIRE(t.train(b, "--set model.d_head=16").status == 0);
  CHECK(t.file(a, "last.safetensors") == t.file(b, "last.safetensors"));
  CHECK(metrics_without_timing(t.file(a, "metrics.jsonl")) ==
        metrics_without_timing(t.file(b, "metrics.jsonl")));
}

TEST_CASE("bptt_recompute gives the same run as stored activations") {
  const TinyRun& t = tiny();
  REQUIRE(t.train("stored").status == 0);
  REQUIRE(t.train("recomputed", "--set bptt_recompute=true").status == 0);
  CHECK(t.file("stored", "last.safetensors") == t.file("recomputed", "last.safetensors"));
}

TEST_CASE("a run killed mid-way and resumed ends bit-identical to an uninterrupted one") {
  const TinyRun& t = tiny();
  REQUIRE(t.train("uninterrupted").status == 0);
  // Dies after step 25: the last checkpoint is step 20, so steps 21..25 are redone and their
  // metrics lines must not appear twice.
  Run killed = t.train("resumed", "--abort-after-step 25");
  CHECK(killed.status == 86);
  CHECK_FALSE(fs::exists(t.root + "/resumed/results.json"));
  Run again = t.train("resumed");
  CHECK(again.status != 0);
  CHECK(again.output.find("--resume") != std::string::npos);
  Run resumed = t.train("resumed", "--resume");
  REQUIRE_MESSAGE(resumed.status == 0, resumed.output);
  for (const char* f : {"last.safetensors", "best.safetensors"})
    CHECK(t.file("uninterrupted", f) == t.file("resumed", f));
  CHECK(metrics_without_timing(t.file("uninterrupted", "metrics.jsonl")) ==
        metrics_without_timing(t.file("resumed", "metrics.jsonl")));
  json a = json::parse(t.file("uninterrupted", "results.json"));
  json b = json::parse(t.file("resumed", "results.json"));
  CHECK(a["loss"] == b["loss"]);
  CHECK(a["acc_teacher_forced"] == b["acc_teacher_forced"]);
  // resuming a finished run changes nothing
  Run finished = t.train("resumed", "--resume");
  CHECK(finished.status == 0);
  CHECK(t.file("uninterrupted", "last.safetensors") == t.file("resumed", "last.safetensors"));
  // a resume with a different config is refused
  Run changed = t.train("resumed", "--resume --set train.lr=0.5");
  CHECK(changed.status != 0);
  CHECK(changed.output.find("differs") != std::string::npos);
}

TEST_CASE("rmt train rejects bad configs with specific errors") {
  const TinyRun& t = tiny();
  expect_error("train --config " + t.config + " --set model.n_layers=2 --out " + t.root + "/x",
               "did you mean 'model.n_layer'");
  expect_error("train --config " + t.config + " --set segments=16 --out " + t.root + "/x",
               "more than the 15 input positions");
  expect_error("train --config " + t.config + " --set model.kind=xl --out " + t.root + "/x",
               "mem_len > 0");
  expect_error("train --config " + t.config + " --set data=/nonexistent --out " + t.root + "/x",
               "/nonexistent");
  // a diverging run stops with a clear error and keeps its last good checkpoint
  Run nan = t.train("diverge", "--set train.lr=1e37 --set train.clip=0");
  CHECK(nan.status != 0);
  CHECK(nan.output.find("non-finite") != std::string::npos);
}
