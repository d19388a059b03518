// ARMT's associative memory around each layer (lib/core/assoc_memory.h, docs/armt.md, the
// authors' AssociativeLayerWrapper): read before the layer at every row, write after it from the
// write block's output rows; and their backwards.
#include "lib/core/assoc_memory.h"

#include "lib/core/error.h"

namespace rmt {

namespace {

// The authors' 1e-5 in every denominator (language_modeling.py:75, 103, 106).
constexpr float kAssocEps = 1e-5f;

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

bool has_assoc(const Model& M) { return traits_of(M.kind).has_assoc; }

}  // namespace

void assoc_layer_params(const Model& M, const std::string& prefix, const AddParam& add) {
  if (!has_assoc(M)) return;
  add(prefix + "W_mq.weight", {M.d_mem, M.d});
  add(prefix + "W_mk.weight", {M.d_mem, M.d});
  add(prefix + "W_mv.weight", {M.d, M.d});
  add(prefix + "W_mb.weight", {1, M.d});
  add(prefix + "W_mb.bias", {1});
}

void assoc_bind_layer(const Model& M, const std::string& prefix, const FindParam& at,
                      AssocWeights& w) {
  if (!has_assoc(M)) return;
  w = {at(prefix + "W_mq.weight"), at(prefix + "W_mk.weight"), at(prefix + "W_mv.weight"),
       at(prefix + "W_mb.weight"), at(prefix + "W_mb.bias")};
}

int64_t assoc_state_floats(const Model& M, int B) {
  return has_assoc(M) ? int64_t(M.L) * B * M.assoc_floats() : 0;
}

void assoc_check_start(const Model& M, const RecurrentState* start) {
  if (start && has_assoc(M))
    fail("forward: an armt model cannot start from a carried state yet (its A and z are not carried "
         "between forwards; docs/armt.md)");
}

void assoc_begin_segment(Backend& be, const Model& M, SegmentActivations& seg,
                         const RecurrentState& state, RecurrentState& next) {
  const bool assoc = has_assoc(M);
  seg.assoc_in = assoc && state.assoc_written ? state.assoc.data() : nullptr;
  seg.assoc_read = seg.assoc_in != nullptr;
  seg.assoc_write = assoc && seg.plan.memory_out;
  if (seg.assoc_write) next.assoc.sized(be, assoc_state_floats(M, seg.B));
}

const float* assoc_layer_read(const LayerStep& st, const SegmentActivations& seg, AssocActivations& a,
                        const float* x) {
  if (!seg.assoc_read) return x;
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = seg.B, q = seg.plan.q, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(q) * B;
  const float* A = seg.assoc_in + int64_t(st.l) * B * M.assoc_floats();
  const float* z = A + int64_t(B) * Dk * d;
  // q = phi(W_mq x); x_in = q A / (q.z + eps) + x   (language_modeling.py:69-76, 82-86)
  float* rq = a.rq.sized(be, rows * dm);
  be.matmul(rq, x, w.assoc.mq_w, int(rows), dm, d, false, true);
  float* rphi = a.rphi.sized(be, rows * Dk);
  be.dpfp_forward(rphi, rq, rows, dm);
  float* rout = a.rout.sized(be, rows * d);
  be.assoc_read_forward(rout, a.rden.sized(be, rows), rphi, A, z, q, B, Dk, d, kAssocEps);
  float* x_in = a.x_in.sized(be, rows * d);
  be.copy_device_to_device(x_in, rout, fbytes(rows * d));
  be.add_inplace(x_in, x, rows * d);
  return x_in;
}

void assoc_layer_write(const LayerStep& st, const SegmentActivations& seg, AssocActivations& a,
                 const float* h2, RecurrentState& next) {
  if (!seg.assoc_write) return;
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = seg.B, m = M.num_mem, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(m) * B;
  const float* mrows = h2 + int64_t(seg.plan.mem_out_row) * B * d;  // the write block's output
  // k = phi(W_mk m), v = W_mv m, beta = sigmoid(W_mb m + b)   (language_modeling.py:99-100, 122)
  float* wk = a.wk.sized(be, rows * dm);
  be.matmul(wk, mrows, w.assoc.mk_w, int(rows), dm, d, false, true);
  float* wphi = a.wphi.sized(be, rows * Dk);
  be.dpfp_forward(wphi, wk, rows, dm);
  float* wv = a.wv.sized(be, rows * d);
  be.matmul(wv, mrows, w.assoc.mv_w, int(rows), d, d, false, true);
  float* wb = a.wb.sized(be, rows);
  be.matmul(wb, mrows, w.assoc.mb_w, int(rows), 1, d, false, true);
  be.add_bias(wb, w.assoc.mb_b, int(rows), 1);
  float* A_out = next.assoc.data() + int64_t(st.l) * B * M.assoc_floats();
  float* z_out = A_out + int64_t(B) * Dk * d;
  if (!seg.assoc_read) {  // the first write: A = 0, z = 0, vbar = 0, gamma = 1 (lines 110-112)
    be.assoc_write_forward(A_out, z_out, nullptr, nullptr, wphi, wv, nullptr, nullptr, wb, m, B, Dk,
                           d, kAssocEps);
    return;
  }
  // vbar = k A / (k.z + eps): what the memory holds for the keys already (lines 101-104)
  const float* A = seg.assoc_in + int64_t(st.l) * B * M.assoc_floats();
  const float* z = A + int64_t(B) * Dk * d;
  float* wbar = a.wbar.sized(be, rows * d);
  float* wden = a.wden.sized(be, rows);
  be.assoc_read_forward(wbar, wden, wphi, A, z, m, B, Dk, d, kAssocEps);
  be.assoc_write_forward(A_out, z_out, A, z, wphi, wv, wbar, wden, wb, m, B, Dk, d, kAssocEps);
}

void assoc_backward_begin(Backend& be, const Model& M, int B, const float* dmem_out,
                          float* dmem_in) {
  if (!has_assoc(M) || !dmem_in) return;
  const int64_t n = assoc_state_floats(M, B);
  if (dmem_out) be.copy_device_to_device(dmem_in, dmem_out, fbytes(n));
  else be.fill(dmem_in, n, 0.f);
}

void assoc_layer_write_backward(const LayerStep& st, const SegmentActivations& seg,
                          const LayerActivations& act, float* dh, const float* dmem_out,
                          float* dmem_in, BackwardScratch& s) {
  if (!dmem_out || !seg.assoc_write) return;
  Backend& be = st.be;
  const Model& M = st.M;
  const int l = st.l;
  const LayerWeights& w = M.W.layers[size_t(l)];
  const LayerWeights& g = M.G.layers[size_t(l)];
  const AssocActivations& a = act.assoc;
  const int B = seg.B, m = M.num_mem, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(m) * B, F = M.assoc_floats();
  const int64_t mrow0 = int64_t(seg.plan.mem_out_row) * B * d;  // the write block's first row
  float* dmrows = dh + mrow0;
  const float* dA_out = dmem_out + int64_t(l) * B * F;
  const float* dz_out = dA_out + int64_t(B) * Dk * d;
  const float* mrows = act.h2.data() + mrow0;
  float* dphi = s.dphi.data();
  float* dv = s.dwv.data();
  float* db = s.dwb.data();
  const bool corrected = seg.assoc_read;
  be.assoc_write_backward(dphi, dv, db, dA_out, dz_out, a.wphi.data(), a.wv.data(),
                          corrected ? a.wbar.data() : nullptr, corrected ? a.wden.data() : nullptr,
                          a.wb.data(), m, B, Dk, d, kAssocEps);
  if (corrected) {
    // d vbar = -d v, through vbar's read of the entering A and z (into dphi, dmem_in)
    float* dbar = s.dwbar.data();
    be.copy_device_to_device(dbar, dv, fbytes(rows * d));
    be.scale(dbar, rows * d, -1.f);
    float* dA_in = dmem_in ? dmem_in + int64_t(l) * B * F : s.dassoc_drop.data();
    if (!dmem_in) be.fill(dA_in, int64_t(B) * F, 0.f);
    const float* A = seg.assoc_in + int64_t(l) * B * F;
    be.assoc_read_backward(dphi, dA_in, dA_in + int64_t(B) * Dk * d, dbar, a.wbar.data(),
                           a.wden.data(), a.wphi.data(), A, A + int64_t(B) * Dk * d, m, B, Dk, d);
  }
  // the projections of the memory rows: k (through DPFP), v and beta's logit
  float* dk = s.dproj.data();
  be.dpfp_backward(dk, dphi, a.wk.data(), rows, dm);
  be.matmul(g.assoc.mk_w, dk, mrows, dm, d, int(rows), true, false, 1.f, 1.f);
  be.matmul(dmrows, dk, w.assoc.mk_w, int(rows), d, dm, false, false, 1.f, 1.f);
  be.matmul(g.assoc.mv_w, dv, mrows, d, d, int(rows), true, false, 1.f, 1.f);
  be.matmul(dmrows, dv, w.assoc.mv_w, int(rows), d, d, false, false, 1.f, 1.f);
  be.bias_backward(g.assoc.mb_b, db, int(rows), 1);
  be.matmul(g.assoc.mb_w, db, mrows, 1, d, int(rows), true, false, 1.f, 1.f);
  be.matmul(dmrows, db, w.assoc.mb_w, int(rows), d, 1, false, false, 1.f, 1.f);
}

void assoc_layer_read_backward(const LayerStep& st, const SegmentActivations& seg,
                         const AssocActivations& a, float* dx, const float* x, float* dmem_in,
                         BackwardScratch& s) {
  if (!seg.assoc_read) return;
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const LayerWeights& g = M.G.layers[size_t(st.l)];
  const int B = seg.B, q = seg.plan.q, d = M.d, dm = M.d_mem, Dk = M.d_key;
  const int64_t rows = int64_t(q) * B, F = M.assoc_floats();
  // x_in = read + x: d(read) = d(x_in), and d(x) = d(x_in) + the read's path through W_mq.
  float* dphi = s.dphi.data();
  be.fill(dphi, rows * Dk, 0.f);
  float* dA_in = dmem_in ? dmem_in + int64_t(st.l) * B * F : s.dassoc_drop.data();
  if (!dmem_in) be.fill(dA_in, int64_t(B) * F, 0.f);
  const float* A = seg.assoc_in + int64_t(st.l) * B * F;
  be.assoc_read_backward(dphi, dA_in, dA_in + int64_t(B) * Dk * d, dx, a.rout.data(),
                         a.rden.data(), a.rphi.data(), A, A + int64_t(B) * Dk * d, q, B, Dk, d);
  float* dq = s.dproj.data();
  be.dpfp_backward(dq, dphi, a.rq.data(), rows, dm);
  be.matmul(g.assoc.mq_w, dq, x, dm, d, int(rows), true, false, 1.f, 1.f);
  be.matmul(dx, dq, w.assoc.mq_w, int(rows), d, dm, false, false, 1.f, 1.f);
}

void assoc_decode_read(const LayerStep& st, const SegmentActivations& seg, float* x,
                       DecodeScratch& s) {
  if (!seg.assoc_read) return;
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = seg.B, d = M.d;
  const float* A = seg.assoc_in + int64_t(st.l) * B * M.assoc_floats();
  // as assoc_read, for one row: x + phi(W_mq x) A / (phi(W_mq x).z + eps)
  be.matmul(s.q.data(), x, w.assoc.mq_w, B, M.d_mem, d, false, true);
  be.dpfp_forward(s.phi.data(), s.q.data(), B, M.d_mem);
  be.assoc_read_forward(s.read.data(), s.den.data(), s.phi.data(), A, A + int64_t(B) * M.d_key * d,
                        1, B, M.d_key, d, kAssocEps);
  be.add_inplace(s.read.data(), x, int64_t(B) * d);
  be.copy_device_to_device(x, s.read.data(), fbytes(int64_t(B) * d));
}

void assoc_size_backward(Backend& be, const Model& M, const SegmentPlan& plan, int B,
                         BackwardScratch& s) {
  if (!has_assoc(M)) return;
  const int64_t rows = int64_t(plan.q) * B, mrows = int64_t(M.num_mem) * B;
  s.dassoc_drop.sized(be, int64_t(B) * M.assoc_floats());
  s.dphi.sized(be, rows * M.d_key);
  s.dproj.sized(be, rows * M.d_mem);
  s.dwv.sized(be, mrows * M.d);
  s.dwb.sized(be, mrows);
  s.dwbar.sized(be, mrows * M.d);
}

void assoc_size_decode(Backend& be, const Model& M, int B, DecodeScratch& s) {
  if (!has_assoc(M)) return;
  s.q.sized(be, int64_t(B) * M.d_mem);
  s.phi.sized(be, int64_t(B) * M.d_key);
  s.read.sized(be, int64_t(B) * M.d);
  s.den.sized(be, B);
}

}  // namespace rmt
