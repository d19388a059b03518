// Packed runs (lib/core/packed_backend.h, packed_train_step in lib/run/train_step.h): K runs of
// one shape trained in one computation give each run the bits it gets trained alone with one
// thread, for every model kind and BPTT setting, with dropout, groups that change from step to
// step (a run sitting steps out, as one at another curriculum stage would), evaluations of one run
// in between, and through the checked cpu-guarded backend.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/packed_backend.h"
#include "lib/core/random.h"
#include "lib/cuda/host_backend.h"
#include "lib/run/train_step.h"

using namespace rmt;

namespace {

ModelConfig small_model(const std::string& kind) {
  ModelConfig c;
  c.kind = kind;
  c.n_token = 12;
  c.n_layer = 2, c.n_head = 2, c.d_head = 8, c.d_model = 16, c.d_inner = 32;
  c.dropout = 0.1;
  c.mem_len = (kind == "xl" || kind == "xl_rmt") ? 4 : 0;
  c.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt" || kind == "armt") ? 3 : 0;
  c.d_mem = 3;  // armt
  return c;
}

constexpr int kRuns = 3, kSteps = 5, kB = 4, kT = 12, kAnswer = 4;
const std::vector<int> kSegments = {4, 4, 4};

// Run k's j-th batch (j = kSteps: the evaluation batch): its own random tokens.
struct Batch {
  std::vector<int32_t> input, target;
  Batch(int run, int j) {
    SplitMixRng rng(mix_seed(uint64_t(run) + 1, uint64_t(j)));
    for (int i = 0; i < kB * kT; ++i) input.push_back(int32_t(2 + rng.below(10)));
    for (int i = 0; i < kB * kT; ++i) target.push_back(int32_t(2 + rng.below(10)));
  }
  StepBatch view() const { return {input.data(), target.data(), kB, kT, &kSegments, kAnswer}; }
};

StepSettings settings_of(int run, int j, int bptt) {
  StepSettings s;
  s.bptt = bptt;
  s.clip = run == 1 ? 0.05 : 1.0;  // run 1 clips, the others mostly not
  s.lr = 1e-3 * (run + 1) / (j + 1);
  s.dropout_seed = mix_seed(uint64_t(run) * 77, uint64_t(j));
  return s;
}

uint64_t init_seed(int run) { return mix_seed(0x5EED, uint64_t(run)); }

struct Trace {
  std::vector<double> loss, norm;
  double eval_loss = 0;
  std::vector<float> params;
};

// Run k trained alone on `be` with one thread: kSteps steps, then an evaluation forward.
Trace alone(const ModelConfig& c, int run, int bptt, bool recompute, Backend& be) {
  set_num_threads(1);
  Model model(c, be);
  model.init_weights(init_seed(run));
  Adam adam(be, model.num_params());
  Engine engine(model, be);
  engine.set_recompute(recompute);
  Trace t;
  for (int j = 0; j < kSteps; ++j) {
    Batch b(run, j);
    StepResult r = train_step(engine, model, be, adam, b.view(), settings_of(run, j, bptt));
    t.loss.push_back(r.loss);
    t.norm.push_back(r.grad_norm);
  }
  Batch e(run, kSteps);
  t.eval_loss = forward_loss(engine, e.input.data(), e.target.data(), kB, kT, kSegments, kAnswer, false, 0);
  t.params = model.params.download();
  return t;
}

// The kRuns runs packed on `inner`: the groups change from step to step (run 1 sits out the
// second iteration and catches up alone in the third); run 0 is evaluated between steps.
std::vector<Trace> packed(const ModelConfig& c, int bptt, bool recompute, Backend& inner) {
  PackedBackend pb(inner, kRuns);
  Model model(c, pb);
  for (int k = 0; k < kRuns; ++k) {
    pb.activate(k);
    model.init_weights(init_seed(k));
  }
  pb.activate_all();
  Adam adam(pb, model.num_params());
  Engine engine(model, pb);
  engine.set_recompute(recompute);
  std::vector<Trace> t(kRuns);
  std::vector<int64_t> adam_steps(kRuns, 0);
  std::vector<int> taken(kRuns, 0);  // steps each run has taken
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {0, 2}, {1}, {0, 1, 2}, {0, 1, 2}, {0, 2}, {1}};
  for (const auto& group : groups) {
    std::vector<std::unique_ptr<Batch>> batches;
    std::vector<PackedRunStep> steps;
    for (int k : group) {
      batches.push_back(std::make_unique<Batch>(k, taken[size_t(k)]));
      steps.push_back({k, batches.back()->view(), settings_of(k, taken[size_t(k)], bptt), &adam_steps[size_t(k)]});
    }
    std::vector<StepResult> r = packed_train_step(engine, model, pb, adam, steps);
    for (size_t i = 0; i < group.size(); ++i) {
      const int k = group[i];
      t[size_t(k)].loss.push_back(r[i].loss);
      t[size_t(k)].norm.push_back(r[i].grad_norm);
      taken[size_t(k)] += 1;
    }
    // An evaluation of run 0 between steps (as validation is) changes nothing of the runs.
    pb.activate(0);
    Batch e(0, kSteps + 1);
    forward_loss(engine, e.input.data(), e.target.data(), kB, kT, kSegments, kAnswer, false, 0);
  }
  for (int k = 0; k < kRuns; ++k) {
    REQUIRE(taken[size_t(k)] == kSteps);
    pb.activate(k);
    Batch e(k, kSteps);
    t[size_t(k)].eval_loss = forward_loss(engine, e.input.data(), e.target.data(), kB, kT, kSegments, kAnswer, false, 0);
    t[size_t(k)].params = model.params.download();
  }
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Packed on `inner` against each run alone on a backend alone_on() makes.
template <class AloneOn>
void check_packed_equals_alone(const std::string& kind, int bptt, bool recompute, Backend& inner, AloneOn alone_on) {
  CAPTURE(kind);
  CAPTURE(bptt);
  CAPTURE(recompute);
  const ModelConfig c = small_model(kind);
  const std::vector<Trace> p = packed(c, bptt, recompute, inner);
  for (int k = 0; k < kRuns; ++k) {
    CAPTURE(k);
    const Trace a = alone(c, k, bptt, recompute, alone_on());
    CHECK(p[size_t(k)].loss == a.loss);  // exactly: the same bits
    CHECK(p[size_t(k)].norm == a.norm);
    CHECK(p[size_t(k)].eval_loss == a.eval_loss);
    CHECK(same_bits(p[size_t(k)].params, a.params));
  }
  CHECK(!same_bits(p[0].params, p[1].params));  // the runs are their own
}
void check_packed_equals_alone(const std::string& kind, int bptt, bool recompute, Backend& inner) {
  check_packed_equals_alone(kind, bptt, recompute, inner, []() -> Backend& { return cpu_backend(); });
}

}  // namespace

TEST_CASE("packed runs: each run bit-identical to the run alone, every model kind and BPTT setting") {
  const int threads_before = num_threads();
  for (const std::string kind : {"baseline", "xl", "mt", "rmt", "xl_rmt", "armt", "deltanet", "gated_deltanet"}) {
    const std::vector<int> bptts =
        (kind == "rmt" || kind == "xl_rmt" || kind == "armt" || kind == "deltanet" || kind == "gated_deltanet")
            ? std::vector<int>{-1, 0, 1}
            : std::vector<int>{-1};
    for (int bptt : bptts) check_packed_equals_alone(kind, bptt, false, cpu_backend());
  }
  check_packed_equals_alone("rmt", -1, true, cpu_backend());  // bptt_recompute
  set_num_threads(threads_before);
}

TEST_CASE("packed runs: through cpu-guarded (no host access, unwritten slices hold NaN)") {
  const int threads_before = num_threads();
  check_packed_equals_alone("rmt", -1, false, guarded_cpu_backend());
  check_packed_equals_alone("xl_rmt", 1, false, guarded_cpu_backend());
  check_packed_equals_alone("armt", 1, false, guarded_cpu_backend());
  check_packed_equals_alone("gated_deltanet", 1, false, guarded_cpu_backend());
  check_packed_equals_alone("xl", -1, false, guarded_cpu_backend());
  set_num_threads(threads_before);
}

TEST_CASE("packed runs: merged on the host-run CUDA backend, each run's bits alone there, every kind and BPTT") {
  // The CUDA backend's drivers run on the host (lib/cuda/host_backend.h): packed runs' calls are
  // recorded and issued once per pass for the group (lib/cuda/run_merge.h), run by run alone on a
  // backend of their own. The groups change from step to step, {0, 2} among them.
  const int threads_before = num_threads();
  for (const std::string kind : {"baseline", "xl", "mt", "rmt", "xl_rmt", "armt", "deltanet", "gated_deltanet"}) {
    const std::vector<int> bptts =
        (kind == "rmt" || kind == "xl_rmt" || kind == "armt" || kind == "deltanet" || kind == "gated_deltanet")
            ? std::vector<int>{-1, 0, 1}
            : std::vector<int>{-1};
    for (int bptt : bptts) {
      cuda::HostDriverBackend merged;
      merged.set_nan_scratch(true);  // a run reading scratch outside its region reads NaN
      REQUIRE(merged.can_merge_runs());
      std::vector<std::unique_ptr<cuda::HostDriverBackend>> own;
      check_packed_equals_alone(kind, bptt, false, merged, [&]() -> Backend& {
        own.push_back(std::make_unique<cuda::HostDriverBackend>());
        return *own.back();
      });
    }
  }
  set_num_threads(threads_before);
}

TEST_CASE("packed runs: the backend's rules") {
  const int threads_before = num_threads();
  {
    PackedBackend pb(cpu_backend(), 3);
    float* x = static_cast<float*>(pb.allocate(5 * sizeof(float)));
    // The first write of a buffer goes to every run's slice; later ones to the active runs.
    const std::vector<float> ones(5, 1.f), twos(5, 2.f);
    pb.activate(1);
    pb.copy_host_to_device(x, ones.data(), 5 * sizeof(float));
    pb.copy_host_to_device(x, twos.data(), 5 * sizeof(float));
    std::vector<float> got(5);
    for (int k = 0; k < 3; ++k) {
      pb.activate(k);
      pb.copy_device_to_host(got.data(), x, 5 * sizeof(float));
      CHECK(got == (k == 1 ? twos : ones));
    }
    // A kernel runs on the active slices only.
    pb.activate(std::vector<int>{0, 2});
    pb.scale(x, 5, 3.f);
    for (int k = 0; k < 3; ++k) {
      pb.activate(k);
      pb.copy_device_to_host(got.data(), x, 5 * sizeof(float));
      CHECK(got[4] == (k == 1 ? 2.f : 3.f));
    }
    // Reading back needs one run; a pointer that is not the backend's is an internal error.
    pb.activate_all();
    CHECK_THROWS_AS(pb.copy_device_to_host(got.data(), x, sizeof(float)), std::logic_error);
    CHECK_THROWS_AS(pb.sum_squares(x, 5), std::logic_error);
    CHECK_THROWS_AS(pb.scale(got.data(), 5, 2.f), std::logic_error);
    CHECK_THROWS_AS(pb.activate(std::vector<int>{2, 1}), std::logic_error);
    CHECK_THROWS_AS(pb.activate(3), std::logic_error);
    pb.deallocate(x, 5 * sizeof(float));
    CHECK(num_threads() == 1);  // a packed run's kernels compute as a lone run's of one thread
  }
  CHECK(num_threads() == threads_before);
}

// ---- Whole runs: train_packed against train() ------------------------------------------------

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "lib/run/config.h"
#include "lib/run/train.h"
#include "tests/cli.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// metrics.jsonl without its timing (tokens/s).
std::vector<json> metrics_of(const fs::path& dir) {
  std::vector<json> lines;
  std::istringstream in(read_file(dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    j.erase("tokens_per_s");
    lines.push_back(j);
  }
  return lines;
}

// results.json without how long it took and how much memory the process had.
json results_of(const fs::path& dir) {
  json j = json::parse(read_file(dir / "results.json"));
  j.erase("wall_time_s");
  j.erase("peak_rss_mb");
  return j;
}

}  // namespace

TEST_CASE("packed runs: whole runs trained packed equal the runs trained alone, file for file") {
  const fs::path root = fresh_dir("rmt_test_packed", "whole");
  Run g = rmt_run("generate copy --length 5 --symbols 4 --train 300 --val 40 --test 40 --out " + (root / "data").string());
  REQUIRE_MESSAGE(g.status == 0, g.output);
  // Four runs of one model, three slots in two packs (two threads): run 1 ends first (fewer
  // steps) and run 3 takes a slot, so the runs are at different curriculum stages (other batch
  // shapes) and step in groups; run 2 trains under the mastery curriculum with a stopping target.
  std::vector<TrainJob> packed_jobs, alone_jobs;
  for (int i = 0; i < 4; ++i) {
    const std::string yaml = fmt::format(
        "data: {}\nsegments: 3\nbptt: {}\n"
        "model: {{kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, num_mem_tokens: 2, dropout: 0.1}}\n"
        "train: {{batch_size: 8, lr: 2.0e-3, max_steps: {}, eval_every: 10, log_every: 5, seed: {}, threads: 1, "
        "curriculum: 3{}}}\n",
        (root / "data").string(), i == 3 ? "1" : "all", i == 1 ? 30 : 60, i + 1,
        i == 2 ? ", curriculum_advance: mastery, target: 0.5" : "");
    const Config c = parse_config(yaml, fmt::format("job {}", i));
    TrainOptions p, a;
    p.run_dir = (root / "packed" / std::to_string(i)).string();
    a.run_dir = (root / "alone" / std::to_string(i)).string();
    packed_jobs.push_back({c, p});
    alone_jobs.push_back({c, a});
  }
  const int threads_before = num_threads();
  const std::vector<std::string> errors = train_packed(packed_jobs, 3, 2);
  for (const std::string& e : errors) CHECK(e == "");
  for (const TrainJob& job : alone_jobs) train(job.config, job.options);
  set_num_threads(threads_before);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    const fs::path p = packed_jobs[size_t(i)].options.run_dir, a = alone_jobs[size_t(i)].options.run_dir;
    CHECK(metrics_of(p) == metrics_of(a));
    CHECK(results_of(p) == results_of(a));
    CHECK(read_file(p / "best.safetensors") == read_file(a / "best.safetensors"));
    CHECK(read_file(p / "last.safetensors") == read_file(a / "last.safetensors"));
  }
  CHECK(results_of(root / "packed" / "1")["steps"] == 30);
  CHECK(metrics_of(root / "packed" / "0") != metrics_of(root / "packed" / "3"));  // runs of their own
}

TEST_CASE("packed runs: what cannot join a pack is refused for that run alone") {
  const fs::path root = fresh_dir("rmt_test_packed", "refused");
  Run g = rmt_run("generate copy --length 5 --symbols 4 --train 100 --val 20 --test 20 --out " + (root / "data").string());
  REQUIRE_MESSAGE(g.status == 0, g.output);
  auto job = [&](const std::string& name, const std::string& model, int threads) {
    const std::string yaml = fmt::format(
        "data: {}\nsegments: 2\nmodel: {{kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: {}, d_inner: 16, "
        "num_mem_tokens: 2}}\ntrain: {{batch_size: 4, max_steps: 10, eval_every: 5, threads: {}}}\n",
        (root / "data").string(), model, threads);
    TrainOptions o;
    o.run_dir = (root / name).string();
    return TrainJob{parse_config(yaml, name), o};
  };
  const int threads_before = num_threads();
  const std::vector<std::string> errors =
      train_packed({job("a", "8", 1), job("b", "16", 1), job("c", "8", 2), job("d", "8", 1)}, 2, 1);
  set_num_threads(threads_before);
  CHECK(errors[0] == "");
  CHECK(errors[1].find("cannot join a pack of rmt L1 H2x4 d8") != std::string::npos);
  CHECK(errors[2].find("train.threads 2: a packed run computes with one thread") != std::string::npos);
  CHECK(errors[3] == "");
  CHECK(fs::exists(root / "a" / "results.json"));
  CHECK(fs::exists(root / "d" / "results.json"));
  CHECK(!fs::exists(root / "b" / "results.json"));
}

TEST_CASE("packed runs: AdamW's weight decay packed as alone; a run of another decay does not join the pack") {
  const fs::path root = fresh_dir("rmt_test_packed", "weight_decay");
  Run g = rmt_run("generate copy --length 5 --symbols 4 --train 100 --val 20 --test 20 --out " + (root / "data").string());
  REQUIRE_MESSAGE(g.status == 0, g.output);
  auto job = [&](const std::string& dir, int seed, const std::string& wd) {
    const std::string yaml = fmt::format(
        "data: {}\nsegments: 2\nmodel: {{kind: rmt, n_layer: 1, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, "
        "num_mem_tokens: 2}}\ntrain: {{batch_size: 4, lr: 3.0e-3, max_steps: 12, eval_every: 6, threads: 1, seed: {}, "
        "weight_decay: {}}}\n", (root / "data").string(), seed, wd);
    TrainOptions o;
    o.run_dir = (root / dir).string();
    return TrainJob{parse_config(yaml, dir), o};
  };
  const int threads_before = num_threads();
  const std::vector<std::string> errors = train_packed({job("p1", 1, "0.5"), job("p2", 2, "0.5")}, 2, 1);
  for (const std::string& e : errors) CHECK(e == "");
  for (const TrainJob& j : {job("a1", 1, "0.5"), job("a2", 2, "0.5")}) train(j.config, j.options);
  const std::vector<std::string> mixed = train_packed({job("m1", 1, "0"), job("m2", 1, "0.5")}, 2, 1);
  set_num_threads(threads_before);
  CHECK(read_file(root / "p1" / "last.safetensors") == read_file(root / "a1" / "last.safetensors"));
  CHECK(read_file(root / "p2" / "last.safetensors") == read_file(root / "a2" / "last.safetensors"));
  CHECK(mixed[0] == "");
  CHECK(mixed[1].find("cannot join a pack") != std::string::npos);
  CHECK(read_file(root / "m1" / "last.safetensors") != read_file(root / "a1" / "last.safetensors"));  // only a1 decays
}
