// Evaluation: teacher-forced against free-running accuracy on a trained model whose answer starts
// inside a segment.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "lib/backend.h"
#include "lib/engine.h"
#include "lib/evaluate.h"
#include "lib/optim.h"
#include "lib/random.h"

using namespace rmt;

namespace {

// "Count on": row = noise (T - A + 1 tokens) | y0 | y0+1 | y0+2 ... (mod V), input = row[:-1],
// target = row[1:]. The answer (the last A targets) starts with y0, which nothing predicts (chance,
// 1/V); every later answer token is the previous one plus 1. Teacher forced, a model that learnt
// the rule gets (1/V + A - 1) / A; decoding freely it continues from its own guess of y0, so a
// sample is all right (y0 guessed) or all wrong: 1/V.
constexpr int V = 6, T = 8, A = 5;

void make_batch(SplitMixRng& rng, int B, std::vector<int32_t>& input, std::vector<int32_t>& target) {
  input.assign(size_t(B) * T, 0);
  target.assign(size_t(B) * T, 0);
  for (int b = 0; b < B; ++b) {
    std::vector<int32_t> row(T + 1);
    for (int t = 0; t <= T - A; ++t) row[size_t(t)] = int32_t(rng.below(V));
    row[T - A + 1] = int32_t(rng.below(V));
    for (int t = T - A + 2; t <= T; ++t) row[size_t(t)] = (row[size_t(t - 1)] + 1) % V;
    for (int t = 0; t < T; ++t) {
      input[size_t(b * T + t)] = row[size_t(t)];
      target[size_t(b * T + t)] = row[size_t(t + 1)];
    }
  }
}

// Tiny models run faster on one thread (and do not fight the other tests for the cores).
struct OneThread {
  int saved = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("free-running accuracy with the answer inside a segment: errors carry on, teacher forcing hides them") {
  OneThread one_thread;
  for (const char* kind : {"baseline", "rmt"}) {
    ModelConfig c;
    c.kind = kind;
    c.n_token = V;
    c.n_layer = 1;
    c.n_head = 2;
    c.d_head = 8;
    c.d_model = 16;
    c.d_inner = 32;
    c.dropout = 0;
    c.mem_init = "normal";
    c.num_mem_tokens = std::string(kind) == "rmt" ? 2 : 0;
    Model model(c);
    model.init_weights(3);
    Engine engine(model, cpu_backend());
    Adam adam(model.num_params());
    const std::vector<int> seg_len{5, 3};  // the answer starts at position 3, inside segment 0
    SplitMixRng rng(11);
    std::vector<int32_t> input, target;
    for (int step = 0; step < 150; ++step) {
      make_batch(rng, 32, input, target);
      engine.forward(input.data(), target.data(), 32, T, seg_len, A, true, uint64_t(step));
      engine.backward(-1);
      clip_grad_norm(cpu_backend(), model.grads, 1.0);
      adam.step(cpu_backend(), model.params, model.grads, 1e-2f);
    }
    LmSplit held_out;
    held_out.n = 600;
    held_out.seq_len = T;
    SplitMixRng test_rng(99);
    make_batch(test_rng, int(held_out.n), held_out.input, held_out.target);
    EvalOptions opt;
    opt.seg_len = seg_len;
    opt.answer_size = A;
    opt.batch_size = 64;
    opt.solve_positions = A;  // solved = the whole answer right: from greedy decoding
    EvalResult r = evaluate(engine, held_out, opt);
    opt.kv_cache_decoding = false;
    EvalResult rerun = evaluate(engine, held_out, opt);
    opt.free_running = false;
    EvalResult tf_only = evaluate(engine, held_out, opt);
    CAPTURE(kind);
    MESSAGE(std::string(kind), ": teacher-forced ", r.acc_teacher_forced, ", free-running ",
            r.acc_free_running.value_or(-1), ", solved ", r.solve_rate.value_or(-1));
    const double chance = 1.0 / V;
    CHECK(r.acc_teacher_forced > (chance + A - 1) / A - 0.05);
    REQUIRE(r.acc_free_running.has_value());
    CHECK(*r.acc_free_running < chance + 0.06);
    CHECK(*r.acc_free_running > chance - 0.06);
    // all or nothing: the solve rate (all A right) equals the per-token accuracy
    CHECK(*r.solve_rate == doctest::Approx(*r.acc_free_running).epsilon(0.02));
    CHECK(rerun.acc_free_running == r.acc_free_running);
    CHECK(!tf_only.acc_free_running.has_value());
    CHECK(tf_only.acc_teacher_forced == r.acc_teacher_forced);
    // teacher-forced, the solve rate asks for y0 right as well: chance
    CHECK(*tf_only.solve_rate < chance + 0.06);
  }
}
