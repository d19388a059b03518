// The CPU backend's relative attention (Backend::rel_attention_forward / backward, in the
// notation of lib/core/backend.h) and Transformer-XL's rel_shift. Per (sample, head) through the
// register-tiled small GEMMs of cpu_small_gemm.cpp; every reduction in a fixed order, so results
// are bit-identical for a fixed thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/cpu_backend.h"
#include "lib/core/cpu_kernels.h"
#include "lib/core/cpu_simd.h"

namespace rmt::cpu {
namespace {

// Below this size (multiply-adds of one GEMM over all (b, h)) threads cost more than they save.
inline bool attn_parallel(const AttentionShape& s) {
  return (int64_t)s.B * s.H * s.qlen * s.klen * s.Dh > (1 << 16);
}

// sum of x[j] * y[j], j < n; the last partial packet through zero-padded copies.
inline float packet_dot(const float* x, const float* y, int n) {
  Packet acc = ei::pset1<Packet>(0.f);
  int j = 0;
  for (; j + kPacket <= n; j += kPacket)
    acc = ei::pmadd(ei::ploadu<Packet>(x + j), ei::ploadu<Packet>(y + j), acc);
  if (j < n) {
    float xt[kPacket] = {}, yt[kPacket] = {};
    std::copy(x + j, x + n, xt);
    std::copy(y + j, y + n, yt);
    acc = ei::pmadd(ei::ploadu<Packet>(xt), ei::ploadu<Packet>(yt), acc);
  }
  return ei::predux(acc);
}


// The mask as two float rows per query row, klenP wide: blocked[j] = -inf where key j is blocked
// or past klen (else 0), added to the score; keep[j] = 0 there (else 1), multiplied into exp,
// since Eigen's exp of -inf is tiny rather than 0.
inline void float_masks(float* blocked, float* keep, const uint8_t* mask, int qlen, int klen,
                        int klenP) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j < klenP; ++j) {
      const bool off = j >= klen || mask[(int64_t)i * klen + j];
      blocked[(int64_t)i * klenP + j] = off ? -inf : 0.f;
      keep[(int64_t)i * klenP + j] = off ? 0.f : 1.f;
    }
}

// One row of attention probabilities. On entry row[0, klen) holds AC (row i); on exit
// row[0, klenP) holds softmax(scale * (AC + rel_shift(BD))) with blocked entries and the padding
// past klen exactly 0, and prob[0, klen) a copy. Whole packets throughout (klenP is a multiple).
// bd_i, bd_next: the unshifted BD rows i and i+1 (the shift of backend.h: row i for j <= i+mlen,
// 0 at j = i+mlen+1, row i+1 after; bd_next unused for the last row). blocked, keep: row i of
// float_masks.
inline void attention_probs_row(float* row, float* prob, int klenP, const float* bd_i,
                                const float* bd_next, const float* blocked, const float* keep,
                                int i, int qlen, int klen, float scale) {
  const int mlen = klen - qlen, jd = std::min(klen - 1, i + mlen);
  const float* bi = bd_i + (qlen - 1 - i);
  for (int j = 0; j <= jd; ++j) row[j] += bi[j];
  for (int j = jd + 2; j < klen; ++j) row[j] += bd_next[j - (jd + 2)];
  const Packet sc = ei::pset1<Packet>(scale);
  Packet mx = ei::pset1<Packet>(-std::numeric_limits<float>::infinity());
  for (int j = 0; j < klenP; j += kPacket) {  // scale, mask, running maximum
    const Packet x = ei::pmadd(ei::ploadu<Packet>(row + j), sc, ei::ploadu<Packet>(blocked + j));
    ei::pstoreu(row + j, x);
    mx = ei::pmax(mx, x);
  }
  const Packet shift = ei::pset1<Packet>(ei::predux_max(mx));
  Packet sum = ei::pset1<Packet>(0.f);
  for (int j = 0; j < klenP; j += kPacket) {  // exp, masked entries to 0, sum
    const Packet e = ei::pmul(ei::pexp(ei::psub(ei::ploadu<Packet>(row + j), shift)),
                              ei::ploadu<Packet>(keep + j));
    ei::pstoreu(row + j, e);
    sum = ei::padd(sum, e);
  }
  const Packet inv = ei::pset1<Packet>(1.f / ei::predux(sum));
  int j = 0;
  for (; j < klenP; j += kPacket) {
    const Packet p = ei::pmul(ei::ploadu<Packet>(row + j), inv);
    ei::pstoreu(row + j, p);
    if (j + kPacket <= klen) ei::pstoreu(prob + j, p);
  }
  for (j = klen / kPacket * kPacket; j < klen; ++j) prob[j] = row[j];
}

// out[c] = sum over rows of x[rows, cols] (row stride ld), rows added in order. Not Eigen's
// colwise().sum(): its vectorised and peeled paths sum in different orders, so the result would
// depend on the output's alignment in memory and a run would not be bit-reproducible.
inline void column_sums(float* out, const float* x, int rows, int cols, int ld) {
  std::fill(out, out + cols, 0.f);
  for (int i = 0; i < rows; ++i) {
    const float* xi = x + (int64_t)i * ld;
    for (int c = 0; c < cols; ++c) out[c] += xi[c];
  }
}

// Scratch that lives per thread and only grows (no allocation in the steady state).
struct AttnScratch {
  MatRM a, b;          // [qlen, klenP] work matrices
  MatRM t;             // [Dh, klenP]    K^T or V^T of one head
  MatRM g;             // [qlen, Dh]     dBD R of one head
  MatRM qu, qv;        // [qlen, Dh]
  MatRM o;             // [qlen, H*Dh]   one sample's attention output (or its gradient)
  MatRM x, dx;         // [klen, 3*H*Dh] one sample's q|k|v rows (and their gradient)
};

AttnScratch& attn_scratch() {
  thread_local AttnScratch s;
  return s;
}

// Rows of one sample in a time-major [rows, B, width] buffer <-> a contiguous [rows, width] copy.
inline void gather_rows(float* dst, const float* src, int rows, int B, int b, int width) {
  for (int t = 0; t < rows; ++t)
    std::memcpy(dst + (int64_t)t * width, src + ((int64_t)t * B + b) * width, sizeof(float) * width);
}
// Prefetch (into L2) the rows of sample b in a time-major [rows, B, width] buffer.
inline void prefetch_rows(const float* src, int rows, int B, int b, int width) {
  for (int t = 0; t < rows; ++t) {
    const char* p = (const char*)(src + ((int64_t)t * B + b) * width);
    for (int64_t off = 0; off < (int64_t)sizeof(float) * width; off += 64)
      __builtin_prefetch(p + off, 0, 2);
  }
}
inline void scatter_rows(float* dst, const float* src, int rows, int B, int b, int width) {
  for (int t = 0; t < rows; ++t)
    std::memcpy(dst + ((int64_t)t * B + b) * width, src + (int64_t)t * width, sizeof(float) * width);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Relative attention. Per (b, h), with Q [qlen,Dh] = q rows mlen.., K, V [klen,Dh], R [klen,Dh]:
//   AC = (Q+u) K^T, BD = shift((Q+v) R^T), P = softmax_masked(scale (AC + BD)), O = P V.

void CpuBackend::rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                                       const float* u, const float* v, const uint8_t* mask,
                                       const AttentionShape& s, float scale) {
  AttentionBuffers& buf = attention_buffers();
  const int B = s.B, H = s.H, Dh = s.Dh, qlen = s.qlen, klen = s.klen, mlen = s.mlen();
  const int HD = H * Dh, row3 = 3 * HD, i0 = s.q_begin, i1 = s.q_stop();
  // Score rows are klenP wide: whole SIMD packets (the padding columns come out 0).
  const int klenP = cpu::packet_round_up(klen);
  buf.rt.resize((size_t)H * Dh * klenP);  // R^T of every head, shared by all samples
  for (int h = 0; h < H; ++h)
    cpu::transpose_padded(buf.rt.data() + (int64_t)h * Dh * klenP, klenP, r + h * Dh, HD, klen, Dh);
  buf.mask_blocked.resize((size_t)qlen * klenP);
  buf.mask_keep.resize((size_t)qlen * klenP);
  float_masks(buf.mask_blocked.data(), buf.mask_keep.data(), mask, qlen, klen, klenP);
#pragma omp parallel for schedule(static) if (attn_parallel(s))
  for (int b = 0; b < B; ++b) {
    AttnScratch& w = attn_scratch();
    w.o.resize(qlen, HD);
    w.t.resize(Dh, klenP);
    w.x.resize(klen, row3);
    gather_rows(w.x.data(), qkv, klen, B, b, row3);  // sample b's q|k|v rows, contiguous
    if (b + 1 < B) prefetch_rows(qkv, klen, B, b + 1, row3);
    const float* x = w.x.data();
    for (int h = 0; h < H; ++h) {
      // Query rows [i0, i1); BD also for row i1 (the wrap-around of row i1-1 reads it).
      const int n = i1 - i0, n2 = std::min(i1 + 1, qlen) - i0;
      CMapM Q(x + (int64_t)(mlen + i0) * row3 + h * Dh, n2, Dh, Stride(row3));
      const float* K = x + HD + h * Dh;
      const float* Vm = x + 2 * HD + h * Dh;
      w.qu = Q.topRows(n).rowwise() + CMapRow(u + h * Dh, Dh);
      w.qv = Q.rowwise() + CMapRow(v + h * Dh, Dh);
      w.a.resize(n, klenP);
      w.b.resize(n2, klenP);
      cpu::transpose_padded(w.t.data(), klenP, K, row3, klen, Dh);  // K^T
      cpu::small_gemm(w.a.data(), klenP, w.qu.data(), Dh, 1, w.t.data(), klenP, n, klenP, Dh,
                      false);  // AC
      cpu::small_gemm(w.b.data(), klenP, w.qv.data(), Dh, 1, buf.rt.data() + (int64_t)h * Dh * klenP,
                      klenP, n2, klenP, Dh, false);  // BD, unshifted
      // Scores and probabilities in place of AC (in cache for P V), then saved to prob.
      float* P = prob + ((int64_t)b * H + h) * qlen * klen;
      for (int i = i0; i < i1; ++i) {
        float* pi = w.a.data() + (int64_t)(i - i0) * klenP;
        const float* bd_i = w.b.data() + (int64_t)(i - i0) * klenP;
        attention_probs_row(pi, P + (int64_t)i * klen, klenP, bd_i, bd_i + klenP,
                            buf.mask_blocked.data() + (int64_t)i * klenP,
                            buf.mask_keep.data() + (int64_t)i * klenP, i, qlen, klen, scale);
      }
      cpu::small_gemm(w.o.data() + (int64_t)i0 * HD + h * Dh, HD, w.a.data(), klenP, 1, Vm, row3,
                      n, Dh, klen, false);  // O = P V
    }
    scatter_rows(out + (int64_t)i0 * B * HD, w.o.data() + (int64_t)i0 * HD, i1 - i0, B, b, HD);
  }
}

// dP = dO V^T; dS = P (dP - rowsum(dP P)) scale; dBD = shift^T(dS);
// dQ = dS K + dBD R; dK = dS^T (Q+u); dV = P^T dO; dR = dBD^T (Q+v); du = colsum(dS K),
// dv = colsum(dBD R). All per sample and head except dR, which sums over samples: one GEMM per
// head over every sample's rows (no per-sample dR partials to reduce). du, dv: per-sample
// partials summed in order.
void CpuBackend::rel_attention_backward(float* dqkv, float* dr, float* du, float* dv,
                                        const float* dout, const float* prob, const float* qkv,
                                        const float* r, const float* u, const float* v,
                                        const AttentionShape& s, float scale) {
  AttentionBuffers& buf = attention_buffers();
  const int B = s.B, H = s.H, Dh = s.Dh, qlen = s.qlen, klen = s.klen, mlen = s.mlen();
  const int HD = H * Dh, row3 = 3 * HD, i0 = s.q_begin, i1 = s.q_stop(), n = i1 - i0;
  const int n2 = std::min(i1 + 1, qlen) - i0;  // dBD rows: the wrap-around reaches row i1
  const int64_t rows = (int64_t)B * n2;  // per head, the rows of dBD that can be nonzero
  const int klenP = cpu::packet_round_up(klen);  // dS rows, padded as in the forward
  buf.du_part.resize((size_t)B * HD);  // [B, H*Dh]
  buf.dv_part.resize((size_t)B * HD);
  buf.bd.resize((size_t)H * rows * klen);  // [H, B, n2, klen]
  buf.qv.resize((size_t)H * rows * Dh);    // [H, B, n2, Dh]
#pragma omp parallel for schedule(static) if (attn_parallel(s))
  for (int b = 0; b < B; ++b) {
    AttnScratch& w = attn_scratch();
    w.o.resize(qlen, HD);
    w.t.resize(Dh, klenP);
    gather_rows(w.o.data(), dout + (int64_t)i0 * B * HD, n, B, b, HD);  // dO, rows [i0, i1)
    w.x.resize(klen, row3);
    w.dx.resize(klen, row3);
    gather_rows(w.x.data(), qkv, klen, B, b, row3);  // sample b's q|k|v rows, contiguous
    if (b + 1 < B) prefetch_rows(qkv, klen, B, b + 1, row3);
    const float* base = w.x.data();
    float* dbase = w.dx.data();  // and their gradient, scattered into dqkv at the end
    for (int h = 0; h < H; ++h) {
      CMapM Q(base + (int64_t)mlen * row3 + h * Dh, qlen, Dh, Stride(row3));
      const float* K = base + HD + h * Dh;
      const float* Vm = base + 2 * HD + h * Dh;
      const float* P = prob + (((int64_t)b * H + h) * qlen + i0) * klen;  // rows [i0, i1)
      const float* dO = w.o.data() + h * Dh;
      float* dbd = buf.bd.data() + ((int64_t)h * B + b) * n2 * klen;  // dBD rows [i0, i0+n2)
      // Q+v of those rows, for dR below
      Eigen::Map<MatRM>(buf.qv.data() + ((int64_t)h * B + b) * n2 * Dh, n2, Dh) =
          Q.middleRows(i0, n2).rowwise() + CMapRow(v + h * Dh, Dh);

      w.a.resize(n, klenP);
      cpu::transpose_padded(w.t.data(), klenP, Vm, row3, klen, Dh);  // V^T
      cpu::small_gemm(w.a.data(), klenP, dO, HD, 1, w.t.data(), klenP, n, klenP, Dh, false);  // dP
      for (int i = 0; i < n; ++i) {      // dP -> dS (scaled), in place
        float* d = w.a.data() + (int64_t)i * klenP;
        const float* p = P + (int64_t)i * klen;
        const float dot = packet_dot(d, p, klen);
        for (int j = 0; j < klen; ++j) d[j] = scale * p[j] * (d[j] - dot);
      }
      cpu::rel_shift_backward_rows(dbd, w.a.data(), klenP, i0, i1, qlen, klen);  // dBD, unshifted

      // dQ = dS K (rows [i0, i1)) + dBD R (rows [i0, i0+n2)); zero elsewhere.
      MapM(dbase + h * Dh, mlen + i0, Dh, Stride(row3)).setZero();  // cached rows have no query
      MapM(dbase + (int64_t)(mlen + i1) * row3 + h * Dh, qlen - i1, Dh, Stride(row3)).setZero();
      float* dQ = dbase + (int64_t)(mlen + i0) * row3 + h * Dh;
      cpu::small_gemm(dQ, row3, w.a.data(), klenP, 1, K, row3, n, Dh, klen, false);
      column_sums(buf.du_part.data() + (int64_t)b * HD + h * Dh, dQ, n, Dh, row3);
      w.g.resize(n2, Dh);
      cpu::small_gemm(w.g.data(), Dh, dbd, klen, 1, r + h * Dh, HD, n2, Dh, klen, false);
      column_sums(buf.dv_part.data() + (int64_t)b * HD + h * Dh, w.g.data(), n2, Dh, Dh);
      MapM(dQ, n2, Dh, Stride(row3)) += w.g;

      w.qu = Q.middleRows(i0, n).rowwise() + CMapRow(u + h * Dh, Dh);
      cpu::small_gemm(dbase + HD + h * Dh, row3, w.a.data(), 1, klenP, w.qu.data(), Dh, klen, Dh,
                      n, false);  // dK = dS^T (Q+u)
      cpu::small_gemm(dbase + 2 * HD + h * Dh, row3, P, 1, klen, dO, HD, klen, Dh, n,
                      false);  // dV = P^T dO
    }
    scatter_rows(dqkv, w.dx.data(), klen, B, b, row3);
  }
  // dR += dBD^T (Q+v), per head over every sample's rows that can carry a gradient.
  for (int h = 0; h < H; ++h)
    gemm(dr + h * Dh, HD, buf.bd.data() + h * rows * klen, klen, buf.qv.data() + h * rows * Dh, Dh, klen,
         Dh, (int)rows, true, false, 1.f, 1.f);
  for (int idx = 0; idx < HD; ++idx) {  // du, dv: fixed-order sums over b
    float su = 0.f, sv = 0.f;
    for (int b = 0; b < B; ++b) {
      su += buf.du_part[(size_t)b * HD + idx];
      sv += buf.dv_part[(size_t)b * HD + idx];
    }
    du[idx] += su;
    dv[idx] += sv;
  }
}

// ---------------------------------------------------------------------------------------
// Transformer-XL's _rel_shift and its adjoint (cpu_kernels.h).

void rel_shift_forward(float* out, const float* x, int qlen, int klen) {
  const int mlen = klen - qlen;
  for (int i = 0; i < qlen; ++i) {
    float* o = out + (int64_t)i * klen;
    const float* xi = x + (int64_t)i * klen;
    // j <= i+mlen: same row, shifted left by qlen-1-i
    const int jd = std::min(klen - 1, i + mlen);
    for (int j = 0; j <= jd; ++j) o[j] = xi[j + qlen - 1 - i];
    if (i + mlen + 1 < klen) o[i + mlen + 1] = 0.f;  // the padded zero column
    // j > i+mlen+1: wraps into the start of row i+1
    for (int j = i + mlen + 2; j < klen; ++j) o[j] = xi[klen + (j - i - mlen - 2)];
  }
}

void rel_shift_backward(float* dx, const float* dout, int qlen, int klen) {
  rel_shift_backward_rows(dx, dout, klen, 0, qlen, qlen, klen);
}

void rel_shift_backward_rows(float* dx, const float* dout, int ld_dout, int i0, int i1, int qlen,
                             int klen) {
  const int mlen = klen - qlen;
  std::fill(dx, dx + (int64_t)(std::min(i1 + 1, qlen) - i0) * klen, 0.f);
  // The shift is injective, so its adjoint is a scatter with no collisions.
  for (int i = i0; i < i1; ++i) {
    const float* g = dout + (int64_t)(i - i0) * ld_dout;
    float* di = dx + (int64_t)(i - i0) * klen;
    const int jd = std::min(klen - 1, i + mlen);
    for (int j = 0; j <= jd; ++j) di[j + qlen - 1 - i] = g[j];
    for (int j = i + mlen + 2; j < klen; ++j) di[klen + (j - i - mlen - 2)] = g[j];
  }
}

}  // namespace rmt::cpu
