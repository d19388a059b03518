#pragma once
// The CUDA backend's relative attention (Backend::rel_attention_forward / _backward of
// lib/core/backend.h), written as drivers of lib/cuda/exec.h: passes of items, each item owning
// what it writes, every sum a loop in a fixed order (no atomics), temporaries in ex.scratch.
// The arithmetic is that of the CPU backend (lib/core/cpu_backend.cpp); tests/
// test_cuda_attention_host.cpp runs these drivers on the host and compares them with it.
//
// Forward, per (b, h), with Q = the query rows [q_begin, q_stop), K, V, R of that head:
//   F1  item (b, h, i): the score row over klen (AC + shifted BD, scaled, masked), softmax with
//       max subtraction, written to prob row i (the item's own row, used as its work space).
//   F2  item (i, b, h, d): out[i, b, h*Dh + d] = sum_j prob[b, h, i, j] V[j, d].
// Backward (n = q_stop - q_begin rows; n2 = n, plus row q_stop when it exists, since the shift's
// wrap-around makes row i read BD row i+1):
//   B1  item (b, h, i): dP row = dO_i V^T, dS row = scale P (dP - dP.P)      -> scratch 0
//   B2  item (b, h, i', c): dBD[i', c], the shift's adjoint as a gather (it is injective: each
//       entry of the unshifted matrix comes from at most one entry of dS)   -> scratch 3
//   B3  item (b, h, i', d): dBD R (rows n2) -> scratch 2 and dS K (rows n) -> scratch 1
//   B4  item (t, b, column) for every element of dqkv: q block dS K + dBD R (0 on cached rows
//       and rows outside the range), k block dS^T (Q+u), v block P^T dO
//   B5  item (c, h*Dh + d): dr += sum over b, then rows i', of dBD (Q+v)
//   B6  item (u or v, h*Dh + d): du += sum over b of (sum over rows of dS K); dv the same of dBD R
//
// What a GPU session should optimize, measured on the device (none of it can run here):
//   * the products as cuBLAS strided-batched GEMMs over (b, h) (AC = (Q+u) K^T, BD = (Q+v) R^T,
//     O = P V, dP = dO V^T, dS K, dBD R, dS^T (Q+u), P^T dO, dBD^T (Q+v)), with the shift, mask
//     and softmax as one fused elementwise/row kernel between them;
//   * or one fused kernel per (b, h, block of query rows) with K, V, R tiles in shared memory
//     (klen <= a few hundred here: a whole head's K, V and R fit), the softmax in registers;
//   * B1's rows through warp-wide reductions (a fixed shuffle tree stays deterministic);
//   * B5/B6 as a two-level fixed-order reduction when B * n2 is large.
// Any change must keep the fixed summation order per element (determinism) and the tolerance of
// the host test against the CPU backend.
#include <cstddef>
#include <cstdint>
#include <math.h>

#include "lib/core/backend.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

namespace attention_detail {

// sum over d < n of (a[d] + bias[d]) * b[d], in order. (q + u) and (q + v) are rounded to float
// before the product, as the CPU backend's Q+u and Q+v matrices are.
RMT_HOST_DEVICE inline float biased_dot(const float* a, const float* bias, const float* b, int n) {
  float s = 0.f;
  for (int d = 0; d < n; ++d) s += (a[d] + bias[d]) * b[d];
  return s;
}

// The largest finite float: the start of a running maximum over scores that are finite.
constexpr float kLowest = -3.402823466e+38f;

}  // namespace attention_detail

// Backend::rel_attention_forward: out [qlen, B, H*Dh] rows [q_begin, q_stop) and prob
// [B, H, qlen, klen] rows [q_begin, q_stop); nothing else is written.
template <class Exec>
void rel_attention_forward(Exec& ex, float* out, float* prob, const float* qkv, const float* r,
                           const float* u, const float* v, const uint8_t* mask,
                           const AttentionShape& s, float scale) {
  const int B = s.B, H = s.H, Dh = s.Dh, qlen = s.qlen, klen = s.klen, mlen = s.mlen();
  const int HD = H * Dh, row3 = 3 * HD, i0 = s.q_begin, n = s.q_stop() - s.q_begin;
  if (n <= 0) return;

  // F1: one score row per (b, h, i), softmax in place in prob.
  ex.for_each((int64_t)B * H * n, [=] RMT_HOST_DEVICE(int64_t it) {
    using namespace attention_detail;
    const int i = i0 + (int)(it % n);
    const int64_t bh = it / n;
    const int h = (int)(bh % H), b = (int)(bh / H);
    const float* q = qkv + ((int64_t)(mlen + i) * B + b) * row3 + h * Dh;  // query of row i
    // Row i+1's query: read only where the shift wraps (j > i+mlen+1, so i+1 < qlen).
    const float* q_next = i + 1 < qlen ? q + (int64_t)B * row3 : q;
    const float* uh = u + h * Dh;
    const float* vh = v + h * Dh;
    const float* rh = r + h * Dh;
    const uint8_t* m = mask + (int64_t)i * klen;
    float* p = prob + (bh * qlen + i) * klen;
    const int jd = i + mlen;  // last key of the unwrapped part (< klen since i < qlen)
    float mx = kLowest;
    for (int j = 0; j < klen; ++j) {
      if (m[j]) continue;
      const float* k = qkv + ((int64_t)j * B + b) * row3 + HD + h * Dh;
      const float ac = biased_dot(q, uh, k, Dh);
      float bd = 0.f;  // j == jd + 1: the padded zero column
      if (j <= jd)
        bd = biased_dot(q, vh, rh + (int64_t)(j + qlen - 1 - i) * HD, Dh);
      else if (j > jd + 1)
        bd = biased_dot(q_next, vh, rh + (int64_t)(j - jd - 2) * HD, Dh);
      const float x = (ac + bd) * scale;
      p[j] = x;
      mx = x > mx ? x : mx;
    }
    float sum = 0.f;
    for (int j = 0; j < klen; ++j) {
      const float e = m[j] ? 0.f : expf(p[j] - mx);
      p[j] = e;
      sum += e;
    }
    const float inv = 1.f / sum;
    for (int j = 0; j < klen; ++j) p[j] *= inv;
  });

  // F2: out[i, b, h*Dh + d] = P[b, h, i, :] . V[:, b, h*Dh + d]; items in out's own order.
  ex.for_each((int64_t)n * B * HD, [=] RMT_HOST_DEVICE(int64_t it) {
    const int hd = (int)(it % HD);
    const int64_t ib = it / HD;
    const int b = (int)(ib % B), i = i0 + (int)(ib / B);
    const int h = hd / Dh;
    const float* p = prob + (((int64_t)b * H + h) * qlen + i) * klen;
    const float* vcol = qkv + (int64_t)b * row3 + 2 * HD + hd;  // V[0, b, hd]
    const int64_t vstride = (int64_t)B * row3;
    float o = 0.f;
    for (int j = 0; j < klen; ++j) o += p[j] * vcol[j * vstride];
    out[(int64_t)i0 * B * HD + it] = o;
  });
}

// Backend::rel_attention_backward: dqkv [klen, B, 3*H*Dh] overwritten (every row), dr, du, dv
// accumulated. Reads dout and prob only in rows [q_begin, q_stop).
template <class Exec>
void rel_attention_backward(Exec& ex, float* dqkv, float* dr, float* du, float* dv,
                            const float* dout, const float* prob, const float* qkv,
                            const float* r, const float* u, const float* v,
                            const AttentionShape& s, float scale) {
  const int B = s.B, H = s.H, Dh = s.Dh, qlen = s.qlen, klen = s.klen, mlen = s.mlen();
  const int HD = H * Dh, row3 = 3 * HD, i0 = s.q_begin, i1 = s.q_stop();
  const int n = i1 > i0 ? i1 - i0 : 0;
  const int n2 = n > 0 ? (i1 < qlen ? i1 + 1 : qlen) - i0 : 0;  // dBD rows [i0, i0 + n2)
  const int64_t BH = (int64_t)B * H;
  // [B, H, n, klen] dS; [B, H, n, Dh] dS K; [B, H, n2, Dh] dBD R; [B, H, n2, klen] dBD
  float* dS = (float*)ex.scratch(0, sizeof(float) * (size_t)(BH * n * klen));
  float* dSK = (float*)ex.scratch(1, sizeof(float) * (size_t)(BH * n * Dh));
  float* dBDR = (float*)ex.scratch(2, sizeof(float) * (size_t)(BH * n2 * Dh));
  float* dBD = (float*)ex.scratch(3, sizeof(float) * (size_t)(BH * n2 * klen));

  // B1: dS rows. dP_j = dO_i . V_j, then dS_j = scale P_j (dP_j - sum_j' dP_j' P_j').
  ex.for_each(BH * n, [=] RMT_HOST_DEVICE(int64_t it) {
    const int i = i0 + (int)(it % n);
    const int64_t bh = it / n;
    const int h = (int)(bh % H), b = (int)(bh / H);
    const float* dO = dout + ((int64_t)i * B + b) * HD + h * Dh;
    const float* p = prob + (bh * qlen + i) * klen;
    float* ds = dS + it * klen;
    for (int j = 0; j < klen; ++j) {
      const float* vj = qkv + ((int64_t)j * B + b) * row3 + 2 * HD + h * Dh;
      float dp = 0.f;
      for (int d = 0; d < Dh; ++d) dp += dO[d] * vj[d];
      ds[j] = dp;
    }
    float dot = 0.f;
    for (int j = 0; j < klen; ++j) dot += ds[j] * p[j];
    for (int j = 0; j < klen; ++j) ds[j] = scale * p[j] * (ds[j] - dot);
  });

  // B2: dBD = shift^T(dS), gathered. Entry (i', c) of the unshifted matrix is read by row i' at
  // key j = c - (qlen-1-i') (when j >= 0) and by row i'-1 at key j = c + i' + mlen + 1 (its
  // wrap-around, when j < klen); the two ranges of c are disjoint, so at most one applies.
  ex.for_each(BH * n2 * klen, [=] RMT_HOST_DEVICE(int64_t it) {
    const int c = (int)(it % klen);
    const int64_t row = it / klen;  // (b, h, i' - i0)
    const int ii = (int)(row % n2);
    const int64_t bh = row / n2;
    const int ip = i0 + ii;
    float g = 0.f;
    if (ii < n) {
      const int j = c - (qlen - 1 - ip);
      if (j >= 0) g = dS[(bh * n + ii) * klen + j];
    }
    if (ii >= 1) {
      const int j = c + ip + mlen + 1;
      if (j < klen) g = dS[(bh * n + ii - 1) * klen + j];
    }
    dBD[it] = g;
  });

  // B3: dBD R for rows [0, n2) and dS K for rows [0, n), per (b, h, row, d).
  ex.for_each(BH * n2 * Dh, [=] RMT_HOST_DEVICE(int64_t it) {
    const int d = (int)(it % Dh);
    const int64_t row = it / Dh;
    const int ii = (int)(row % n2);
    const int64_t bh = row / n2;
    const int h = (int)(bh % H), b = (int)(bh / H);
    const float* g = dBD + row * klen;
    const float* rcol = r + h * Dh + d;
    float a = 0.f;
    for (int c = 0; c < klen; ++c) a += g[c] * rcol[(int64_t)c * HD];
    dBDR[it] = a;
    if (ii < n) {
      const float* ds = dS + (bh * n + ii) * klen;
      const float* kcol = qkv + (int64_t)b * row3 + HD + h * Dh + d;  // K[0, b, h, d]
      const int64_t kstride = (int64_t)B * row3;
      float sk = 0.f;
      for (int j = 0; j < klen; ++j) sk += ds[j] * kcol[j * kstride];
      dSK[(bh * n + ii) * Dh + d] = sk;
    }
  });

  // B4: every element of dqkv, items in its own order (t, b, column).
  ex.for_each((int64_t)klen * B * row3, [=] RMT_HOST_DEVICE(int64_t it) {
    const int col = (int)(it % row3);
    const int64_t tb = it / row3;
    const int b = (int)(tb % B), t = (int)(tb / B);
    const int blk = col / HD, hd = col % HD, h = hd / Dh, d = hd % Dh;
    const int64_t bh = (int64_t)b * H + h;
    float g = 0.f;
    if (blk == 0) {  // query: only rows [i0, i0 + n2) of the current rows carry a gradient
      const int ii = t - mlen - i0;
      if (t >= mlen && ii >= 0 && ii < n2) {
        const float pos = dBDR[(bh * n2 + ii) * Dh + d];
        g = ii < n ? dSK[(bh * n + ii) * Dh + d] + pos : pos;
      }
    } else if (blk == 1) {  // key: sum over query rows of dS[i, t] (q_i + u)
      const float* ds = dS + bh * n * klen + t;
      const float* qcol = qkv + ((int64_t)(mlen + i0) * B + b) * row3 + hd;  // Q[i0, b, hd]
      const int64_t qstride = (int64_t)B * row3;
      const float ud = u[hd];
      for (int ii = 0; ii < n; ++ii) g += ds[(int64_t)ii * klen] * (qcol[ii * qstride] + ud);
    } else {  // value: sum over query rows of P[i, t] dO[i]
      const float* p = prob + (bh * qlen + i0) * klen + t;
      const float* docol = dout + ((int64_t)i0 * B + b) * HD + hd;  // dO[i0, b, hd]
      const int64_t dstride = (int64_t)B * HD;
      for (int ii = 0; ii < n; ++ii) g += p[(int64_t)ii * klen] * docol[ii * dstride];
    }
    dqkv[it] = g;
  });

  // B5: dr[c, h*Dh + d] += sum over b, then rows i', of dBD[b, h, i', c] (q_i' + v)[d].
  ex.for_each((int64_t)klen * HD, [=] RMT_HOST_DEVICE(int64_t it) {
    const int hd = (int)(it % HD), c = (int)(it / HD);
    const int h = hd / Dh;
    const float vd = v[hd];
    const int64_t qstride = (int64_t)B * row3;
    float a = 0.f;
    for (int b = 0; b < B; ++b) {
      const float* g = dBD + ((int64_t)b * H + h) * n2 * klen + c;
      const float* qcol = qkv + ((int64_t)(mlen + i0) * B + b) * row3 + hd;  // Q[i0, b, hd]
      for (int ii = 0; ii < n2; ++ii) a += g[(int64_t)ii * klen] * (qcol[ii * qstride] + vd);
    }
    dr[it] += a;
  });

  // B6: du[hd] += sum over b of (sum over rows of dS K); dv[hd] the same of dBD R.
  ex.for_each((int64_t)2 * HD, [=] RMT_HOST_DEVICE(int64_t it) {
    const bool is_u = it < HD;
    const int hd = (int)(is_u ? it : it - HD);
    const int h = hd / Dh, d = hd % Dh;
    const int rows = is_u ? n : n2;
    const float* x = is_u ? dSK : dBDR;
    float total = 0.f;
    for (int b = 0; b < B; ++b) {
      const float* xb = x + ((int64_t)b * H + h) * rows * Dh + d;
      float part = 0.f;
      for (int ii = 0; ii < rows; ++ii) part += xb[(int64_t)ii * Dh];
      total += part;
    }
    (is_u ? du : dv)[hd] += total;
  });
}

}  // namespace rmt::cuda
