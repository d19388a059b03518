#pragma once
// Language-model training steps in Transformer-XL's setting (docs/paper.md §7): the corpus is
// cut into B parallel streams and step s trains on segment s of every stream; the Transformer-XL
// cache and the RMT memory that segment s-1 left are carried into it, detached, and every one of
// its positions is scored (next-token cross-entropy).
//
// RMT with bptt k back-propagates through its memory over the last k segments as the authors'
// code does: step s re-runs the window of segments s-k .. s from the state that entered segment
// s-k (as the step that ended there handed it on, detached) and scores only segment s. Near the
// start of the streams the window is shorter and starts from the initial state, whose learned
// memory then gets the gradient. bptt 0 = the memory detached at every border. Models without
// memory tokens run the new segment only (nothing flows back through the detached cache).
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "lib/files/safetensors.h"
#include "lib/run/evaluate.h"
#include "lib/run/train_step.h"
#include "tasks/text.h"

namespace rmt {

// Fills input and target [B, T] (row-major) with segment `index` of every stream.
using LmSegmentSource =
    std::function<void(int64_t index, std::vector<int32_t>& input, std::vector<int32_t>& target)>;

// What language-model training carries from one step to the next.
class LmCarry {
 public:
  // window: the earlier segments a step re-runs (bptt k for a model with memory tokens, else 0).
  explicit LmCarry(int window = 0) : window_(window) {}
  int window() const { return window_; }
  // The segment (of every stream) the next step trains on.
  int64_t next_segment() const { return next_; }
  // The states entering segments next_segment() - stored().size() + 1 .. next_segment(), each
  // as the step before it handed it on; the initial state (segment 0) is never stored.
  const std::deque<RecurrentState>& stored() const { return stored_; }
  // The streams start over (a new pass over the split): the initial state at segment 0.
  void reset() {
    next_ = 0;
    stored_.clear();
  }
  // What next_segment() and stored() held (resuming a run); fails if they do not fit together.
  void restore(int64_t next_segment, std::deque<RecurrentState> stored);

  // The next step's window: segments next_segment() - w .. next_segment() with
  // w = min(window(), next_segment()), and the state entering its first segment (null: the
  // initial state, at the start of the streams).
  int window_segments() const;
  const RecurrentState* window_start() const;
  // The step ended: keeps the state it handed on (the state after segment next_segment()) and
  // advances. The oldest state, once out of every later window, lends its buffers to the new one,
  // so that steps allocate nothing once the window is full (a captured step stays valid).
  void hand_on(const RecurrentState& after);

 private:
  int window_ = 0;
  int64_t next_ = 0;
  std::deque<RecurrentState> stored_;
};

// One step's forward and backward (gradients into model.grads; the caller clips and updates):
// the window of segments next - w .. next (w = min(window, next)) from the state entering its
// first segment, the loss the mean cross-entropy over the B x T positions of segment next, which
// is returned. Afterwards the state after segment next is stored and next_segment() advances.
// The new segment's logits [B, T, V] are engine.logits(engine.num_segments() - 1).
double lm_forward_backward(Engine& engine, LmCarry& carry, const LmSegmentSource& source, int B,
                           int T, bool training, uint64_t dropout_seed);

// A whole training step: the same forward and backward, then the clip and the Adam step, as
// train_step (lib/run/train_step.h) runs them: one host wait, and with `capture` on a backend
// that can, the step captured once warm and replayed (the state entering the window is copied
// into the engine's own buffers before the graph). settings.bptt is ignored (the window is the
// carry's). The same numbers as lm_forward_backward followed by optimizer_step.
StepResult lm_train_step(Engine& engine, Model& model, Backend& be, Adam& adam, LmCarry& carry,
                         const LmSegmentSource& source, int B, int T, const StepSettings& settings,
                         StepCapture* capture = nullptr);

// The LM batching of training: segment `index` of every stream of `streams`, of length T.
LmSegmentSource text_segment_source(const TextStreams& streams, int T);

// A language model's loss over a whole split: its B streams segment after segment in order, the
// cache and memory carried (as in training, from the initial state at every stream's start),
// every target position scored once (text_scored_positions: the B*L-byte prefix of the split,
// less each stream's first byte; the last segment may be shorter). max_positions > 0 stops
// after the first ceil(max_positions / (B*T)) segments of every stream.
// loss: mean next-byte cross-entropy (nats); bpc = loss / ln 2; acc_teacher_forced: next-byte
// accuracy; samples and positions: the positions scored; streams: B.
EvalResult evaluate_lm(Engine& engine, const TextStreams& streams, int T, int64_t max_positions = 0);

// The carried state in a training state file (state.safetensors): tensors lm.state.<i>.mem
// [m, B, d] and lm.state.<i>.cache.<l> [mlen, B, d], metadata lm.next_segment, lm.states and
// lm.state.<i>.mlen. The refs point into `host`, where the states are copied from the
// backend; it must outlive their use.
void add_lm_carry(const LmCarry& carry, const Model& model, int B, std::vector<TensorRef>& refs,
                  std::map<std::string, std::string>& metadata,
                  std::deque<std::vector<float>>& host);
// Reads them back into `carry` (whose window is the run's), checking every shape against the
// model and batch; fails naming `path` and what is missing or does not fit.
void restore_lm_carry(const SafetensorsFile& file, const std::string& path, const Model& model,
                      int B, LmCarry& carry);

}  // namespace rmt
