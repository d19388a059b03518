#pragma once
// Forward and backward of a model over all segments of a batch, written by hand layer by layer
// (no autograd). Activations of every segment are kept for backpropagation through time; each
// buffer is sized on first use and reused, so a training step allocates nothing once warm.
#include <cstdint>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/model.h"

namespace rmt {

// Every activation is time-major, [rows, B, width] as in the authors' code: row t of sample b
// is buffer row t*B + b. A block of positions (the memory rows, the token rows, the cache) is
// then one contiguous range for the whole batch, so it is sliced, skipped or handed on without
// gathering.

// What flows from one segment to the next.
struct RecurrentState {
  std::vector<float> mem;                 // [m, B, d]    memory tokens (rmt, mt, xl_rmt)
  std::vector<std::vector<float>> cache;  // per layer [mlen, B, d], detached (xl, xl_rmt)
  int mlen = 0;                           // rows currently in the cache
};

// Which results of a segment anything depends on. Training asks only for what its loss needs;
// evaluation and decoding ask for everything.
struct SegmentOutputs {
  bool logits = true;  // logits and loss of the token rows
  bool memory = true;  // the memory passed on (models with memory tokens)
};

// Language modelling carries the state across forward() calls (docs/paper.md: Transformer-XL's
// LM setting): a forward may start from a state handed out by an earlier one.
struct Carry {
  // The state entering the first segment; null: initial_state (the learned memory, an empty
  // cache). A given state is detached: no gradient flows into it.
  const RecurrentState* start = nullptr;
  // Compute the whole state after the last segment (training otherwise skips its memory).
  bool pass_on = false;
};

// Saved activations of one segment. Query rows are [read m | tokens | write m_write]; key rows
// are [cache mlen | query rows]. The last layer computes only query rows [live_begin, live_end):
// the rows whose output something needs (the rest hold stale values).
struct LayerActivations {
  std::vector<float> cat;        // [klen, B, d]     [cache; layer input] (only when mlen > 0)
  std::vector<float> qkv;        // [klen, B, 3*H*Dh] (cache rows: keys and values only)
  std::vector<float> r;          // [klen, H*Dh]     r_net(pos)
  std::vector<float> prob;       // [B, H, q, klen]
  std::vector<float> av;         // [q, B, H*Dh]     attention vectors
  std::vector<float> a;          // [q, B, d]        x + attn_out (LayerNorm 1 input)
  std::vector<float> h1;         // [q, B, d]        LayerNorm 1 output
  std::vector<float> f1;         // [q, B, d_inner]  ReLU output
  std::vector<float> f1_drop;    // [q, B, d_inner]  after dropout (only when dropout > 0)
  std::vector<float> c;          // [q, B, d]        h1 + ff (LayerNorm 2 input)
  std::vector<float> h2;         // [q, B, d]        layer output
  std::vector<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // [q*B]
  std::vector<uint8_t> keep_o, keep_f1, keep_f2;              // dropout masks
};

struct SegmentActivations {
  int B = 0, T = 0, q = 0, mlen = 0, klen = 0;
  int m_write = 0;                   // write-block rows run (0 when no memory is passed on)
  int live_begin = 0, live_end = 0;  // query rows the last layer computes
  std::vector<int32_t> ids;      // [T, B] input tokens
  std::vector<int32_t> targets;  // [T, B] -1 where the position is not scored
  std::vector<uint8_t> mask;     // [q, klen] 1 = blocked
  std::vector<float> pos;        // [klen, d] position embedding (after dropout)
  std::vector<float> h0;         // [q, B, d] embedded input (after dropout)
  std::vector<LayerActivations> layers;
  std::vector<float> out;        // [q, B, d] last layer output after the final dropout
  std::vector<float> logits_tb;  // [T, B, V]
  std::vector<float> logits;     // [B, T, V] the same, in the caller's order
  std::vector<float> dlogits;    // [T, B, V] d(loss)/d(logits), set whenever targets are given
  std::vector<float> loss_rows;  // [T*B] per-position cross-entropy (0 where unscored)
  std::vector<uint8_t> keep_h0, keep_pos, keep_out;
};

class Engine {
 public:
  Engine(Model& model, Backend& backend);

  // input, target: [B, T] row-major; the loss is the mean cross-entropy over the last
  // answer_size positions of each row, over all segments concatenated. Keeps every
  // segment's activations and returns the loss.
  // In training, work no loss depends on is skipped: a segment with no scored position whose
  // output goes nowhere (no memory; baseline and xl) is not run at all, or only up to the
  // layer inputs the next segment's cache needs (xl), and its backward is skipped. Its logits
  // are then not available. Evaluation (training = false) computes every segment.
  double forward(const int32_t* input, const int32_t* target, int B, int T,
                 const std::vector<int>& seg_len, int answer_size, bool training,
                 uint64_t dropout_seed, const Carry& carry = {});
  // Gradients of the last forward's loss into model.grads (overwritten).
  // bptt: -1 = through every segment, 0 = memory detached at every border,
  // k = the loss of segment t reaches back through segments t-1 .. t-k.
  void backward(int bptt);

  // Memory-efficient BPTT: forward keeps only the state at each segment border (and the logits)
  // and backward recomputes each segment's activations from it (same numbers, same gradients).
  // Activation memory then no longer grows with the number of segments.
  void set_recompute(bool on) { recompute_ = on; }

  int num_segments() const { return int(seg_len_.size()); }
  int segment_length(int s) const { return seg_len_[size_t(s)]; }
  // Logits [B, T_s, V] of segment s from the last forward.
  const std::vector<float>& logits(int s) const;
  // The state entering segment s of the last forward, s = 0..num_segments(); the last one (the
  // state after the last segment) is whole only with Carry::pass_on.
  const RecurrentState& state(int s) const;

  // One segment forward from an explicit state (used by forward and by greedy decoding).
  // tokens [B, T]; targets may be null (no loss). Writes the next state into next.
  // `outputs` says what is needed past the cache: with neither logits nor memory the layers run
  // only as far as the next cache needs (the input of every layer).
  void forward_segment(SegmentActivations& a, const int32_t* tokens, const int32_t* targets,
                       int B, int T, const RecurrentState& state, RecurrentState& next,
                       bool training, uint64_t seed, float loss_scale,
                       SegmentOutputs outputs = {});
  // Incremental greedy decoding inside a segment. `a` holds a full forward of this segment
  // (forward_segment, no dropout); its qkv buffers serve as the key/value cache. Runs token row
  // t (0-based within the segment) with input ids[B] through every layer, attending over the
  // cache, the read block and token rows < t (whose qkv rows must be current), overwrites the
  // row's qkv, and writes its logits [B, V]. Token rows are causal, so the result equals a full
  // forward of the segment with these inputs.
  void decode_token_row(SegmentActivations& a, int t, const int32_t* ids, float* logits);
  // The state before the first segment: the learned memory, an empty cache.
  void initial_state(RecurrentState& state, int B) const;

 private:
  // Backward of one segment. with_loss: include the segment's loss gradient; dmem_out: gradient
  // w.r.t. the memory this segment passed on (null if none); dmem_in: where to write the
  // gradient w.r.t. the memory it received (null to drop it).
  void backward_segment(SegmentActivations& a, bool with_loss, const float* dmem_out,
                        float* dmem_in);
  float dropout_p(bool training) const;
  // The activations of segment s for backward: stored, or recomputed into work_.
  SegmentActivations& activations_for_backward(int s);

  Model& model_;
  Backend& be_;
  std::vector<int> seg_len_;
  // Per segment, from the last forward: scored (any position with a loss) and what was asked of
  // it (segments asked for nothing were not run).
  std::vector<uint8_t> seg_scored_;
  std::vector<SegmentOutputs> seg_outputs_;
  std::vector<SegmentActivations> segs_;
  std::vector<RecurrentState> states_;  // states_[s] = state entering segment s
  double loss_ = 0;
  bool training_ = false;
  bool from_initial_ = true;  // the last forward started from the learned memory
  int batch_ = 0;
  bool recompute_ = false, recomputing_ = false;  // option; whether the last forward recomputes
  uint64_t dropout_seed_ = 0;
  float loss_scale_ = 0;
  std::vector<std::vector<int32_t>> seg_tokens_, seg_targets_;  // inputs kept for recomputing
  std::vector<std::vector<float>> seg_logits_;                  // logits kept when recomputing
  SegmentActivations work_;                                      // the one recomputed segment
  RecurrentState work_next_;
  // backward scratch, reused
  std::vector<float> dh_, dx_, dtmp_, dff_, dav_, dqkv_, dr_, dmem_in_, dmem_out_;
  // decoding scratch, reused
  std::vector<float> row_x_, row_av_, row_a_, row_f_, row_prob_, row_stats_;
  std::vector<uint8_t> row_mask_;
};

}  // namespace rmt
