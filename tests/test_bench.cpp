#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/model_kind.h"
#include "lib/experiments/bench.h"
#include "lib/experiments/sweep.h"
#include "tests/cli.h"
#include "tests/source_manifest.h"

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
  CHECK(bench_models().size() == 17);  // copy, lm, copy120 (3 each), repro (2), delta (6)
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
  CHECK(models == bench_selection("all"));
}

TEST_CASE("rmt bench --pack K times K packed runs: steps/s of all, each run its own") {
  Run r = rmt_run("bench --tiny --json --model repro --manifest " + kSourceManifest + " --reps 3 --warmup 1 --threads 2 --peak-gflops 50 --pack 3");
  CAPTURE(r.output);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.output);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    auto j = nlohmann::json::parse(line);
    CHECK(j["pack"].get<int>() == 3);
    CHECK(j["threads"].get<int>() == 2);  // runs at a time
    // steps/s counts every run's step: 3 per packed step
    CHECK(j["steps_per_s"].get<double>() == doctest::Approx(3000.0 / j["step_ms"].get<double>()));
    const BenchWorkload w = bench_workload(j["model"], true, 0, kSourceManifest);
    CHECK(j["gflop_per_step"].get<double>() == doctest::Approx(3 * step_flops(w) * 1e-9));
    CHECK(std::isfinite(j["loss"].get<double>()));
  }
  CHECK(n == 2);
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

TEST_CASE("bench copy120 workload is the paper's copy of 120 symbols in 3 segments") {
  // docs/paper.md §1: copy120 = 120 symbols of 8 (ids 2..9, vocab 10), 360 input positions,
  // answer 240; §4 Figure 5b: segments of 120 with cache / memory 60.
  for (const char* kind : {"baseline", "xl", "rmt"}) {
    BenchWorkload w = bench_workload(std::string("copy120_") + kind, false);
    CAPTURE(kind);
    CHECK(w.workload == "copy120");
    CHECK(!w.lm);
    CHECK(w.model.kind == kind);
    CHECK(w.model.n_layer == 4);
    CHECK(w.model.d_model == 128);
    CHECK(w.model.n_head * w.model.d_head == 256);
    CHECK(w.model.n_token == 10);
    CHECK(w.batch == 32);
    CHECK(w.seq_len() == 360);
    CHECK(w.answer_size() == 240);
    CHECK(w.segments == 3);
  }
  CHECK(bench_workload("copy120_xl", false).model.mem_len == 60);
  CHECK(bench_workload("copy120_xl", false).model.num_mem_tokens == 0);
  CHECK(bench_workload("copy120_rmt", false).model.num_mem_tokens == 60);
  CHECK(bench_workload("copy120_rmt", false).model.mem_len == 0);
  CHECK(bench_workload("copy120_rmt", true).model.num_mem_tokens == 3);  // tiny: half of 6
  CHECK(bench_workload("rmt", false).workload == "copy");
  CHECK(bench_workload("lm_rmt", false).workload == "lm");
}

TEST_CASE("bench repro workloads are the shapes rmt reproduce trains") {
  // Each: the RMT run with the most segments of its manifest item's sweep, as planned (issue 58:
  // the retrieval one was typed, d_model 64, 4 heads, batch 32, where fig4_retrieval.yaml trains
  // d_model 32, 2 heads, batch 128).
  struct Case {
    const char* model;
    const char* sweep;
    int segments, seq_len, answer, n_token;
  };
  for (const Case& c : {Case{"repro_copy_rmt", "fig4_copy.yaml", 9, 18, 12, 12},
                        Case{"repro_retrieval_rmt", "fig4_retrieval.yaml", 5, 10, 1, 37}}) {
    CAPTURE(c.model);
    const SweepPlan plan = plan_sweep(load_sweep(std::string(RMT_SOURCE_DIR) + "/experiments/reproduce/" + c.sweep),
                                      fresh_tmp("rmt_test_bench", "runs"), 1);
    const SweepRun* cell = nullptr;
    for (const auto& run : plan.runs)
      if (run.config.model.kind == "rmt" && run.config.segments == c.segments) cell = &run;
    REQUIRE(cell != nullptr);
    const BenchWorkload w = bench_workload(c.model, false, 0, kSourceManifest);
    const ModelConfig &a = w.model, &b = cell->config.model;
    CHECK(a.kind == b.kind);
    CHECK(a.n_layer == b.n_layer);
    CHECK(a.n_head == b.n_head);
    CHECK(a.d_head == b.d_head);
    CHECK(a.d_model == b.d_model);
    CHECK(a.d_inner == b.d_inner);
    CHECK(a.num_mem_tokens == b.num_mem_tokens);
    CHECK(a.mem_len == b.mem_len);
    CHECK(a.dropout == b.dropout);
    CHECK(w.segments == cell->config.segments);
    CHECK(w.batch == cell->config.train.batch_size);
    CHECK(w.lr == cell->config.train.lr);
    CHECK(w.clip == cell->config.train.clip);
    CHECK(w.bptt == cell->config.bptt);
    CHECK(w.seq_len() == c.seq_len);
    CHECK(w.answer_size() == c.answer);
    CHECK(a.n_token == c.n_token);
  }
  CHECK(bench_workload("repro_copy_rmt", false, 0, kSourceManifest).workload == "repro_copy");
  CHECK(bench_workload("repro_retrieval_rmt", false, 0, kSourceManifest).workload == "repro_retrieval");
  CHECK(bench_selection("repro") == std::vector<std::string>{"repro_copy_rmt", "repro_retrieval_rmt"});
  const std::string manifest = " --manifest " + kSourceManifest;
  Run r = rmt_run("bench --model repro --tiny --reps 2 --warmup 1 --threads 1 --json" + manifest);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("\"model\":\"repro_retrieval_rmt\"") != std::string::npos);
  CHECK(r.output.find("\"workload\":\"repro_retrieval\"") != std::string::npos);
  // The table's headers say each shape as it is read.
  r = rmt_run("bench --model repro --reps 2 --warmup 1 --threads 1 --batch 2 --peak-gflops 1" + manifest);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(r.output.find("copy of 6 symbols (the RMT run with the most segments `rmt reproduce` trains in fig4_copy): "
                      "2 layers, d_model 32, 2 heads, 2 memory tokens, bptt all; batch 2") != std::string::npos);
  CHECK(r.output.find("associative retrieval, 4 pairs (the RMT run with the most segments `rmt reproduce` trains in "
                      "fig4_retrieval): 2 layers, d_model 32, 2 heads, 2 memory tokens, bptt all; batch 2")
        != std::string::npos);
}

TEST_CASE("bench --model groups select their models; all is the copy and language models") {
  CHECK(bench_selection("copy") == std::vector<std::string>{"baseline", "xl", "rmt"});
  CHECK(bench_selection("copy120") ==
        std::vector<std::string>{"copy120_baseline", "copy120_xl", "copy120_rmt"});
  CHECK(bench_selection("lm") == std::vector<std::string>{"lm_baseline", "lm_xl", "lm_rmt"});
  CHECK(bench_selection("all") == std::vector<std::string>{"baseline", "xl", "rmt", "lm_baseline",
                                                           "lm_xl", "lm_rmt"});
  CHECK(bench_selection("copy120_xl") == std::vector<std::string>{"copy120_xl"});
  CHECK(bench_selection("delta") ==
        std::vector<std::string>{"deltanet", "gated_deltanet", "seg64_deltanet", "seg64_gated_deltanet",
                                 "seg256_deltanet", "seg256_gated_deltanet"});
  CHECK(bench_workload("seg64_gated_deltanet", false).model.kind == "gated_deltanet");
  CHECK(bench_workload("seg256_deltanet", false).seq_len() == 768);  // 3 segments of 256
  CHECK(bench_workload("deltanet", false).seq_len() == 72);
  CHECK_THROWS_WITH(bench_selection("copy360"),
                    doctest::Contains("--model must be one of baseline, xl, rmt"));
}

TEST_CASE("bench batch override: FLOPs scale with the batch, except r_net's") {
  for (const std::string& name : bench_models()) {
    CAPTURE(name);
    const BenchWorkload w = bench_workload(name, true, 0, kSourceManifest),
                      w5 = bench_workload(name, true, 5, kSourceManifest);
    CHECK(w5.batch == 5);
    CHECK(w5.seq_len() == w.seq_len());
    CHECK(w5.model.num_mem_tokens == w.model.num_mem_tokens);
    CHECK(w5.model.mem_len == w.model.mem_len);
    if (kind_has_mixer_state(w.model.kind)) {  // no r_net: every term scales with B
      CHECK(step_flops(w5) == doctest::Approx(5 * step_flops(w) / w.batch));
      continue;
    }
    // r_net (2*klen*d*hd per layer) is the only term without B: 5x the FLOPs minus 4x r_net.
    CHECK(step_flops(w5) < 5 * step_flops(w) / w.batch);
    CHECK(step_flops(w5) > 4 * step_flops(w) / w.batch);
  }
  CHECK(bench_workload("rmt", false, 256).batch == 256);
  CHECK(bench_workload("lm_xl", false, 8).batch == 8);
  CHECK_THROWS_WITH(bench_workload("rmt", false, -1), doctest::Contains("--batch must be at least 1"));
}

// The copy120 workload's structure (memory and cache half the segment, vocab 10) on the hand
// model: B=1, H=1, Dh=2, d=2, d_inner=4, V=3, 3 segments of 4 (copy_length 4), memory / cache 2.
TEST_CASE("bench FLOP formula of the copy120 structure matches a hand count") {
  auto hand = [](const std::string& kind) {
    BenchWorkload w = bench_workload("copy120_" + kind, true);
    ModelConfig& m = w.model;
    m.n_layer = 1, m.n_head = 1, m.d_head = 2, m.d_model = 2, m.d_inner = 4, m.n_token = 3;
    w.batch = 1;
    w.copy_length = 4;  // T = 12, segments of 4
    if (m.mem_len > 0) m.mem_len = 2;
    if (m.num_mem_tokens > 0) m.num_mem_tokens = 2;
    return w;
  };
  auto layer = [](double n, double klen) { return 24 * klen + 8 * klen + 12 * n * klen + 40 * n; };
  const double output = 2 * 4 * 2 * 3;  // 2*B*T_seg*d*V = 48
  // baseline: segments 2 and 3 (q = klen = 4, 4 scored rows): 480 + 48 each, 3 x (fwd + bwd).
  CHECK(layer(4, 4) == 480);
  CHECK(step_flops(hand("baseline")) == 3 * 2 * (480 + output));
  // xl: the cache keeps 2 of the first segment's 4 rows: klen = 6 in segments 2 and 3.
  CHECK(layer(4, 6) == 640);
  CHECK(step_flops(hand("xl")) == 3 * 2 * (640 + output));
  // rmt, 2 memory tokens: segment 1 q = klen = 2 + 4 + 2 = 8, live = its 2 write rows, no
  // output; segment 2 q = 8, live = 4 tokens + 2 write rows; segment 3 (last) no write block:
  // q = klen = 6, live 4.
  CHECK(layer(2, 8) == 528);
  CHECK(layer(6, 8) == 1072);
  CHECK(step_flops(hand("rmt")) == 3 * (528 + (1072 + output) + (640 + output)));
  // An evaluation forward: every row of every segment.
  CHECK(forward_flops(hand("rmt")) == 3 * (layer(8, 8) + output));
  CHECK(forward_flops(hand("xl")) == layer(4, 4) + 2 * layer(4, 6) + 3 * output);
}

// One step of each tiny model at batch 3: the FLOPs the run reports, counted by hand. Tiny:
// 1 layer, H=2, Dh=8, d=16, d_inner=32, segments of 6; copy: V=12, memory / cache 6; copy120:
// V=10, memory / cache 3. Per layer with n live rows of klen keys, B=3:
//   qkv 2*3*klen*16*48 = 4608 klen, r_net 2*klen*16*16 = 512 klen, AC+BD+AV 3*2*3*2*n*klen*8
//   = 288 n klen, o_net 2*3*n*16*16 = 1536 n, FF 2*2*3*n*16*32 = 6144 n;
// output layer 2*3*6*16*V: 6912 (V=12), 5760 (V=10).
TEST_CASE("rmt bench --tiny --batch 3 runs and counts the FLOPs of batch 3") {
  auto layer = [](double n, double klen) { return 5120 * klen + 288 * n * klen + 7680 * n; };
  const double out12 = 6912, out10 = 5760;
  CHECK(layer(6, 6) == 87168);
  const std::map<std::string, double> hand = {
      // copy: segments 2 and 3 scored, q = 6
      {"baseline", 3 * 2 * (layer(6, 6) + out12)},
      {"xl", 3 * 2 * (layer(6, 12) + out12)},  // cache 6
      // 6 read + 6 tokens + 6 write rows; live: write rows, tokens + write rows, tokens
      {"rmt", 3 * (layer(6, 18) + (layer(12, 18) + out12) + (layer(6, 12) + out12))},
      {"copy120_baseline", 3 * 2 * (layer(6, 6) + out10)},
      {"copy120_xl", 3 * 2 * (layer(6, 9) + out10)},  // cache 3
      // 3 read + 6 tokens + 3 write rows
      {"copy120_rmt", 3 * (layer(3, 12) + (layer(9, 12) + out10) + (layer(6, 9) + out10))},
  };
  CHECK(hand.at("rmt") == 1673856);
  CHECK(hand.at("copy120_rmt") == 1127232);
  std::vector<std::string> seen;
  for (const char* group : {"copy", "copy120"}) {
    Run r = rmt_run(std::string("bench --tiny --json --no-eval --batch 3 --reps 1 --warmup 0 "
                                "--threads 1 --peak-gflops 10 --model ") + group);
    CAPTURE(r.output);
    REQUIRE(r.status == 0);
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line);
      const std::string model = j["model"];
      CAPTURE(model);
      seen.push_back(model);
      CHECK(j["batch"].get<int>() == 3);
      CHECK(j["workload"] == group);
      CHECK(j["seq_len"].get<int>() == 18);
      CHECK(j["gflop_per_step"].get<double>() == doctest::Approx(hand.at(model) * 1e-9).epsilon(1e-12));
      CHECK(j["tokens_per_s"].get<double>() ==
            doctest::Approx(3 * 18 / (j["step_ms"].get<double>() * 1e-3)));
      CHECK(j["loss"].get<double>() > 0);
    }
  }
  CHECK(seen == std::vector<std::string>{"baseline", "xl", "rmt", "copy120_baseline",
                                         "copy120_xl", "copy120_rmt"});
  // --list reflects --batch without running anything.
  Run l = rmt_run("bench --list --tiny --batch 3 --model copy120_rmt");
  REQUIRE(l.status == 0);
  auto j = nlohmann::json::parse(l.output);
  CHECK(j["batch"] == 3);
  CHECK(j["vocab"] == 10);
  CHECK(j["num_mem_tokens"] == 3);
  CHECK(j["gflop_per_step"].get<double>() == doctest::Approx(hand.at("copy120_rmt") * 1e-9));
}

TEST_CASE("rmt --version names the GEMM library the CPU backend was built with") {
  Run v = rmt_run("--version");
  CHECK(v.status == 0);
  CHECK(v.output.find("gemm: " + cpu_gemm_library()) != std::string::npos);
  CHECK((cpu_gemm_library().rfind("oneDNN ", 0) == 0 || cpu_gemm_library().rfind("Eigen ", 0) == 0));
}
