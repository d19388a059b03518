#pragma once
// The token mixer of deltanet and gated_deltanet: fla's DeltaNet and Gated DeltaNet layers
// (docs/deltanet.md §1-2, with file and line), in place of the attention sublayer of rmt's
// backbone. Per layer, rows time-major, H heads of Dk key and Dv value columns:
//   q, k, v = silu(conv(x W_q)), silu(conv(x W_k)), silu(conv(x W_v))   causal, depthwise, width W
//   q, k    = L2-normalised per head                                      (eps 1e-6 inside the root)
//   beta    = sigmoid(x W_b);   g = -exp(A_log) softplus(x W_a + dt_bias) (gated; DeltaNet: g = 0)
//   S_t     = e^g_t S_{t-1} + k_t (beta_t (v_t - e^g_t S_{t-1}^T k_t))^T,  o_t = S_t^T q_t / sqrt(Dk)
//   y       = W_o (RMSNorm_w(o) per head [* silu(x W_g)] (gated))
// The state it carries from one segment to the next, with gradients through it (bptt all | 0 |
// k, as armt's A and z): every layer's S and the convolution's last W - 1 input rows, in
// RecurrentState::mixer (lib/core/activations.h). Parameters under fla's names, below each
// layer's `attn.`, and the layer's first LayerNorm as `attn_layer_norm`.
#include <cstdint>
#include <string>

#include "lib/core/layer.h"
#include "lib/core/random.h"

namespace rmt {

// Its parameters in layer `prefix`, in the order of fla's state_dict (the layer's own A_log and
// dt_bias, then q_proj, k_proj, v_proj, a_proj, b_proj, the convolutions, g_proj, o_norm,
// o_proj), then the layer's LayerNorm; and their places in a flat buffer.
void delta_layer_params(const Model& M, const std::string& prefix, const AddParam& add);
void delta_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                      LayerWeights& w);
// fla's initialisation where it is not rmt's N(0, 0.02): o_norm's weight 1, A_log = log U(0, 16),
// dt_bias the inverse softplus of a log-uniform dt in [1e-3, 0.1] floored at 1e-4. False for a
// tensor it leaves to the model's rule.
bool delta_init_param(const std::string& name, float* x, int64_t n, SplitMixRng& rng);
// The parameters per layer (the mixer and its LayerNorm), counted from the config alone.
double delta_layer_param_count(const ModelConfig& c);

// Floats of the carried state per sample and layer (S, the convolution's rows), and of the
// whole state for B samples (0 for a kind without it).
int64_t delta_state_floats_per_sample(const Model& M);
int64_t delta_state_floats(const Model& M, int B);

// Layer st.l on its input x [q, B, d] from layer st.l of the entering state (st.mixer_in), its
// state after the segment into layer st.l of next.mixer; y [q, B, d] (sized here) its live rows.
// Returns false, leaving y alone, for a last layer with no live rows (the state is written).
bool delta_forward(const LayerStep& st, DeltaActivations& a, const float* x, RecurrentState& next,
                   DeviceArray<float>& y);
// Backward from dy (the live rows of d(y); null when there are none): parameter gradients into
// M.G, d(x) added into dx [q, B, d]. dstate_out / dstate_in: the gradient w.r.t. the state
// leaving / entering the segment (the mixer's part of it, every layer; null: none / dropped).
void delta_backward(const LayerStep& st, DeltaActivations& a, const float* x, const float* dy,
                    float* dx, const float* dstate_out, float* dstate_in, BackwardScratch& s);
// One decoded row of every sample at row `row`: x [B, d] in, y [B, d] out, from the state after
// rows [0, row) of the segment (kept from the row decoded before, or rebuilt from the segment's
// saved rows, which must be current).
void delta_decode_row(const LayerStep& st, DeltaActivations& a, int row, const float* x, float* y,
                      DecodeScratch& s);

// Its scratch of a segment's backward (a decoded row's is sized where it is written).
void delta_size_backward(Backend& be, const Model& M, const SegmentPlan& plan, int B,
                         BackwardScratch& s);

}  // namespace rmt
