// ARMT's associative memory around each layer (docs/armt.md, the authors' AssociativeLayerWrapper):
// read before the layer at every row, write after it from the write block's output rows; and
// their backwards. Shapes as lib/core/engine.cpp names them, plus
//   dm    model.d_mem        Dk  6 dm (DPFP's width)        F  Dk*d + Dk (A_b and z_b)
// Layer l's memory in a state: A_l = assoc + l*B*F [B, Dk, d], z_l = A_l + B*Dk*d [B, Dk].
#include <cstring>

#include "lib/core/engine.h"

namespace rmt {

namespace {

// The authors' 1e-5 in every denominator (language_modeling.py:75, 103, 106).
constexpr float kAssocEps = 1e-5f;

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

}  // namespace

int64_t Engine::memory_floats(int B) const {
  const Model& M = model_;
  if (M.d_key > 0) return int64_t(M.L) * B * M.assoc_floats();
  return int64_t(B) * M.num_mem * M.d;
}

const float* Engine::assoc_read(SegmentActivations& seg, LayerActivations& act, int l,
                                const float* x) {
  if (!seg.assoc_read) return x;
  const Model& M = model_;
  const LayerWeights& w = M.W.layers[size_t(l)];
  const int B = seg.B, q = seg.plan.q, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(q) * B;
  const float* A = seg.assoc_in + int64_t(l) * B * M.assoc_floats();
  const float* z = A + int64_t(B) * Dk * d;
  // q = phi(W_mq x); x_in = q A / (q.z + eps) + x   (language_modeling.py:69-76, 82-86)
  float* rq = sized(act.rq, rows * dm);
  be_.matmul(rq, x, w.mq_w, int(rows), dm, d, false, true);
  float* rphi = sized(act.rphi, rows * Dk);
  be_.dpfp_forward(rphi, rq, rows, dm);
  float* rout = sized(act.rout, rows * d);
  be_.assoc_read_forward(rout, sized(act.rden, rows), rphi, A, z, q, B, Dk, d, kAssocEps);
  float* x_in = sized(act.x_in, rows * d);
  be_.copy_device_to_device(x_in, rout, fbytes(rows * d));
  be_.add_inplace(x_in, x, rows * d);
  return x_in;
}

void Engine::assoc_write(SegmentActivations& seg, LayerActivations& act, int l,
                         const float* mrows, float* assoc_out) {
  const Model& M = model_;
  const LayerWeights& w = M.W.layers[size_t(l)];
  const int B = seg.B, m = M.num_mem, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(m) * B;
  // k = phi(W_mk m), v = W_mv m, beta = sigmoid(W_mb m + b)   (language_modeling.py:99-100, 122)
  float* wk = sized(act.wk, rows * dm);
  be_.matmul(wk, mrows, w.mk_w, int(rows), dm, d, false, true);
  float* wphi = sized(act.wphi, rows * Dk);
  be_.dpfp_forward(wphi, wk, rows, dm);
  float* wv = sized(act.wv, rows * d);
  be_.matmul(wv, mrows, w.mv_w, int(rows), d, d, false, true);
  float* wb = sized(act.wb, rows);
  be_.matmul(wb, mrows, w.mb_w, int(rows), 1, d, false, true);
  be_.add_bias(wb, w.mb_b, int(rows), 1);
  float* A_out = assoc_out + int64_t(l) * B * M.assoc_floats();
  float* z_out = A_out + int64_t(B) * Dk * d;
  if (!seg.assoc_read) {  // the first write: A = 0, z = 0, vbar = 0, gamma = 1 (lines 110-112)
    be_.assoc_write_forward(A_out, z_out, nullptr, nullptr, wphi, wv, nullptr, nullptr, wb, m, B, Dk,
                            d, kAssocEps);
    return;
  }
  // vbar = k A / (k.z + eps): what the memory holds for the keys already (lines 101-104)
  const float* A = seg.assoc_in + int64_t(l) * B * M.assoc_floats();
  const float* z = A + int64_t(B) * Dk * d;
  float* wbar = sized(act.wbar, rows * d);
  float* wden = sized(act.wden, rows);
  be_.assoc_read_forward(wbar, wden, wphi, A, z, m, B, Dk, d, kAssocEps);
  be_.assoc_write_forward(A_out, z_out, A, z, wphi, wv, wbar, wden, wb, m, B, Dk, d, kAssocEps);
}

void Engine::assoc_write_backward(SegmentActivations& seg, LayerActivations& act, int l,
                                  float* dmrows, const float* dassoc_out, float* dassoc_in) {
  const Model& M = model_;
  const LayerWeights& w = M.W.layers[size_t(l)];
  const LayerWeights& g = M.G.layers[size_t(l)];
  const int B = seg.B, m = M.num_mem, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(m) * B, F = M.assoc_floats();
  const float* dA_out = dassoc_out + int64_t(l) * B * F;
  const float* dz_out = dA_out + int64_t(B) * Dk * d;
  const float* mrows = seg.layers[size_t(l)].h2.data() + int64_t(seg.plan.mem_out_row) * B * d;
  float* dphi = backward_.dphi.data();
  float* dv = backward_.dwv.data();
  float* db = backward_.dwb.data();
  const bool corrected = seg.assoc_read;
  be_.assoc_write_backward(dphi, dv, db, dA_out, dz_out, act.wphi.data(), act.wv.data(),
                           corrected ? act.wbar.data() : nullptr, corrected ? act.wden.data() : nullptr,
                           act.wb.data(), m, B, Dk, d, kAssocEps);
  if (corrected) {
    // d vbar = -d v, through vbar's read of the entering A and z (into dphi, dassoc_in)
    float* dbar = backward_.dwbar.data();
    be_.copy_device_to_device(dbar, dv, fbytes(rows * d));
    be_.scale(dbar, rows * d, -1.f);
    float* dA_in = dassoc_in ? dassoc_in + int64_t(l) * B * F : backward_.dassoc_drop.data();
    if (!dassoc_in) be_.fill(dA_in, int64_t(B) * F, 0.f);
    const float* A = seg.assoc_in + int64_t(l) * B * F;
    be_.assoc_read_backward(dphi, dA_in, dA_in + int64_t(B) * Dk * d, dbar, act.wbar.data(),
                            act.wden.data(), act.wphi.data(), A, A + int64_t(B) * Dk * d, m, B, Dk, d);
  }
  // the projections of the memory rows: k (through DPFP), v and beta's logit
  float* dk = backward_.dproj.data();
  be_.dpfp_backward(dk, dphi, act.wk.data(), rows, dm);
  be_.matmul(g.mk_w, dk, mrows, dm, d, int(rows), true, false, 1.f, 1.f);
  be_.matmul(dmrows, dk, w.mk_w, int(rows), d, dm, false, false, 1.f, 1.f);
  be_.matmul(g.mv_w, dv, mrows, d, d, int(rows), true, false, 1.f, 1.f);
  be_.matmul(dmrows, dv, w.mv_w, int(rows), d, d, false, false, 1.f, 1.f);
  be_.bias_backward(g.mb_b, db, int(rows), 1);
  be_.matmul(g.mb_w, db, mrows, 1, d, int(rows), true, false, 1.f, 1.f);
  be_.matmul(dmrows, db, w.mb_w, int(rows), d, 1, false, false, 1.f, 1.f);
}

void Engine::assoc_read_backward(SegmentActivations& seg, LayerActivations& act, int l, float* dx,
                                 const float* x, float* dassoc_in) {
  if (!seg.assoc_read) return;
  const Model& M = model_;
  const LayerWeights& w = M.W.layers[size_t(l)];
  const LayerWeights& g = M.G.layers[size_t(l)];
  const int B = seg.B, q = seg.plan.q, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(q) * B, F = M.assoc_floats();
  // x_in = read + x: d(read) = d(x_in), and d(x) = d(x_in) + the read's path through W_mq.
  float* dphi = backward_.dphi.data();
  be_.fill(dphi, rows * Dk, 0.f);
  float* dA_in = dassoc_in ? dassoc_in + int64_t(l) * B * F : backward_.dassoc_drop.data();
  if (!dassoc_in) be_.fill(dA_in, int64_t(B) * F, 0.f);
  const float* A = seg.assoc_in + int64_t(l) * B * F;
  be_.assoc_read_backward(dphi, dA_in, dA_in + int64_t(B) * Dk * d, dx, act.rout.data(),
                          act.rden.data(), act.rphi.data(), A, A + int64_t(B) * Dk * d, q, B, Dk, d);
  float* dq = backward_.dproj.data();
  be_.dpfp_backward(dq, dphi, act.rq.data(), rows, dm);
  be_.matmul(g.mq_w, dq, x, dm, d, int(rows), true, false, 1.f, 1.f);
  be_.matmul(dx, dq, w.mq_w, int(rows), d, dm, false, false, 1.f, 1.f);
}

}  // namespace rmt
