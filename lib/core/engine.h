#pragma once
// Forward and backward of a model over all segments of a batch, written by hand layer by layer
// (no autograd), as calls of the model's backend: the engine never touches a buffer itself.
// Activations of every segment are kept for backpropagation through time; each buffer is sized
// on first use and reused, so a training step allocates nothing once warm.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "lib/core/activations.h"
#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/layer.h"
#include "lib/core/model.h"
#include "lib/core/segment_plan.h"

namespace rmt {

class Engine {
 public:
  explicit Engine(Model& model);  // on the model's backend
  // `backend` must be the model's (kept for callers that name it).
  Engine(Model& model, Backend& backend);

  // Training's forward (and forward_loss's, below) in two halves, so that a training step can be
  // captured once and replayed (lib/run/train_step.cpp). input, target: [B, T] row-major host
  // arrays; the loss is the mean cross-entropy over the last answer_size positions of each row
  // whose target is not -1 (a position the dataset leaves unscored), over all segments concatenated; every segment's activations are kept. In training, work no
  // loss depends on is skipped: a segment with no scored position whose output goes nowhere (no
  // memory; baseline and xl) is not run at all, or only up to the layer inputs the next
  // segment's cache needs (xl), and its backward is skipped. Its logits are then not available.
  // Evaluation (training = false) computes every segment. stage_forward is the host's part: it
  // checks and plans, and uploads every segment's tokens and targets. run_forward issues the
  // kernels, and nothing else once its buffers are sized (no copy from or to the host, no wait),
  // adding the loss sum (not yet scaled: loss_scale()) into *loss_sum, a double of the backend's
  // memory.
  void stage_forward(const int32_t* input, const int32_t* target, int B, int T,
                     const std::vector<int>& seg_len, int answer_size, bool training,
                     uint64_t dropout_seed, const Carry& carry = {});
  void run_forward(double* loss_sum);
  float loss_scale() const { return fwd_.loss_scale; }
  Backend& backend() const { return be_; }
  // Two doubles of the backend's memory, for a step's results read back in one download:
  // [0] a loss sum (forward, add_segment_loss), [1] the gradient's sum of squares (train_step).
  static constexpr int kResultWords = 2;
  double* result_words() { return results_.sized(be_, kResultWords); }
  // How many segments (and decoded rows) this engine has run on the host so far: a captured step
  // is replayed only while nothing else has run since its capture.
  uint64_t segment_runs() const { return segment_runs_; }

  // Gradients of the last forward's loss into model.grads (overwritten).
  // bptt: -1 = through every segment, 0 = memory detached at every border,
  // k = the loss of segment t reaches back through segments t-1 .. t-k.
  void backward(int bptt);

  // Memory-efficient BPTT: forward keeps only the state at each segment border (and the logits)
  // and backward recomputes each segment's activations from it (same numbers, same gradients).
  // Activation memory then no longer grows with the number of segments.
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  int num_segments() const { return int(fwd_.seg_len.size()); }
  int segment_length(int s) const { return fwd_.seg_len[size_t(s)]; }
  // Logits [B, T_s, V] of segment s from the last forward, copied to the host.
  std::vector<float> logits(int s) const;
  // The logits of a segment run by forward_segment, [B, T, V] on the host.
  std::vector<float> segment_logits(const SegmentActivations& seg) const;
  // `sum` plus the per-position losses of a segment run with targets and logits, added by the
  // backend's accumulate_sum as run_forward adds them (so that a loss summed over segments has the
  // same bits whether the segments ran in one run_forward or one by one).
  double add_segment_loss(const SegmentActivations& seg, double sum);
  // The attention mask that segment ran with, [q, klen] on the host (1 = blocked).
  std::vector<uint8_t> segment_mask(const SegmentActivations& seg) const;
  // The state entering segment s of the last forward, s = 0..num_segments(); the last one (the
  // state after the last segment) is whole only with Carry::pass_on.
  const RecurrentState& state(int s) const;
  // The saved activations of segment s of the last forward (none for a segment not run, or with
  // recompute). Mutable for the GPU suite, which aligns the cpu's ReLU ties with the device's
  // before re-running backward (tests/cuda/test_cuda_models.cpp).
  SegmentActivations& activations(int s) { return fwd_.segs.at(size_t(s)); }

  // One segment forward from an explicit state (used by forward and by greedy decoding).
  // tokens [B, T] (host); targets (host) may be null (no loss). Writes the next state into next.
  // `outputs` says what is needed past the cache: with neither logits nor memory the layers run
  // only as far as the next cache needs (the input of every layer).
  void forward_segment(SegmentActivations& seg, const int32_t* tokens, const int32_t* targets,
                       int B, int T, const RecurrentState& state, RecurrentState& next,
                       bool training, uint64_t seed, float loss_scale,
                       SegmentOutputs outputs = {});
  // Incremental greedy decoding inside a segment. `seg` holds a full forward of this segment
  // (forward_segment, no dropout); its qkv buffers serve as the key/value cache. Runs token row
  // t (0-based within the segment) with input ids[B] (host) through every layer, attending over
  // the cache, the read block and token rows < t (whose qkv rows must be current), overwrites
  // the row's qkv, and writes its logits [B, V] (host). Token rows are causal, so the result
  // equals a full forward of the segment with these inputs.
  void decode_token_row(SegmentActivations& seg, int t, const int32_t* ids, float* logits);
  // The state before the first segment: the learned memory, an empty cache.
  void initial_state(RecurrentState& state, int B) const;

  // Fails, saying why, where forward_diagonal does not apply to this model.
  void check_diagonal() const;
  // Whether forward_diagonal runs a diagonal's layer-steps at once: on the CPU backend with more
  // than one thread. Otherwise they run in turn, and the grid walked segment by segment (the
  // sequential order) computes the same with a segment's rows still in cache from layer to layer.
  bool diagonal_overlaps() const;
  // Evaluation (no dropout) of segments of seg_len tokens from the initial state, the
  // (segment, layer) grid walked by diagonals (lib/core/engine_diagonal.cpp, docs/armt.md
  // "Diagonal evaluation"): armt only, whose layer l of segment s needs only layer l - 1 of
  // segment s (its input) and layer l of segment s - 1 (A_l and z_l), so the layer-steps of a
  // diagonal are independent. Every layer-step runs the kernels run_segment runs, on the same
  // shapes: the results are forward_segment's bit for bit. input(s) gives segment s when it
  // starts; done(s, seg) is called for every segment in order once its last layer has run (seg:
  // its logits and per-position losses, as forward_segment leaves them). `after` gets the state
  // after the last segment. Holds at most min(L, segments) segments at once, whatever the number
  // of segments. Fails for any other kind (rmt's memory tokens go from the last layer of a segment
  // to the first of the next: no two layer-steps are independent).
  void forward_diagonal(int B, const std::vector<int>& seg_len, float loss_scale,
                        const std::function<DiagonalSegmentInput(int s)>& input,
                        const std::function<void(int s, const SegmentActivations& seg)>& done,
                        RecurrentState& after);

 private:
  // Backward of one segment. with_loss: include the segment's loss gradient; dmem_out: gradient
  // w.r.t. the memory this segment passed on (null if none); dmem_in: where to write the
  // gradient w.r.t. the memory it received (null to drop it). Both in the backend's memory.
  void backward_segment(SegmentActivations& seg, bool with_loss, const float* dmem_out,
                        float* dmem_in);
  float dropout_p(bool training) const;
  // Floats of the state's memory (and of its gradient): the memory tokens' part [m, B, d] (rmt,
  // mt, xl_rmt), then the associative memory's (armt: A and z of every layer).
  int64_t memory_floats(int B) const;
  // Segment s's dropout seed in the backend's memory (stage_forward), null without dropout.
  const uint64_t* segment_seed(int s) const {
    return dropout_p(fwd_.training) > 0 ? fwd_.segment_seeds.data() + s : nullptr;
  }
  // forward_segment with its plan given (stage_forward plans all segments at once) and its tokens
  // and targets (may be null) already in the backend's memory, time-major [T, B]; so is its dropout
  // seed (one word, read when the kernels run; null without dropout).
  void run_segment(SegmentActivations& seg, const SegmentPlan& plan, const int32_t* ids,
                   const int32_t* targets, int B, const RecurrentState& state,
                   RecurrentState& next, bool training, const uint64_t* seed, float loss_scale);
  // run_segment in its three parts, which forward_diagonal runs separately. begin_segment: the
  // segment's fields, its mask, the next state's shape and its input rows (returned, [q, B, d]).
  const float* begin_segment(SegmentActivations& seg, const SegmentPlan& plan, const int32_t* ids,
                             int B, const RecurrentState& state, RecurrentState& next,
                             bool training, const uint64_t* seed);
  // Layer l of seg's plan: what layer_forward and layer_backward run with.
  LayerStep layer_step(const SegmentActivations& seg, int l, bool training,
                       const uint64_t* seed) const;
  // Layer l on its input x into act: armt's read, the layer (lib/core/layer.h: the mixer, the
  // cache handed on, the feed-forward), armt's write into next. Returns its output (act.h2), or null for a last layer that stops at its input
  // (no live rows: the next state has what it needs).
  const float* run_layer(SegmentActivations& seg, LayerActivations& act, int l, const float* x,
                         const RecurrentState& state, RecurrentState& next, bool training,
                         const uint64_t* seed);
  // After the last layer (output x): the final dropout, the logits and loss, rmt's memory out.
  void end_segment(SegmentActivations& seg, const float* x, const int32_t* targets,
                   RecurrentState& next, bool training, const uint64_t* seed, float loss_scale);
  // task(0), .., task(n - 1), independent of each other: at once where diagonal_overlaps() (each
  // on one thread, run_cpu_tasks_concurrently), else in turn.
  void run_independent(int n, const std::function<void(int)>& task);
  // tokens (and targets, when targets_dev is given) [B, T] on the host -> [T, B] in ids (targets_dev).
  void upload_segment(DeviceArray<int32_t>& ids, DeviceArray<int32_t>* targets_dev,
                      const int32_t* tokens, const int32_t* targets, int B, int T);
  // The activations of segment s for backward: stored, or recomputed into recomputed_.
  SegmentActivations& activations_for_backward(int s);
  // The attention mask of a segment shape, built on the host once per shape and uploaded.
  const uint8_t* mask_for(const SegmentPlan& plan);
  // Grows a buffer on this engine's backend (see DeviceArray::sized).
  template <typename T>
  T* sized(DeviceArray<T>& array, int64_t n) {
    return array.sized(be_, n);
  }

  Model& model_;
  Backend& be_;
  SegmentModel plan_model_;  // what segment plans depend on: num_mem, mem_len, write_block
  bool recompute_ = false;   // set_recompute

  // The last forward (stage_forward, run_forward): its batch, what each segment computed
  // (scored, the outputs asked of it; segments asked for nothing were not run), the states
  // between them and, unless recomputing, every segment's activations.
  struct StagedForward {
    std::vector<int> seg_len;
    std::vector<SegmentPlan> plans;
    std::vector<SegmentActivations> segs;
    std::vector<RecurrentState> states;  // states[s] = state entering segment s
    bool training = false;
    bool from_initial = true;  // started from the learned memory
    bool recomputing = false;  // recompute_ when it was staged
    int batch = 0;
    float loss_scale = 0;
    RecurrentState carry_in;  // the carried state it starts from
    // The batch's tokens and targets, uploaded in one copy (recomputing reads them too): segment
    // s's ids [T_s, B] at batch_at[s], its targets [T_s, B] right after.
    DeviceArray<int32_t> batch_tokens;
    std::vector<int64_t> batch_at;
    // per segment: its dropout seed mix_seed(step's seed, s), uploaded with the batch, so that a
    // captured step reads the seeds of the step it replays
    DeviceArray<uint64_t> segment_seeds;
    std::vector<DeviceArray<float>> seg_logits;  // logits kept when recomputing
  } fwd_;
  const int32_t* segment_ids(int s) const {
    return fwd_.batch_tokens.data() + fwd_.batch_at[size_t(s)];
  }
  const int32_t* segment_targets(int s) const {
    return segment_ids(s) + int64_t(fwd_.seg_len[size_t(s)]) * fwd_.batch;
  }
  DeviceArray<double> results_;  // result_words()
  uint64_t segment_runs_ = 0;
  // The one recomputed segment (set_recompute) and the state it hands on.
  struct Recomputed {
    SegmentActivations seg;
    RecurrentState next;
  } recomputed_;
  DiagonalSlots diagonal_;
  // attention masks by shape (q, mlen, m_read, m_write)
  std::map<std::array<int, 4>, DeviceArray<uint8_t>> masks_;
  // host staging, reused: a segment's ids and targets [B, T] and transposed, a mask being built
  struct HostStaging {
    std::vector<int32_t> batch, ids, targets;
    std::vector<uint8_t> mask;
  } host_;
  BackwardScratch backward_;
  MemoryGradients dmem_;
  DecodeScratch decode_;
};

// stage_forward and run_forward in turn, the loss read back to the host and returned (scaled).
double forward_loss(Engine& engine, const int32_t* input, const int32_t* target, int B, int T,
                    const std::vector<int>& seg_len, int answer_size, bool training,
                    uint64_t dropout_seed, const Carry& carry = {});

}  // namespace rmt
