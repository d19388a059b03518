// Language-model training steps (lib/run/lm.h): the carried state and the BPTT window.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "lib/experiments/results_table.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"
#include "lib/run/lm.h"
#include "lib/run/run_setup.h"
#include "tests/cli.h"

using namespace rmt;

namespace {

ModelConfig lm_tiny_config(const std::string& kind) {
  ModelConfig c;
  c.kind = kind;
  c.n_token = 9;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_head = 4;
  c.d_model = 8;
  c.d_inner = 12;
  c.dropout = 0;
  c.mem_len = (kind == "xl" || kind == "xl_rmt") ? 5 : 0;
  c.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt") ? 3 : 0;
  return c;
}

// B streams of S segments of T tokens: input [B, S*T] and its next-token target.
struct Streams {
  int B = 2, T = 4, S = 5;
  std::vector<int32_t> input, target;
  explicit Streams(int V, uint64_t seed) {
    SplitMixRng rng(seed);
    std::vector<int32_t> bytes;
    for (int i = 0; i < B * (S * T + 1); ++i) bytes.push_back(int32_t(rng.below(uint64_t(V))));
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < S * T; ++t) {
        input.push_back(bytes[size_t(b * (S * T + 1) + t)]);
        target.push_back(bytes[size_t(b * (S * T + 1) + t + 1)]);
      }
  }
  LmSegmentSource source() const {
    return [this](int64_t s, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
      in.clear();
      tg.clear();
      for (int b = 0; b < B; ++b) {
        auto row = int64_t(b) * S * T + s * T;
        in.insert(in.end(), input.begin() + row, input.begin() + row + T);
        tg.insert(tg.end(), target.begin() + row, target.begin() + row + T);
      }
    };
  }
  // Columns of the first n segments.
  std::vector<int32_t> prefix(const std::vector<int32_t>& x, int n) const {
    std::vector<int32_t> out;
    for (int b = 0; b < B; ++b)
      out.insert(out.end(), x.begin() + int64_t(b) * S * T, x.begin() + int64_t(b) * S * T + n * T);
    return out;
  }
};

}  // namespace

TEST_CASE("LM steps with fixed parameters equal the last segment of one long forward with bptt k") {
  // With the parameters held fixed, the state a step stores is what one forward over all
  // segments computes at that border, so step s (window k) must give the loss, logits and
  // gradients of segment s scored alone in a forward over segments 0..s with truncated BPTT k.
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "deltanet", "gated_deltanet"})
    for (int k : {0, 1, 2}) {
      CAPTURE(kind);
      CAPTURE(k);
      Model model(lm_tiny_config(kind));
      // the state's gradient (memory tokens', the delta rule's S and rows) reaches back k segments
      const bool window = model.num_mem > 0 || traits_of(model.kind).has_mixer_state();
      SplitMixRng rng(31);
      std::vector<float> params(static_cast<size_t>(model.num_params()));
      for (auto& p : params) p = float(0.5 * rng.normal());
      model.params.upload(model.backend, params);
      Streams st(model.V, 7);
      Engine engine(model, cpu_backend());
      LmCarry carry(window ? k : 0);
      for (int s = 0; s < st.S; ++s) {
        CAPTURE(s);
        const double loss = lm_forward_backward(engine, carry, st.source(), st.B, st.T, false, 0);
        const std::vector<float> logits = engine.logits(engine.num_segments() - 1);
        const std::vector<float> grads = model.grads.download();
        CHECK(engine.num_segments() == (window ? std::min(k, s) + 1 : 1));
        CHECK(carry.next_segment() == s + 1);
        CHECK(int(carry.stored().size()) == std::min(s + 1, carry.window() + 1));

        std::vector<int32_t> in = st.prefix(st.input, s + 1), tg = st.prefix(st.target, s + 1);
        const double ref = forward_loss(engine, in.data(), tg.data(), st.B, (s + 1) * st.T,
                                          std::vector<int>(size_t(s) + 1, st.T), st.T, false, 0);
        engine.backward(k);
        CHECK(std::abs(loss - ref) <= 1e-6 * std::abs(ref));
        const std::vector<float> ref_logits = engine.logits(s), ref_grads = model.grads.download();
        double d = 0, gmax = 0, gd = 0;
        for (size_t i = 0; i < logits.size(); ++i) d = std::max(d, double(std::abs(logits[i] - ref_logits[i])));
        for (size_t i = 0; i < grads.size(); ++i) {
          gd = std::max(gd, double(std::abs(grads[i] - ref_grads[i])));
          gmax = std::max(gmax, double(std::abs(ref_grads[i])));
        }
        CHECK(d <= 1e-5);
        CHECK(gd <= 1e-5 * gmax);
      }
    }
}

TEST_CASE("an LM training step (one host wait) gives the bits of forward, backward, then the update") {
  // lm_train_step runs the step through train_step (the loss and the gradient norm read in one
  // download); its numbers must be those of lm_forward_backward followed by optimizer_step.
  for (const char* kind : {"baseline", "xl", "rmt", "xl_rmt"}) {
    CAPTURE(kind);
    ModelConfig c = lm_tiny_config(kind);
    c.dropout = 0.1;
    Model a(c), b(c);
    a.init_weights(3);
    b.params.upload(b.backend, a.params.download());
    Engine ea(a, cpu_backend()), eb(b, cpu_backend());
    Adam adam_a(cpu_backend(), a.num_params()), adam_b(cpu_backend(), b.num_params());
    Streams st(a.V, 11);
    LmCarry ca(a.num_mem > 0 ? 2 : 0), cb(a.num_mem > 0 ? 2 : 0);
    StepSettings s;
    s.clip = 0.25;
    s.lr = 1e-2;
    for (int step = 0; step < st.S; ++step) {
      CAPTURE(step);
      s.dropout_seed = 60 + uint64_t(step);
      const StepResult got = lm_train_step(ea, a, cpu_backend(), adam_a, ca, st.source(), st.B, st.T, s);
      const double loss = lm_forward_backward(eb, cb, st.source(), st.B, st.T, true, s.dropout_seed);
      const StepResult want = optimizer_step(b, cpu_backend(), adam_b, loss, s.clip, s.lr);
      CHECK(got.loss == want.loss);
      CHECK(got.grad_norm == want.grad_norm);
      CHECK(a.params.download() == b.params.download());
      CHECK(ca.next_segment() == cb.next_segment());
    }
  }
}

TEST_CASE("LM steps: the window starts from the stored state, not a recomputed one") {
  // Changing the parameters after a step changes what a re-run of earlier segments would give,
  // but not the state stored for the next window: a step with window 1 after a parameter change
  // must equal a window started explicitly from the state the previous step handed on.
  Model model(lm_tiny_config("rmt"));
  SplitMixRng rng(5);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (auto& p : params) p = float(0.5 * rng.normal());
  model.params.upload(model.backend, params);
  Streams st(model.V, 3);
  Engine engine(model, cpu_backend());
  LmCarry carry(1);
  lm_forward_backward(engine, carry, st.source(), st.B, st.T, false, 0);
  lm_forward_backward(engine, carry, st.source(), st.B, st.T, false, 0);  // segment 1
  const RecurrentState entering1 = carry.stored().front();         // handed on by step 0
  for (auto& p : params) p *= 1.01f;
  model.params.upload(model.backend, params);
  const double loss = lm_forward_backward(engine, carry, st.source(), st.B, st.T, false, 0);  // window 1..2
  std::vector<int32_t> in, tg, window_in, window_tg;
  for (int b = 0; b < st.B; ++b)
    for (int s : {1, 2}) {
      auto row = int64_t(b) * st.S * st.T + s * st.T;
      window_in.insert(window_in.end(), st.input.begin() + row, st.input.begin() + row + st.T);
      window_tg.insert(window_tg.end(), st.target.begin() + row, st.target.begin() + row + st.T);
    }
  const double ref = forward_loss(engine, window_in.data(), window_tg.data(), st.B, 2 * st.T, {st.T, st.T},
                                    st.T, false, 0, Carry{&entering1, false});
  CHECK(loss == ref);
  // and a re-run from the start differs (the test can tell the two apart)
  std::vector<int32_t> all_in = st.prefix(st.input, 3), all_tg = st.prefix(st.target, 3);
  const double rerun = forward_loss(engine, all_in.data(), all_tg.data(), st.B, 3 * st.T,
                                      {st.T, st.T, st.T}, st.T, false, 0);
  CHECK(std::abs(rerun - ref) > 1e-6);
}

TEST_CASE("LmCarry::restore refuses states that do not fit") {
  LmCarry carry(1);
  CHECK_THROWS_WITH_AS(carry.restore(1, {}), doctest::Contains("no carried state"), Error);
  CHECK_THROWS_WITH_AS(carry.restore(5, std::deque<RecurrentState>(3)), doctest::Contains("cannot hold"), Error);
  CHECK_THROWS_WITH_AS(carry.restore(-1, {}), doctest::Contains("cannot hold"), Error);
  carry.restore(5, std::deque<RecurrentState>(2));
  CHECK(carry.next_segment() == 5);
  carry.reset();
  CHECK(carry.next_segment() == 0);
  CHECK(carry.stored().empty());
}

namespace {

// A text dataset in dir/t: n bytes of letters, spaces and newlines, or (words) of words drawn
// from eight, each followed by a space (at most 3 bits a word: under 0.7 bits a byte).
std::string lm_text_dataset(const std::filesystem::path& dir, int n, bool words = false) {
  static const char* kWords[] = {"the", "cat", "sat", "on", "a", "mat", "and", "purred"};
  std::string text;
  uint64_t x = 3;
  while (int(text.size()) < n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    if (words) text += std::string(kWords[(x >> 33) % 8]) + " ";
    else text += "etaoin shrdlu\n"[(x >> 33) % 14];
  }
  text.resize(size_t(n));
  rmt::write_file_atomic(dir / "t.txt", text);
  Run g = rmt_run("generate text --input " + (dir / "t.txt").string() + " --out " + (dir / "t").string());
  REQUIRE_MESSAGE(g.status == 0, g.output);
  return (dir / "t").string();
}

}  // namespace

TEST_CASE("a language model trains from the CLI and rmt eval reproduces its test loss and bpc") {
  using json = nlohmann::json;
  const std::filesystem::path dir = fresh_dir("rmt_test_lm", "train");
  const std::string data = lm_text_dataset(dir, 3000);  // train 2700, val 150, test 150
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "gated_deltanet"}) {
    CAPTURE(kind);
    const std::string run = (dir / kind).string();
    Run r = rmt_run(fmt::format("train --out {} --set data={} --set segment_length=8 --set bptt=1 "
                                "--set model.kind={} --set model.n_layer=1 --set model.n_head=2 "
                                "--set model.d_head=4 --set model.d_model=8 --set model.d_inner=16 "
                                "--set model.num_mem_tokens=2 --set model.mem_len=12 "
                                "--set train.batch_size=4 --set train.lr=3e-3 --set train.max_steps=12 "
                                "--set train.eval_every=6 --set train.log_every=3 --set train.threads=1",
                                run, data, kind));
    REQUIRE_MESSAGE(r.status == 0, r.output);
    CHECK(r.output.find("streams, segments of 8") != std::string::npos);
    const json res = json::parse(rmt::read_file(run + "/results.json"));
    // 4 streams of 37 bytes of the 150-byte test split: 36 targets each
    CHECK(res["positions"] == 4 * 36);
    CHECK(res["streams"] == 4);
    CHECK(res["segment_length"] == 8);
    CHECK(std::abs(res["bpc"].get<double>() - res["loss"].get<double>() / std::log(2.0)) < 1e-12);
    CHECK(res["bpc"].get<double>() > 0);
    const json ev = json::parse(rmt_run("eval --run " + run, true).output);
    CHECK(ev["loss"] == res["loss"]);
    CHECK(ev["bpc"] == res["bpc"]);
    CHECK(ev["acc_teacher_forced"] == res["acc_teacher_forced"]);
    // one stream scores every byte of the split but the first
    const json one = json::parse(rmt_run("eval --run " + run + " --batch-size 1", true).output);
    CHECK(one["positions"] == 149);
    CHECK(one["streams"] == 1);
    // validation lines report bpc; the resolved config is a language model's
    std::istringstream metrics(rmt::read_file(run + "/metrics.jsonl"));
    int evals = 0;
    for (std::string line; std::getline(metrics, line);) {
      const json j = json::parse(line);
      if (j.contains("val_loss")) {
        ++evals;
        CHECK(std::abs(j["val_bpc"].get<double>() - j["val_loss"].get<double>() / std::log(2.0)) < 1e-12);
      }
    }
    CHECK(evals == 2);
    const std::string config = rmt::read_file(run + "/config.yaml");
    CHECK(config.find("segment_length: 8\n") != std::string::npos);
    CHECK(config.find("segments:") == std::string::npos);
    CHECK(config.find("n_token: 256\n") != std::string::npos);
    // its learning curve is its validation bpc
    Run curve = rmt_run("plot --curves " + run + " --format csv", true);
    REQUIRE_MESSAGE(curve.status == 0, curve.output);
    CHECK(curve.output.rfind("kind,seed,segments,run_id,step,val_bpc,val_segments\n", 0) == 0);
    CHECK(curve.output.find(fmt::format("{},", kind)) != std::string::npos);
  }
  // All six as one figure; beside an algorithmic run, refused (bpc and accuracy share no axis).
  Run figure = rmt_run("plot --curves " + dir.string() + " --out " + (dir / "curves.svg").string());
  REQUIRE_MESSAGE(figure.status == 0, figure.output);
  CHECK(rmt::read_file(dir / "curves.svg").find("validation bits per character") != std::string::npos);
}

TEST_CASE("segments of 1 and 2 bytes train, and the memory estimate is the window's") {
  // The algorithmic default `segments: 3` once cut a language model's segment into 3 for the
  // memory estimate: segment_length 1 and 2 failed ("cannot split 1 input positions into 3
  // segments") and the estimate was of a wrong workload.
  const std::filesystem::path dir = fresh_dir("rmt_test_lm", "short");
  const std::string data = lm_text_dataset(dir, 3000);
  for (int T : {1, 2, 16}) {
    CAPTURE(T);
    rmt::Config c;
    c.data = data;
    c.segment_length = T;
    c.bptt = 1;
    c.model.kind = "rmt";
    c.model.n_layer = 1, c.model.n_head = 2, c.model.d_head = 4, c.model.d_model = 8, c.model.d_inner = 16;
    c.model.num_mem_tokens = 2;
    c.train.batch_size = 4, c.train.max_steps = 4, c.train.eval_every = 2, c.train.threads = 1;
    const rmt::RunSetup run = rmt::prepare_run(c);
    const rmt::Workload window = run.family->train_workload(run);
    CHECK(window.seg_len == std::vector<int>(size_t(rmt::lm_window(run)), T));
    CHECK(run.family->train_memory_estimate(run).total() == rmt::estimate_memory(run.config.model, window).total());
    const std::string out = (dir / ("run" + std::to_string(T))).string();
    Run r = rmt_run(fmt::format("train --out {} --set data={} --set segment_length={} --set bptt=1 "
                                "--set model.kind=rmt --set model.n_layer=1 --set model.n_head=2 "
                                "--set model.d_head=4 --set model.d_model=8 --set model.d_inner=16 "
                                "--set model.num_mem_tokens=2 --set train.batch_size=4 "
                                "--set train.max_steps=4 --set train.eval_every=2 --set train.threads=1",
                                out, data, T));
    CHECK_MESSAGE(r.status == 0, r.output);
  }
}

TEST_CASE("language-model training lowers the validation bpc") {
  // Words drawn from eight: 150 steps of a small rmt must take the test bpc from about 8 (an
  // untrained model: uniform over 256 bytes) below 1.5, far under the 3.2 bits of the text's 9
  // symbols drawn uniformly: it learned the words.
  using json = nlohmann::json;
  const std::filesystem::path dir = fresh_dir("rmt_test_lm", "learn");
  const std::string data = lm_text_dataset(dir, 20000, true);
  Run r = rmt_run(fmt::format("train --out {} --set data={} --set segment_length=16 --set bptt=1 "
                              "--set model.kind=rmt --set model.n_layer=2 --set model.n_head=2 "
                              "--set model.d_head=8 --set model.d_model=16 --set model.d_inner=32 "
                              "--set model.num_mem_tokens=2 --set model.dropout=0 "
                              "--set train.batch_size=8 --set train.lr=5e-3 --set train.schedule=constant "
                              "--set train.max_steps=150 --set train.eval_every=150 --set train.threads=1",
                              (dir / "run").string(), data));
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const json res = json::parse(rmt::read_file((dir / "run/results.json").string()));
  CHECK(res["bpc"].get<double>() < 1.5);
  MESSAGE("test bpc after 150 steps: " << res["bpc"].get<double>());
}

TEST_CASE("segment_length leaves the run ids of algorithmic sweeps as they were") {
  // The committed quick_copy results were made before language models existed: planning the
  // same sweep (runs under "runs", as `make run` does) must give the same run ids, which hash
  // the resolved config.
  const rmt::SweepSpec spec = rmt::load_sweep(std::string(RMT_SOURCE_DIR) + "/experiments/quick_copy.yaml");
  const rmt::SweepPlan plan = rmt::plan_sweep(spec, "runs", 1);
  const rmt::CsvTable committed = rmt::parse_csv(
      rmt::read_file(std::string(RMT_SOURCE_DIR) + "/experiments/results/quick_copy/results.csv"), "results.csv");
  std::vector<std::string> planned, ids;
  for (const auto& run : plan.runs) planned.push_back(run.run_id);
  for (const auto& row : committed.rows) ids.push_back(row[size_t(committed.column("run_id"))]);
  std::sort(planned.begin(), planned.end());
  std::sort(ids.begin(), ids.end());
  CHECK(planned == ids);
  CHECK(committed.column("bpc") < 0);
  CHECK(rmt::results_csv_text(plan).find("bpc") == std::string::npos);  // no new column either
}

TEST_CASE("a sweep over text trains language models; results.csv and rmt table show bpc") {
  const std::filesystem::path dir = fresh_dir("rmt_test_lm", "sweep");
  std::string text;
  for (int i = 0; text.size() < 3000; ++i) text += fmt::format("line {} of the sweep's text\n", i * 7919 % 1000);
  rmt::write_file_atomic(dir / "t.txt", text);
  rmt::write_file_atomic(dir / "lm.yaml", fmt::format(R"(
data: {{task: text, input: {}, split: "80,10,10"}}
base:
  segment_length: 8
  bptt: 1
  model: {{n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, dropout: 0.0}}
  train: {{batch_size: 4, lr: 1.0e-3, schedule: constant, max_steps: 4, eval_every: 4, log_every: 4}}
grid:
  - {{model.kind: [baseline, rmt], train.seed: [1, 2]}}
  - {{model.kind: [xl], model.mem_len: [4, 8]}}
derive:
  model.num_mem_tokens: segment_length / 4
)", (dir / "t.txt").string()));
  Run r = rmt_run("sweep " + (dir / "lm.yaml").string() + " -j 2 --runs-dir " + (dir / "runs").string());
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string csv_path = (dir / "runs/lm/results.csv").string();
  const rmt::CsvTable csv = rmt::parse_csv(rmt::read_file(csv_path), csv_path);
  REQUIRE(csv.rows.size() == 6);
  const int bpc = csv.column("bpc"), seg = csv.column("segments"), seglen = csv.column("segment_length"),
            mem = csv.column("model.num_mem_tokens");
  REQUIRE(bpc >= 0);
  for (const auto& row : csv.rows) {
    CHECK(std::stod(row[size_t(bpc)]) > 0);
    CHECK(row[size_t(seg)] == "1");
    CHECK(row[size_t(seglen)] == "8");
  }
  CHECK(csv.rows[2][size_t(mem)] == "2");  // derive: 8 / 4 for the rmt runs
  // rmt table defaults to bpc for a language-model sweep
  Run t = rmt_run("table " + csv_path);
  REQUIRE_MESSAGE(t.status == 0, t.output);
  CHECK(t.output.find("test bits per character") != std::string::npos);
  CHECK(t.output.find("| rmt (mem 2) |") != std::string::npos);
  CHECK(t.output.find("| xl (cache = seg len/2) |") != std::string::npos);
  // bad data blocks
  rmt::write_file_atomic(dir / "bad.yaml", "data: {task: text, input: x, length: 4}\ngrid: {train.seed: [1]}\n");
  expect_error("sweep " + (dir / "bad.yaml").string() + " --dry-run", "data option 'length' is not an option of task text");
  rmt::write_file_atomic(dir / "bad2.yaml", "data: {task: text, input: x}\ngrid: {train.seed: [1]}\n");
  expect_error("sweep " + (dir / "bad2.yaml").string() + " --dry-run", "data task text is a byte-level text dataset (rmt generate text): set segment_length");
  rmt::write_file_atomic(dir / "bad3.yaml", "data: {task: copy, input: x}\ngrid: {train.seed: [1]}\n");
  expect_error("sweep " + (dir / "bad3.yaml").string() + " --dry-run", "data option 'input' belongs to task text");
}
