// Diagonal evaluation of armt (Engine::forward_diagonal, docs/armt.md "Diagonal evaluation"):
// the logits, per-position losses and the state after the last segment of every shape are those
// of segment-by-segment evaluation bit for bit, at one and two threads; the evaluation's loss and
// accuracies too; other kinds are refused.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/random.h"
#include "lib/run/evaluate.h"

using namespace rmt;

namespace {

ModelConfig diagonal_config(const std::string& kind, int layers) {
  ModelConfig c;
  c.kind = kind;
  c.n_token = 7;
  c.n_layer = layers;
  c.n_head = 2;
  c.d_head = 4;
  c.d_model = 8;
  c.d_inner = 12;
  c.dropout = 0;
  c.mem_init = "normal";
  c.mem_len = (kind == "xl" || kind == "xl_rmt") ? 3 : 0;
  c.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt" || kind == "armt") ? 2 : 0;
  c.d_mem = 4;  // armt: keys of 24 (with 2, few rows share a DPFP feature with the keys written)
  return c;
}

// Every parameter random (W_mv included, which starts at zero: with it zero the associative read
// adds nothing and the segments would not depend on each other, so a wrong order could pass).
void randomize(Model& model, uint64_t seed) {
  SplitMixRng rng(seed);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (auto& p : params) p = float(0.3 * rng.normal());
  model.params.upload(model.backend, params);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// What links the segments: armt's A and z, or the delta rule's S and convolution rows.
std::vector<float> carried(const RecurrentState& state) {
  std::vector<float> out = state.assoc.download();
  const std::vector<float> mixer = state.mixer.download();
  out.insert(out.end(), mixer.begin(), mixer.end());
  return out;
}

struct Batch {
  int B = 0, T = 0, A = 0;
  std::vector<int> seg_len;
  std::vector<int32_t> input, target;
  Batch(int B_, std::vector<int> seg_len_, int A_, uint64_t seed) : B(B_), A(A_), seg_len(std::move(seg_len_)) {
    for (int Ts : seg_len) T += Ts;
    SplitMixRng rng(seed);
    for (int i = 0; i < B * T; ++i) input.push_back(int32_t(rng.below(7)));
    for (int i = 0; i < B * T; ++i) target.push_back(int32_t(rng.below(7)));
  }
  // Segment s's tokens and targets [B, Ts] (targets -1 before the answer); whether it is scored.
  bool segment(int s, std::vector<int32_t>& tokens, std::vector<int32_t>& targets) const {
    int t0 = 0;
    for (int i = 0; i < s; ++i) t0 += seg_len[size_t(i)];
    const int Ts = seg_len[size_t(s)];
    tokens.resize(size_t(B) * Ts);
    targets.resize(size_t(B) * Ts);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Ts; ++t) {
        tokens[size_t(b * Ts + t)] = input[size_t(b * T + t0 + t)];
        targets[size_t(b * Ts + t)] = t0 + t >= T - A ? target[size_t(b * T + t0 + t)] : -1;
      }
    return t0 + Ts > T - A;
  }
};

// What a segment's evaluation leaves: its logits and per-position losses (scored segments), and
// the A and z after the last segment.
struct Outputs {
  std::vector<std::vector<float>> logits, loss_rows;
  std::vector<float> state_after;
};

// decoding: every segment asked for what greedy decoding asks of the segments before the answer
// (logits and memory, no targets); else as the teacher-forced pass asks (logits where scored).
Outputs sequential(Engine& engine, const Batch& batch, float loss_scale, bool decoding) {
  Outputs out;
  RecurrentState state, next;
  engine.initial_state(state, batch.B);
  SegmentActivations seg;
  std::vector<int32_t> tokens, targets;
  for (int s = 0; s < int(batch.seg_len.size()); ++s) {
    const bool scored = batch.segment(s, tokens, targets) && !decoding;
    engine.forward_segment(seg, tokens.data(), scored ? targets.data() : nullptr, batch.B,
                           batch.seg_len[size_t(s)], state, next, false, 0, loss_scale,
                           decoding ? SegmentOutputs{} : SegmentOutputs{scored, true});
    if (seg.has_logits) out.logits.push_back(engine.segment_logits(seg));
    if (scored) out.loss_rows.push_back(seg.loss_rows.download());
    std::swap(state, next);
  }
  out.state_after = carried(state);
  return out;
}

Outputs diagonal(Engine& engine, const Batch& batch, float loss_scale, bool decoding,
                 std::vector<int>* done_order = nullptr) {
  Outputs out;
  std::vector<int32_t> tokens, targets;
  RecurrentState after;
  engine.forward_diagonal(
      batch.B, batch.seg_len, loss_scale,
      [&](int s) {
        const bool scored = batch.segment(s, tokens, targets) && !decoding;
        return DiagonalSegmentInput{tokens.data(), scored ? targets.data() : nullptr,
                                    decoding ? SegmentOutputs{} : SegmentOutputs{scored, true}};
      },
      [&](int s, const SegmentActivations& seg) {
        if (done_order) done_order->push_back(s);
        if (seg.has_logits) out.logits.push_back(engine.segment_logits(seg));
        if (seg.plan.logits && !decoding) out.loss_rows.push_back(seg.loss_rows.download());
      },
      after);
  CHECK((after.assoc_written || !after.mixer.empty()));
  out.state_after = carried(after);
  return out;
}

struct Threads {
  int saved = num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("diagonal evaluation of armt, deltanet and gated_deltanet: the logits, losses and state of sequential evaluation, bit for bit") {
  struct Shape {
    int layers, B;
    std::vector<int> seg_len;
    int A;
  };
  const std::vector<Shape> shapes = {
      {3, 2, {4, 4}, 6},           // fewer segments than layers
      {2, 3, {3, 3, 3, 3, 3}, 7},  // more segments than layers, the answer over three segments
      {4, 2, {5}, 3},              // one segment
      {3, 2, {4, 4, 4, 4, 2}, 4},  // an uneven last segment
      {1, 2, {3, 3, 3}, 3},        // one layer: every diagonal one layer-step
      {4, 1, {2, 3, 2, 3, 2, 3, 2, 3}, 5},  // batch of one, lengths alternating
  };
  for (const std::string kind : {"armt", "deltanet", "gated_deltanet"})
  for (const std::string device : {"cpu", "cpu-guarded"})
    for (int threads : {1, 2})
      for (bool decoding : {false, true})  // as the teacher-forced pass asks, as greedy decoding does
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Shape& sh = shapes[i];
        CAPTURE(kind);
        CAPTURE(device);
        CAPTURE(threads);
        CAPTURE(decoding);
        CAPTURE(i);
        Threads use(threads);
        Backend& be = backend_by_name(device);
        Model model(diagonal_config(kind, sh.layers), be);
        randomize(model, 11 + i);
        Engine engine(model);
        const Batch batch(sh.B, sh.seg_len, sh.A, 3 + i);
        const float loss_scale = 1.f / float(sh.B * sh.A);
        const Outputs want = sequential(engine, batch, loss_scale, decoding);
        std::vector<int> order;
        const Outputs got = diagonal(engine, batch, loss_scale, decoding, &order);
        std::vector<int> in_order(sh.seg_len.size());
        for (size_t s = 0; s < in_order.size(); ++s) in_order[s] = int(s);
        CHECK(order == in_order);  // every segment handed back once, in order
        REQUIRE(got.logits.size() == want.logits.size());
        REQUIRE(got.loss_rows.size() == want.loss_rows.size());
        REQUIRE(!want.logits.empty());
        for (size_t s = 0; s < want.logits.size(); ++s) {
          CHECK(same_bits(got.logits[s], want.logits[s]));
          for (float x : want.logits[s]) REQUIRE(std::isfinite(x));
        }
        for (size_t s = 0; s < want.loss_rows.size(); ++s) CHECK(same_bits(got.loss_rows[s], want.loss_rows[s]));
        CHECK(same_bits(got.state_after, want.state_after));
        CHECK(num_threads() == threads);  // the concurrent layer-steps leave the thread count as it was
        // The segments are linked: the last segment from the initial state gives other logits, so
        // a schedule that read a stale A or z would not pass.
        if (sh.seg_len.size() > 1) {
          RecurrentState fresh, next;
          engine.initial_state(fresh, sh.B);
          SegmentActivations seg;
          std::vector<int32_t> tokens, targets;
          const int last = int(sh.seg_len.size()) - 1;
          batch.segment(last, tokens, targets);
          engine.forward_segment(seg, tokens.data(), targets.data(), sh.B, sh.seg_len.back(), fresh, next,
                                 false, 0, loss_scale, SegmentOutputs{true, true});
          CHECK(!same_bits(engine.segment_logits(seg), want.logits.back()));
        }
      }
}

TEST_CASE("diagonal evaluation: evaluate's loss, accuracies and greedy predictions are the sequential schedule's") {
  const int n = 11, VV = 7;
  const std::vector<int> seg_len{4, 4, 4, 4, 4, 4, 3};
  const int TT = 27, AA = 9;
  SplitMixRng rng(21);
  SampleSplit split;
  split.n = n, split.seq_len = TT;
  for (int64_t i = 0; i < int64_t(n) * TT; ++i) {
    split.input.push_back(int32_t(rng.below(VV)));
    split.target.push_back(int32_t(rng.below(VV)));
  }
  // 6 memory tokens: keys enough that most rows' DPFP features meet some (with few, many reads
  // are exactly zero and the predictions hardly depend on the state entering the answer).
  for (const std::string kind : {"armt", "deltanet", "gated_deltanet"})
  for (int threads : {1, 2})
    for (bool free_running : {false, true}) {  // greedy decoding: the segments before the answer's by diagonals
      ModelConfig config = diagonal_config(kind, 3);
      config.num_mem_tokens = kind == "armt" ? 6 : 0;
      CAPTURE(kind);
      CAPTURE(threads);
      CAPTURE(free_running);
      Threads use(threads);
      Model model(config, cpu_backend());
      randomize(model, 4);
      Engine engine(model);
      EvalOptions opt;
      opt.seg_len = seg_len, opt.answer_size = AA, opt.batch_size = 4, opt.free_running = free_running;
      opt.solve_positions = 2;
      std::vector<int32_t> predictions;
      opt.on_predictions = [&](int64_t, int B, const int32_t*, const int32_t*, const int32_t* pred) {
        predictions.insert(predictions.end(), pred, pred + int64_t(B) * TT);
      };
      const EvalResult want = evaluate(engine, split, opt);
      const std::vector<int32_t> want_predictions = predictions;
      predictions.clear();
      opt.schedule = EvalSchedule::diagonal;
      const EvalResult got = evaluate(engine, split, opt);
      CHECK(std::isfinite(want.loss));
      CHECK(same_bits(got.loss, want.loss));
      CHECK(same_bits(got.acc_teacher_forced, want.acc_teacher_forced));
      CHECK(same_bits(*got.exact_match_teacher_forced, *want.exact_match_teacher_forced));
      CHECK(same_bits(*got.solve_rate_teacher_forced, *want.solve_rate_teacher_forced));
      CHECK(predictions == want_predictions);
      if (free_running) {
        CHECK(same_bits(*got.acc_free_running, *want.acc_free_running));
        CHECK(same_bits(*got.exact_match, *want.exact_match));
        CHECK(same_bits(*got.solve_rate, *want.solve_rate));
      }
    }
}

TEST_CASE("diagonal evaluation is refused for the kinds whose segments it cannot overlap") {
  for (const char* kind : {"baseline", "xl", "rmt", "mt", "xl_rmt"}) {
    CAPTURE(kind);
    Model model(diagonal_config(kind, 2), cpu_backend());
    model.init_weights(1);
    Engine engine(model);
    RecurrentState after;
    auto no_input = [](int) -> DiagonalSegmentInput { FAIL("no segment may start"); return {}; };
    auto no_done = [](int, const SegmentActivations&) { FAIL("no segment may finish"); };
    CHECK_THROWS_WITH_AS(engine.forward_diagonal(1, {3, 3}, 1.f, no_input, no_done, after),
                         doctest::Contains("model.kind armt, deltanet and gated_deltanet only"), Error);
    SampleSplit split;
    split.n = 1, split.seq_len = 6;
    split.input.assign(6, 1);
    split.target.assign(6, 1);
    EvalOptions opt;
    opt.seg_len = {3, 3}, opt.answer_size = 2, opt.free_running = false;
    opt.schedule = EvalSchedule::diagonal;
    CHECK_THROWS_WITH_AS(evaluate(engine, split, opt), doctest::Contains("--schedule sequential"), Error);
  }
  CHECK_THROWS_WITH_AS(parse_eval_schedule("diagonals"), doctest::Contains("sequential, diagonal"), Error);
  CHECK(parse_eval_schedule("diagonal") == EvalSchedule::diagonal);
}
