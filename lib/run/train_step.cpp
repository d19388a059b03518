#include "lib/run/train_step.h"

#include <cmath>

namespace rmt {

double forward_backward(Engine& engine, const StepBatch& batch, int bptt, bool training,
                        uint64_t dropout_seed) {
  const double loss = engine.forward(batch.input, batch.target, batch.B, batch.T, *batch.seg_len,
                                     batch.answer_size, training, dropout_seed, batch.carry);
  engine.backward(bptt);
  return loss;
}

StepResult optimizer_step(Model& model, Backend& be, Adam& adam, double loss, double clip,
                          double lr) {
  StepResult r;
  r.loss = loss;
  r.grad_norm = clip_grad_norm(be, model.grads, clip);
  r.applied = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.applied) adam.step(be, model.params, model.grads, float(lr));
  return r;
}

StepResult train_step(Engine& engine, Model& model, Backend& be, Adam& adam,
                      const StepBatch& batch, const StepSettings& s) {
  const double loss = forward_backward(engine, batch, s.bptt, s.training, s.dropout_seed);
  return optimizer_step(model, be, adam, loss, s.clip, s.lr);
}

}  // namespace rmt
