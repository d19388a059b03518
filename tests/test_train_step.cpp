// train_step(): the one training step of rmt train, rmt bench and rmt step-dump.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "lib/run/train_step.h"

using namespace rmt;

namespace {

ModelConfig step_config(const std::string& kind) {
  ModelConfig c;
  c.kind = kind;
  c.n_token = 7;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_head = 4;
  c.d_model = 8;
  c.d_inner = 12;
  c.dropout = 0.1;
  c.mem_len = kind == "xl_rmt" ? 3 : 0;
  c.num_mem_tokens = 2;
  return c;
}

struct Batch {
  int B = 3, T = 9, A = 5;
  std::vector<int> seg_len{3, 3, 3};
  std::vector<int32_t> input, target;
  Batch() {
    SplitMixRng rng(11);
    for (int i = 0; i < B * T; ++i) input.push_back(int32_t(rng.below(7)));
    for (int i = 0; i < B * T; ++i) target.push_back(int32_t(rng.below(7)));
  }
  StepBatch view() const { return {input.data(), target.data(), B, T, &seg_len, A}; }
};

}  // namespace

TEST_CASE("train_step is forward, backward with bptt, clip and one Adam step, bit for bit") {
  for (const std::string kind : {"rmt", "xl_rmt"}) {
    for (int bptt : {-1, 1}) {
      CAPTURE(kind);
      CAPTURE(bptt);
      const Batch batch;
      Backend& be = backend_by_name("cpu");
      Model by_step(step_config(kind), be), by_hand(step_config(kind), be);
      by_step.init_weights(3);
      by_hand.init_weights(3);
      Engine e_step(by_step, be), e_hand(by_hand, be);
      Adam a_step(be, by_step.num_params()), a_hand(be, by_hand.num_params());
      StepSettings s;
      s.bptt = bptt;
      s.clip = 0.05;  // small enough to clip
      s.lr = 1e-2;
      for (int i = 0; i < 3; ++i) {
        s.dropout_seed = 100 + uint64_t(i);
        const StepResult r = train_step(e_step, by_step, be, a_step, batch.view(), s);
        const double loss = forward_loss(e_hand, batch.input.data(), batch.target.data(), batch.B, batch.T,
                                           batch.seg_len, batch.A, true, s.dropout_seed);
        e_hand.backward(bptt);
        const double norm = clip_grad_norm(be, by_hand.grads, s.clip);
        a_hand.step(be, by_hand.params, by_hand.grads, float(s.lr));
        CHECK(r.applied);
        CHECK(r.loss == loss);
        CHECK(r.grad_norm == norm);
        CHECK(r.grad_norm > s.clip);
      }
      CHECK(a_step.t == 3);
      CHECK(by_step.params.download() == by_hand.params.download());
      CHECK(a_step.moment1.download() == a_hand.moment1.download());
      CHECK(a_step.moment2.download() == a_hand.moment2.download());
    }
  }
}

TEST_CASE("train_step leaves parameters and Adam alone when the loss is not finite") {
  const Batch batch;
  Backend& be = backend_by_name("cpu");
  Model model(step_config("rmt"), be);
  model.init_weights(3);
  Engine engine(model, be);
  Adam adam(be, model.num_params());
  StepSettings s;
  s.lr = 1e-2;
  const StepResult first = train_step(engine, model, be, adam, batch.view(), s);
  REQUIRE(first.applied);
  // An infinite embedding weight makes the loss NaN.
  const float inf = std::numeric_limits<float>::infinity();
  model.params.write(0, &inf, 1);
  const std::vector<float> params = model.params.download(), m = adam.moment1.download(),
                           v = adam.moment2.download();
  const StepResult bad = train_step(engine, model, be, adam, batch.view(), s);
  CHECK_FALSE(bad.applied);
  CHECK_FALSE(std::isfinite(bad.loss));
  CHECK(adam.t == 1);
  CHECK(adam.moment1.download() == m);
  CHECK(adam.moment2.download() == v);
  CHECK(model.params.download() == params);
}
