#include "lib/run/step_dump.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/core/optim.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "lib/run/lm.h"
#include "lib/run/train_step.h"

namespace rmt {

namespace {
// The files a dump writes, named once (kStepDumpFiles lists them for the CLI's checks).
constexpr const char *kLogits = "logits.npy", *kLoss = "loss.json", *kGrads = "grads.safetensors",
                     *kAdam = "adam.json", *kAfter = "after.safetensors", *kParams = "params.safetensors";
}  // namespace

const std::vector<std::string> kStepDumpFiles = {kLogits, kLoss, kGrads, kAdam, kAfter, kParams};

namespace fs = std::filesystem;

namespace {

// --delta-chunk: the delta rule's form for this dump (a way to compute, not part of the weights,
// so the checkpoint does not carry it).
void use_delta_chunk(Model& model, int chunk) {
  if (chunk < 0) return;
  if (!kind_has_mixer_state(model.config.kind))
    fail("--delta-chunk applies to model kinds deltanet and gated_deltanet, not {}", model.config.kind);
  model.config.delta_chunk = chunk;
  model.wy_chunk = chunk;
}

// The scored-answer step: one forward and backward as evaluation runs it (no dropout, every
// segment), its tensors, then adam_steps train_step()s on the same batch.
StepDumpResult answer_step_dump(const StepDumpRequest& req) {
  int64_t B = 0, T = 0, B2 = 0, T2 = 0;
  auto in64 = read_npy_int_matrix(req.input, B, T);
  auto tg64 = read_npy_int_matrix(req.target, B2, T2);
  if (B != B2 || T != T2) fail("--input is [{}, {}] but --target is [{}, {}]", B, T, B2, T2);
  if (B <= 0 || T <= 0) fail("--input {} is empty ([{}, {}])", req.input, B, T);
  if (B > 1000000 || T > 1000000) fail("--input {} is [{}, {}]: too large for one step", req.input, B, T);
  Backend& be = backend_by_name(req.device);
  auto model = load_checkpoint(req.checkpoint, [&](const ModelConfig& c) {
    check_kind_runs_on(c.kind, req.device);
    Workload w;
    w.batch = int(B);
    w.seg_len = segment_lengths(int(T), req.segments);
    w.training = true;
    check_memory_fits(estimate_memory(c, w), fmt::format("step-dump of {} (batch {})", req.checkpoint, B));
  }, be);
  use_delta_chunk(*model, req.delta_chunk);
  model->config.dropout = 0;  // deterministic: golden runs compare without dropout
  std::vector<int32_t> input(in64.begin(), in64.end()), target(tg64.begin(), tg64.end());
  if (req.answer_size < 1 || req.answer_size > T)
    fail("--answer-size {} must be in 1..{} (the columns of --input)", req.answer_size, T);
  // Every id that reaches the kernels indexes the embedding or the logits: check them all here.
  for (size_t i = 0; i < input.size(); ++i)
    if (in64[i] < 0 || in64[i] >= model->V)
      fail("{}: input id {} at row {} is outside the checkpoint's vocabulary 0..{}", req.input,
           in64[i], int64_t(i) / T, model->V - 1);
  for (size_t i = 0; i < target.size(); ++i)
    if (int64_t(i) % T >= T - req.answer_size && (tg64[i] < 0 || tg64[i] >= model->V))
      fail("{}: target id {} at row {} (a scored position) is outside the checkpoint's "
           "vocabulary 0..{}", req.target, tg64[i], int64_t(i) / T, model->V - 1);
  const std::vector<int> seg_len = segment_lengths(int(T), req.segments);
  create_directories_or_fail(req.out);
  const fs::path out(req.out);
  Engine engine(*model, be);
  const StepBatch batch{input.data(), target.data(), int(B), int(T), &seg_len, req.answer_size};

  const double loss = forward_backward(engine, batch, req.bptt, false, 0);
  if (!std::isfinite(loss))
    fail("the loss of {} on this batch is {}: the model's outputs are not finite numbers",
         req.checkpoint, loss);
  // logits [B, T, V], segments concatenated
  const int V = model->V;
  std::vector<float> logits(size_t(B * T * V));
  int t0 = 0;
  for (int s = 0; s < engine.num_segments(); ++s) {
    const int Ts = engine.segment_length(s);
    const std::vector<float> seg_logits = engine.logits(s);  // [B, Ts, V]
    for (int b = 0; b < B; ++b)
      std::copy_n(seg_logits.begin() + int64_t(b) * Ts * V, Ts * V,
                  logits.begin() + (b * T + t0) * V);
    t0 += Ts;
  }
  write_npy_float32(out / kLogits, {B, T, V}, logits.data());
  write_file_atomic(out / kLoss, nlohmann::json{{"loss", loss}}.dump() + "\n");
  save_checkpoint((out / kGrads).string(), *model, model->grads);

  if (req.adam_steps > 0) {
    Adam adam(be, model->num_params());
    adam.set_weight_decay(req.weight_decay, model->param_info);
    StepSettings settings;
    settings.bptt = req.bptt;
    settings.clip = req.clip;
    settings.lr = req.lr;
    settings.training = false;  // as the forward above
    std::vector<double> losses;
    for (int i = 0; i < req.adam_steps; ++i) {
      const StepResult step = train_step(engine, *model, be, adam, batch, settings);
      if (!step.applied)
        fail("Adam step {} of {} on this batch: the loss is {} and the gradient norm {}, not "
             "finite numbers (a smaller --lr?)", i + 1, req.adam_steps, step.loss, step.grad_norm);
      losses.push_back(step.loss);
    }
    write_file_atomic(out / kAdam, nlohmann::json{{"losses", losses}}.dump() + "\n");
    save_checkpoint((out / kAfter).string(), *model, model->params);
  }
  return {{loss}};
}

// Language-model steps (lib/run/lm.h) over B streams of S x T positions.
StepDumpResult lm_step_dump(const StepDumpRequest& req) {
  int64_t B = 0, cols = 0, B2 = 0, cols2 = 0;
  auto in64 = read_npy_int_matrix(req.input, B, cols);
  auto tg64 = read_npy_int_matrix(req.target, B2, cols2);
  if (B != B2 || cols != cols2) fail("--input is [{}, {}] but --target is [{}, {}]", B, cols, B2, cols2);
  if (B <= 0 || cols <= 0) fail("--input {} is empty ([{}, {}])", req.input, B, cols);
  if (B > 1000000 || cols > 100000000) fail("--input {} is [{}, {}]: too large", req.input, B, cols);
  const int T = req.segment_length;
  if (cols % T != 0)
    fail("--input {} has {} columns, not a whole number of segments of --segment-length {}",
         req.input, cols, T);
  const int64_t steps = cols / T;
  Backend& be = backend_by_name(req.device);
  auto model = load_checkpoint(req.checkpoint, [&](const ModelConfig& c) {
    check_kind_runs_on(c.kind, req.device);
    Workload w;
    w.batch = int(B);
    const int window = std::max(req.bptt, 0);
    const std::optional<ModelKind> kind = find_model_kind(c.kind);  // unknown: refused below
    const bool memory = kind && (traits_of(*kind).has_memory || traits_of(*kind).has_mixer_state());
    w.seg_len.assign(size_t(memory ? std::min<int64_t>(window, steps - 1) + 1 : 1), T);
    w.training = true;
    check_memory_fits(estimate_memory(c, w), fmt::format("step-dump of {} (batch {})", req.checkpoint, B));
  }, be);
  use_delta_chunk(*model, req.delta_chunk);
  model->config.dropout = 0;  // deterministic: golden runs compare without dropout
  // the state's gradient (the memory tokens', the mixers' state's) reaches back bptt segments
  const bool state_gradient = model->num_mem > 0 || traits_of(model->kind).has_mixer_state();
  if (req.bptt < 0 && state_gradient)
    fail("--bptt all: a language model's streams have no end to back-propagate to; give the "
         "number of earlier segments, --bptt k");
  const int window = state_gradient ? req.bptt : 0;
  for (size_t i = 0; i < in64.size(); ++i)
    if (in64[i] < 0 || in64[i] >= model->V || tg64[i] < 0 || tg64[i] >= model->V)
      fail("{}: id {} at row {} is outside the checkpoint's vocabulary 0..{}",
           in64[i] < 0 || in64[i] >= model->V ? req.input : req.target,
           in64[i] < 0 || in64[i] >= model->V ? in64[i] : tg64[i], int64_t(i) / cols, model->V - 1);
  std::vector<int32_t> input(in64.begin(), in64.end()), target(tg64.begin(), tg64.end());
  LmSegmentSource source = [&](int64_t s, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(input.begin() + b * cols + s * T, T, in.begin() + b * T);
      std::copy_n(target.begin() + b * cols + s * T, T, tg.begin() + b * T);
    }
  };
  create_directories_or_fail(req.out);
  Engine engine(*model, be);
  Adam adam(be, model->num_params());
  adam.set_weight_decay(req.weight_decay, model->param_info);
  LmCarry carry(window);
  StepDumpResult result;
  for (int64_t s = 0; s < steps; ++s) {
    const fs::path out = fs::path(req.out) / fmt::format("step{}", s);
    create_directories_or_fail(out.string());
    save_checkpoint((out / kParams).string(), *model, model->params);
    // training mode (dropout is 0): the step skips what training skips
    const double loss = lm_forward_backward(engine, carry, source, int(B), T, true, 0);
    if (!std::isfinite(loss))
      fail("the loss of {} at step {} is {}: the model's outputs are not finite numbers",
           req.checkpoint, s, loss);
    write_npy_float32(out / kLogits, {B, T, model->V}, engine.logits(engine.num_segments() - 1).data());
    write_file_atomic(out / kLoss, nlohmann::json{{"loss", loss}}.dump() + "\n");
    save_checkpoint((out / kGrads).string(), *model, model->grads);
    result.losses.push_back(loss);
    if (req.update) {
      const StepResult step = optimizer_step(*model, be, adam, loss, req.clip, req.lr);
      if (!step.applied)
        fail("step {}: the gradient norm is {}, not a finite number (a smaller --lr?)", s,
             step.grad_norm);
    }
  }
  return result;
}

}  // namespace

StepDumpResult step_dump(const StepDumpRequest& req) {
  return req.segment_length > 0 ? lm_step_dump(req) : answer_step_dump(req);
}

}  // namespace rmt
