// The layer's forward and backward (lib/core/layer.h), each step of one mirrored in the other;
// shapes as lib/core/engine.cpp names them.
#include "lib/core/layer.h"

#include "lib/core/mixer.h"

namespace rmt {

const float* layer_forward(const LayerStep& st, LayerActivations& act, const float* x,
                           const RecurrentState& state, RecurrentState& next) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = st.B, d = M.d, di = M.d_inner, q = st.plan.q;
  const int64_t Bd = int64_t(B) * d;  // one position of the whole batch
  const float p = st.p;
  const uint64_t l = uint64_t(st.l);
  // The mixer's output into attn_res, its live rows (and its part of the next state).
  if (!mixer_forward(st, act, x, state, next, act.attn_res)) return nullptr;
  const int64_t o = int64_t(st.row_begin()) * B;  // first buffer row
  const int n = (st.row_end() - st.row_begin()) * B;
  // attn_res = x + dropout(mixer(x)); h1 = LayerNorm(attn_res)
  float* ares = act.attn_res.data() + o * d;
  if (p > 0)
    be.dropout_forward(ares, ares, act.keep_o.sized(be, q * Bd) + o * d, n * int64_t(d), p,
                       {st.seed, 3, l});
  float* h1 = act.h1.sized(be, q * Bd) + o * d;
  be.add_layernorm_forward(h1, act.ln1_mean.sized(be, q * B) + o, act.ln1_rstd.sized(be, q * B) + o,
                           ares, nullptr, x + o * d, w.ln1_w, w.ln1_b, n, d);
  // ff_res = h1 + dropout(W2 dropout(relu(W1 h1 + b1)) + b2); h2 = LayerNorm(ff_res)
  float* f1 = act.f1.sized(be, int64_t(q) * B * di) + o * di;
  be.matmul(f1, h1, w.ff1_w, n, di, d, false, true);
  be.add_bias_relu(f1, w.ff1_b, n, di);
  const float* f1_used = f1;
  if (p > 0) {
    float* f1d = act.f1_drop.sized(be, int64_t(q) * B * di) + o * di;
    be.dropout_forward(f1d, f1, act.keep_f1.sized(be, int64_t(q) * B * di) + o * di,
                       int64_t(n) * di, p, {st.seed, 4, l});
    f1_used = f1d;
  }
  float* fres = act.ff_res.sized(be, q * Bd) + o * d;
  be.matmul(fres, f1_used, w.ff2_w, n, d, di, false, true);
  const float* ff2_bias = w.ff2_b;  // added with the residual, unless dropout comes between
  if (p > 0) {
    be.add_bias(fres, w.ff2_b, n, d);
    be.dropout_forward(fres, fres, act.keep_f2.sized(be, q * Bd) + o * d, n * int64_t(d), p,
                       {st.seed, 5, l});
    ff2_bias = nullptr;
  }
  float* h2 = act.h2.sized(be, q * Bd);
  be.add_layernorm_forward(h2 + o * d, act.ln2_mean.sized(be, q * B) + o,
                           act.ln2_rstd.sized(be, q * B) + o, fres, ff2_bias, h1, w.ln2_w, w.ln2_b,
                           n, d);
  return h2;
}

void layer_backward(const LayerStep& st, LayerActivations& act, const float* x, float* dh,
                    const float* dstate_out, float* dstate_in, BackwardScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const LayerWeights& g = M.G.layers[size_t(st.l)];
  const int B = st.B, d = M.d, di = M.d_inner;
  const int64_t rows = int64_t(st.plan.q) * B;
  const float p = st.p;
  // Rows past the mixer: the live ones in the last layer (the others have zero gradient).
  const int64_t o = int64_t(st.row_begin()) * B, n64 = int64_t(st.row_end()) * B - o;
  const int n = int(n64);
  if (n == 0 && traits_of(M.kind).has_mixer_state()) {
    // a last layer that only passed its mixer's state on: nothing past the mixer ran
    be.fill(dh, rows * d, 0.f);
    mixer_backward(st, act, x, nullptr, dh, dstate_out, dstate_in, s);
    return;
  }
  float* dx = s.dx.data();
  float* dtmp = s.dtmp.data();
  // LayerNorm 2: dh (w.r.t. h2) -> dx (w.r.t. ff_res)
  be.layernorm_backward(dx + o * d, g.ln2_w, g.ln2_b, dh + o * d, act.ff_res.data() + o * d,
                        act.ln2_mean.data() + o, act.ln2_rstd.data() + o, w.ln2_w, n, d);
  // feed-forward: ff_res = h1 + drop(W2 drop(relu(W1 h1 + b1)) + b2)
  const float* dff2 = dx + o * d;  // d(ff output) = d(ff_res) through dropout
  if (p > 0) {
    be.dropout_backward(dtmp + o * d, dx + o * d, act.keep_f2.data() + o * d, n64 * d, p);
    dff2 = dtmp + o * d;
  }
  be.bias_backward(g.ff2_b, dff2, n, d);
  be.matmul(g.ff2_w, dff2, (p > 0 ? act.f1_drop.data() : act.f1.data()) + o * di, d, di, n, true,
            false, 1.f, 1.f);
  float* dff = s.dff.data() + o * di;
  be.matmul(dff, dff2, w.ff2_w, n, di, d, false, false);
  if (p > 0) be.dropout_backward(dff, dff, act.keep_f1.data() + o * di, n64 * di, p);
  be.relu_backward(dff, dff, act.f1.data() + o * di, n64 * di);
  be.bias_backward(g.ff1_b, dff, n, di);
  be.matmul(g.ff1_w, dff, act.h1.data() + o * d, di, d, n, true, false, 1.f, 1.f);
  be.matmul(dx + o * d, dff, w.ff1_w, n, d, di, false, false, 1.f, 1.f);  // dx = d(h1)
  // LayerNorm 1: d(h1) -> d(attn_res), attn_res = x + drop(mixer(x))
  be.layernorm_backward(dh + o * d, g.ln1_w, g.ln1_b, dx + o * d, act.attn_res.data() + o * d,
                        act.ln1_mean.data() + o, act.ln1_rstd.data() + o, w.ln1_w, n,
                        d);  // dh = d(attn_res)
  const float* dmix = dh + o * d;  // d(mixer output) through dropout
  if (p > 0) {
    be.dropout_backward(dtmp + o * d, dh + o * d, act.keep_o.data() + o * d, n64 * d, p);
    dmix = dtmp + o * d;
  }
  // d(x) = d(attn_res) (residual; zero past the live rows) + the mixer's d(x).
  if (n64 < rows) {
    be.fill(dh, o * d, 0.f);
    be.fill(dh + (o + n64) * d, (rows - o - n64) * d, 0.f);
  }
  mixer_backward(st, act, x, dmix, dh, dstate_out, dstate_in, s);
}

void layer_decode_row(const LayerStep& st, LayerActivations& act, int row, float* x,
                      DecodeScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = st.B, d = M.d, di = M.d_inner;
  float* ares = s.attn_res.data();
  float* f1 = s.f.data();
  float* stats = s.stats.data();
  mixer_decode_row(st, act, row, x, ares, s);
  be.add_layernorm_forward(x, stats, stats + B, ares, nullptr, x, w.ln1_w, w.ln1_b, B, d);  // x = h1
  be.matmul(f1, x, w.ff1_w, B, di, d, false, true);
  be.add_bias_relu(f1, w.ff1_b, B, di);
  be.matmul(ares, f1, w.ff2_w, B, d, di, false, true);
  be.add_layernorm_forward(x, stats, stats + B, ares, w.ff2_b, x, w.ln2_w, w.ln2_b, B, d);
}

}  // namespace rmt
