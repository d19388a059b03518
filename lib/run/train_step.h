#pragma once
// One training step: forward over the segments, backward with the bptt setting, the global
// gradient-norm clip and the Adam step. `rmt train`, `rmt bench` and `rmt step-dump` all run
// this one function, so what they train, time and compare with PyTorch is the same step.
#include <cstdint>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/packed_backend.h"

namespace rmt {

// One batch. input, target: [B, T] row-major token ids; the loss is the mean cross-entropy over
// the last answer_size positions of each row whose target is not -1 (a position the dataset leaves
// unscored: mqar), all segments concatenated.
struct StepBatch {
  const int32_t* input = nullptr;
  const int32_t* target = nullptr;
  int B = 0, T = 0;
  const std::vector<int>* seg_len = nullptr;  // segment lengths, summing to T
  int answer_size = 0;
  Carry carry = {};  // language modelling: the state to start from and whether to pass it on
};

// The positions the batch's loss is the mean over: its answer positions whose target is not -1
// (B x answer_size where every one is scored). Part of what a captured or packed step depends on:
// the loss scale 1 / scored is an argument of its kernels.
int64_t scored_positions(const StepBatch& batch);

struct StepSettings {
  int bptt = -1;     // -1 = through every segment, 0 = memory detached at every border, k
  double clip = 0;   // global gradient-norm clip; 0 = none
  double lr = 0;     // Adam's learning rate for this step
  // true: dropout, and work no loss depends on is skipped (Engine::forward); false: the forward
  // of evaluation (every segment, no dropout), as the golden tests compare with PyTorch.
  bool training = true;
  uint64_t dropout_seed = 0;
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // the global gradient norm before clipping
  // false when the loss or the gradient norm is not finite: the parameters and Adam's state
  // were left as they were, so the last good state can still be saved or reported.
  bool applied = false;
};

// The loss of one forward over every segment of the batch, with its gradients (backward with
// bptt) in model.grads. No clipping, no parameter update.
double forward_backward(Engine& engine, const StepBatch& batch, int bptt, bool training,
                        uint64_t dropout_seed);

// The update that follows a step's backward: clip the gradients in model.grads, then one Adam
// step unless the loss or the gradient norm is not finite. Language-model steps
// (lib/run/lm.h), which run their own forward and backward, end with it too.
StepResult optimizer_step(Model& model, Backend& be, Adam& adam, double loss, double clip,
                          double lr);

// A training step captured on a backend that can capture (a CUDA graph, Backend::begin_capture),
// kept by the caller from step to step. The first step of a shape runs uncaptured (it sizes the
// buffers), the second is captured, and later ones replay it: one launch for the forward, the
// backward and the gradient norm. It is captured again when the batch's shapes or the settings
// change, when the engine ran anything else in between (an evaluation), or when the backend's
// memory moved. Dropout is captured too: its seeds are uploaded with the batch and read by the
// kernels (DropoutSeed), so each replay draws its step's masks; so is a carried start state
// (language modelling: copied into the engine's buffers by Engine::stage_forward).
// A backend keeps one capture: two StepCaptures taking turns on one backend in one process (no
// rmt command does) would find theirs replaced, and replay fails with a clear error.
struct StepCapture {
  std::vector<int64_t> key;        // the shapes and settings of the warm or captured step
  int64_t id = 0;                  // the backend's capture of that step (0: none yet)
  uint64_t segment_runs = 0;       // engine.segment_runs() after it
  int64_t memory_epoch = -1;       // be.memory_epoch() after it
  int64_t captured = 0, replayed = 0;  // counts, for tests and benchmarks
};

// forward_backward, then optimizer_step, with one download: the loss and the gradient norm are
// left on the backend and read together. With `capture` (and a backend that can), the forward,
// backward and norm are one captured launch once warm (StepCapture); results are the same bits
// either way. engine must be built on model and be.
StepResult train_step(Engine& engine, Model& model, Backend& be, Adam& adam,
                      const StepBatch& batch, const StepSettings& settings,
                      StepCapture* capture = nullptr);

// One run's part of a packed step (lib/core/packed_backend.h): its slot, batch and settings, and
// its own Adam step count (Adam::t: runs of one pack start at different times).
struct PackedRunStep {
  int slot = 0;
  StepBatch batch;
  StepSettings settings;
  int64_t* adam_steps = nullptr;
};

// train_step for a group of packed runs on a model built on `be`: each run's batch is staged with
// that run alone active; the forward, the backward and the gradient norms run once for the group
// on a device (every kernel over the group's slices, merged where the backend merges runs), run
// by run on the CPU (each run's whole, for its cache); then each run reads its loss and norm and
// takes its own clip and Adam step (its learning rate, its step count). Each run's result has the
// bits train_step gives that run alone. The group's batches must have one shape (B, T, segments,
// answer size) and one bptt and training setting; no carried state (language models run alone).
// With `capture` (and an inner backend that can), the group's forward, backward and norms are one
// captured launch once warm, as train_step's (captured again when the group changes). Leaves the
// group active.
std::vector<StepResult> packed_train_step(Engine& engine, Model& model, PackedBackend& be, Adam& adam,
                                          const std::vector<PackedRunStep>& group, StepCapture* capture = nullptr);

}  // namespace rmt
