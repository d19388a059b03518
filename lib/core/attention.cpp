// Relative softmax attention as the layer's token mixer (lib/core/attention.h); shapes as
// lib/core/engine.cpp names them.
#include "lib/core/attention.h"

#include <cmath>

namespace rmt {

namespace {

inline size_t fbytes(int64_t n) { return size_t(n) * sizeof(float); }

// The kernels' shape of layer-step st: its last layer computes only the live query rows.
AttentionShape attention_shape(const LayerStep& st) {
  AttentionShape shape{st.B, st.M.H, st.M.Dh, st.plan.q, st.plan.klen};
  if (st.last()) shape.q_begin = st.plan.live_begin, shape.q_end = st.plan.live_end;
  return shape;
}

float attention_scale(const Model& M) { return 1.f / std::sqrt(float(M.Dh)); }

}  // namespace

void attention_shared_params(const Model& M, const AddParam& add) {
  add("r_w_bias", {M.H, M.Dh});
  add("r_r_bias", {M.H, M.Dh});
}

void attention_layer_params(const Model& M, const std::string& prefix, const AddParam& add) {
  const int64_t HD = int64_t(M.H) * M.Dh, d = M.d;
  add(prefix + "dec_attn.qkv_net.weight", {3 * HD, d});
  add(prefix + "dec_attn.o_net.weight", {d, HD});
  add(prefix + "dec_attn.layer_norm.weight", {d});
  add(prefix + "dec_attn.layer_norm.bias", {d});
  add(prefix + "dec_attn.r_net.weight", {HD, d});
}

void attention_bind(const FindParam& at, Weights& w) {
  w.u = at("r_w_bias");
  w.v = at("r_r_bias");
}

void attention_bind_layer(const std::string& prefix, const FindParam& at, LayerWeights& w) {
  w.attn = {at(prefix + "dec_attn.qkv_net.weight"), at(prefix + "dec_attn.r_net.weight"),
            at(prefix + "dec_attn.o_net.weight")};
  w.ln1_w = at(prefix + "dec_attn.layer_norm.weight");
  w.ln1_b = at(prefix + "dec_attn.layer_norm.bias");
}

bool attention_forward(const LayerStep& st, AttentionActivations& a, const float* x,
                       const float* cache, DeviceArray<float>* next_cache, DeviceArray<float>& y) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const SegmentPlan& plan = st.plan;
  const int B = st.B, d = M.d, HD = M.H * M.Dh, q = plan.q, mlen = plan.mlen, klen = plan.klen;
  const int64_t Bd = int64_t(B) * d;
  // keys and values over [cache; x]; only the current rows ask queries.
  const float* cat = x;
  if (mlen > 0) {
    float* c = a.cat.sized(be, int64_t(klen) * Bd);
    be.copy_device_to_device(c, cache, fbytes(mlen * Bd));
    be.copy_device_to_device(c + mlen * Bd, x, fbytes(q * Bd));
    cat = c;
  }
  if (next_cache) {  // Transformer-XL's _update_mems: the last next_mlen rows of [cache; x], detached
    const int n = plan.next_mlen;
    be.copy_device_to_device(next_cache->sized(be, n * Bd), cat + (klen - n) * Bd, fbytes(n * Bd));
  }
  if (st.last() && plan.live() == 0) return false;  // the next state has what it needs
  float* qkv = a.qkv.sized(be, int64_t(klen) * B * 3 * HD);
  if (mlen > 0)  // cache rows: keys and values only (columns HD..3HD)
    be.matmul_strided(qkv + HD, 3 * HD, cat, d, w.attn.qkv_w + int64_t(HD) * d, d, mlen * B, 2 * HD, d,
                      false, true);
  be.matmul(qkv + int64_t(mlen) * B * 3 * HD, x, w.attn.qkv_w, q * B, 3 * HD, d, false, true);
  float* r = a.r.sized(be, int64_t(klen) * HD);
  be.matmul(r, st.pos, w.attn.r_w, klen, HD, d, false, true);
  float* av = a.av.sized(be, q * int64_t(B) * HD);
  be.rel_attention_forward(av, a.prob.sized(be, int64_t(B) * M.H * q * klen), qkv, r, M.W.u, M.W.v,
                           st.mask, attention_shape(st), attention_scale(M));
  // y = o_net(av), the live rows
  const int64_t o = int64_t(st.row_begin()) * B;  // first buffer row
  const int n = (st.row_end() - st.row_begin()) * B;
  be.matmul(y.sized(be, q * Bd) + o * d, av + o * HD, w.attn.o_w, n, d, HD, false, true);
  return true;
}

void attention_backward(const LayerStep& st, AttentionActivations& a, const float* x,
                        const float* dy, float* dx, BackwardScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const LayerWeights& g = M.G.layers[size_t(st.l)];
  const SegmentPlan& plan = st.plan;
  const int B = st.B, d = M.d, HD = M.H * M.Dh, q = plan.q, mlen = plan.mlen, klen = plan.klen;
  const int64_t o = int64_t(st.row_begin()) * B;
  const int n = (st.row_end() - st.row_begin()) * B;
  // y = av W_o
  be.matmul(g.attn.o_w, dy, a.av.data() + o * HD, d, HD, n, true, false, 1.f, 1.f);
  float* dav = s.dav.data();  // rows past the live ones are not read
  be.matmul(dav + o * HD, dy, w.attn.o_w, n, HD, d, false, false);
  // attention core
  float* dr = s.dr.data();
  be.fill(dr, int64_t(klen) * HD, 0.f);
  float* dqkv = s.dqkv.data();
  be.rel_attention_backward(dqkv, dr, M.G.u, M.G.v, dav, a.prob.data(), a.qkv.data(), a.r.data(),
                            M.W.u, M.W.v, attention_shape(st), attention_scale(M));
  be.matmul(g.attn.r_w, dr, st.pos, HD, d, klen, true, false, 1.f, 1.f);
  // qkv weights: the current rows (q, k, v) and the cache rows (k, v only)
  const float* dqkv_cur = dqkv + int64_t(mlen) * B * 3 * HD;
  be.matmul(g.attn.qkv_w, dqkv_cur, x, 3 * HD, d, q * B, true, false, 1.f, 1.f);
  if (mlen > 0)
    be.matmul_strided(g.attn.qkv_w + int64_t(HD) * d, d, dqkv + HD, 3 * HD, a.cat.data(), d, 2 * HD, d,
                      mlen * B, true, false, 1.f, 1.f);
  // d(x) += the current rows of d(qkv) W_qkv; the cache rows are detached.
  be.matmul(dx, dqkv_cur, w.attn.qkv_w, q * B, d, 3 * HD, false, false, 1.f, 1.f);
}

void attention_decode_row(const LayerStep& st, AttentionActivations& a, int row, const float* x,
                          float* y, DecodeScratch& s) {
  Backend& be = st.be;
  const Model& M = st.M;
  const LayerWeights& w = M.W.layers[size_t(st.l)];
  const int B = st.B, d = M.d, HD = M.H * M.Dh, klen = row + 1;
  // the row's q, k, v go into the key/value rows (row `row` of every sample)
  be.matmul(a.qkv.data() + int64_t(row) * B * 3 * HD, x, w.attn.qkv_w, B, 3 * HD, d, false, true);
  // One query row over keys [0, klen), a prefix of the segment's qkv buffer; the position table
  // is the segment's, shifted so that its last row is distance 0 from the query.
  const AttentionShape shape{B, M.H, M.Dh, 1, klen};
  be.rel_attention_forward(s.av.data(), s.prob.data(), a.qkv.data(),
                           a.r.data() + int64_t(st.plan.klen - klen) * HD, M.W.u, M.W.v,
                           s.mask.data(), shape, attention_scale(M));
  be.matmul(y, s.av.data(), w.attn.o_w, B, d, HD, false, true);
}

}  // namespace rmt
