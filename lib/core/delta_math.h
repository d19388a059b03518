#pragma once
// The delta rule of DeltaNet and Gated DeltaNet (docs/deltanet.md), token by token, as per-head
// bodies: the CPU backend runs one per (sample, head) in an OpenMP loop (cpu_delta.cpp), the CUDA
// backend one per item of ex.for_each (lib/cuda/delta_kernels.h): the same expressions in the
// same order on both, so the host run of the CUDA driver is bit-identical to the CPU backend.
//
// Per head, with a_t = exp(g_t) (1 without a gate), the state S [Dk, Dv] and row t's k, v, q:
//   p_t = S_{t-1}^T k_t                  (what the memory holds for the key)
//   u_t = beta_t (v_t - a_t p_t)         (the correction the write makes)
//   S_t = a_t S_{t-1} + k_t u_t^T
//   o_t = scale S_t^T q_t
// Backward (dS the gradient w.r.t. S_t, running from S_T's to S_0's):
//   dq_t = scale S_t do_t;  dS += scale q_t do_t^T
//   du = dS^T k_t;  dv_t = beta_t du;  dbeta_t = du . (v_t - a_t p_t);  e = -beta_t du
//   M = dS + k_t e^T;  dk_t = dS u_t + a_t S_{t-1} e;  da = <S_{t-1}, M>;  dg_t = a_t da
//   dS <- a_t M
// Backward needs S_{t-1} and S_t of every row: the forward saves the state entering every chunk
// of s.chunk rows, and the backward recomputes a chunk's states from it, with the forward's own
// step: the same bits, so the gradients do not depend on the chunk size.
//
// Every sum runs in a fixed order, in float (deterministic; no atomics): over its index in
// increasing order, or, for the backward's dot products, as dot8's 8 interleaved partial sums.
#include <math.h>

#include <cstdint>

#include "lib/core/backend.h"
#include "lib/core/host_device.h"

namespace rmt::delta {

using Shape = DeltaShape;  // lib/core/backend.h

// Row t of head bh (= b * H + h) in a [T, B, H, width] buffer.
RMT_HOST_DEVICE inline int64_t row_of(const Shape& s, int t, int64_t bh, int width) {
  return (int64_t(t) * s.heads() + bh) * width;
}

// sum_j a[j] b[j] as 8 interleaved partial sums added in a fixed order: the same bits on every
// backend, and vectorisable (a strict left-to-right sum is one long dependency chain).
RMT_HOST_DEVICE inline float dot8(const float* a, const float* b, int n) {
  float p[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) p[l] += a[j + l] * b[j + l];
  for (int l = 0; j < n; ++j, ++l) p[l] += a[j] * b[j];
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

// One step S_{t-1} -> S_t in place, for row t of head bh: writes u_t into u [Dv] (p_t on the way).
RMT_HOST_DEVICE inline void step(const Shape& s, float* S, float* u, const float* k,
                                 const float* v, float beta, float a) {
  const int Dk = s.Dk, Dv = s.Dv;
  for (int j = 0; j < Dv; ++j) u[j] = 0.f;
  for (int i = 0; i < Dk; ++i)
    for (int j = 0; j < Dv; ++j) u[j] += S[int64_t(i) * Dv + j] * k[i];  // p_t
  for (int j = 0; j < Dv; ++j) u[j] = beta * (v[j] - a * u[j]);
  for (int i = 0; i < Dk; ++i)
    for (int j = 0; j < Dv; ++j) S[int64_t(i) * Dv + j] = a * S[int64_t(i) * Dv + j] + k[i] * u[j];
}

// o_t [Dv] = scale S_t^T q_t.
RMT_HOST_DEVICE inline void read(const Shape& s, float* o, const float* S, const float* q,
                                 float scale) {
  const int Dk = s.Dk, Dv = s.Dv;
  for (int j = 0; j < Dv; ++j) o[j] = 0.f;
  for (int i = 0; i < Dk; ++i)
    for (int j = 0; j < Dv; ++j) o[j] += S[int64_t(i) * Dv + j] * q[i];
  for (int j = 0; j < Dv; ++j) o[j] *= scale;
}

RMT_HOST_DEVICE inline float decay(const float* g, const Shape& s, int t, int64_t bh) {
  return g ? expf(g[int64_t(t) * s.heads() + bh]) : 1.f;
}

// Head bh's forward over all T rows: S_out's head starts as S_in's (zero where S_in is null) and
// ends as S_T; o row by row (o's row holds u_t until it is read); the state entering chunk c into
// S_chunks [chunks, B, H, Dk, Dv] (unless null).
RMT_HOST_DEVICE inline void forward_head(const Shape& s, int64_t bh, float* o, float* S_out,
                                         float* S_chunks, const float* q, const float* k,
                                         const float* v, const float* beta, const float* g,
                                         const float* S_in, float scale) {
  const int64_t n = s.state();
  float* S = S_out + bh * n;
  for (int64_t i = 0; i < n; ++i) S[i] = S_in ? S_in[bh * n + i] : 0.f;
  for (int t = 0; t < s.T; ++t) {
    if (S_chunks && t % s.chunk == 0)
      for (int64_t i = 0; i < n; ++i) S_chunks[(t / s.chunk * s.heads() + bh) * n + i] = S[i];
    float* ot = o + row_of(s, t, bh, s.Dv);
    step(s, S, ot, k + row_of(s, t, bh, s.Dk), v + row_of(s, t, bh, s.Dv),
         beta[int64_t(t) * s.heads() + bh], decay(g, s, t, bh));
    read(s, ot, S, q + row_of(s, t, bh, s.Dk), scale);
  }
}

// Head bh's backward: dq, dk, dv, dbeta (and dg where g is given) overwritten, dS_in [B, H, Dk,
// Dv] = d(loss)/d(S_in) overwritten (it holds the running dS); dS_out (null: zero) is the
// gradient w.r.t. S_T. S_chunks: the forward's saved states; work: s.work_per_head() floats of
// this head's own.
RMT_HOST_DEVICE inline void backward_head(const Shape& s, int64_t bh, float* dq, float* dk,
                                          float* dv, float* dbeta, float* dg, float* dS_in,
                                          const float* dout, const float* dS_out,
                                          const float* q, const float* k, const float* v,
                                          const float* beta, const float* g,
                                          const float* S_chunks, float* work, float scale) {
  const int Dk = s.Dk, Dv = s.Dv;
  const int64_t n = s.state();
  float* dS = dS_in + bh * n;
  for (int64_t i = 0; i < n; ++i) dS[i] = dS_out ? dS_out[bh * n + i] : 0.f;
  float* states = work;                          // S_{c0}, .., S_{c1}: [chunk + 1, Dk, Dv]
  float* u = work + (int64_t(s.chunk) + 1) * n;  // u_t [Dv]
  float* du = u + Dv;                            // du, then e = -beta du [Dv]
  for (int64_t c = s.chunks() - 1; c >= 0; --c) {
    const int c0 = int(c) * s.chunk, c1 = c0 + s.chunk < s.T ? c0 + s.chunk : s.T;
    // The chunk's states, recomputed from the saved one by the forward's step.
    for (int64_t i = 0; i < n; ++i) states[i] = S_chunks[(c * s.heads() + bh) * n + i];
    for (int t = c0; t < c1; ++t) {
      float* next = states + int64_t(t - c0 + 1) * n;
      for (int64_t i = 0; i < n; ++i) next[i] = next[i - n];
      step(s, next, u, k + row_of(s, t, bh, Dk), v + row_of(s, t, bh, Dv),
           beta[int64_t(t) * s.heads() + bh], decay(g, s, t, bh));
    }
    for (int t = c1 - 1; t >= c0; --t) {
      const float* Sp = states + int64_t(t - c0) * n;  // S_{t-1}
      const float* Sn = Sp + n;                        // S_t
      const float* qt = q + row_of(s, t, bh, Dk);
      const float* kt = k + row_of(s, t, bh, Dk);
      const float* vt = v + row_of(s, t, bh, Dv);
      const float* dot = dout + row_of(s, t, bh, Dv);
      const int64_t r = int64_t(t) * s.heads() + bh;
      const float b = beta[r], a = decay(g, s, t, bh);
      // o_t = scale S_t^T q_t
      float* dqt = dq + row_of(s, t, bh, Dk);
      for (int i = 0; i < Dk; ++i) dqt[i] = scale * dot8(Sn + int64_t(i) * Dv, dot, Dv);
      for (int i = 0; i < Dk; ++i)
        for (int j = 0; j < Dv; ++j) dS[int64_t(i) * Dv + j] += scale * qt[i] * dot[j];
      // u_t = beta (v - a p), p = S_{t-1}^T k: recomputed (u holds p, then v - a p)
      for (int j = 0; j < Dv; ++j) u[j] = 0.f;
      for (int i = 0; i < Dk; ++i)
        for (int j = 0; j < Dv; ++j) u[j] += Sp[int64_t(i) * Dv + j] * kt[i];
      for (int j = 0; j < Dv; ++j) u[j] = vt[j] - a * u[j];
      // S_t = a S_{t-1} + k u^T: du = dS^T k
      for (int j = 0; j < Dv; ++j) du[j] = 0.f;
      for (int i = 0; i < Dk; ++i)
        for (int j = 0; j < Dv; ++j) du[j] += dS[int64_t(i) * Dv + j] * kt[i];
      float db = 0.f;
      float* dvt = dv + row_of(s, t, bh, Dv);
      for (int j = 0; j < Dv; ++j) {
        db += du[j] * u[j];
        dvt[j] = b * du[j];
        du[j] = -b * du[j];  // e
        u[j] = b * u[j];     // u_t itself
      }
      dbeta[r] = db;
      // dk = dS u + a S_{t-1} e
      float* dkt = dk + row_of(s, t, bh, Dk);
      for (int i = 0; i < Dk; ++i)
        dkt[i] = dot8(dS + int64_t(i) * Dv, u, Dv) + a * dot8(Sp + int64_t(i) * Dv, du, Dv);
      // M = dS + k e^T; da = <S_{t-1}, M> (row by row); dS <- a M
      float da = 0.f;
      for (int i = 0; i < Dk; ++i) {
        float* row = dS + int64_t(i) * Dv;
        for (int j = 0; j < Dv; ++j) row[j] += kt[i] * du[j];  // M's row
        da += dot8(Sp + int64_t(i) * Dv, row, Dv);
        for (int j = 0; j < Dv; ++j) row[j] *= a;
      }
      if (g) dg[r] = a * da;
    }
  }
}

// ---- The short convolution (fla's ShortConvolution without bias, then SiLU when `silu`):
//   xin = [state_in; x]  (W-1 + T rows)     pre_t = sum_j w[c, j] xin_{t+j}     y_t = silu(pre_t)
// state_out = the last W-1 rows of xin. Backward, with dpre = dy silu'(pre):
//   dxin_r = sum_j w[c, j] dpre_{r-j} (+ dstate_out_{r-T} for the rows state_out holds)
//   dx_t = dxin_{t+W-1},  dstate_in_r = dxin_r (r < W-1),  dw[c, j] += sum_{t, b} dpre_t xin_{t+j}

// Row r of xin at channel (b, c): a state row for r < W-1, else row r - W + 1 of x.
RMT_HOST_DEVICE inline float conv_in(const ConvShape& s, const float* x, const float* state, int r,
                                     int64_t bc) {
  if (r >= s.W - 1) return x[int64_t(r - s.W + 1) * s.row() + bc];
  return state ? state[int64_t(r) * s.row() + bc] : 0.f;
}

RMT_HOST_DEVICE inline float conv_pre(const ConvShape& s, const float* x, const float* w,
                                      const float* state, int t, int64_t bc) {
  const float* wc = w + (bc % s.C) * s.W;
  float acc = 0.f;
  for (int j = 0; j < s.W; ++j) acc += wc[j] * conv_in(s, x, state, t + j, bc);
  return acc;
}

RMT_HOST_DEVICE inline float sigmoid(float z) { return 1.f / (1.f + expf(-z)); }
RMT_HOST_DEVICE inline float conv_activation(float pre, bool silu) { return silu ? pre * sigmoid(pre) : pre; }

// y at item i = t * B*C + bc.
RMT_HOST_DEVICE inline float conv_item(const ConvShape& s, const float* x, const float* w,
                                       const float* state, int64_t i, bool silu) {
  return conv_activation(conv_pre(s, x, w, state, int(i / s.row()), i % s.row()), silu);
}

// state_out at item i = r * B*C + bc (r < W-1): row T + r of xin.
RMT_HOST_DEVICE inline float conv_state_item(const ConvShape& s, const float* x, const float* state,
                                             int64_t i) {
  return conv_in(s, x, state, s.T + int(i / s.row()), i % s.row());
}

// dpre = g silu'(pre).
RMT_HOST_DEVICE inline float conv_dpre_of(float g, float pre) {
  const float sg = sigmoid(pre);
  return g * (sg * (1.f + pre * (1.f - sg)));
}
// dpre at row t, channel bc.
RMT_HOST_DEVICE inline float conv_dpre(const ConvShape& s, const float* dy, const float* x,
                                       const float* w, const float* state, int t, int64_t bc,
                                       bool silu) {
  const float g = dy[int64_t(t) * s.row() + bc];
  if (!silu) return g;
  return conv_dpre_of(g, conv_pre(s, x, w, state, t, bc));
}

// dxin at item i = r * B*C + bc, r in [0, W-1+T).
RMT_HOST_DEVICE inline float conv_dxin_item(const ConvShape& s, const float* dy,
                                            const float* dstate_out, const float* x,
                                            const float* w, const float* state, int64_t i,
                                            bool silu) {
  const int r = int(i / s.row());
  const int64_t bc = i % s.row();
  const float* wc = w + (bc % s.C) * s.W;
  float acc = 0.f;
  for (int j = 0; j < s.W; ++j) {
    const int t = r - j;
    if (t >= 0 && t < s.T) acc += wc[j] * conv_dpre(s, dy, x, w, state, t, bc, silu);
  }
  if (dstate_out && r >= s.T) acc += dstate_out[int64_t(r - s.T) * s.row() + bc];
  return acc;
}

// sum over t, b (in that order) of dpre_t * xin_{t+j} for item i = c * W + j.
RMT_HOST_DEVICE inline float conv_dw_item(const ConvShape& s, const float* dy, const float* x,
                                          const float* w, const float* state, int64_t i,
                                          bool silu) {
  const int c = int(i / s.W), j = int(i % s.W);
  float acc = 0.f;
  for (int t = 0; t < s.T; ++t)
    for (int b = 0; b < s.B; ++b) {
      const int64_t bc = int64_t(b) * s.C + c;
      acc += conv_dpre(s, dy, x, w, state, t, bc, silu) * conv_in(s, x, state, t + j, bc);
    }
  return acc;
}

// ---- The mixer's per-row pieces (fla's l2norm, the gates, FusedRMSNormGated). Rows of D floats:
// a head's keys (l2norm) or values (the output norm); the gates one float per (row, head).

// softplus as torch's (threshold 20: linear above it).
RMT_HOST_DEVICE inline float softplus(float z) { return z > 20.f ? z : log1pf(expf(z)); }

// l2norm of row r: y = x rstd, rstd = 1 / sqrt(sum x^2 + eps) (fla: eps inside the root).
RMT_HOST_DEVICE inline void l2norm_row(float* y, float* rstd, const float* x, int64_t r, int D,
                                       float eps) {
  const float* xr = x + r * D;
  float ss = 0.f;
  for (int j = 0; j < D; ++j) ss += xr[j] * xr[j];
  const float rs = 1.f / sqrtf(ss + eps);
  for (int j = 0; j < D; ++j) y[r * D + j] = xr[j] * rs;
  rstd[r] = rs;
}
// dx = rstd (dy - y (y . dy))
RMT_HOST_DEVICE inline void l2norm_backward_row(float* dx, const float* dy, const float* y,
                                                const float* rstd, int64_t r, int D) {
  const float* yr = y + r * D;
  const float* dyr = dy + r * D;
  float yd = 0.f;
  for (int j = 0; j < D; ++j) yd += yr[j] * dyr[j];
  for (int j = 0; j < D; ++j) dx[r * D + j] = rstd[r] * (dyr[j] - yr[j] * yd);
}

// The output norm of row r: xhat = x rstd, rstd = 1 / sqrt(mean x^2 + eps); y = xhat w, times
// silu(gate) with a gate (Gated DeltaNet's g_proj output).
RMT_HOST_DEVICE inline void rms_norm_gated_row(float* y, float* rstd, const float* x,
                                               const float* w, const float* gate, int64_t r,
                                               int D, float eps) {
  const float* xr = x + r * D;
  float ss = 0.f;
  for (int j = 0; j < D; ++j) ss += xr[j] * xr[j];
  const float rs = 1.f / sqrtf(ss / D + eps);
  for (int j = 0; j < D; ++j) {
    const float n = xr[j] * rs * w[j];
    y[r * D + j] = gate ? n * (gate[r * D + j] * sigmoid(gate[r * D + j])) : n;
  }
  rstd[r] = rs;
}
// d(loss)/d(xhat w) at row r, column j.
RMT_HOST_DEVICE inline float rms_norm_dn(const float* dy, const float* gate, int64_t r, int D,
                                         int j) {
  const int64_t i = r * D + j;
  return gate ? dy[i] * (gate[i] * sigmoid(gate[i])) : dy[i];
}
// dx and dgate (with a gate) of row r: dx = rstd (dxhat - xhat mean(dxhat xhat)), dxhat = dn w.
RMT_HOST_DEVICE inline void rms_norm_gated_backward_row(float* dx, float* dgate, const float* dy,
                                                        const float* x, const float* rstd,
                                                        const float* w, const float* gate,
                                                        int64_t r, int D) {
  const float rs = rstd[r];
  float m = 0.f;
  for (int j = 0; j < D; ++j) m += rms_norm_dn(dy, gate, r, D, j) * w[j] * (x[r * D + j] * rs);
  m /= D;
  for (int j = 0; j < D; ++j) {
    const int64_t i = r * D + j;
    const float xhat = x[i] * rs;
    dx[i] = rs * (rms_norm_dn(dy, gate, r, D, j) * w[j] - xhat * m);
    if (gate) {
      const float sg = sigmoid(gate[i]);
      dgate[i] = dy[i] * xhat * w[j] * (sg * (1.f + gate[i] * (1.f - sg)));
    }
  }
}
// dw[j] summed over the rows in order.
RMT_HOST_DEVICE inline float rms_norm_dw_item(const float* dy, const float* x, const float* rstd,
                                              const float* gate, int64_t rows, int D, int j) {
  float acc = 0.f;
  for (int64_t r = 0; r < rows; ++r)
    acc += rms_norm_dn(dy, gate, r, D, j) * (x[r * D + j] * rstd[r]);
  return acc;
}

// The gates of item i = r * H + h: beta = sigmoid(b); g = -exp(A_log[h]) softplus(a + dt_bias[h]).
RMT_HOST_DEVICE inline float gate_g(const float* a, const float* A_log, const float* dt_bias,
                                    int64_t i, int H) {
  const int h = int(i % H);
  return -expf(A_log[h]) * softplus(a[i] + dt_bias[h]);
}
// dz, z = a + dt_bias: dg * (-exp(A_log)) * sigmoid(z)
RMT_HOST_DEVICE inline float gate_dz(const float* dg, const float* a, const float* A_log,
                                     const float* dt_bias, int64_t i, int H) {
  const int h = int(i % H);
  return dg[i] * (-expf(A_log[h]) * sigmoid(a[i] + dt_bias[h]));
}

// The gate's parameter gradients of head h, summed over the rows in order (accumulate):
// dA_log[h] += sum dg g (d g / d A_log = g), ddt_bias[h] += sum da (da = dz, z = a + dt_bias).
RMT_HOST_DEVICE inline void gate_param_grads(float* dA_log, float* ddt_bias, const float* dg,
                                             const float* g, const float* da, int64_t rows, int H,
                                             int h) {
  float sg = 0.f, sz = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    sg += dg[r * H + h] * g[r * H + h];
    sz += da[r * H + h];
  }
  dA_log[h] += sg;
  ddt_bias[h] += sz;
}

}  // namespace rmt::delta
