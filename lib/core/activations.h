#pragma once
// What the engine (lib/core/engine.h) keeps of a segment: the recurrent state handed from one
// segment to the next, every layer's saved activations, and the scratch of the work that reads
// them (backward, truncated BPTT, decoding, diagonal evaluation), each a struct sized once per
// shape by its own size() before the work runs (as llm.c's malloc_and_point_activations), not
// buffer by buffer inside the compute.
#include <cstdint>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/segment_plan.h"

namespace rmt {

struct Model;

// Every activation is time-major, [rows, B, width] as in the authors' code: row t of sample b
// is buffer row t*B + b. A block of positions (the memory rows, the token rows, the cache) is
// then one contiguous range for the whole batch, so it is sliced, skipped or handed on without
// gathering.

// Every buffer below is in the backend's memory (DeviceArray): kernels read and write it, the
// host only through the backend's copies.

// What flows from one segment to the next.
struct RecurrentState {
  DeviceArray<float> mem;                 // [num_mem, B, d]  memory tokens (rmt, mt, xl_rmt)
  std::vector<DeviceArray<float>> cache;  // per layer [mlen, B, d], detached (xl, xl_rmt)
  int mlen = 0;                           // rows currently in the cache
  // armt: every layer's associative memory, layer l at l * B * assoc_floats(): A [B, Dk, d] then
  // z [B, Dk] (docs/armt.md). Empty until a segment has written it (assoc_written): the first
  // segment neither reads it nor corrects its write (the authors' first_seg).
  DeviceArray<float> assoc;
  bool assoc_written = false;
  // deltanet, gated_deltanet: every layer's delta-rule state, layer l at l * B * the mixer's
  // floats per sample (lib/core/delta_mixer.h): S [B, H, Dk, Dv], then the convolution's last
  // W - 1 input rows of q, k and v ([W-1, B, HK], [W-1, B, HK], [W-1, B, HV]). Zero before the
  // first segment.
  DeviceArray<float> mixer;
};

// Language modelling carries the state across forward_loss() calls (docs/paper.md: Transformer-XL's
// LM setting): a forward may start from a state handed out by an earlier one.
struct Carry {
  // The state entering the first segment; null: initial_state (the learned memory, an empty
  // cache). A given state is detached: no gradient flows into it.
  const RecurrentState* start = nullptr;
  // Compute the whole state after the last segment (training otherwise skips its memory).
  bool pass_on = false;
};

// Saved activations of one layer in one segment, in the shapes of its SegmentPlan
// (lib/core/segment_plan.h). Query rows are [read num_mem | tokens | write m_write]; key rows are
// [cache mlen | query rows]. The last layer computes only query rows [live_begin, live_end): the
// rows whose output something needs (the rest hold stale values).
//
// The token mixer's part: relative softmax attention (lib/core/attention.cpp).
struct AttentionActivations {
  DeviceArray<float> cat;   // [klen, B, d]     [cache; layer input] (only when mlen > 0)
  DeviceArray<float> qkv;   // [klen, B, 3*H*Dh] (cache rows: keys and values only)
  DeviceArray<float> r;     // [klen, H*Dh]     r_net(pos)
  DeviceArray<float> prob;  // [B, H, q, klen]
  DeviceArray<float> av;    // [q, B, H*Dh]     attention vectors
};
// The delta-rule mixer's part (lib/core/delta_mixer.cpp, docs/deltanet.md), rows = q*B time-major,
// HK = H*Dk, HV = H*Dv:
struct DeltaActivations {
  DeviceArray<float> xq, xk, xv;  // [rows, HK|HK|HV] the projections, before the convolution
  DeviceArray<float> cq, ck;      // [rows, HK]  after the convolution and SiLU
  DeviceArray<float> v;           // [rows, HV]  the same: the rule's values
  DeviceArray<float> qn, kn;      // [rows, HK]  L2-normalised per head: the rule's q and k
  DeviceArray<float> rq, rk;      // [rows*H]    their 1 / norms
  DeviceArray<float> b, a;        // [rows, H]   b_proj x, a_proj x (gated)
  DeviceArray<float> beta, g;     // [rows, H]   write strength, log-decay (gated)
  DeviceArray<float> S_chunks;    // [chunks, B, H, Dk, Dv]  the state entering every chunk
  DeviceArray<float> rule_work;   // [B*H, forward_work_per_head] the chunked form's scratch
  DeviceArray<float> o;           // [rows, HV]  the rule's output
  DeviceArray<float> gate;        // [rows, HV]  g_proj x (gated)
  DeviceArray<float> on, ro;      // [rows, HV], [rows*H]  the output norm's result, 1 / rms
  DeviceArray<float> ones;        // [max(HK, HV)] the width-1 convolution of model.short_conv 0
  // Decoding (Engine::decode_token_row): the layer's state after rows [0, dec_row) of this
  // segment, in dec[0] (dec[1] takes the next row's); dec_row -1: not built since the forward.
  DeviceArray<float> dec[2];
  int dec_row = -1;
};
// armt's associative memory's part (lib/core/assoc_memory.cpp, docs/armt.md). The read before the
// layer, when the state holds a memory:
struct AssocActivations {
  DeviceArray<float> x_in;        // [q, B, d]      layer input + read: what the layer runs on
  DeviceArray<float> rq, rphi;    // [q, B, d_mem], [q, B, Dk]  W_mq x and its DPFP
  DeviceArray<float> rout, rden;  // [q, B, d], [q*B]  the read and its denominators
  // The write after it, from the write block's output rows (when the memory is passed on):
  DeviceArray<float> wk, wphi;  // [m, B, d_mem], [m, B, Dk]  W_mk m and its DPFP (the keys)
  DeviceArray<float> wv, wbar;  // [m, B, d]      W_mv m, and what A already gives for the keys
  DeviceArray<float> wden, wb;  // [m*B]          wbar's denominators; the logits of beta
};
// The layer (lib/core/layer.cpp): the mixer, then the residual blocks and the feed-forward.
struct LayerActivations {
  AttentionActivations attn;     // the mixer's: attention's or the delta rule's
  DeltaActivations delta;
  DeviceArray<float> attn_res;   // [q, B, d]        x + mixer output (LayerNorm 1 input)
  DeviceArray<float> h1;         // [q, B, d]        LayerNorm 1 output
  DeviceArray<float> f1;         // [q, B, d_inner]  ReLU output
  DeviceArray<float> f1_drop;    // [q, B, d_inner]  after dropout (only when dropout > 0)
  DeviceArray<float> ff_res;     // [q, B, d]        h1 + ff (LayerNorm 2 input)
  DeviceArray<float> h2;         // [q, B, d]        layer output
  DeviceArray<float> ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // [q*B]
  DeviceArray<uint8_t> keep_o, keep_f1, keep_f2;              // dropout masks
  AssocActivations assoc;
};

struct SegmentActivations {
  int B = 0;                 // samples
  SegmentPlan plan;          // what the segment ran: T, q, mlen, klen, m_write, live rows, ...
  bool has_logits = false;   // logits (and, with targets, the loss) were computed
  const int32_t* token_ids = nullptr;  // [T, B] the input tokens it ran with (ids or the engine's)
  DeviceArray<int32_t> ids;      // [T, B] input tokens (forward_segment's upload)
  DeviceArray<int32_t> targets;  // [T, B] -1 where the position is not scored
  DeviceArray<uint64_t> seed;    // [1] forward_segment's dropout seed (uploaded when training)
  DeviceArray<float> pos;        // [klen, d] position embedding (after dropout)
  DeviceArray<float> h0;         // [q, B, d] embedded input (after dropout)
  std::vector<LayerActivations> layers;
  DeviceArray<float> out;        // [q, B, d] last layer output after the final dropout
  DeviceArray<float> logits;     // [T, B, V] (time-major; Engine::segment_logits reorders)
  DeviceArray<float> dlogits;    // [T, B, V] d(loss)/d(logits), set whenever targets are given
  DeviceArray<float> loss_rows;  // [T*B] per-position cross-entropy (0 where unscored)
  DeviceArray<uint8_t> keep_h0, keep_pos, keep_out;
  // armt: the associative memory the segment read (the entering state's; valid while that state
  // lives: the engine keeps every state of a forward, decoding runs before its state moves on)
  // and whether it read one and wrote the next.
  const float* assoc_in = nullptr;
  bool assoc_read = false, assoc_write = false;
  // deltanet, gated_deltanet: the mixers' state it started from (the entering state's mixer,
  // valid while that state lives, as assoc_in)
  const float* mixer_in = nullptr;
  const uint8_t* mask = nullptr;  // [q, klen] its attention mask (Engine::mask_for's, kept by shape)
};

// Evaluation by diagonals (Engine::forward_diagonal): what the caller gives for segment s, read
// when the segment starts. tokens and targets [B, T_s] on the host (targets null: no loss).
struct DiagonalSegmentInput {
  const int32_t* tokens = nullptr;
  const int32_t* targets = nullptr;
  SegmentOutputs outputs;
};

// ---- Scratch, reused from call to call (a warm training step allocates nothing) ----

// One segment's backward (Engine::backward_segment): d(layer output) travels down the layers in
// dh; the others hold one layer's intermediate gradients. Shapes of the segment's plan.
struct BackwardScratch {
  DeviceArray<float> dh, dx, dtmp;  // [q, B, d]   d(h2) then d(attn_res); d(ff_res) then d(h1); dropout's
  DeviceArray<float> dff;           // [q, B, di]  d(ReLU output)
  DeviceArray<float> dav;           // [q, B, HD]  d(attention vectors)
  DeviceArray<float> dqkv, dr;      // [klen, B, 3HD], [klen, HD]
  // armt (docs/armt.md): a dropped state gradient [B, F] (F = Dk d + Dk), d(phi) [q, B, Dk],
  // d(W_mq x | W_mk m) [q, B, dm], d(v) and d(vbar) [m, B, d], d(beta) [m B]
  DeviceArray<float> dassoc_drop, dphi, dproj, dwv, dwb, dwbar;
  // the delta rule (lib/core/delta_mixer.cpp), rows = q*B: d(normed output), d(rule output),
  // d(gate) [rows, HV]; d(q, k) [rows, HK] through the rule, then the norm, then the convolution;
  // d(v) [rows, HV] through the rule, then the convolution; d(beta), d(g), d(b), d(a) [rows, H];
  // a dropped d(S_in); the rule's work; the width-1 convolution's unused weight gradient
  DeviceArray<float> d_on, d_o, d_gate, d_q, d_k, d_v, d_cq, d_ck, d_xq, d_xk, d_xv;
  DeviceArray<float> d_beta, d_g, d_b, d_a, d_S_drop, delta_work, d_ones;
  void size(Backend& be, const Model& M, const SegmentPlan& plan, int B);
};

// The memory's gradient between segments (Engine::backward), each of memory_floats(B): with full
// BPTT the one entering and the one leaving the segment; truncated, one stream per age (arriving
// at / leaving the segment, and whether each holds one), their merge at segment 0 and one
// segment's output.
struct MemoryGradients {
  DeviceArray<float> in, out;
  std::vector<DeviceArray<float>> arriving, leaving;
  std::vector<uint8_t> arriving_set, leaving_set;
  DeviceArray<float> merged, tbptt_out;
};

// One decoded row of every sample (Engine::decode_token_row), B rows wide.
struct DecodeScratch {
  DeviceArray<float> x, av, attn_res, f, prob, stats, logits;  // [B, d] [B, HD] [B, d] [B, di] [B, H, klen] [2B] [B, V]
  DeviceArray<float> q, phi, read, den;                        // armt's read: [B, dm] [B, Dk] [B, d] [B]
  DeltaActivations delta;  // the delta rule's one row (rows = B); its S_chunks: the rebuild's outputs
  DeviceArray<int32_t> ids;                                    // [B]
  DeviceArray<uint8_t> mask;                                   // [klen] all zero: the row sees every key before it
  void size(Backend& be, const Model& M, int B, int klen);
};

// Evaluation by diagonals (Engine::forward_diagonal): segment s in slot s % slots (its input, its
// layers ping-ponged by parity: layers[l % 2]), and the states entering even and odd segments
// (layer l of the state entering s + 1 is written by layer-step (s, l) while (s + 1, l - 1)
// reads layer l - 1 of it).
struct DiagonalSlots {
  std::vector<SegmentActivations> slots;
  RecurrentState states[2];
};

}  // namespace rmt
