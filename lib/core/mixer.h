#pragma once
// The layer's token mixer, chosen by the kinds table's mixer column (lib/core/model_kind.h).
// Each mixer is a file of its own with the same calls; these pass the layer's and the model's
// calls on to the kind's: relative softmax attention (lib/core/attention.h) or the delta rule
// (lib/core/delta_mixer.h, DeltaNet and Gated DeltaNet). A new mixer is its file, its kernels, a
// value of Mixer, and a case in each switch below.
#include <string>

#include "lib/core/attention.h"
#include "lib/core/delta_mixer.h"
#include "lib/core/layer.h"
#include "lib/core/model.h"

namespace rmt {

inline Mixer mixer_of(const Model& M) { return traits_of(M.kind).mixer; }

// Parameters: those all layers share, then layer `prefix`'s (names and shapes, in the authors'
// state_dict order), and their places in a flat buffer.
inline void mixer_shared_params(const Model& M, const AddParam& add) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_shared_params(M, add);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return;  // none shared
  }
}
inline void mixer_layer_params(const Model& M, const std::string& prefix, const AddParam& add) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_layer_params(M, prefix, add);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_layer_params(M, prefix, add);
  }
}
inline void mixer_bind(const Model& M, const FindParam& at, Weights& w) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_bind(at, w);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return;
  }
}
inline void mixer_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                             LayerWeights& w) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_bind_layer(prefix, at, w);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_bind_layer(M, prefix, at, w);
  }
}
// The mixer's own initialisation of tensor `name` (n floats at x); false: the model's rule.
inline bool mixer_init_param(const Model& M, const std::string& name, float* x, int64_t n,
                             SplitMixRng& rng) {
  switch (mixer_of(M)) {
    case Mixer::attention: return false;
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_init_param(name, x, n, rng);
  }
  return false;
}

// Whether the segment's relative position table and attention mask are used (attention's).
inline bool mixer_uses_positions(const Model& M) { return mixer_of(M) == Mixer::attention; }
// Floats of the state the mixers carry from segment to segment with its gradient, for B samples
// (RecurrentState::mixer; attention's cache is detached: 0).
inline int64_t mixer_state_floats(const Model& M, int B) {
  switch (mixer_of(M)) {
    case Mixer::attention: return 0;
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_state_floats(M, B);
  }
  return 0;
}

// The mixer's output y for the layer's live rows, from the state entering the segment, the state
// it hands on written into next; false for a last layer with no live rows (lib/core/attention.h
// says the contract).
inline bool mixer_forward(const LayerStep& st, LayerActivations& act, const float* x,
                          const RecurrentState& state, RecurrentState& next, DeviceArray<float>& y) {
  const size_t l = size_t(st.l);
  switch (mixer_of(st.M)) {
    case Mixer::attention:
      return attention_forward(st, act.attn, x, st.plan.mlen > 0 ? state.cache[l].data() : nullptr,
                               st.plan.next_mlen > 0 ? &next.cache[l] : nullptr, y);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_forward(st, act.delta, x, next, y);
  }
  return false;
}
// Its backward from dy (null: no live rows): parameter gradients into M.G, d(x) added into dx.
// dstate_out / dstate_in: the gradient w.r.t. the mixers' state leaving / entering the segment
// (null: none / dropped); attention's cache is detached.
inline void mixer_backward(const LayerStep& st, LayerActivations& act, const float* x,
                           const float* dy, float* dx, const float* dstate_out, float* dstate_in,
                           BackwardScratch& s) {
  switch (mixer_of(st.M)) {
    case Mixer::attention: return attention_backward(st, act.attn, x, dy, dx, s);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule:
      return delta_backward(st, act.delta, x, dy, dx, dstate_out, dstate_in, s);
  }
}
// One decoded row: x [B, d] in, y [B, d] out, the mixer's own state for row `row` updated.
inline void mixer_decode_row(const LayerStep& st, LayerActivations& act, int row, const float* x,
                             float* y, DecodeScratch& s) {
  switch (mixer_of(st.M)) {
    case Mixer::attention: return attention_decode_row(st, act.attn, row, x, y, s);
    case Mixer::delta_rule:
    case Mixer::gated_delta_rule: return delta_decode_row(st, act.delta, row, x, y, s);
  }
}

}  // namespace rmt
