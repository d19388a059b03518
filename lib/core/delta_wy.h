#pragma once
// The delta rule's chunked form (the WY/UT form of fla/ops/delta_rule/README.md and
// fla/ops/delta_rule/naive.py's delta_rule_chunkwise; docs/deltanet.md §2): the same map as the
// recurrence of lib/core/delta_math.h, computed a chunk of L = s.chunk rows at a time from the
// state S entering the chunk, so that most of the work is products of whole matrices instead of
// one row after another. Per head, rows t, i of the chunk (0-based), with the chunk's cumulative
// log decay Gam_t = g_0 + .. + g_t (0 without a gate):
//   gam_t = exp(Gam_t)    G_ti = exp(Gam_t - Gam_i) (i <= t)    Gend_i = exp(Gam_{L-1} - Gam_i)
//   A_ti  = beta_t G_ti (k_t . k_i)  for i < t          (strictly lower triangular)
//   (I + A) U = R,  R_t = beta_t (v_t - gam_t S^T k_t)    (U's rows are the recurrence's u_t)
//   o_t   = scale (gam_t S^T q_t + sum_{i <= t} G_ti (q_t . k_i) U_i)
//   S'    = gam_{L-1} S + sum_i Gend_i k_i U_i^T        (the state entering the next chunk)
// The triangular system is solved by forward substitution, row by row (U_t needs U_i, i < t).
// Backward, per chunk from the last (dS the gradient w.r.t. S', then w.r.t. S), with
// dO the rows' output gradients:
//   dU_i  = scale sum_{t >= i} G_ti (q_t . k_i) dO_t + Gend_i dS^T k_i
//   dQK_ti = scale G_ti (dO_t . U_i)  (i <= t): dq_t += dQK_ti k_i, dk_i += dQK_ti q_t
//   dq_t += scale gam_t S dO_t;   dk_i += Gend_i dS U_i
//   dR = (I + A)^-T dU (back substitution); dA_ti = -dR_t . U_i (i < t)
//   dbeta_t = dR_t . (v_t - gam_t S^T k_t) + sum_i dA_ti G_ti (k_t . k_i);  dv_t = beta_t dR_t
//   dk_t -= beta_t gam_t S dR_t;  dk_t += sum_i dA_ti beta_t G_ti k_i;  dk_i += dA_ti beta_t G_ti k_t
//   dS <- gam_{L-1} dS + scale sum_t gam_t q_t dO_t^T - sum_t beta_t gam_t k_t dR_t^T
//   dGam from every exp: d(G_ti) G_ti to Gam_t and minus it to Gam_i; dg_t = sum_{t' >= t} dGam_t'
// The forward saves S entering every chunk (S_chunks); the backward recomputes a chunk's U with
// the forward's own function, so its U has the forward's bits. Sums run in a fixed order (over
// the summed index in increasing order, dot products as dot8's partial sums): the same bits for
// any thread count and on the CUDA driver's host run.
#include "lib/core/delta_math.h"

namespace rmt::delta {

// out[r][j] = (keep ? keep_scale out[r][j] : 0) + sum_{a < K} X(r, a) B[a][j], the sum over a in
// increasing order, for r < R, j < N: X(r, a) = X[r x_row + a x_col], row a of B at B + a ldb,
// row r of out at out + r ldo. Row by row, B's rows streaming through the row's sums; NC > 0 is
// N known when compiling (the usual head widths: the compiler then keeps a row's sums in
// registers, about 4x faster measured here), 0 any N. The same sums in the same order either way.
template <int NC>
RMT_HOST_DEVICE inline void rows_times_n(float* __restrict__ out, int64_t ldo,
                                         const float* __restrict__ X, int64_t x_row, int64_t x_col,
                                         const float* __restrict__ B, int64_t ldb, int R, int K,
                                         int N_any, bool keep, float keep_scale) {
  const int N = NC > 0 ? NC : N_any;
  for (int r = 0; r < R; ++r) {
    float* o = out + r * ldo;
    const float* x = X + r * x_row;
    for (int j = 0; j < N; ++j) o[j] = keep ? keep_scale * o[j] : 0.f;
    for (int a = 0; a < K; ++a) {
      const float c = x[a * x_col];
      const float* b = B + a * ldb;
      for (int j = 0; j < N; ++j) o[j] += c * b[j];
    }
  }
}
RMT_HOST_DEVICE inline void rows_times(float* out, int64_t ldo, const float* X, int64_t x_row,
                                       int64_t x_col, const float* B, int64_t ldb, int R, int K,
                                       int N, bool keep, float keep_scale) {
  switch (N) {
    case 16: return rows_times_n<16>(out, ldo, X, x_row, x_col, B, ldb, R, K, N, keep, keep_scale);
    case 32: return rows_times_n<32>(out, ldo, X, x_row, x_col, B, ldb, R, K, N, keep, keep_scale);
    case 64: return rows_times_n<64>(out, ldo, X, x_row, x_col, B, ldb, R, K, N, keep, keep_scale);
    case 128: return rows_times_n<128>(out, ldo, X, x_row, x_col, B, ldb, R, K, N, keep, keep_scale);
    default: return rows_times_n<0>(out, ldo, X, x_row, x_col, B, ldb, R, K, N, keep, keep_scale);
  }
}

// The chunk [c0, c0 + L) of head bh from the state S entering it: Gam, G (gated only), and
// U [L, Dv] (KS [L, Dv], when not null, gets S^T k_t of each row for the backward).
RMT_HOST_DEVICE inline void wy_chunk_u(const Shape& s, int64_t bh, int c0, int L, float* Gam,
                                       float* G, float* U, float* KS, const float* S,
                                       const float* k, const float* v, const float* beta,
                                       const float* g) {
  const int Dk = s.Dk, Dv = s.Dv;
  for (int t = 0; t < L; ++t)
    Gam[t] = (t > 0 ? Gam[t - 1] : 0.f) + (g ? g[int64_t(c0 + t) * s.heads() + bh] : 0.f);
  if (g)
    for (int t = 0; t < L; ++t)
      for (int i = 0; i <= t; ++i) G[t * s.chunk + i] = expf(Gam[t] - Gam[i]);
  // S^T k_t of every row
  rows_times(U, Dv, k + row_of(s, c0, bh, Dk), s.heads() * Dk, 1, S, Dv, L, Dk, Dv, false, 1.f);
  for (int t = 0; t < L; ++t) {
    const float* kt = k + row_of(s, c0 + t, bh, Dk);
    const float* vt = v + row_of(s, c0 + t, bh, Dv);
    const float b = beta[int64_t(c0 + t) * s.heads() + bh];
    const float gam = g ? expf(Gam[t]) : 1.f;
    float* Ut = U + int64_t(t) * Dv;
    if (KS)
      for (int j = 0; j < Dv; ++j) KS[int64_t(t) * Dv + j] = Ut[j];
    for (int j = 0; j < Dv; ++j) Ut[j] = vt[j] - gam * Ut[j];
    // forward substitution: U_t = beta_t (v_t - gam_t S^T k_t - sum_{i<t} G_ti (k_t . k_i) U_i)
    for (int i = 0; i < t; ++i) {
      const float c = (g ? G[t * s.chunk + i] : 1.f) * dot8(kt, k + row_of(s, c0 + i, bh, Dk), Dk);
      const float* Ui = U + int64_t(i) * Dv;
      for (int j = 0; j < Dv; ++j) Ut[j] -= c * Ui[j];
    }
    for (int j = 0; j < Dv; ++j) Ut[j] *= b;
  }
}

// Head bh's forward over all T rows (forward_head's contract, lib/core/delta_math.h), chunk by
// chunk; work: s.forward_work_per_head() floats of this head's own.
RMT_HOST_DEVICE inline void wy_forward_head(const Shape& s, int64_t bh, float* o, float* S_out,
                                            float* S_chunks, const float* q, const float* k,
                                            const float* v, const float* beta, const float* g,
                                            const float* S_in, float* work, float scale) {
  const int Dk = s.Dk, Dv = s.Dv, C = s.chunk;
  const int64_t n = s.state();
  float* S = S_out + bh * n;
  for (int64_t i = 0; i < n; ++i) S[i] = S_in ? S_in[bh * n + i] : 0.f;
  float* Gam = work;                // [C]
  float* U = Gam + C;               // [C, Dv]
  float* G = U + int64_t(C) * Dv;   // [C, C] (gated)
  float* KgT = G + int64_t(C) * C;  // [Dk, C] Gend_i k_i[a]
  for (int c0 = 0; c0 < s.T; c0 += C) {
    const int L = c0 + C < s.T ? C : s.T - c0;
    if (S_chunks)
      for (int64_t i = 0; i < n; ++i) S_chunks[(c0 / C * s.heads() + bh) * n + i] = S[i];
    wy_chunk_u(s, bh, c0, L, Gam, G, U, nullptr, S, k, v, beta, g);
    // o_t = scale (gam_t S^T q_t + sum_{i <= t} G_ti (q_t . k_i) U_i)
    rows_times(o + row_of(s, c0, bh, Dv), s.heads() * Dv, q + row_of(s, c0, bh, Dk), s.heads() * Dk,
               1, S, Dv, L, Dk, Dv, false, 1.f);
    for (int t = 0; t < L; ++t) {
      const float* qt = q + row_of(s, c0 + t, bh, Dk);
      float* ot = o + row_of(s, c0 + t, bh, Dv);
      const float gam = g ? expf(Gam[t]) : 1.f;
      for (int j = 0; j < Dv; ++j) ot[j] *= gam;
      for (int i = 0; i <= t; ++i) {
        const float c = (g ? G[t * C + i] : 1.f) * dot8(qt, k + row_of(s, c0 + i, bh, Dk), Dk);
        const float* Ui = U + int64_t(i) * Dv;
        for (int j = 0; j < Dv; ++j) ot[j] += c * Ui[j];
      }
      for (int j = 0; j < Dv; ++j) ot[j] *= scale;
    }
    // S' = gam_{L-1} S + sum_i Gend_i k_i U_i^T
    const float gend = g ? expf(Gam[L - 1]) : 1.f;
    for (int a = 0; a < Dk; ++a)
      for (int i = 0; i < L; ++i)
        KgT[a * C + i] = (g ? G[(L - 1) * C + i] : 1.f) * k[row_of(s, c0 + i, bh, Dk) + a];
    rows_times(S, Dv, KgT, C, 1, U, Dv, Dk, L, Dv, true, gend);
  }
}

// Head bh's backward (backward_head's contract, lib/core/delta_math.h), chunk by chunk from
// the last; work: s.work_per_head() floats of this head's own.
RMT_HOST_DEVICE inline void wy_backward_head(const Shape& s, int64_t bh, float* dq, float* dk,
                                             float* dv, float* dbeta, float* dg, float* dS_in,
                                             const float* dout, const float* dS_out,
                                             const float* q, const float* k, const float* v,
                                             const float* beta, const float* g,
                                             const float* S_chunks, float* work, float scale) {
  const int Dk = s.Dk, Dv = s.Dv, C = s.chunk;
  const int64_t n = s.state(), H = s.heads();
  float* dS = dS_in + bh * n;
  for (int64_t i = 0; i < n; ++i) dS[i] = dS_out ? dS_out[bh * n + i] : 0.f;
  // work: Gam, gam, dGam [C]; U, KS, dU [C, Dv]; G, KK, QK [C, C]; ST, dST; Y, X1, X2
  float* Gam = work;                    // [C]
  float* gam = Gam + C;                 // [C] exp(Gam_t)
  float* dGam = gam + C;                // [C]
  float* U = dGam + C;                  // [C, Dv]
  float* KS = U + int64_t(C) * Dv;      // [C, Dv] S^T k_t
  float* dU = KS + int64_t(C) * Dv;     // [C, Dv] dU, then dR
  float* G = dU + int64_t(C) * Dv;      // [C, C] (gated)
  float* KK = G + int64_t(C) * C;       // [C, C] k_t . k_i (i < t)
  float* QK = KK + int64_t(C) * C;      // [C, C] q_t . k_i (i <= t)
  float* ST = QK + int64_t(C) * C;      // [Dv, Dk] S^T
  float* dST = ST + n;                  // [Dv, Dk] dS^T (the gradient w.r.t. S')
  float* Y = dST + n;                   // [C, Dk] products with S's or dS's columns
  float* X1 = Y + int64_t(C) * Dk;      // [Dk, C] scale gam_t q_t
  float* X2 = X1 + int64_t(Dk) * C;     // [Dk, C] -beta_t gam_t k_t
  auto at = [&](const float* x, int t, int width) { return x + row_of(s, t, bh, width); };
  for (int64_t c = s.chunks() - 1; c >= 0; --c) {
    const int c0 = int(c) * C, L = c0 + C < s.T ? C : s.T - c0;
    const float* S = S_chunks + (c * H + bh) * n;  // S entering the chunk
    auto G_ = [&](int t, int i) { return g ? G[t * C + i] : 1.f; };
    auto b_ = [&](int t) { return beta[int64_t(c0 + t) * H + bh]; };
    // The forward's U (its bits), S^T k_t, and the chunk's dot products.
    wy_chunk_u(s, bh, c0, L, Gam, G, U, KS, S, k, v, beta, g);
    for (int t = 0; t < L; ++t) {
      gam[t] = g ? expf(Gam[t]) : 1.f;
      dGam[t] = 0.f;
      for (int i = 0; i < t; ++i) KK[t * C + i] = dot8(at(k, c0 + t, Dk), at(k, c0 + i, Dk), Dk);
      for (int i = 0; i <= t; ++i) QK[t * C + i] = dot8(at(q, c0 + t, Dk), at(k, c0 + i, Dk), Dk);
      float* dkt = dk + row_of(s, c0 + t, bh, Dk);
      for (int a = 0; a < Dk; ++a) dkt[a] = 0.f;
    }
    // S' = gam_{L-1} S + sum_i Gend_i k_i U_i^T: dU_i = Gend_i dS^T k_i, dk_i = Gend_i dS U_i,
    // d(Gend_i) = k_i . dS U_i, d(gam_{L-1}) = <S, dS>
    for (int a = 0; a < Dk; ++a)
      for (int j = 0; j < Dv; ++j) {
        ST[int64_t(j) * Dk + a] = S[int64_t(a) * Dv + j];
        dST[int64_t(j) * Dk + a] = dS[int64_t(a) * Dv + j];
      }
    rows_times(dU, Dv, at(k, c0, Dk), H * Dk, 1, dS, Dv, L, Dk, Dv, false, 1.f);  // dS^T k_i
    rows_times(Y, Dk, U, Dv, 1, dST, Dk, L, Dv, Dk, false, 1.f);                // dS U_i
    float dGend = 0.f;  // to Gam_{L-1}
    for (int i = 0; i < L; ++i) {
      const float* ki = at(k, c0 + i, Dk);
      float* dUi = dU + int64_t(i) * Dv;
      float* dki = dk + row_of(s, c0 + i, bh, Dk);
      const float* Yi = Y + int64_t(i) * Dk;
      const float ge = G_(L - 1, i);
      for (int j = 0; j < Dv; ++j) dUi[j] *= ge;
      float dge = 0.f;
      for (int a = 0; a < Dk; ++a) {
        dki[a] += ge * Yi[a];
        dge += ki[a] * Yi[a];
      }
      dGend += dge * ge;
      dGam[i] -= dge * ge;
    }
    float sd = 0.f;
    for (int a = 0; a < Dk; ++a) sd += dot8(S + int64_t(a) * Dv, dS + int64_t(a) * Dv, Dv);
    dGend += gam[L - 1] * sd;
    // o_t = scale (gam_t S^T q_t + sum_{i <= t} G_ti QK_ti U_i)
    rows_times(dq + row_of(s, c0, bh, Dk), H * Dk, at(dout, c0, Dv), H * Dv, 1, ST, Dk, L, Dv, Dk,
               false, 1.f);  // S dO_t
    for (int t = 0; t < L; ++t) {
      const float* dot = at(dout, c0 + t, Dv);
      const float* qt = at(q, c0 + t, Dk);
      float* dqt = dq + row_of(s, c0 + t, bh, Dk);
      float dgam = 0.f;
      for (int a = 0; a < Dk; ++a) {
        dqt[a] *= scale * gam[t];
        dgam += qt[a] * dqt[a];  // d(gam_t) gam_t
      }
      dGam[t] += dgam;
      for (int i = 0; i <= t; ++i) {
        const float gti = G_(t, i);
        const float dqk = scale * gti * dot8(dot, U + int64_t(i) * Dv, Dv);  // d(QK_ti)
        const float* ki = at(k, c0 + i, Dk);
        float* dki = dk + row_of(s, c0 + i, bh, Dk);
        for (int a = 0; a < Dk; ++a) dqt[a] += dqk * ki[a];
        for (int a = 0; a < Dk; ++a) dki[a] += dqk * qt[a];
        if (i < t) {  // d(G_ti) G_ti (G_tt = 1)
          dGam[t] += dqk * QK[t * C + i];
          dGam[i] -= dqk * QK[t * C + i];
        }
        const float w = scale * gti * QK[t * C + i];
        float* dUi = dU + int64_t(i) * Dv;
        for (int j = 0; j < Dv; ++j) dUi[j] += w * dot[j];
      }
    }
    // (I + A) U = R: dR_t = dU_t - sum_{i > t} A_it dR_i, A_it = beta_i G_it KK_it
    for (int t = L - 1; t >= 0; --t) {
      float* dRt = dU + int64_t(t) * Dv;
      for (int i = t + 1; i < L; ++i) {
        const float Ait = b_(i) * G_(i, t) * KK[i * C + t];
        const float* dRi = dU + int64_t(i) * Dv;
        for (int j = 0; j < Dv; ++j) dRt[j] -= Ait * dRi[j];
      }
    }
    // R_t = beta_t (v_t - gam_t S^T k_t), A_ti = beta_t G_ti KK_ti (i < t), dA_ti = -dR_t . U_i
    rows_times(Y, Dk, dU, Dv, 1, ST, Dk, L, Dv, Dk, false, 1.f);  // S dR_t
    for (int t = 0; t < L; ++t) {
      const float* dRt = dU + int64_t(t) * Dv;
      const float* vt = at(v, c0 + t, Dv);
      const float* kt = at(k, c0 + t, Dk);
      const float* KSt = KS + int64_t(t) * Dv;
      const float b = b_(t);
      float* dvt = dv + row_of(s, c0 + t, bh, Dv);
      float* dkt = dk + row_of(s, c0 + t, bh, Dk);
      float db = 0.f, dks = 0.f;
      for (int j = 0; j < Dv; ++j) {
        db += dRt[j] * (vt[j] - gam[t] * KSt[j]);
        dks += dRt[j] * KSt[j];
        dvt[j] = b * dRt[j];
      }
      dGam[t] -= b * gam[t] * dks;  // d(gam_t) gam_t
      for (int a = 0; a < Dk; ++a) dkt[a] -= b * gam[t] * Y[int64_t(t) * Dk + a];
      for (int i = 0; i < t; ++i) {
        const float dA = -dot8(dRt, U + int64_t(i) * Dv, Dv);
        const float gti = G_(t, i);
        db += dA * gti * KK[t * C + i];
        const float w = dA * b * gti;  // d(KK_ti)
        const float* ki = at(k, c0 + i, Dk);
        float* dki = dk + row_of(s, c0 + i, bh, Dk);
        for (int a = 0; a < Dk; ++a) dkt[a] += w * ki[a];
        for (int a = 0; a < Dk; ++a) dki[a] += w * kt[a];
        dGam[t] += w * KK[t * C + i];  // d(G_ti) G_ti
        dGam[i] -= w * KK[t * C + i];
      }
      dbeta[int64_t(c0 + t) * H + bh] = db;
    }
    // dS <- gam_{L-1} dS + scale sum_t gam_t q_t dO_t^T - sum_t beta_t gam_t k_t dR_t^T
    for (int a = 0; a < Dk; ++a)
      for (int t = 0; t < L; ++t) {
        X1[int64_t(a) * C + t] = scale * gam[t] * at(q, c0 + t, Dk)[a];
        X2[int64_t(a) * C + t] = -b_(t) * gam[t] * at(k, c0 + t, Dk)[a];
      }
    rows_times(dS, Dv, X1, C, 1, at(dout, c0, Dv), H * Dv, Dk, L, Dv, true, gam[L - 1]);
    rows_times(dS, Dv, X2, C, 1, dU, Dv, Dk, L, Dv, true, 1.f);
    // Gam_t = g_0 + .. + g_t: dg_t = sum_{t' >= t} dGam_t'
    if (g) {
      dGam[L - 1] += dGend;
      float acc = 0.f;
      for (int t = L - 1; t >= 0; --t) {
        acc += dGam[t];
        dg[int64_t(c0 + t) * H + bh] = acc;
      }
    }
  }
}

// Either form of head bh's forward and backward, by s.wy (the kernels' bodies).
RMT_HOST_DEVICE inline void rule_forward_head(const Shape& s, int64_t bh, float* o, float* S_out,
                                              float* S_chunks, const float* q, const float* k,
                                              const float* v, const float* beta, const float* g,
                                              const float* S_in, float* work, float scale) {
  if (s.wy)
    wy_forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in,
                    work + bh * s.forward_work_per_head(), scale);
  else
    forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in, scale);
}
RMT_HOST_DEVICE inline void rule_backward_head(const Shape& s, int64_t bh, float* dq, float* dk,
                                               float* dv, float* dbeta, float* dg, float* dS_in,
                                               const float* dout, const float* dS_out,
                                               const float* q, const float* k, const float* v,
                                               const float* beta, const float* g,
                                               const float* S_chunks, float* work, float scale) {
  if (s.wy)
    wy_backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta, g,
                     S_chunks, work + bh * s.work_per_head(), scale);
  else
    backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta, g, S_chunks,
                  work + bh * s.work_per_head(), scale);
}

}  // namespace rmt::delta
