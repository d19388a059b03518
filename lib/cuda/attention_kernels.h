#pragma once
// The CUDA backend's relative attention (Backend::rel_attention_forward / _backward of
// lib/core/backend.h) as cuBLAS strided-batched products around one fused row kernel each way.
// Drivers of lib/cuda/exec.h: every product one ex.sgemm (batched over (b, h) or over h), every
// other pass items or blocks that own what they write, every sum a fixed tree or cuBLAS's own
// fixed order (no atomics). tests/test_cuda_attention_host.cpp runs them on the host (the
// products through the CPU's GEMM) against the CPU backend's attention (lib/core/cpu_attention.cpp).
//
// Names (per batch b, head h; rows i of the n computed query rows [i0, i0 + n), n2 = n plus the
// row after the range when there is one, since the shift's wrap-around makes row i read BD row
// i+1):
//   Qu = q + u [B*H, n, Dh], Qv = q + v [H, B*n2, Dh], K, V [B*H, klen, Dh]: packed operands
//   AC = Qu K^T  [B*H, n, klen]    content scores (written into prob's rows, then replaced)
//   BD = Qv R^T  [H, B*n2, klen]   position scores, before the shift (R = r's columns of head h)
//   P = softmax(mask((AC + shift(BD)) * scale)),  out = P V
// Forward: pack, AC, BD, rel_attention_softmax_forward (a block per row), P V   (5 launches).
// Backward: pack, dP = dO V^T, rel_attention_softmax_backward (dS and the shift's adjoint dBD, a
// block per row), dBD R, dr += dBD^T Qv, dS K, dS^T Qu, P^T dO, unpack into dqkv, du and dv as
// column sums (11 launches, 12 over more than kRowChunk rows of B*n2).
#include <cstddef>
#include <cstdint>
#include <math.h>

#include "lib/core/backend.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/reduction_kernels.h"

namespace rmt::cuda {

namespace attention_detail {

// The largest finite float: the start of a running maximum over scores that are finite.
constexpr float kLowest = -3.402823466e+38f;

// The sizes of one call, as the passes use them.
struct Dims {
  int B, H, Dh, qlen, klen, mlen, HD, row3, i0, n, n2;
  int64_t BH;
};
inline Dims dims_of(const AttentionShape& s) {
  Dims d{};
  d.B = s.B, d.H = s.H, d.Dh = s.Dh, d.qlen = s.qlen, d.klen = s.klen, d.mlen = s.mlen();
  d.HD = s.H * s.Dh, d.row3 = 3 * d.HD, d.i0 = s.q_begin;
  const int i1 = s.q_stop();
  d.n = i1 > d.i0 ? i1 - d.i0 : 0;
  d.n2 = d.n > 0 ? (i1 < d.qlen ? i1 + 1 : d.qlen) - d.i0 : 0;
  d.BH = (int64_t)s.B * s.H;
  return d;
}

// The packed operands, one scratch buffer (slot 0): Qu, Qv, K, V.
struct Packed {
  float *Qu, *Qv, *K, *V;
};

// Copies q + u, q + v (rounded to float, as the CPU's Q+u and Q+v), k and v of qkv
// [klen, B, 3*H*Dh] into head-contiguous blocks, so that every product is one strided batch.
template <class Exec>
Packed pack_operands(Exec& ex, const float* qkv, const float* u, const float* v, const Dims& g) {
  const int64_t nu = g.BH * g.n * g.Dh, nv = g.BH * g.n2 * g.Dh, nk = g.BH * g.klen * g.Dh;
  float* base = (float*)ex.scratch(0, sizeof(float) * (size_t)(nu + nv + 2 * nk));
  const Packed p{base, base + nu, base + nu + nv, base + nu + nv + nk};
  const int B = g.B, H = g.H, Dh = g.Dh, klen = g.klen, HD = g.HD, row3 = g.row3, n = g.n,
            n2 = g.n2, q0 = g.mlen + g.i0;
  ex.for_each(g.BH * klen * Dh, [=] RMT_HOST_DEVICE(int64_t it) {
    const int d = (int)(it % Dh), j = (int)((it / Dh) % klen);
    const int64_t bh = it / ((int64_t)Dh * klen);
    const int b = (int)(bh / H), h = (int)(bh % H), hd = h * Dh + d;
    const float* kv = qkv + ((int64_t)j * B + b) * row3 + hd;  // key/value row j
    p.K[it] = kv[HD];
    p.V[it] = kv[2 * HD];
    const float q = j < n2 ? qkv[((int64_t)(q0 + j) * B + b) * row3 + hd] : 0.f;  // query row i0+j
    if (j < n) p.Qu[(bh * n + j) * Dh + d] = q + u[hd];
    if (j < n2) p.Qv[(((int64_t)h * B + b) * n2 + j) * Dh + d] = q + v[hd];
  });
  return p;
}

// A strided-batched product (exec.h's Gemm) in one line.
inline Gemm batched(float* C, int ldc, int64_t sc, const float* A, int lda, int64_t sa, bool ta,
                    const float* Bm, int ldb, int64_t sb, bool tb, int M, int N, int K, int batch,
                    float beta = 0.f) {
  Gemm g{C, ldc, sc, A, lda, sa, Bm, ldb, sb, M, N, K, ta, tb};
  g.beta = beta;
  g.batch = batch;
  return g;
}

}  // namespace attention_detail

// A block per query row (b, h, i): score_j = (AC[i, j] + shift(BD)[i, j]) * scale, masked keys
// out, softmax with max subtraction (a fixed-tree max and sum) -> prob row i, which held AC.
// Each thread reads AC[j] before it writes prob[j] for the same j, so the row is done in place.
template <class Exec>
void rel_attention_softmax_forward(Exec& ex, float* prob, const float* BD, const uint8_t* mask,
                                   const attention_detail::Dims& g, float scale) {
  const int B = g.B, H = g.H, qlen = g.qlen, klen = g.klen, mlen = g.mlen, i0 = g.i0, n = g.n,
            n2 = g.n2;
  ex.for_each_block(g.BH * n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t it) {
    using attention_detail::kLowest;
    const int ii = (int)(it % n), i = i0 + ii;
    const int64_t bh = it / n;
    const int b = (int)(bh / H), h = (int)(bh % H);
    float* p = prob + (bh * qlen + i) * klen;  // AC on entry
    const float* bd = BD + (((int64_t)h * B + b) * n2 + ii) * klen;  // BD row i; row i+1 follows
    const uint8_t* m = mask + (int64_t)i * klen;
    const int jd = i + mlen;  // the last key of the unwrapped part
    // Transformer-XL's _rel_shift: row i, column j+qlen-1-i for j <= jd; 0 at j = jd+1; row i+1,
    // column j-jd-2 beyond (read only by rows that see keys after themselves: RMT's memory).
    auto score = [=](int64_t j) {
      const float s = j <= jd ? bd[j + qlen - 1 - i] : (j == jd + 1 ? 0.f : bd[klen + j - jd - 2]);
      return m[j] ? kLowest : (p[j] + s) * scale;
    };
    const float mx = blk.max(klen, score);
    auto e = [=](int64_t j) { return m[j] ? 0.f : expf(score(j) - mx); };
    const float inv = 1.f / blk.sum(klen, e);
    blk.for_each(klen, [=](int64_t j) { p[j] = e(j) * inv; });
  });
}

// A block per query row (b, h, i): dS_j = scale P_j (dP_j - sum_j' dP_j' P_j') in place of dP
// [B*H, n, klen], then the shift's adjoint into dBD [H, B*n2, klen]: each entry of dBD comes from
// exactly one entry of dS (row i' at key c-(qlen-1-i') when that is >= 0, else row i'-1 at key
// c+i'+mlen+1), so the block of row i writes row i's columns c >= qlen-1-i and row i+1's columns
// c < qlen-2-i; the first row's other columns and the row after the range get zeros.
template <class Exec>
void rel_attention_softmax_backward(Exec& ex, float* dS, float* dBD, const float* prob,
                                    const attention_detail::Dims& g, float scale) {
  const int B = g.B, H = g.H, qlen = g.qlen, klen = g.klen, mlen = g.mlen, i0 = g.i0, n = g.n,
            n2 = g.n2;
  ex.for_each_block(g.BH * n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t it) {
    const int ii = (int)(it % n), i = i0 + ii;
    const int64_t bh = it / n;
    const int b = (int)(bh / H), h = (int)(bh % H);
    const float* p = prob + (bh * qlen + i) * klen;
    float* ds = dS + it * klen;  // dP on entry
    const float dot = blk.sum(klen, [=](int64_t j) { return ds[j] * p[j]; });
    blk.for_each(klen, [=](int64_t j) { ds[j] = scale * p[j] * (ds[j] - dot); });
    float* row = dBD + (((int64_t)h * B + b) * n2 + ii) * klen;
    const int lo = qlen - 1 - i;  // row i's own columns start here
    const bool next = ii + 1 < n2, next_outside = ii + 1 == n;
    blk.for_each(klen, [=](int64_t c) {
      if (c >= lo) row[c] = ds[c - lo];
      else if (ii == 0) row[c] = 0.f;
      if (next) {
        if (c < lo - 1) row[klen + c] = ds[c + i + mlen + 2];
        else if (next_outside) row[klen + c] = 0.f;
      }
    });
  });
}

// Backend::rel_attention_forward: out [qlen, B, H*Dh] rows [q_begin, q_stop) and prob
// [B, H, qlen, klen] rows [q_begin, q_stop); nothing else is written.
template <class Exec>
void rel_attention_forward(Exec& ex, float* out, float* prob, const float* qkv, const float* r,
                           const float* u, const float* v, const uint8_t* mask,
                           const AttentionShape& s, float scale) {
  using namespace attention_detail;
  const Dims g = dims_of(s);
  if (g.n <= 0) return;
  const int Dh = g.Dh, klen = g.klen, HD = g.HD, n = g.n, n2 = g.n2, bh = (int)g.BH;
  const int64_t pq = (int64_t)g.qlen * klen;  // one (b, h) of prob
  float* prob0 = prob + (int64_t)g.i0 * klen;
  const Packed p = pack_operands(ex, qkv, u, v, g);
  // AC = Qu K^T into prob's rows; BD = Qv R^T per head (R_h: r's columns h*Dh.., row stride HD).
  ex.sgemm(batched(prob0, klen, pq, p.Qu, Dh, (int64_t)n * Dh, false, p.K, Dh, (int64_t)klen * Dh,
                   true, n, klen, Dh, bh));
  float* BD = (float*)ex.scratch(1, sizeof(float) * (size_t)(g.BH * n2 * klen));
  ex.sgemm(batched(BD, klen, (int64_t)g.B * n2 * klen, p.Qv, Dh, (int64_t)g.B * n2 * Dh, false, r,
                   HD, Dh, true, g.B * n2, klen, Dh, g.H));
  rel_attention_softmax_forward(ex, prob, BD, mask, g, scale);
  // out[i, b, h*Dh..] = P V: batch (b, h) starts at column (b*H + h)*Dh of out's row i0.
  ex.sgemm(batched(out + (int64_t)g.i0 * g.B * HD, g.B * HD, Dh, prob0, klen, pq, false, p.V, Dh,
                   (int64_t)klen * Dh, false, n, Dh, klen, bh));
}

// Backend::rel_attention_backward: dqkv [klen, B, 3*H*Dh] overwritten (every row), dr, du, dv
// accumulated. Reads dout and prob only in rows [q_begin, q_stop).
template <class Exec>
void rel_attention_backward(Exec& ex, float* dqkv, float* dr, float* du, float* dv,
                            const float* dout, const float* prob, const float* qkv,
                            const float* r, const float* u, const float* v,
                            const AttentionShape& s, float scale) {
  using namespace attention_detail;
  const Dims g = dims_of(s);
  const int B = g.B, H = g.H, Dh = g.Dh, klen = g.klen, mlen = g.mlen, HD = g.HD, row3 = g.row3,
            i0 = g.i0, n = g.n, n2 = g.n2, bh = (int)g.BH;
  if (n <= 0) {  // no query row: no gradient reaches qkv
    ex.for_each((int64_t)klen * B * row3, [=] RMT_HOST_DEVICE(int64_t it) { dqkv[it] = 0.f; });
    return;
  }
  const int64_t pq = (int64_t)g.qlen * klen, kd = (int64_t)klen * Dh;
  const float* prob0 = prob + (int64_t)i0 * klen;
  const float* dout0 = dout + (int64_t)i0 * B * HD;  // dO of (b, h): column (b*H + h)*Dh
  const Packed p = pack_operands(ex, qkv, u, v, g);
  float* dS = (float*)ex.scratch(1, sizeof(float) * (size_t)(g.BH * n * klen));
  float* dBD = (float*)ex.scratch(2, sizeof(float) * (size_t)(g.BH * n2 * klen));
  // dQc [B*H, n, Dh] = dS K; dQp [H, B*n2, Dh] = dBD R; dK, dV [B*H, klen, Dh].
  const int64_t nc = g.BH * n * Dh, np = g.BH * n2 * Dh, nk = g.BH * kd;
  float* dQc = (float*)ex.scratch(3, sizeof(float) * (size_t)(nc + np + 2 * nk));
  float *dQp = dQc + nc, *dK = dQp + np, *dV = dK + nk;

  // dP = dO V^T, then dS and dBD.
  ex.sgemm(batched(dS, klen, (int64_t)n * klen, dout0, B * HD, Dh, false, p.V, Dh, kd, true, n,
                   klen, Dh, bh));
  rel_attention_softmax_backward(ex, dS, dBD, prob, g, scale);
  // Position side, per head: dQp = dBD R_h; dr_h += dBD^T Qv (summed over b and rows by cuBLAS).
  const int64_t bn2 = (int64_t)B * n2;
  ex.sgemm(batched(dQp, Dh, bn2 * Dh, dBD, klen, bn2 * klen, false, r, HD, Dh, false, B * n2, Dh,
                   klen, H));
  ex.sgemm(batched(dr, HD, Dh, dBD, klen, bn2 * klen, true, p.Qv, Dh, bn2 * Dh, false, klen, Dh,
                   B * n2, H, 1.f));
  // Content side, per (b, h): dQc = dS K, dK = dS^T Qu, dV = P^T dO.
  ex.sgemm(batched(dQc, Dh, (int64_t)n * Dh, dS, klen, (int64_t)n * klen, false, p.K, Dh, kd,
                   false, n, Dh, klen, bh));
  ex.sgemm(batched(dK, Dh, kd, dS, klen, (int64_t)n * klen, true, p.Qu, Dh, (int64_t)n * Dh, false,
                   klen, Dh, n, bh));
  ex.sgemm(batched(dV, Dh, kd, prob0, klen, pq, true, dout0, B * HD, Dh, false, klen, Dh, n, bh));

  // Every element of dqkv (t, b, column): q block dQc + dQp on the computed rows (dQp alone on
  // the row after them, 0 elsewhere), k block dK, v block dV.
  ex.for_each((int64_t)klen * B * row3, [=] RMT_HOST_DEVICE(int64_t it) {
    const int col = (int)(it % row3);
    const int64_t tb = it / row3;
    const int b = (int)(tb % B), t = (int)(tb / B);
    const int blk = col / HD, hd = col % HD, h = hd / Dh, d = hd % Dh;
    const int64_t q = (int64_t)b * H + h;
    float x = 0.f;
    if (blk == 0) {
      const int ii = t - mlen - i0;
      if (t >= mlen && ii >= 0 && ii < n2) {
        const float pos = dQp[(((int64_t)h * B + b) * n2 + ii) * Dh + d];
        x = ii < n ? dQc[(q * n + ii) * Dh + d] + pos : pos;
      }
    } else {
      x = (blk == 1 ? dK : dV)[(q * klen + t) * Dh + d];
    }
    dqkv[it] = x;
  });

  // du[hd] += sum over b and rows of dQc; dv[hd] the same of dQp: 2*HD column sums over B*n2 rows
  // (row (b, i'): dQc has only i' < n).
  column_sums(
      ex, bn2, 2 * (int64_t)HD, 4,
      [=] RMT_HOST_DEVICE(int64_t row, int64_t c) {
        const int b = (int)(row / n2), ii = (int)(row % n2);
        const int hd = (int)(c < HD ? c : c - HD), h = hd / Dh, d = hd % Dh;
        if (c < HD) return ii < n ? dQc[(((int64_t)b * H + h) * n + ii) * Dh + d] : 0.f;
        return dQp[(((int64_t)h * B + b) * n2 + ii) * Dh + d];
      },
      [=] RMT_HOST_DEVICE(int64_t c, float total) {
        if (c < HD) du[c] += total;
        else dv[c - HD] += total;
      });
}

}  // namespace rmt::cuda
