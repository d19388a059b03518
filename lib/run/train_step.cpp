#include "lib/run/train_step.h"

#include <cmath>
#include <functional>
#include <stdexcept>

namespace rmt {

double forward_backward(Engine& engine, const StepBatch& batch, int bptt, bool training,
                        uint64_t dropout_seed) {
  const double loss = forward_loss(engine, batch.input, batch.target, batch.B, batch.T,
                                   *batch.seg_len, batch.answer_size, training, dropout_seed,
                                   batch.carry);
  engine.backward(bptt);
  return loss;
}

int64_t scored_positions(const StepBatch& b) {
  int64_t scored = 0;
  for (int r = 0; r < b.B; ++r)
    for (int p = b.T - b.answer_size; p < b.T; ++p) scored += b.target[int64_t(r) * b.T + p] >= 0;
  return scored;
}

namespace {

// Clip (the norm known), then Adam unless the loss or the norm is not finite.
StepResult clip_and_update(Model& model, Backend& be, Adam& adam, double loss, double norm,
                           double clip, double lr) {
  StepResult r;
  r.loss = loss;
  r.grad_norm = norm;
  scale_to_norm(be, model.grads, norm, clip);
  r.applied = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.applied) adam.step(be, model.params, model.grads, float(lr));
  return r;
}

// What a captured step depends on besides the buffers: the shapes and the settings.
std::vector<int64_t> capture_key(const Engine& engine, const StepBatch& b, const StepSettings& s) {
  std::vector<int64_t> key{b.B, b.T, b.answer_size, s.bptt, s.training, b.carry.start != nullptr,
                           b.carry.pass_on, engine.recompute(), scored_positions(b)};
  key.insert(key.end(), b.seg_len->begin(), b.seg_len->end());
  return key;
}

// Issues a step's device part: as it is, or (with `capture`, on a backend that can) a warm step,
// then captured once and replayed while `key`, the engine and the backend's memory stay the same.
void run_captured(Backend& be, Engine& engine, StepCapture* capture, const std::vector<int64_t>& key,
                  const std::function<void()>& issue) {
  if (!capture || !be.can_capture()) {
    issue();
    return;
  }
  StepCapture& c = *capture;
  const bool same = key == c.key && be.memory_epoch() == c.memory_epoch;
  if (same && c.id > 0 && engine.segment_runs() == c.segment_runs) {
    be.replay(c.id);  // nothing has touched its buffers since it was captured
    ++c.replayed;
  } else if (same && c.id == 0) {  // warm: capture this step, then run it
    be.begin_capture();
    try {
      issue();
    } catch (...) {
      be.abort_capture();
      throw;
    }
    c.id = be.end_capture();
    be.replay(c.id);
    ++c.captured;
  } else {  // a new shape, or the engine or memory changed: a warm step first
    issue();
    c.key = key;
    c.id = 0;
  }
  c.segment_runs = engine.segment_runs();
  c.memory_epoch = be.memory_epoch();
}

}  // namespace

StepResult optimizer_step(Model& model, Backend& be, Adam& adam, double loss, double clip,
                          double lr) {
  const double norm = std::sqrt(be.sum_squares(model.grads.data(), model.grads.size()));
  return clip_and_update(model, be, adam, loss, norm, clip, lr);
}

StepResult train_step(Engine& engine, Model& model, Backend& be, Adam& adam,
                      const StepBatch& batch, const StepSettings& s, StepCapture* capture) {
  // ---- The host's part: plans, checks, the batch's tokens and targets uploaded.
  engine.stage_forward(batch.input, batch.target, batch.B, batch.T, *batch.seg_len,
                       batch.answer_size, s.training, s.dropout_seed, batch.carry);
  double* results = engine.result_words();  // [loss sum, gradient sum of squares]

  // ---- The device's part: forward, backward, the gradient's sum of squares.
  auto issue = [&] {
    be.fill_bytes(results, 0, sizeof(double));
    engine.run_forward(results);
    engine.backward(s.bptt);
    be.sum_squares_to(results + 1, model.grads.data(), model.grads.size());
  };
  run_captured(be, engine, capture, capture ? capture_key(engine, batch, s) : std::vector<int64_t>(), issue);

  // ---- One download: the loss and the norm; then clip and Adam.
  double words[Engine::kResultWords];
  be.copy_device_to_host(words, results, sizeof words);
  return clip_and_update(model, be, adam, words[0] * engine.loss_scale(), std::sqrt(words[1]),
                         s.clip, s.lr);
}

std::vector<StepResult> packed_train_step(Engine& engine, Model& model, PackedBackend& be, Adam& adam,
                                          const std::vector<PackedRunStep>& group, StepCapture* capture) {
  if (group.empty()) return {};
  const PackedRunStep& first = group[0];
  std::vector<int> slots;
  for (const PackedRunStep& r : group) {
    const StepBatch &a = r.batch, &b = first.batch;
    if (a.B != b.B || a.T != b.T || *a.seg_len != *b.seg_len || a.answer_size != b.answer_size ||
        scored_positions(a) != scored_positions(b) ||
        r.settings.bptt != first.settings.bptt || r.settings.training != first.settings.training ||
        a.carry.start || a.carry.pass_on || !r.adam_steps)
      throw std::logic_error("packed_train_step: the runs of a group differ in shape or settings, or carry state");
    slots.push_back(r.slot);
  }
  // ---- The host's part, run by run: plans, checks, each batch's tokens, targets and seeds.
  for (const PackedRunStep& r : group) {
    be.activate(r.slot);
    engine.stage_forward(r.batch.input, r.batch.target, r.batch.B, r.batch.T, *r.batch.seg_len,
                         r.batch.answer_size, r.settings.training, r.settings.dropout_seed, r.batch.carry);
  }
  // ---- The device's part: forward, backward, each run's gradient norm. On a device (a backend
  // that merges runs or captures) once for the group; on the CPU run by run, each run's part
  // whole, so that its buffers stay in cache (the runs' turns kernel by kernel evict each other's:
  // bench/README.md, "Packed runs"). Either way each run computes what it computes alone.
  double* results = engine.result_words();  // per run: [loss sum, gradient sum of squares]
  auto issue = [&] {
    be.fill_bytes(results, 0, sizeof(double));
    engine.run_forward(results);
    engine.backward(first.settings.bptt);
    be.sum_squares_to(results + 1, model.grads.data(), model.grads.size());
  };
  if (be.inner().can_merge_runs() || be.can_capture()) {
    be.activate(slots);
    std::vector<int64_t> key;
    if (capture) {  // the group's slots are part of what was captured
      key = capture_key(engine, first.batch, first.settings);
      key.insert(key.end(), slots.begin(), slots.end());
    }
    run_captured(be, engine, capture, key, issue);
  } else {
    for (int slot : slots) {
      be.activate(slot);
      issue();
    }
  }

  // ---- Run by run: one download of its loss and norm, its clip and Adam step.
  std::vector<StepResult> out;
  for (const PackedRunStep& r : group) {
    be.activate(r.slot);
    double words[Engine::kResultWords];
    be.copy_device_to_host(words, results, sizeof words);
    adam.t = *r.adam_steps;
    out.push_back(clip_and_update(model, be, adam, words[0] * engine.loss_scale(), std::sqrt(words[1]),
                                  r.settings.clip, r.settings.lr));
    *r.adam_steps = adam.t;
  }
  be.activate(slots);
  return out;
}

}  // namespace rmt
