// The delta-rule mixer (lib/core/delta_mixer.h, docs/deltanet.md): its parameters, forward,
// backward and decoded row, as calls of the backend's kernels (lib/core/backend_kernels.h, the
// delta mixer's rows). Shapes as lib/core/engine.cpp names them, plus
//   H heads    Dk = d_head key, Dv = expand_v d_head value columns    HK = H Dk, HV = H Dv
//   W  the convolution's width (model.short_conv; 0: none, run as a width-1 convolution by 1)
#include "lib/core/delta_mixer.h"

#include <algorithm>
#include <cmath>

namespace rmt {

namespace {

constexpr float kL2Eps = 1e-6f;    // fla's l2norm (inside the root, docs/deltanet.md §1.4)
constexpr float kNormEps = 1e-5f;  // fla's layers' norm_eps, the output RMSNorm's (§1.6)
// The recurrent form's rows between the states the forward saves for the backward (its
// gradients do not depend on it, lib/core/delta_math.h).
constexpr int kChunk = 64;

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

bool gated(const Model& M) { return traits_of(M.kind).mixer == Mixer::gated_delta_rule; }

struct Dims {
  int H, Dk, Dv, W;       // W: the convolution's width as run (1 without one)
  int carried;            // input rows it carries: W - 1
  int64_t HK, HV, C_max;  // C_max: the widest of q, k, v
};
Dims dims(const Model& M) {
  const int W = M.conv > 0 ? M.conv : 1;
  const int64_t HK = int64_t(M.H) * M.Dh, HV = int64_t(M.H) * M.Dv;
  return {M.H, M.Dh, M.Dv, W, W - 1, HK, HV, std::max(HK, HV)};
}

// Layer l's part of a state's mixer block (RecurrentState::mixer, B samples): S, then the
// carried input rows of q, k and v.
struct StateView {
  float *S = nullptr, *cq = nullptr, *ck = nullptr, *cv = nullptr;
};
StateView state_view(const Model& M, const float* base, int l, int B) {
  if (!base) return {};
  const Dims D = dims(M);
  float* S = const_cast<float*>(base) + int64_t(l) * B * delta_state_floats_per_sample(M);
  float* cq = S + int64_t(B) * D.H * D.Dk * D.Dv;
  float* ck = cq + int64_t(D.carried) * B * D.HK;
  float* cv = ck + int64_t(D.carried) * B * D.HK;
  return {S, cq, ck, cv};
}

// The rule's shape: the chunked form with chunks of model.delta_chunk rows, or (0) the recurrence.
DeltaShape rule_shape(const Model& M, int T, int B) {
  if (M.wy_chunk > 0) return {T, B, M.H, M.Dh, M.Dv, M.wy_chunk, true};
  return {T, B, M.H, M.Dh, M.Dv, kChunk};
}
// The forward's scratch for shape s (null for the recurrence).
float* rule_work(Backend& be, DeviceArray<float>& work, const DeltaShape& s) {
  return s.wy ? work.sized(be, s.heads() * s.forward_work_per_head()) : nullptr;
}
float rule_scale(const Model& M) { return 1.f / std::sqrt(float(M.Dh)); }

// The convolution's weight: the parameter, or the width-1 kernel of ones (no convolution: SiLU).
const float* conv_weight(const Model& M, const float* w, DeviceArray<float>& ones, Backend& be) {
  if (M.conv > 0) return w;
  const int64_t n = dims(M).C_max;
  if (ones.size() != n) be.fill(ones.sized(be, n), n, 1.f);
  return ones.data();
}

// What the forward computes of T rows from x [T*B, d] up to the rule's output, into a; from
// state `in` (null pointers: zero), its state after the rows into `out`.
void forward_rows(Backend& be, const Model& M, const DeltaWeights& w, DeltaActivations& a,
                  const float* x, int T, int B, const StateView& in, const StateView& out,
                  bool save_chunks) {
  const Dims D = dims(M);
  const int d = M.d, H = D.H;
  const int64_t rows = int64_t(T) * B;
  // q, k, v = silu(conv(x W)) each, the convolution carrying its last W - 1 input rows
  auto conv = [&](DeviceArray<float>& xp, DeviceArray<float>& y, const float* proj, const float* cw,
                  int64_t C, const float* state_in, float* state_out) {
    be.matmul(xp.sized(be, rows * C), x, proj, int(rows), int(C), d, false, true);
    be.short_conv_forward(y.sized(be, rows * C), D.carried > 0 ? state_out : nullptr, xp.data(),
                          conv_weight(M, cw, a.ones, be), D.carried > 0 ? state_in : nullptr,
                          ConvShape{T, B, int(C), D.W}, true);
  };
  conv(a.xq, a.cq, w.q_w, w.q_conv, D.HK, in.cq, out.cq);
  conv(a.xk, a.ck, w.k_w, w.k_conv, D.HK, in.ck, out.ck);
  conv(a.xv, a.v, w.v_w, w.v_conv, D.HV, in.cv, out.cv);
  be.l2norm_forward(a.qn.sized(be, rows * D.HK), a.rq.sized(be, rows * H), a.cq.data(), rows * H, D.Dk,
                    kL2Eps);
  be.l2norm_forward(a.kn.sized(be, rows * D.HK), a.rk.sized(be, rows * H), a.ck.data(), rows * H, D.Dk,
                    kL2Eps);
  // beta = sigmoid(x W_b); g = -exp(A_log) softplus(x W_a + dt_bias) (gated)
  be.matmul(a.b.sized(be, rows * H), x, w.b_w, int(rows), H, d, false, true);
  const bool gate = gated(M);
  if (gate) be.matmul(a.a.sized(be, rows * H), x, w.a_w, int(rows), H, d, false, true);
  be.delta_gates_forward(a.beta.sized(be, rows * H), gate ? a.g.sized(be, rows * H) : nullptr, a.b.data(),
                         gate ? a.a.data() : nullptr, w.A_log, w.dt_bias, rows, H);
  // the delta rule from the entering S
  const DeltaShape s = rule_shape(M, T, B);
  be.delta_rule_forward(a.o.sized(be, rows * D.HV), out.S,
                        save_chunks ? a.S_chunks.sized(be, s.chunks() * s.heads() * s.state()) : nullptr,
                        rule_work(be, a.rule_work, s), a.qn.data(), a.kn.data(), a.v.data(), a.beta.data(), gate ? a.g.data() : nullptr,
                        in.S, s, rule_scale(M));
}

// The output norm (and gate) of rows [0, rows) of a.o, into a.on.
void output_norm(Backend& be, const Model& M, const DeltaWeights& w, DeltaActivations& a,
                 const float* x, int64_t rows) {
  const Dims D = dims(M);
  const float* gate = nullptr;
  if (gated(M)) {
    be.matmul(a.gate.sized(be, rows * D.HV), x, w.g_w, int(rows), int(D.HV), M.d, false, true);
    gate = a.gate.data();
  }
  be.rms_norm_gated_forward(a.on.sized(be, rows * D.HV), a.ro.sized(be, rows * D.H), a.o.data(),
                            w.o_norm, gate, rows * D.H, D.Dv, kNormEps);
}

}  // namespace

void delta_layer_params(const Model& M, const std::string& prefix, const AddParam& add) {
  const Dims D = dims(M);
  const int64_t d = M.d, H = D.H;
  const std::string p = prefix + "attn.";
  if (gated(M)) {
    add(p + "A_log", {H});
    add(p + "dt_bias", {H});
  }
  add(p + "q_proj.weight", {D.HK, d});
  add(p + "k_proj.weight", {D.HK, d});
  add(p + "v_proj.weight", {D.HV, d});
  if (gated(M)) add(p + "a_proj.weight", {H, d});
  add(p + "b_proj.weight", {H, d});
  if (M.conv > 0) {
    add(p + "q_conv1d.weight", {D.HK, 1, M.conv});
    add(p + "k_conv1d.weight", {D.HK, 1, M.conv});
    add(p + "v_conv1d.weight", {D.HV, 1, M.conv});
  }
  if (gated(M)) add(p + "g_proj.weight", {D.HV, d});
  add(p + "o_norm.weight", {D.Dv});
  add(p + "o_proj.weight", {d, D.HV});
  add(prefix + "attn_layer_norm.weight", {d});
  add(prefix + "attn_layer_norm.bias", {d});
}

void delta_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                      LayerWeights& lw) {
  const std::string p = prefix + "attn.";
  DeltaWeights& w = lw.delta;
  if (gated(M)) {
    w.A_log = at(p + "A_log"), w.dt_bias = at(p + "dt_bias");
    w.a_w = at(p + "a_proj.weight"), w.g_w = at(p + "g_proj.weight");
  }
  w.q_w = at(p + "q_proj.weight"), w.k_w = at(p + "k_proj.weight"), w.v_w = at(p + "v_proj.weight");
  w.b_w = at(p + "b_proj.weight");
  if (M.conv > 0) {
    w.q_conv = at(p + "q_conv1d.weight"), w.k_conv = at(p + "k_conv1d.weight");
    w.v_conv = at(p + "v_conv1d.weight");
  }
  w.o_norm = at(p + "o_norm.weight"), w.o_w = at(p + "o_proj.weight");
  lw.ln1_w = at(prefix + "attn_layer_norm.weight");
  lw.ln1_b = at(prefix + "attn_layer_norm.bias");
}

bool delta_init_param(const std::string& name, float* x, int64_t n, SplitMixRng& rng) {
  auto ends_with = [&](const char* tail) {
    const std::string t(tail);
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (ends_with("attn.o_norm.weight")) {
    std::fill(x, x + n, 1.f);
  } else if (ends_with("attn.A_log")) {  // gated_deltanet.py:151-152
    for (int64_t i = 0; i < n; ++i) x[i] = float(std::log(16.0 * (1.0 - rng.uniform())));  // U(0, 16]
  } else if (ends_with("attn.dt_bias")) {  // gated_deltanet.py:155-165
    for (int64_t i = 0; i < n; ++i) {
      const double lo = std::log(1e-3), hi = std::log(0.1);
      const double dt = std::max(std::exp(lo + rng.uniform() * (hi - lo)), 1e-4);
      x[i] = float(dt + std::log(-std::expm1(-dt)));  // softplus^-1(dt)
    }
  } else {
    return false;
  }
  return true;
}

double delta_layer_param_count(const ModelConfig& c) {
  const bool gate = traits_of(c.kind).mixer == Mixer::gated_delta_rule;
  const double d = c.d_model, H = c.n_head, Dv = double(c.d_head) * resolved_expand_v(c);
  const double HK = H * c.d_head, HV = H * Dv, W = c.short_conv;
  double n = 2 * HK * d + HV * d + H * d + (2 * HK + HV) * W + Dv + d * HV + 2 * d;
  if (gate) n += 2 * H + H * d + HV * d;  // A_log, dt_bias, a_proj, g_proj
  return n;
}

int64_t delta_state_floats_per_sample(const Model& M) {
  if (!traits_of(M.kind).has_mixer_state()) return 0;
  const Dims D = dims(M);
  return int64_t(D.H) * D.Dk * D.Dv + int64_t(D.carried) * (2 * D.HK + D.HV);
}

int64_t delta_state_floats(const Model& M, int B) {
  return int64_t(M.L) * B * delta_state_floats_per_sample(M);
}

bool delta_forward(const LayerStep& st, DeltaActivations& a, const float* x, RecurrentState& next,
                   DeviceArray<float>& y) {
  Backend& be = st.be;
  const Model& M = st.M;
  const DeltaWeights& w = M.W.layers[size_t(st.l)].delta;
  const int B = st.B, q = st.plan.q, d = M.d;
  const int64_t rows = int64_t(q) * B, HV = dims(M).HV;
  a.dec_row = -1;  // a decoded row rebuilds its state from this forward's rows
  forward_rows(be, M, w, a, x, q, B, state_view(M, st.mixer_in, st.l, B),
               state_view(M, next.mixer.data(), st.l, B), true);
  if (st.last() && st.plan.live() == 0) return false;  // the next state has what it needs
  output_norm(be, M, w, a, x, rows);
  // y = o_proj(on), the live rows
  const int64_t o = int64_t(st.row_begin()) * B;
  const int n = (st.row_end() - st.row_begin()) * B;
  be.matmul(y.sized(be, rows * d) + o * d, a.on.data() + o * HV, w.o_w, n, d, int(HV), false, true);
  return true;
}

void delta_backward(const LayerStep& st, DeltaActivations& a, const float* x, const float* dy,
                    float* dx, const float* dstate_out, float* dstate_in, BackwardScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const DeltaWeights& w = M.W.layers[size_t(st.l)].delta;
  const DeltaWeights& g = M.G.layers[size_t(st.l)].delta;
  const Dims D = dims(M);
  const int B = st.B, q = st.plan.q, d = M.d, H = D.H;
  const int64_t rows = int64_t(q) * B, HK = D.HK, HV = D.HV;
  const bool gate = gated(M);
  const StateView in = state_view(M, st.mixer_in, st.l, B);
  const StateView d_out = state_view(M, dstate_out, st.l, B);
  const StateView d_in = state_view(M, dstate_in, st.l, B);
  // y = on W_o (the live rows; the others have no gradient)
  const int64_t o = int64_t(st.row_begin()) * B;
  const int n = dy ? (st.row_end() - st.row_begin()) * B : 0;
  float* d_o = s.d_o.data();
  float* d_gate = gate ? s.d_gate.data() : nullptr;
  if (n > 0) {
    be.matmul(g.o_w, dy, a.on.data() + o * HV, d, int(HV), n, true, false, 1.f, 1.f);
    float* d_on = s.d_on.data();
    if (n < rows) be.fill(d_on, rows * HV, 0.f);
    be.matmul(d_on + o * HV, dy, w.o_w, n, int(HV), d, false, false);
    // the output norm (and gate): d(on) -> d(o) (and d(g_proj x))
    be.rms_norm_gated_backward(d_o, g.o_norm, d_gate, d_on, a.o.data(), a.ro.data(), w.o_norm,
                               gate ? a.gate.data() : nullptr, rows * H, D.Dv);
    if (gate) {
      be.matmul(g.g_w, d_gate, x, int(HV), d, int(rows), true, false, 1.f, 1.f);
      be.matmul(dx, d_gate, w.g_w, int(rows), d, int(HV), false, false, 1.f, 1.f);
    }
  } else {  // no live rows (a last layer that only passed its state on)
    be.fill(d_o, rows * HV, 0.f);
  }
  // the delta rule: d(o), d(S_out) -> d(q, k, v, beta, g), d(S_in)
  const DeltaShape rs = rule_shape(M, q, B);
  be.delta_rule_backward(s.d_q.data(), s.d_k.data(), s.d_v.data(), s.d_beta.data(),
                         gate ? s.d_g.data() : nullptr, d_in.S ? d_in.S : s.d_S_drop.data(),
                         s.delta_work.data(), d_o, d_out.S, a.qn.data(), a.kn.data(), a.v.data(),
                         a.beta.data(), gate ? a.g.data() : nullptr, a.S_chunks.data(), rs,
                         rule_scale(M));
  // the gates: d(beta), d(g) -> d(x W_b), d(x W_a), d(A_log), d(dt_bias)
  be.delta_gates_backward(s.d_b.data(), gate ? s.d_a.data() : nullptr, g.A_log, g.dt_bias,
                          s.d_beta.data(), gate ? s.d_g.data() : nullptr, a.beta.data(),
                          gate ? a.g.data() : nullptr, gate ? a.a.data() : nullptr, w.A_log,
                          w.dt_bias, rows, H);
  auto projection_backward = [&](float* gw, const float* wt, const float* dz, int64_t C) {
    be.matmul(gw, dz, x, int(C), d, int(rows), true, false, 1.f, 1.f);
    be.matmul(dx, dz, wt, int(rows), d, int(C), false, false, 1.f, 1.f);
  };
  projection_backward(g.b_w, w.b_w, s.d_b.data(), H);
  if (gate) projection_backward(g.a_w, w.a_w, s.d_a.data(), H);
  // the L2 norms, then the convolutions (and their carried rows), then the projections
  be.l2norm_backward(s.d_cq.data(), s.d_q.data(), a.qn.data(), a.rq.data(), rows * H, D.Dk);
  be.l2norm_backward(s.d_ck.data(), s.d_k.data(), a.kn.data(), a.rk.data(), rows * H, D.Dk);
  auto conv_backward = [&](float* dxp, float* gconv, const float* cw, float* dstate_in_c,
                           const float* dy_c, const float* dstate_out_c, const DeviceArray<float>& xp,
                           const float* state_in_c, int64_t C) {
    const bool carried = D.carried > 0;
    if (M.conv == 0) be.fill(s.d_ones.data(), D.C_max, 0.f);  // (unused: keeps it finite)
    be.short_conv_backward(dxp, M.conv > 0 ? gconv : s.d_ones.data(), carried ? dstate_in_c : nullptr, dy_c,
                           carried ? dstate_out_c : nullptr, xp.data(), conv_weight(M, cw, a.ones, be),
                           carried ? state_in_c : nullptr, ConvShape{q, B, int(C), D.W}, true);
  };
  conv_backward(s.d_xq.data(), g.q_conv, w.q_conv, d_in.cq, s.d_cq.data(), d_out.cq, a.xq, in.cq, HK);
  conv_backward(s.d_xk.data(), g.k_conv, w.k_conv, d_in.ck, s.d_ck.data(), d_out.ck, a.xk, in.ck, HK);
  conv_backward(s.d_xv.data(), g.v_conv, w.v_conv, d_in.cv, s.d_v.data(), d_out.cv, a.xv, in.cv, HV);
  projection_backward(g.q_w, w.q_w, s.d_xq.data(), HK);
  projection_backward(g.k_w, w.k_w, s.d_xk.data(), HK);
  projection_backward(g.v_w, w.v_w, s.d_xv.data(), HV);
}

void delta_decode_row(const LayerStep& st, DeltaActivations& a, int row, const float* x, float* y,
                      DecodeScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const DeltaWeights& w = M.W.layers[size_t(st.l)].delta;
  const Dims D = dims(M);
  const int B = st.B;
  const int64_t F = int64_t(B) * delta_state_floats_per_sample(M);  // one layer's state
  if (a.dec_row != row) {
    // The state after rows [0, row): the rule over the segment's saved rows from the entering
    // state, and the last W - 1 input rows of [entering rows; the segment's projections].
    const StateView in = state_view(M, st.mixer_in, st.l, B);
    const StateView out = state_view(M, a.dec[0].sized(be, F), 0, B);
    const int64_t S_floats = int64_t(B) * D.H * D.Dk * D.Dv;
    if (row == 0) {
      be.copy_device_to_device(out.S, in.S, fbytes(S_floats));
    } else {
      const DeltaShape rs = rule_shape(M, row, B);
      be.delta_rule_forward(s.delta.o.sized(be, int64_t(row) * B * D.HV), out.S, nullptr,
                            rule_work(be, s.delta.rule_work, rs), a.qn.data(),
                            a.kn.data(), a.v.data(), a.beta.data(), gated(M) ? a.g.data() : nullptr,
                            in.S, rs, rule_scale(M));
    }
    auto window = [&](float* dst, const float* entering, const DeviceArray<float>& xp, int64_t C) {
      const int R = D.carried;
      const int64_t rowf = int64_t(B) * C;
      const int from_entering = std::max(0, R - row);  // rows still from the entering state
      if (from_entering > 0)
        be.copy_device_to_device(dst, entering + (R - from_entering) * rowf, fbytes(from_entering * rowf));
      const int from_segment = R - from_entering;
      if (from_segment > 0)
        be.copy_device_to_device(dst + from_entering * rowf, xp.data() + (row - from_segment) * rowf,
                                 fbytes(from_segment * rowf));
    };
    if (D.carried > 0) {
      window(out.cq, in.cq, a.xq, D.HK);
      window(out.ck, in.ck, a.xk, D.HK);
      window(out.cv, in.cv, a.xv, D.HV);
    }
  }
  // The row itself, from dec[0] into dec[1]; then they swap.
  DeltaActivations& r = s.delta;
  forward_rows(be, M, w, r, x, 1, B, state_view(M, a.dec[0].data(), 0, B),
               state_view(M, a.dec[1].sized(be, F), 0, B), false);
  output_norm(be, M, w, r, x, B);
  be.matmul(y, r.on.data(), w.o_w, B, M.d, int(D.HV), false, true);
  std::swap(a.dec[0], a.dec[1]);
  a.dec_row = row + 1;
}

void delta_size_backward(Backend& be, const Model& M, const SegmentPlan& plan, int B,
                         BackwardScratch& s) {
  if (!traits_of(M.kind).has_mixer_state()) return;
  const Dims D = dims(M);
  const int64_t rows = int64_t(plan.q) * B;
  for (DeviceArray<float>* a : {&s.d_on, &s.d_o, &s.d_v, &s.d_xv}) a->sized(be, rows * D.HV);
  if (gated(M)) s.d_gate.sized(be, rows * D.HV);
  for (DeviceArray<float>* a : {&s.d_q, &s.d_k, &s.d_cq, &s.d_ck, &s.d_xq, &s.d_xk}) a->sized(be, rows * D.HK);
  for (DeviceArray<float>* a : {&s.d_beta, &s.d_b}) a->sized(be, rows * D.H);
  if (gated(M)) s.d_g.sized(be, rows * D.H), s.d_a.sized(be, rows * D.H);
  const DeltaShape rs = rule_shape(M, plan.q, B);
  s.d_S_drop.sized(be, rs.heads() * rs.state());
  s.delta_work.sized(be, rs.heads() * rs.work_per_head());
  if (M.conv == 0) s.d_ones.sized(be, D.C_max);
}

}  // namespace rmt
