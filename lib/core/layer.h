#pragma once
// One layer of the backbone (docs/paper.md §2, post-LayerNorm as Transformer-XL), as a forward /
// backward pair of free functions over explicit buffers, mirroring each other line for line:
//   attn_res = x + dropout(mixer(x))                   h1 = LayerNorm1(attn_res)
//   ff_res   = h1 + dropout(W2 dropout(relu(W1 h1 + b1)) + b2)   h2 = LayerNorm2(ff_res)
// The token mixer is the kind's (lib/core/mixer.h). The memory mechanisms
// that act around a layer (armt's associative read and write) are the engine's, not the layer's.
// Shapes as lib/core/engine.cpp names them.
#include <cstdint>

#include "lib/core/activations.h"
#include "lib/core/backend.h"
#include "lib/core/model.h"
#include "lib/core/segment_plan.h"

namespace rmt {

// What layer l of a segment runs with besides its weights and activations.
struct LayerStep {
  Backend& be;
  const Model& M;
  const SegmentPlan& plan;
  int B;                  // samples
  int l;                  // the layer
  float p;                // dropout probability (0: none)
  const uint64_t* seed;   // dropout's seed word (null without dropout)
  const float* pos;       // [klen, d] the segment's position embedding (after dropout)
  const uint8_t* mask;    // [q, klen] the segment's attention mask
  const float* mixer_in;  // the mixers' state entering the segment (RecurrentState::mixer; null
                          // for attention, which carries its cache instead)
  bool last() const { return l == M.L - 1; }
  // Past the mixer each row is on its own: the last layer runs only the live rows.
  int row_begin() const { return last() ? plan.live_begin : 0; }
  int row_end() const { return last() ? plan.live_end : plan.q; }
};

// Layer l on its input x [q, B, d] into act, from the state entering the segment (its cache
// rows, or the mixer's state), the mixer's part of the state handed on written into next.
// Returns its output (act.h2), or null for a last layer with no live rows (it stops once the
// next state has what it needs).
const float* layer_forward(const LayerStep& st, LayerActivations& act, const float* x,
                           const RecurrentState& state, RecurrentState& next);

// Its backward. dh [q, B, d] holds d(h2) (rows past the live ones ignored) and becomes d(x); x
// is the input the layer ran on. Parameter gradients accumulate into M.G. dstate_out /
// dstate_in: the gradient w.r.t. the mixers' state leaving / entering the segment (null: none /
// dropped).
void layer_backward(const LayerStep& st, LayerActivations& act, const float* x, float* dh,
                    const float* dstate_out, float* dstate_in, BackwardScratch& s);

// One decoded row of every sample through layer l (Engine::decode_token_row): x [B, d] becomes
// the layer's output, the row's keys and values go into row `row` of act's key/value rows, and
// it attends over rows [0, row]. No dropout.
void layer_decode_row(const LayerStep& st, LayerActivations& act, int row, float* x,
                      DecodeScratch& s);

}  // namespace rmt
