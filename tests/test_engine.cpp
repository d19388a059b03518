// End-to-end checks of the model's hand-written backward: finite differences of the whole loss
// for every model kind and BPTT setting, BPTT identities, and bit-for-bit determinism. Each runs
// on the CPU backend and on cpu-guarded, whose buffers the host cannot touch outside a backend
// call: a host access left in the engine crashes these tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/random.h"
#include "lib/run/evaluate.h"

using namespace rmt;

namespace {

// The backends every engine test runs on.
const std::vector<std::string> kDevices = {"cpu", "cpu-guarded"};

// kind: a model kind (the delta kinds in their default form, the chunked one in chunks of 16:
// a segment a chunk here), or "deltanet/wy2" or "gated_deltanet/wy2" for chunks of 2 rows (the
// problem's segments of 4 and 3: whole and short chunks), "KIND/recurrent" for the recurrence.
ModelConfig tiny_config(const std::string& name) {
  const size_t slash = name.find('/');
  const std::string kind = name.substr(0, slash);
  ModelConfig c;
  c.kind = kind;
  if (slash != std::string::npos) c.delta_chunk = name.substr(slash) == "/wy2" ? 2 : 0;
  c.n_token = 7;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_head = 4;
  c.d_model = 8;
  c.d_inner = 12;
  c.dropout = 0;
  c.mem_len = (kind == "xl" || kind == "xl_rmt") ? 3 : 0;
  c.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt" || kind == "armt") ? 2 : 0;
  c.d_mem = 2;  // armt: keys of 12
  return c;
}

struct Problem {
  int B = 2, T = 10, A = 6;
  std::vector<int> seg_len{4, 3, 3};
  std::vector<int32_t> input, target;
  explicit Problem(int V, uint64_t seed = 5) {
    SplitMixRng rng(seed);
    for (int i = 0; i < B * T; ++i) input.push_back(int32_t(rng.below(uint64_t(V))));
    for (int i = 0; i < B * T; ++i) target.push_back(int32_t(rng.below(uint64_t(V))));
  }
};

// Makes every parameter O(1)-random so no gradient is trivially zero.
void randomize(Model& model, uint64_t seed) {
  SplitMixRng rng(seed);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (auto& p : params) p = float(0.5 * rng.normal());
  model.params.upload(model.backend, params);
}

double loss_of(Engine& e, const Problem& pb) {
  return forward_loss(e, pb.input.data(), pb.target.data(), pb.B, pb.T, pb.seg_len, pb.A, false, 0);
}

// The same loss, segment by segment, but with each segment's Transformer-XL cache taken from
// `frozen` instead of being recomputed: the cache is detached (stop-gradient), so finite
// differences must hold it fixed to see what backward computes. Records the caches when
// `record` is set.
double loss_with_frozen_cache(Engine& e, const Problem& pb, std::vector<RecurrentState>& frozen,
                              bool record) {
  RecurrentState state, next;
  e.initial_state(state, pb.B);
  SegmentActivations a;
  const float scale = 1.f / float(pb.B * pb.A);
  double loss = 0;
  int t0 = 0;
  for (size_t s = 0; s < pb.seg_len.size(); ++s) {
    const int Ts = pb.seg_len[s];
    std::vector<int32_t> tokens, targets;
    for (int b = 0; b < pb.B; ++b)
      for (int t = t0; t < t0 + Ts; ++t) {
        tokens.push_back(pb.input[size_t(b * pb.T + t)]);
        targets.push_back(t >= pb.T - pb.A ? pb.target[size_t(b * pb.T + t)] : -1);
      }
    if (record) frozen.push_back(state);
    state.cache = frozen[s].cache;
    state.mlen = frozen[s].mlen;
    e.forward_segment(a, tokens.data(), targets.data(), pb.B, Ts, state, next, false, 0, scale);
    for (float l : a.loss_rows.download()) loss += l;
    state = next;
    t0 += Ts;
  }
  return loss * scale;
}

// Central differences at a sample of coordinates of every tensor.
void check_gradients(const std::string& kind, int bptt, Backend& be) {
  Model model(tiny_config(kind), be);
  randomize(model, 11);
  Problem pb(model.V);
  Engine engine(model);
  double base = loss_of(engine, pb);
  engine.backward(bptt);
  std::vector<float> grads = model.grads.download();
  std::vector<RecurrentState> frozen;
  CHECK(std::abs(loss_with_frozen_cache(engine, pb, frozen, true) - base) < 1e-5);
  int checked = 0;
  for (const auto& info : model.param_info) {
    for (int64_t k = 0; k < std::min<int64_t>(info.numel, 4); ++k) {
      int64_t i = info.offset + (k * 7919) % info.numel;
      float saved = 0;
      model.params.read(i, &saved, 1);
      // The delta rule's L2 norms and exponential gates curve more at these O(1) weights: a
      // smaller step keeps the central difference's error below the tolerance.
      const float h = traits_of(model.kind).has_mixer_state() ? 2e-3f : 1e-2f;
      const float up_value = saved + h, down_value = saved - h;
      model.params.write(i, &up_value, 1);
      double up = loss_with_frozen_cache(engine, pb, frozen, false);
      model.params.write(i, &down_value, 1);
      double down = loss_with_frozen_cache(engine, pb, frozen, false);
      model.params.write(i, &saved, 1);
      double fd = (up - down) / (2 * h);
      double an = grads[size_t(i)];
      INFO(kind, " bptt ", bptt, " ", info.name, "[", i - info.offset, "] analytic ", an, " fd ", fd);
      CHECK(std::abs(an - fd) <= 2e-3 + 3e-2 * std::abs(fd));
      ++checked;
    }
  }
  CHECK(checked > 20);
}

}  // namespace

// Truncated BPTT (0, k) is not the derivative of the loss, so finite differences check full
// BPTT only; the golden tests compare truncated BPTT with the PyTorch reference.
TEST_CASE("model gradients match finite differences for every kind (full BPTT)") {
  for (const std::string& device : kDevices) {
    CAPTURE(device);
    for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "armt", "deltanet", "gated_deltanet",
                             "deltanet/wy2", "gated_deltanet/wy2", "deltanet/recurrent",
                             "gated_deltanet/recurrent"})
      check_gradients(kind, -1, backend_by_name(device));
  }
}

TEST_CASE("truncated BPTT: k >= segments-1 equals full BPTT; 0 differs") {
  for (const std::string& device : kDevices)
   for (const char* kind : {"rmt", "armt", "deltanet", "gated_deltanet", "gated_deltanet/wy2",
                            "gated_deltanet/recurrent"}) {
    CAPTURE(device);
    CAPTURE(kind);
    Model model(tiny_config(kind), backend_by_name(device));
    randomize(model, 3);
    Problem pb(model.V);
    Engine engine(model);
    auto grads_for = [&](int bptt) {
      loss_of(engine, pb);
      engine.backward(bptt);
      return model.grads.download();
    };
    std::vector<float> all = grads_for(-1), k2 = grads_for(2), k0 = grads_for(0);
    double max_diff = 0, max_diff0 = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      max_diff = std::max(max_diff, double(std::abs(all[i] - k2[i])));
      max_diff0 = std::max(max_diff0, double(std::abs(all[i] - k0[i])));
    }
    CHECK(max_diff < 1e-5);
    CHECK(max_diff0 > 1e-4);
  }
}

TEST_CASE("forward and backward are bit-identical across runs") {
  for (const std::string& device : kDevices) {
    CAPTURE(device);
    Model model(tiny_config("xl_rmt"), backend_by_name(device));
    randomize(model, 9);
    Problem pb(model.V);
    Engine engine(model);
    double l1 = loss_of(engine, pb);
    engine.backward(-1);
    std::vector<float> g1 = model.grads.download();
    double l2 = loss_of(engine, pb);
    engine.backward(-1);
    CHECK(l1 == l2);
    CHECK(g1 == model.grads.download());
  }
}

TEST_CASE("cpu-guarded gives the CPU backend's results bit for bit (every kind, truncated BPTT, dropout)") {
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "armt", "deltanet", "gated_deltanet",
                           "gated_deltanet/wy2", "deltanet/recurrent"})
    for (int bptt : {-1, 1}) {
      CAPTURE(kind);
      CAPTURE(bptt);
      ModelConfig c = tiny_config(kind);
      c.dropout = 0.1;
      auto run = [&](Backend& be, std::vector<float>& logits) {
        Model model(c, be);
        randomize(model, 12);
        Problem pb(model.V);
        Engine engine(model);
        const double loss = forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T,
                                           pb.seg_len, pb.A, true, 5);
        engine.backward(bptt);
        logits = engine.logits(2);
        return std::make_pair(loss, model.grads.download());
      };
      std::vector<float> logits_cpu, logits_guarded;
      const auto cpu = run(cpu_backend(), logits_cpu);
      const auto guarded = run(backend_by_name("cpu-guarded"), logits_guarded);
      CHECK(cpu.first == guarded.first);
      CHECK(cpu.second == guarded.second);
      CHECK(logits_cpu == logits_guarded);
    }
}

TEST_CASE("segment_lengths splits evenly, longer segments first, and rejects impossible splits") {
  CHECK(segment_lengths(72, 3) == std::vector<int>{24, 24, 24});
  CHECK(segment_lengths(10, 4) == std::vector<int>{3, 3, 2, 2});
  CHECK(describe_segments({3, 3, 2, 2}) == "3,3,2,2 (uneven)");
  CHECK_THROWS(segment_lengths(5, 6));
  CHECK_THROWS(segment_lengths(5, 0));
}

TEST_CASE("greedy decoding with cached keys/values equals re-running every segment") {
  // The answer starting at a segment border, inside a segment (at its first, a middle and its
  // last row), at position 0, and one token long; even, uneven and single segments.
  struct Layout {
    std::vector<int> seg_len;
    int A;
  };
  const std::vector<Layout> layouts = {
      {{4, 3, 3}, 6},  {{4, 3, 3}, 5},  {{4, 3, 3}, 7},  {{4, 3, 3}, 8}, {{4, 3, 3}, 9},
      {{4, 3, 3}, 10}, {{4, 3, 3}, 1},  {{4, 3, 3}, 2},  {{3, 3, 2, 2}, 5},
      {{3, 3, 2, 2}, 3}, {{10}, 4},     {{5, 5}, 7}};
  for (const std::string& device : kDevices)
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "armt", "deltanet", "gated_deltanet"}) {
    CAPTURE(device);
    ModelConfig c = tiny_config(kind);
    c.num_mem_tokens = c.num_mem_tokens > 0 ? 3 : 0;  // 3 rows: the read block's wrap-around matters
    Model model(c, backend_by_name(device));
    randomize(model, 21);
    Problem pb(model.V, 8);
    Engine engine(model);
    for (const Layout& l : layouts) {
      std::vector<int32_t> with_cache, rerun;
      decode_greedy(engine, pb.input.data(), pb.B, pb.T, l.seg_len, l.A, true, with_cache);
      decode_greedy(engine, pb.input.data(), pb.B, pb.T, l.seg_len, l.A, false, rerun);
      CAPTURE(kind);
      CAPTURE(describe_segments(l.seg_len));
      CAPTURE(l.A);
      CHECK(with_cache == rerun);
      for (int b = 0; b < pb.B; ++b)
        for (int p = 0; p < pb.T; ++p) CHECK((rerun[size_t(b * pb.T + p)] >= 0) == (p >= pb.T - l.A));
      // The first answer token follows the true inputs only: it is the teacher-forced prediction.
      forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T, l.seg_len, l.A, false, 0);
      const int p0 = pb.T - l.A;
      int s = 0, t0 = 0;
      while (t0 + engine.segment_length(s) <= p0) t0 += engine.segment_length(s++);
      const std::vector<float> logits = engine.logits(s);
      const int Ts = engine.segment_length(s);
      for (int b = 0; b < pb.B; ++b) {
        const float* row = logits.data() + (int64_t(b) * Ts + (p0 - t0)) * model.V;
        CHECK(rerun[size_t(b * pb.T + p0)] == int(std::max_element(row, row + model.V) - row));
      }
    }
  }
}

TEST_CASE("bptt_recompute: recomputed activations give bit-identical gradients") {
  for (const std::string& device : kDevices)
  for (const char* kind : {"rmt", "xl_rmt", "mt", "armt", "deltanet", "gated_deltanet"})
    for (int bptt : {-1, 0, 1}) {
      CAPTURE(device);
      ModelConfig c = tiny_config(kind);
      c.dropout = 0.2;  // the recomputed dropout masks must match the forward's
      Model model(c, backend_by_name(device));
      randomize(model, 4);
      Problem pb(model.V);
      Engine engine(model);
      double stored = forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T, pb.seg_len,
                                     pb.A, true, 77);
      engine.backward(bptt);
      std::vector<float> g = model.grads.download();
      engine.set_recompute(true);
      double recomputed = forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T,
                                         pb.seg_len, pb.A, true, 77);
      engine.backward(bptt);
      CAPTURE(kind);
      CAPTURE(bptt);
      CHECK(stored == recomputed);
      CHECK(g == model.grads.download());
    }
}

TEST_CASE("training skips work no loss depends on, with the same loss and gradients") {
  // Segment 0 (4 of 10 positions) has no scored position: baseline does not run it, xl runs it
  // only up to its cache, rmt runs its last layer only for the memory it passes on (and the last
  // segment's only for the tokens, with no write block at all: no memory leaves it); with
  // dropout 0 a training step must equal an evaluation step.
  for (const std::string& device : kDevices)
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "armt", "deltanet", "gated_deltanet"})
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(device);
      const bool recompute = variant == 1;
      const int bptt = variant == 2 ? 1 : -1;
      Model model(tiny_config(kind), backend_by_name(device));
      randomize(model, 6);
      Problem pb(model.V);
      Engine engine(model);
      engine.set_recompute(recompute);
      const double eval_loss = loss_of(engine, pb);
      const std::vector<float> logits1 = engine.logits(1);
      engine.backward(bptt);
      const std::vector<float> eval_grads = model.grads.download();
      const double train_loss = forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T,
                                               pb.seg_len, pb.A, true, 0);
      engine.backward(bptt);
      const std::vector<float> train_grads = model.grads.download();
      CAPTURE(kind);
      CAPTURE(variant);
      // Equal up to rounding: a GEMM over fewer rows may round differently.
      CHECK(std::abs(train_loss - eval_loss) <= 1e-6 * std::abs(eval_loss));
      double max_diff = 0, max_ref = 0;
      for (size_t i = 0; i < eval_grads.size(); ++i) {
        max_diff = std::max(max_diff, double(std::abs(train_grads[i] - eval_grads[i])));
        max_ref = std::max(max_ref, double(std::abs(eval_grads[i])));
      }
      CHECK(max_diff <= 1e-5 * max_ref);
      const std::vector<float> logits_train = engine.logits(1);
      REQUIRE(logits_train.size() == logits1.size());
      for (size_t i = 0; i < logits1.size(); ++i) REQUIRE(std::abs(logits_train[i] - logits1[i]) <= 1e-5f);
      CHECK_THROWS_WITH_AS(engine.logits(0), doctest::Contains("not computed"), Error);
    }
}

namespace {

// Columns [c0, c1) of a [B, T] row-major array.
std::vector<int32_t> columns(const std::vector<int32_t>& x, int B, int T, int c0, int c1) {
  std::vector<int32_t> out;
  for (int b = 0; b < B; ++b)
    out.insert(out.end(), x.begin() + b * T + c0, x.begin() + b * T + c1);
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

}  // namespace

TEST_CASE("a forward from a carried state equals the same segments inside one forward") {
  // Language modelling runs a window of segments from a state an earlier forward handed out
  // (Carry): the last segment of a 3-segment forward with bptt 1 must equal a 2-segment window
  // started from the state after segment 0, with full BPTT through the window, in training
  // (work skipped) and evaluation mode alike; the state passed on must equal the longer
  // forward's.
  for (const std::string& device : kDevices)
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt", "deltanet", "gated_deltanet"})
    for (bool training : {false, true}) {
      CAPTURE(device);
      CAPTURE(kind);
      CAPTURE(training);
      Model model(tiny_config(kind), backend_by_name(device));
      randomize(model, 12);
      Problem pb(model.V, 13);
      const int B = pb.B, T = pb.T, A = 3;  // the answer: segment 2 exactly
      Engine engine(model);
      const double full = forward_loss(engine, pb.input.data(), pb.target.data(), B, T, {4, 3, 3}, A,
                                         training, 0, Carry{nullptr, true});
      const std::vector<float> full_logits = engine.logits(2);
      const RecurrentState full_end = engine.state(3);
      engine.backward(1);
      const std::vector<float> full_grads = model.grads.download();

      std::vector<int32_t> in0 = columns(pb.input, B, T, 0, 4), tg0 = columns(pb.target, B, T, 0, 4);
      forward_loss(engine, in0.data(), tg0.data(), B, 4, {4}, 4, training, 0, Carry{nullptr, true});
      const RecurrentState after0 = engine.state(1);
      std::vector<int32_t> in1 = columns(pb.input, B, T, 4, 10), tg1 = columns(pb.target, B, T, 4, 10);
      const double window = forward_loss(engine, in1.data(), tg1.data(), B, 6, {3, 3}, A, training, 0,
                                           Carry{&after0, true});
      engine.backward(-1);
      CHECK(std::abs(window - full) <= 1e-6 * std::abs(full));
      CHECK(max_abs_diff(engine.logits(1), full_logits) <= 1e-5);
      double ref = 0;
      for (float g : full_grads) ref = std::max(ref, double(std::abs(g)));
      CHECK(max_abs_diff(model.grads.download(), full_grads) <= 1e-5 * ref);
      if (model.num_mem > 0)
        CHECK(max_abs_diff(engine.state(2).mem.download(), full_end.mem.download()) <= 1e-5);
      CHECK(engine.state(2).mlen == full_end.mlen);
      CHECK(engine.state(2).mixer.size() == full_end.mixer.size());  // deltanet's S and conv rows
      if (!full_end.mixer.empty())
        CHECK(max_abs_diff(engine.state(2).mixer.download(), full_end.mixer.download()) <= 1e-5);
      for (size_t l = 0; l < full_end.cache.size(); ++l)
        CHECK(max_abs_diff(engine.state(2).cache[l].download(), full_end.cache[l].download()) <= 1e-5);
      // The start state is detached: the learned memory gets no gradient through it.
      if (model.num_mem > 0) {
        const ParamInfo* mem = model.find("mem_tokens");
        std::vector<float> g(static_cast<size_t>(mem->numel));
        model.grads.read(mem->offset, g.data(), mem->numel);
        double g_mem = 0;
        for (float x : g) g_mem = std::max(g_mem, double(std::abs(x)));
        CHECK(g_mem == 0);
      }
    }
}

TEST_CASE("a carried start state that does not fit the model is refused") {
  Model model(tiny_config("xl_rmt"));
  Problem pb(model.V);
  Engine engine(model);
  RecurrentState st;
  engine.initial_state(st, pb.B + 1);  // another batch size
  CHECK_THROWS_WITH_AS(forward_loss(engine, pb.input.data(), pb.target.data(), pb.B, pb.T, pb.seg_len,
                                      pb.A, false, 0, Carry{&st, false}),
                       doctest::Contains("start state"), Error);
}
