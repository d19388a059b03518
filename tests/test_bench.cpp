#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/experiments/bench.h"
#include "tests/cli.h"

using namespace rmt;

// A 1-layer, 1-head model small enough to count by hand.
static BenchWorkload hand_workload(const std::string& kind) {
  BenchWorkload w = bench_workload(kind, true);
  ModelConfig& m = w.model;
  m.n_layer = 1, m.n_head = 1, m.d_head = 2, m.d_model = 2, m.d_inner = 4, m.n_token = 3;
  w.batch = 1;
  w.copy_length = 2;  // T = 6
  w.segments = 3;     // segments of 2
  m.mem_len = kind == "xl" ? 2 : 0;
  m.num_mem_tokens = kind == "rmt" ? 1 : 0;
  return w;
}

TEST_CASE("bench FLOP formula matches a hand count") {
  // One segment with q query rows and klen key rows, of which n run attention and what follows
  // (B=1, H=1, Dh=2, d=2, d_inner=4, V=3, 2 token rows):
  //   qkv 2*klen*2*6 = 24 klen, r_net 2*klen*2*2 = 8 klen, AC+BD+AV 3*2*n*klen*2 = 12 n klen,
  //   o_net 2*n*2*2 = 8 n, FF 2*2*n*2*4 = 32 n; the output layer 2*2*2*3 = 24.
  auto layer = [](double n, double klen) { return 24 * klen + 8 * klen + 12 * n * klen + 40 * n; };
  // baseline: three segments with q = klen = 2: 48+16+48+80+24 = 216 each.
  CHECK(layer(2, 2) + 24 == 216);
  CHECK(forward_flops(hand_workload("baseline")) == 3 * 216);
  // xl: cache of 2 rows from the second segment on: klen = 4 (qkv 96, r 32, attn 96, o+FF 80,
  // output 24 = 328).
  CHECK(layer(2, 4) + 24 == 328);
  CHECK(forward_flops(hand_workload("xl")) == 216 + 2 * 328);
  // rmt, one memory token: q = klen = 1 + 2 + 1 = 4 (128 + 192 + 160 + 24 = 504).
  CHECK(layer(4, 4) + 24 == 504);
  CHECK(forward_flops(hand_workload("rmt")) == 3 * 504);
  // What a step needs: the first segment has no scored position (answer = last 4 of 6). The
  // baseline skips it; xl runs its n_layer-1 = 0 layers below the last for the cache.
  CHECK(step_flops(hand_workload("baseline")) == 2 * 3 * 216);
  CHECK(step_flops(hand_workload("xl")) == 2 * 3 * 328);
  // rmt passes memory on, so every segment counts three times, but the (last, here only) layer
  // runs past its keys and values only for the rows something reads: segment 0 its memory row
  // (n = 1, no output layer), segment 1 its 2 tokens and the memory row (n = 3), segment 2 its
  // tokens (n = 2) and, passing nothing on, no write block (q = klen = 3).
  const double rmt_step = layer(1, 4) + (layer(3, 4) + 24) + (layer(2, 3) + 24);
  CHECK(rmt_step == 216 + 416 + 272);
  CHECK(step_flops(hand_workload("rmt")) == 3 * rmt_step);
}

// The language-model counterpart: B = 1 stream, segments of 2, xl cache 2, rmt 1 memory token
// with BPTT-1 (window of one earlier segment).
static BenchWorkload hand_lm_workload(const std::string& kind) {
  BenchWorkload w = bench_workload("lm_" + kind, true);
  ModelConfig& m = w.model;
  m.n_layer = 1, m.n_head = 1, m.d_head = 2, m.d_model = 2, m.d_inner = 4, m.n_token = 3;
  w.batch = 1;
  w.lm_segment = 2;
  m.mem_len = kind == "xl" ? 2 : 0;
  m.num_mem_tokens = kind == "rmt" ? 1 : 0;
  w.lm_window = kind == "rmt" ? 1 : 0;
  return w;
}

TEST_CASE("bench FLOP formula of the language-model step matches a hand count") {
  auto layer = [](double n, double klen) { return 24 * klen + 8 * klen + 12 * n * klen + 40 * n; };
  // baseline: one segment, q = klen = 2, every row scored: 3 x (216).
  CHECK(step_flops(hand_lm_workload("baseline")) == 3 * 216);
  CHECK(forward_flops(hand_lm_workload("baseline")) == 216);
  // xl: the cache holds the previous segment's 2 rows (steady state): klen = 4, 328 a forward.
  CHECK(step_flops(hand_lm_workload("xl")) == 3 * 328);
  CHECK(forward_flops(hand_lm_workload("xl")) == 328);
  CHECK(lm_fill_steps(hand_lm_workload("xl")) == 1);
  // rmt: the earlier segment of the window (q = klen = 1 + 2 + 1 = 4) runs only its write row
  // past the keys and values and has no output layer: layer(1, 4) = 216. The new segment as its
  // loss needs it has no write block (q = klen = 3), its 2 token rows live: layer(2, 3) + 24 =
  // 272. Its write block runs once, forward only, for the next step's memory: with it the
  // segment is layer(3, 4) + 24 = 416, so 144 more.
  CHECK(layer(1, 4) == 216);
  CHECK(layer(2, 3) + 24 == 272);
  CHECK(layer(3, 4) + 24 == 416);
  CHECK(step_flops(hand_lm_workload("rmt")) == 3 * (216 + 272) + (416 - 272));
  CHECK(forward_flops(hand_lm_workload("rmt")) == layer(4, 4) + 24);
  CHECK(lm_fill_steps(hand_lm_workload("rmt")) == 1);
  CHECK(lm_fill_steps(hand_lm_workload("baseline")) == 0);
  // A cache longer than a segment takes more steps to fill.
  BenchWorkload long_cache = hand_lm_workload("xl");
  long_cache.model.mem_len = 5;
  CHECK(lm_fill_steps(long_cache) == 3);
}

TEST_CASE("bench language-model workloads are the paper's enwik8 model at a stated batch") {
  for (const char* name : {"lm_baseline", "lm_xl", "lm_rmt"}) {
    BenchWorkload w = bench_workload(name, false);
    CAPTURE(name);
    CHECK(w.lm);
    CHECK(w.model.n_layer == 12);
    CHECK(w.model.d_model == 512);
    CHECK(w.model.n_head == 8);
    CHECK(w.model.d_head == 64);
    CHECK(w.model.d_inner == 2048);
    CHECK(w.model.n_token == 256);
    CHECK(w.batch == 2);
    CHECK(w.seq_len() == 128);
    CHECK(w.answer_size() == 128);  // every position scored
  }
  CHECK(bench_workload("lm_xl", false).model.mem_len == 128);
  CHECK(bench_workload("lm_rmt", false).model.num_mem_tokens == 10);
  CHECK(bench_workload("lm_rmt", false).lm_window == 1);
  CHECK(bench_workload("lm_baseline", false).model.num_mem_tokens == 0);
  CHECK_THROWS(bench_workload("lm_mt", false));
  CHECK(bench_models().size() == 6);
}

TEST_CASE("bench workload is the paper's copy config") {
  BenchWorkload w = bench_workload("rmt", false);
  CHECK(w.model.n_layer == 4);
  CHECK(w.model.n_head * w.model.d_head == 256);
  CHECK(w.model.d_model == 128);
  CHECK(w.batch == 32);
  CHECK(w.seq_len() == 72);
  CHECK(w.answer_size() == 48);
  CHECK(w.model.num_mem_tokens == 24);
  CHECK(bench_workload("xl", false).model.mem_len == 24);
  CHECK_THROWS(bench_workload("mt", false));
}

TEST_CASE("rmt bench --json emits one object per model with the report keys") {
  Run r = rmt_run("bench --tiny --json --reps 1 --warmup 0 --threads 1 --gemm-size 64");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.output);
  std::string line;
  std::vector<std::string> models;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);  // throws (fails the test) on invalid JSON
    for (const char* key : {"model", "tokens_per_s", "step_ms", "gflop_per_step", "gflops", "mfu",
                            "peak_gflops", "peak_rss_mb"})
      CHECK_MESSAGE(j.contains(key), key);
    CHECK(j["tokens_per_s"].get<double>() > 0);
    CHECK(j["gflop_per_step"].get<double>() > 0);
    CHECK(j["peak_rss_mb"].get<double>() > 0);
    CHECK(j["threads"].get<int>() == 1);
    models.push_back(j["model"]);
  }
  CHECK(models == bench_models());
}

TEST_CASE("rmt bench --model lm runs the language models from a full carried state") {
  Run r = rmt_run("bench --tiny --json --model lm --reps 2 --warmup 0 --threads 1 --peak-gflops 50");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.output);
  std::string line;
  std::vector<std::string> models;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    const std::string model = j["model"];
    models.push_back(model);
    CHECK(j["workload"] == "lm");
    CHECK(j["seq_len"].get<int>() == bench_workload(model, true).lm_segment);
    // --warmup 0, yet the steps that fill the cache / BPTT window ran untimed.
    CHECK(j["warmup"].get<int>() == lm_fill_steps(bench_workload(model, true)));
    CHECK(j["bptt_window"].get<int>() == (model == "lm_rmt" ? 1 : 0));
    CHECK(j["loss"].get<double>() > 4.5);  // random bytes: about ln 256 = 5.5 at the start
    CHECK(j["loss"].get<double>() < 6.5);
    CHECK(j["peak_gflops"].get<double>() == 50);
    CHECK(j["sample_bytes"].get<int>() == bench_workload(model, true).lm_segment);  // rmt sample's path
    CHECK(j["sample_ms"].get<double>() > 0);
  }
  CHECK(models == std::vector<std::string>{"lm_baseline", "lm_xl", "lm_rmt"});
}

TEST_CASE("rmt bench --list describes the workloads without running them") {
  Run r = rmt_run("bench --list --model lm_rmt");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.output);
  BenchWorkload w = bench_workload("lm_rmt", false);
  CHECK(j["n_layer"] == 12);
  CHECK(j["num_mem_tokens"] == 10);
  CHECK(j["gflop_per_step"].get<double>() == doctest::Approx(step_flops(w) * 1e-9));
  CHECK(j["params"].get<int64_t>() > 41000000);  // the enwik8 model: 41.1M parameters
  CHECK(j["params"].get<int64_t>() < 41200000);
  Run all = rmt_run("bench --list --model copy");
  CHECK(all.status == 0);
  CHECK(std::count(all.output.begin(), all.output.end(), '\n') == 3);
}

TEST_CASE("rmt --version names the GEMM library the CPU backend was built with") {
  Run v = rmt_run("--version");
  CHECK(v.status == 0);
  CHECK(v.output.find("gemm: " + cpu_gemm_library()) != std::string::npos);
  CHECK((cpu_gemm_library().rfind("oneDNN ", 0) == 0 || cpu_gemm_library().rfind("Eigen ", 0) == 0));
}
