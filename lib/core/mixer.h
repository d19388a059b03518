#pragma once
// The layer's token mixer, chosen by the kinds table's mixer column (lib/core/model_kind.h).
// Each mixer is a file of its own with the same six calls; these pass the layer's and the model's
// calls on to the kind's. Relative softmax attention (lib/core/attention.h) is every kind's today.
// A new mixer is its file, its kernels, a value of Mixer, and a case in each switch below.
#include <string>

#include "lib/core/attention.h"
#include "lib/core/layer.h"
#include "lib/core/model.h"

namespace rmt {

inline Mixer mixer_of(const Model& M) { return traits_of(M.kind).mixer; }

// Parameters: those all layers share, then layer `prefix`'s (names and shapes, in the authors'
// state_dict order), and their places in a flat buffer.
inline void mixer_shared_params(const Model& M, const AddParam& add) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_shared_params(M, add);
  }
}
inline void mixer_layer_params(const Model& M, const std::string& prefix, const AddParam& add) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_layer_params(M, prefix, add);
  }
}
inline void mixer_bind(const Model& M, const FindParam& at, Weights& w) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_bind(at, w);
  }
}
inline void mixer_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                             LayerWeights& w) {
  switch (mixer_of(M)) {
    case Mixer::attention: return attention_bind_layer(prefix, at, w);
  }
}

// The mixer's output y for the layer's live rows, the state it hands on (next_cache); false for a
// last layer with no live rows (lib/core/attention.h says the contract).
inline bool mixer_forward(const LayerStep& st, LayerActivations& act, const float* x,
                          const float* cache, DeviceArray<float>* next_cache,
                          DeviceArray<float>& y) {
  switch (mixer_of(st.M)) {
    case Mixer::attention: return attention_forward(st, act.attn, x, cache, next_cache, y);
  }
  return false;
}
// Its backward from dy: parameter gradients into M.G, d(x) added into dx.
inline void mixer_backward(const LayerStep& st, LayerActivations& act, const float* x,
                           const float* dy, float* dx, BackwardScratch& s) {
  switch (mixer_of(st.M)) {
    case Mixer::attention: return attention_backward(st, act.attn, x, dy, dx, s);
  }
}
// One decoded row: x [B, d] in, y [B, d] out, the mixer's own state for row `row` updated.
inline void mixer_decode_row(const LayerStep& st, LayerActivations& act, int row, const float* x,
                             float* y, DecodeScratch& s) {
  switch (mixer_of(st.M)) {
    case Mixer::attention: return attention_decode_row(st, act.attn, row, x, y, s);
  }
}

}  // namespace rmt
