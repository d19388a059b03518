// Whole training steps through the CUDA backend's calls, run on the host (HostDriverBackend of
// lib/cuda/host_backend.h: every kernel its CUDA driver, every GEMM the column-major call cuBLAS
// would get): the loss and the gradients against the CPU backend, and the stream operations a
// step issues (kernel launches, cuBLAS calls, memsets, copies, host waits) per model, for the
// copy models of experiments/fig4_copy.yaml and the LM of experiments/train_rmt_gcide.yaml.
// RMT_STREAM_OPS=1 prints the table (issue #20 quotes it).
//
// The counts do not depend on the batch size except where a column sum has 64 rows or fewer
// (one launch less), so the steps run at batch 1 (the host runs the kernels one item at a time);
// the second step is counted (the first grows the scratch).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#include "lib/experiments/bench.h"
#include "lib/run/lm.h"
#include "lib/run/train_step.h"
#include "tests/random_lm_stream.h"
#include "tests/source_manifest.h"

using namespace rmt;
namespace cu = rmt::cuda;

namespace {

// max |got - ref| <= tol * max |ref|
bool close(const std::vector<float>& got, const std::vector<float>& ref, double tol, double* ratio) {
  if (got.size() != ref.size()) return false;
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs((double)got[i] - ref[i]));
    mag = std::max(mag, std::fabs((double)ref[i]));
  }
  *ratio = mag > 0 ? err / mag : err;
  return std::isfinite(err) && err <= tol * mag;
}

// The copy model of experiments/fig4_copy.yaml; memory and cache of one segment.
ModelConfig copy_model(const std::string& kind, int seg) {
  ModelConfig c;
  c.kind = kind;
  c.n_token = 12;
  c.n_layer = 4, c.n_head = 4, c.d_head = 64, c.d_model = 128, c.d_inner = 256;
  c.dropout = 0.1;
  c.mem_len = (kind == "xl" || kind == "xl_rmt") ? seg : 0;
  c.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt") ? seg : 0;
  return c;
}

// The LM of experiments/train_rmt_gcide.yaml.
ModelConfig lm_model() {
  ModelConfig c;
  c.kind = "rmt";
  c.n_token = 256;
  c.n_layer = 2, c.n_head = 4, c.d_head = 32, c.d_model = 128, c.d_inner = 512;
  c.dropout = 0;
  c.num_mem_tokens = 10;
  c.mem_init = "normal";
  return c;
}

struct Count {
  std::string what;
  cu::StreamOps ops;
};

std::vector<Count>& table() {
  static std::vector<Count> t;
  return t;
}

void print_table() {
  if (!std::getenv("RMT_STREAM_OPS")) return;
  std::printf("stream operations per training step (cuda drivers counted on the host)\n");
  std::printf("%-28s %8s %8s %8s %8s %8s %8s %8s\n", "model", "kernels", "gemms", "memsets", "copies",
              "graphs", "total", "syncs");
  for (const Count& c : table())
    std::printf("%-28s %8lld %8lld %8lld %8lld %8lld %8lld %8lld\n", c.what.c_str(),
                (long long)c.ops.kernels, (long long)c.ops.gemms, (long long)c.ops.memsets,
                (long long)c.ops.copies, (long long)c.ops.graphs, (long long)c.ops.total(),
                (long long)c.ops.syncs);
}

// A copy batch: random symbols, the loss over the last 48 of 72 positions.
struct Batch {
  int B, T = 72, A = 48;
  std::vector<int> seg_len;
  std::vector<int32_t> input, target;
  Batch(int B, int segments, uint64_t seed) : B(B), seg_len(segments, 72 / segments) {
    SplitMixRng rng(seed);
    for (int i = 0; i < B * T; ++i) input.push_back(int32_t(2 + rng.below(10)));
    for (int i = 0; i < B * T; ++i) target.push_back(int32_t(2 + rng.below(10)));
  }
  StepBatch view() const { return {input.data(), target.data(), B, T, &seg_len, A}; }
};

// Two training steps (clip 0.25, Adam) of the host-run CUDA calls; the second step's operations
// are counted. With `compare`, the same steps on the CPU from the same parameters: the losses,
// the gradient norms and the final parameters agree. With `nan_scratch`, every scratch request
// holds NaN until a driver writes it (a read of unwritten scratch would make the loss NaN).
void copy_steps(const std::string& kind, int segments, int B, bool compare, bool nan_scratch = false) {
  const std::string what = kind + " copy " + std::to_string(segments) + "x" + std::to_string(72 / segments);
  CAPTURE(what);
  const ModelConfig c = copy_model(kind, 72 / segments);
  cu::HostDriverBackend host;
  host.set_nan_scratch(nan_scratch);
  Model ref(c, cpu_backend()), dev(c, host);
  ref.init_weights(5);
  dev.params.upload(host, ref.params.download());
  Engine ref_engine(ref), dev_engine(dev);
  Adam ref_adam(cpu_backend(), ref.num_params()), dev_adam(host, dev.num_params());
  StepSettings s;
  s.bptt = -1;
  s.clip = 0.25;
  s.lr = 1e-3;
  for (int step = 0; step < 2; ++step) {
    s.dropout_seed = 70 + uint64_t(step);
    const Batch b(B, segments, 90 + uint64_t(step));
    host.reset_ops();
    const StepResult d = train_step(dev_engine, dev, host, dev_adam, b.view(), s);
    if (step == 1 && !compare) table().push_back({what, host.ops()});
    if (!compare) continue;
    const StepResult r = train_step(ref_engine, ref, cpu_backend(), ref_adam, b.view(), s);
    CHECK(r.applied == d.applied);
    CHECK(std::fabs(r.loss - d.loss) <= 1e-5 * std::fabs(r.loss));
    CHECK(std::fabs(r.grad_norm - d.grad_norm) <= 1e-4 * std::fabs(r.grad_norm));
  }
  if (!compare) return;
  double ratio = 0;
  CHECK_MESSAGE(close(dev.params.download(), ref.params.download(), 1e-4, &ratio), "params ratio ", ratio);
}

// One training step of a bench workload's model (the reproduction's shapes, lib/experiments/
// bench.h) counted as copy_steps counts: random tokens, batch 1, the second step.
cu::StreamOps workload_steps(const std::string& name) {
  const BenchWorkload w = bench_workload(name, false, 1, kSourceManifest);
  ModelConfig c = w.model;
  resolve_kind(c);
  cu::HostDriverBackend host;
  Model dev(c, host);
  dev.init_weights(5);
  Engine engine(dev);
  Adam adam(host, dev.num_params());
  const int T = w.seq_len(), A = w.answer_size();
  const std::vector<int> seg_len = segment_lengths(T, w.segments);
  StepSettings s;
  s.bptt = w.bptt, s.clip = w.clip, s.lr = w.lr;
  for (int step = 0; step < 2; ++step) {
    SplitMixRng rng(30 + uint64_t(step));
    std::vector<int32_t> input, target;
    for (int i = 0; i < T; ++i) input.push_back(int32_t(2 + rng.below(uint64_t(c.n_token - 2))));
    for (int i = 0; i < T; ++i) target.push_back(int32_t(2 + rng.below(uint64_t(c.n_token - 2))));
    host.reset_ops();
    const StepResult r = train_step(engine, dev, host, adam, {input.data(), target.data(), 1, T, &seg_len, A}, s);
    CHECK(r.applied);
    if (step == 1) table().push_back({fmt::format("{} {}x{}", name, w.segments, T / w.segments), host.ops()});
  }
  return table().back().ops;
}

// Runs of a bench workload's model packed on the host-run CUDA backend, their calls merged
// (lib/cuda/run_merge.h) or made run by run: steps[i] is the group of step i. Returns the stream
// operations of the last step; each run's losses go to losses[slot], its parameters to params.
struct PackedTrace {
  cu::StreamOps last;
  std::vector<std::vector<double>> losses;
  std::vector<std::vector<float>> params;
};
PackedTrace packed_workload(const std::string& name, int runs, bool merge, const std::vector<std::vector<int>>& steps) {
  const BenchWorkload w = bench_workload(name, false, 1, kSourceManifest);
  ModelConfig c = w.model;
  resolve_kind(c);
  cu::HostDriverBackend host;
  host.set_merge_runs(merge);
  PackedBackend pb(host, runs);
  Model model(c, pb);
  for (int k = 0; k < runs; ++k) {
    pb.activate(k);
    model.init_weights(5 + uint64_t(k));
  }
  pb.activate_all();
  Engine engine(model, pb);
  Adam adam(pb, model.num_params());
  const int T = w.seq_len(), A = w.answer_size();
  const std::vector<int> seg_len = segment_lengths(T, w.segments);
  PackedTrace t;
  t.losses.resize(size_t(runs));
  std::vector<int64_t> adam_steps(size_t(runs), 0);
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<std::vector<int32_t>> input(steps[i].size()), target(steps[i].size());
    std::vector<PackedRunStep> group;
    for (size_t j = 0; j < steps[i].size(); ++j) {
      const int k = steps[i][j];
      SplitMixRng rng(mix_seed(30 + uint64_t(i), uint64_t(k)));
      for (int q = 0; q < T; ++q) input[j].push_back(int32_t(2 + rng.below(uint64_t(c.n_token - 2))));
      for (int q = 0; q < T; ++q) target[j].push_back(int32_t(2 + rng.below(uint64_t(c.n_token - 2))));
      StepSettings s;
      s.bptt = w.bptt, s.clip = w.clip, s.lr = w.lr;
      group.push_back({k, {input[j].data(), target[j].data(), 1, T, &seg_len, A}, s, &adam_steps[size_t(k)]});
    }
    host.reset_ops();
    const std::vector<StepResult> r = packed_train_step(engine, model, pb, adam, group);
    t.last = host.ops();
    for (size_t j = 0; j < r.size(); ++j) t.losses[size_t(steps[i][j])].push_back(r[j].loss);
  }
  for (int k = 0; k < runs; ++k) {
    pb.activate(k);
    t.params.push_back(model.params.download());
  }
  return t;
}

}  // namespace

TEST_CASE("cuda host backend: the GEMM's column-major mapping gives the CPU's products") {
  cu::HostDriverBackend host;
  SplitMixRng rng(3);
  auto randv = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = float(rng.normal());
    return v;
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int M = 5, N = 7, K = 3, lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
      const std::vector<float> A = randv(size_t((ta ? K : M) * lda)), B = randv(size_t((tb ? N : K) * ldb));
      const std::vector<float> C0 = randv(size_t(M * ldc));
      std::vector<float> ref = C0, got = C0;
      cpu_backend().matmul_strided(ref.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, ta, tb, 0.5f, 1.f);
      host.matmul_strided(got.data(), ldc, A.data(), lda, B.data(), ldb, M, N, K, ta, tb, 0.5f, 1.f);
      CHECK(got == ref);
    }
}

TEST_CASE("cuda host backend: an RMT copy model's training steps match the CPU's") {
  copy_steps("rmt", 3, 2, true);
}

TEST_CASE("cuda host backend: every model's steps match the CPU's with NaN in every scratch request") {
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt"}) copy_steps(kind, 3, 2, true, true);
}

TEST_CASE("cuda host backend: the NaN-scratch switch fills each request, also of a grown or reused slot") {
  cu::HostExec ex;
  ex.nan_scratch = false;
  auto* p = static_cast<unsigned char*>(ex.scratch(0, 64));
  std::memset(p, 7, 64);
  CHECK(static_cast<unsigned char*>(ex.scratch(0, 64))[10] == 7);  // off: what was there
  ex.nan_scratch = true;
  const int64_t memsets = ex.ops.memsets;
  float* f = static_cast<float*>(ex.scratch(0, 64));
  for (int i = 0; i < 16; ++i) CHECK(std::isnan(f[i]));
  f = static_cast<float*>(ex.scratch(1, 4096));  // a new, larger slot
  CHECK(std::isnan(f[1023]));
  CHECK(ex.ops.memsets == memsets + 2);  // one stream operation per request, as on the GPU
}

TEST_CASE("cuda host backend: stream operations per training step of the copy models") {
  copy_steps("baseline", 1, 1, false);
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt"}) copy_steps(kind, 3, 1, false);
  copy_steps("rmt", 9, 1, false);
  // The reproduction's shapes (issue 40, "the sequential floor"): uncaptured, every kernel a launch.
  for (const char* name : {"repro_copy_rmt", "repro_retrieval_rmt"}) workload_steps(name);
}

// Six steps captured and uncaptured on two host-run CUDA backends from the same parameters: the
// same bits, with one launch and one host wait per replayed step. Each step has its own dropout
// seed, so a replay that drew the captured step's masks again would not match.
void captured_steps(double dropout) {
  CAPTURE(dropout);
  ModelConfig c = copy_model("rmt", 24);
  c.dropout = dropout;
  cu::HostDriverBackend cap_be, plain_be;
  Model init(c, cpu_backend());
  init.init_weights(11);
  Model cap(c, cap_be), plain(c, plain_be);
  cap.params.upload(cap_be, init.params.download());
  plain.params.upload(plain_be, init.params.download());
  Engine cap_engine(cap), plain_engine(plain);
  Adam cap_adam(cap_be, cap.num_params()), plain_adam(plain_be, plain.num_params());
  StepSettings s;
  s.clip = 0.25;
  s.lr = 1e-3;
  StepCapture capture;
  // Steps 0 warm, 1 captured, 2 replayed; an evaluation; 3 warm again, 4 captured, 5 replayed.
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const Batch b(2, 3, 300 + uint64_t(step));
    s.dropout_seed = 500 + uint64_t(step);
    if (step == 3) {  // the engine runs something else: the capture must not be replayed
      const Batch e(2, 3, 999);
      forward_loss(cap_engine, e.input.data(), e.target.data(), e.B, e.T, e.seg_len, e.A, false, 0);
    }
    cap_be.reset_ops();
    const StepResult got = train_step(cap_engine, cap, cap_be, cap_adam, b.view(), s, &capture);
    const cu::StreamOps ops = cap_be.ops();
    const StepResult want = train_step(plain_engine, plain, plain_be, plain_adam, b.view(), s);
    CHECK(got.loss == want.loss);
    CHECK(got.grad_norm == want.grad_norm);
    CHECK(got.applied);
    CHECK(cap.params.download() == plain.params.download());
    if (step > 0) CHECK(ops.syncs == 1);  // the one download of the loss and the norm (step 0 grows scratch)
    if (step == 2 || step == 5) {
      // one launch for forward, backward and norm; outside it the batch's uploads (the ids and
      // targets of every segment in one, and with dropout the segments' seeds), the download,
      // the clip and Adam
      CHECK(ops.graphs == 1);
      CHECK(ops.gemms == 0);
      CHECK(ops.kernels <= 2);
      CHECK(ops.copies == 1 + (dropout > 0 ? 1 : 0) + 1);
      if (step == 5)
        table().push_back({dropout > 0 ? "rmt copy 3x24 dropout, captured" : "rmt copy 3x24, captured", ops});
    }
  }
  CHECK(capture.captured == 2);
  CHECK(capture.replayed == 2);
}

TEST_CASE("cuda host backend: a captured step replays the same bits, with one launch and one host wait") {
  captured_steps(0);
  captured_steps(0.1);  // each replay draws its own step's dropout masks
}

TEST_CASE("cuda host backend: captured language-model steps replay the same bits") {
  // bptt 2 with dropout: the window grows over the first steps (new shapes, captured anew),
  // then every step starts from a carried state that is another buffer each time.
  ModelConfig c = lm_model();
  c.dropout = 0.1;
  cu::HostDriverBackend cap_be, plain_be;
  Model init(c, cpu_backend());
  init.init_weights(23);
  Model cap(c, cap_be), plain(c, plain_be);
  cap.params.upload(cap_be, init.params.download());
  plain.params.upload(plain_be, init.params.download());
  Engine cap_engine(cap), plain_engine(plain);
  Adam cap_adam(cap_be, cap.num_params()), plain_adam(plain_be, plain.num_params());
  const int B = 2, T = 16, steps = 10;
  const RandomLmStream stream(B, T, steps, 31);
  const LmSegmentSource source = stream.source();
  LmCarry cap_carry(2), plain_carry(2);
  StepSettings s;
  s.clip = 0.25;
  s.lr = 1e-3;
  StepCapture capture;
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    s.dropout_seed = 90 + uint64_t(step);
    cap_be.reset_ops();
    const StepResult got = lm_train_step(cap_engine, cap, cap_be, cap_adam, cap_carry, source, B, T, s, &capture);
    const cu::StreamOps ops = cap_be.ops();
    const StepResult want = lm_train_step(plain_engine, plain, plain_be, plain_adam, plain_carry, source, B, T, s);
    CHECK(got.loss == want.loss);
    CHECK(got.grad_norm == want.grad_norm);
    CHECK(cap.params.download() == plain.params.download());
    if (step == steps - 1) {
      CHECK(ops.graphs == 1);  // forward, backward and norm in one launch
      CHECK(ops.syncs == 1);
      table().push_back({"rmt LM 2 x 16 (bptt 2) dropout, captured", ops});
    }
  }
  CHECK(capture.replayed >= 4);
}

TEST_CASE("cuda host backend: what a CUDA graph cannot hold fails while capturing") {
  cu::HostDriverBackend be;
  DeviceArray<float> x(be, 4);
  be.fill(x.data(), 4, 1.f);
  float host[4];
  be.begin_capture();
  be.scale(x.data(), 4, 2.f);  // recorded, not run
  CHECK_THROWS_WITH_AS(be.copy_device_to_host(host, x.data(), sizeof host),
                       "a download while capturing a step", std::logic_error);
  CHECK_THROWS_WITH_AS(be.copy_host_to_device(x.data(), host, sizeof host),
                       "an upload while capturing a step", std::logic_error);
  CHECK_THROWS_AS(be.allocate(64), std::logic_error);
  CHECK_THROWS_AS(be.synchronize(), std::logic_error);
  const int64_t id = be.end_capture();
  be.copy_device_to_host(host, x.data(), sizeof host);
  CHECK(host[0] == 1.f);  // capturing ran nothing
  be.replay(id);
  be.replay(id);
  be.copy_device_to_host(host, x.data(), sizeof host);
  CHECK(host[3] == 4.f);  // each replay ran the scale once
  CHECK_THROWS_AS(be.replay(id + 1), std::logic_error);
  CHECK_FALSE(cpu_backend().can_capture());
}

TEST_CASE("cuda host backend: packed steps captured give the bits of uncaptured ones, one launch a step") {
  // Three RMT runs packed (lib/core/packed_backend.h) on two host-run CUDA backends from the same
  // parameters, one capturing: each run's losses and parameters agree bit for bit; the group
  // changes once (run 1 sits a step out), which captures again.
  const ModelConfig c = copy_model("rmt", 24);
  cu::HostDriverBackend plain_host, capture_host;
  PackedBackend plain(plain_host, 3), captured(capture_host, 3);
  Model a(c, plain), b(c, captured);
  for (int k = 0; k < 3; ++k) {
    plain.activate(k), captured.activate(k);
    a.init_weights(60 + uint64_t(k));
    b.init_weights(60 + uint64_t(k));
  }
  plain.activate_all(), captured.activate_all();
  Adam adam_a(plain, a.num_params()), adam_b(captured, b.num_params());
  Engine engine_a(a), engine_b(b);
  StepCapture capture;
  std::vector<int64_t> steps_a(3, 0), steps_b(3, 0);
  const std::vector<std::vector<int>> groups = {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 1, 2}};
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<std::unique_ptr<Batch>> batches;
    std::vector<PackedRunStep> ga, gb;
    for (int k : groups[i]) {
      batches.push_back(std::make_unique<Batch>(1, 3, 300 + 10 * i + uint64_t(k)));
      StepSettings s;
      s.clip = 0.25, s.lr = 1e-3, s.dropout_seed = 77 + 10 * i + uint64_t(k);
      ga.push_back({k, batches.back()->view(), s, &steps_a[size_t(k)]});
      gb.push_back({k, batches.back()->view(), s, &steps_b[size_t(k)]});
    }
    const std::vector<StepResult> ra = packed_train_step(engine_a, a, plain, adam_a, ga);
    capture_host.reset_ops();
    const std::vector<StepResult> rb = packed_train_step(engine_b, b, captured, adam_b, gb, &capture);
    for (size_t j = 0; j < ra.size(); ++j) {
      CHECK(ra[j].loss == rb[j].loss);
      CHECK(ra[j].grad_norm == rb[j].grad_norm);
    }
    if (i == 2 || i == 5) CHECK(capture_host.ops().graphs == 1);  // replayed: one launch for the group
  }
  CHECK(capture.captured == 2);  // once per group
  CHECK(capture.replayed == 2);  // a warm step, a capture, then replays, per group
  for (int k = 0; k < 3; ++k) {
    plain.activate(k), captured.activate(k);
    CHECK(a.params.download() == b.params.download());
  }
}

TEST_CASE("cuda host backend: packed runs merged, one launch per pass for the group; the same bits as run by run") {
  // 16 runs of the reproduction's RMT copy model (issue 40): a packed step with the runs' calls
  // merged against the same step made run by run, and against one run alone.
  const cu::StreamOps one = workload_steps("repro_copy_rmt");
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const PackedTrace merged = packed_workload("repro_copy_rmt", 16, true, {all, all});
  const PackedTrace in_turn = packed_workload("repro_copy_rmt", 16, false, {all, all});
  CHECK(merged.losses == in_turn.losses);
  CHECK(merged.params == in_turn.params);
  CHECK(merged.losses[0] != merged.losses[1]);  // the runs are their own
  table().push_back({"repro_copy_rmt x16 in turn", in_turn.last});
  table().push_back({"repro_copy_rmt x16 merged", merged.last});
  // Run by run, the group's forward and backward are 16 runs' launches; merged, about one run's:
  // a pass is one launch, a product one batched call (those of the attention, batched over (b, h)
  // already, one call over pointer arrays and the pass that writes them). What stays per run is
  // each run's own part of the step: its batch, its reading of loss and norm, its clip and Adam.
  CHECK(in_turn.last.kernels + in_turn.last.gemms >= 15 * (one.kernels + one.gemms));
  CHECK(merged.last.gemms <= one.gemms + 16);
  CHECK(merged.last.kernels <= one.kernels + one.gemms / 2 + 16 * 4);
  CHECK(merged.last.total() * 5 < in_turn.last.total());

  // Four runs, then a group without run 2: slots 0, 1, 3 are at no one stride, so even the
  // single products go through pointer arrays.
  const std::vector<std::vector<int>> steps = {{0, 1, 2, 3}, {0, 1, 3}, {0, 1, 3}};
  const PackedTrace gap = packed_workload("repro_retrieval_rmt", 4, true, steps);
  const PackedTrace gap_in_turn = packed_workload("repro_retrieval_rmt", 4, false, steps);
  CHECK(gap.losses == gap_in_turn.losses);
  CHECK(gap.params == gap_in_turn.params);
  CHECK(gap.losses[2].size() == 1);
}

TEST_CASE("cuda host backend: merged runs that issue different operations are refused") {
  cu::HostDriverBackend be;
  DeviceArray<float> x(be, 8), y(be, 8);
  be.fill(x.data(), 8, 1.f);
  be.begin_run_merge(2);
  be.merge_run(0);
  be.scale(x.data(), 4, 2.f);
  be.merge_run(1);
  be.add_inplace(y.data(), x.data(), 4);  // another pass
  CHECK_THROWS_WITH_AS(be.end_run_merge(),
                       "merged runs: run 1 issued another kind of operation at operation 0 than run 0 (packed runs must "
                       "run one shape)",
                       std::logic_error);
  be.begin_run_merge(2);  // the failed merge left nothing behind
  be.merge_run(0);
  be.scale(x.data(), 4, 2.f);
  float host[8];
  CHECK_THROWS_WITH_AS(be.copy_device_to_host(host, x.data(), sizeof host), "a download inside merged packed runs",
                       std::logic_error);
  be.merge_run(1);
  be.scale(x.data() + 4, 4, 3.f);
  be.end_run_merge();
  be.copy_device_to_host(host, x.data(), sizeof host);
  CHECK(host[0] == 2.f);
  CHECK(host[7] == 3.f);
  CHECK(be.ops().kernels >= 1);
}

TEST_CASE("cuda host backend: the LM's training steps match the CPU; stream operations per step") {
  const ModelConfig c = lm_model();
  cu::HostDriverBackend host;
  Model ref(c, cpu_backend()), dev(c, host);
  ref.init_weights(7);
  dev.params.upload(host, ref.params.download());
  Engine ref_engine(ref), dev_engine(dev);
  Adam ref_adam(cpu_backend(), ref.num_params()), dev_adam(host, dev.num_params());
  const int B = 1, T = 128, steps = 3;
  const RandomLmStream stream(B, T, steps, 29);
  const LmSegmentSource source = stream.source();
  LmCarry ref_carry(1), dev_carry(1);  // bptt 1
  StepSettings s;
  s.clip = 0.25;
  s.lr = 1e-3;
  for (int step = 0; step < steps; ++step) {
    host.reset_ops();
    // the cpu: forward and backward, then the update; the device: the whole step in one wait
    const double rl = lm_forward_backward(ref_engine, ref_carry, source, B, T, true, 40 + uint64_t(step));
    const StepResult r = optimizer_step(ref, cpu_backend(), ref_adam, rl, 0.25, 1e-3);
    s.dropout_seed = 40 + uint64_t(step);
    const StepResult d = lm_train_step(dev_engine, dev, host, dev_adam, dev_carry, source, B, T, s);
    if (step == 2) {
      table().push_back({"rmt LM gcide 128 (bptt 1)", host.ops()});
      CHECK(host.ops().syncs == 1);
    }
    CHECK(std::fabs(rl - d.loss) <= 1e-5 * std::fabs(rl));
    CHECK(std::fabs(r.grad_norm - d.grad_norm) <= 1e-4 * std::fabs(r.grad_norm));
  }
  double ratio = 0;
  CHECK_MESSAGE(close(dev.params.download(), ref.params.download(), 1e-4, &ratio), "params ratio ", ratio);
  print_table();
}
