// The delta mixer's kernels on the CPU, each an OpenMP loop over the per-item (or per-head) bodies
// of lib/core/delta_math.h and delta_wy.h. The delta rule (either form): one head (sample, head) per iteration; heads are
// independent and each runs its rows in order. The short convolution: one output element per
// iteration, its sums in a fixed order. Bit-identical for any thread count.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lib/core/cpu_backend.h"
#include "lib/core/delta_wy.h"

namespace rmt::cpu {

void CpuBackend::delta_rule_forward(float* o, float* S_out, float* S_chunks, float* work, const float* q,
                                    const float* k, const float* v, const float* beta,
                                    const float* g, const float* S_in, const DeltaShape& s,
                                    float scale) {
  const int64_t heads = s.heads();
#pragma omp parallel for schedule(static) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh)
    delta::rule_forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in, work, scale);
}

void CpuBackend::delta_rule_backward(float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                     float* dS_in, float* work, const float* dout,
                                     const float* dS_out, const float* q, const float* k,
                                     const float* v, const float* beta, const float* g,
                                     const float* S_chunks, const DeltaShape& s, float scale) {
  const int64_t heads = s.heads();
#pragma omp parallel for schedule(static) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh)
    delta::rule_backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta,
                              g, S_chunks, work, scale);
}

// The short convolution on the CPU: each element's sums in delta_math.h's order (the bits of its
// per-item functions, which the CUDA drivers run), vectorised across channels: per (row, sample)
// the W products are added tap by tap into a row of accumulators, with w transposed to [W, C] and
// a missing state as a row of zeros (the products with 0 the per-item sums add too). At the
// small widths of these models the per-item form, a division per element, was most of the step.
namespace {

// Host scratch of this thread (the backend is reentrant across threads): w^T [W, C], zeros [B*C].
struct ConvScratch {
  std::vector<float> wt, zeros, acc;
  const float* transpose(const float* w, const ConvShape& s) {
    wt.resize(size_t(s.W) * size_t(s.C));
    for (int c = 0; c < s.C; ++c)
      for (int j = 0; j < s.W; ++j) wt[size_t(j) * size_t(s.C) + size_t(c)] = w[int64_t(c) * s.W + j];
    return wt.data();
  }
  const float* zero_row(int64_t n) {
    if (int64_t(zeros.size()) < n) zeros.assign(size_t(n), 0.f);
    return zeros.data();
  }
};
thread_local ConvScratch conv_scratch;

// Row r of xin = [state; x]: a state row (zeros when there is no state) or a row of x.
const float* xin_row(const ConvShape& s, const float* x, const float* state, const float* zeros, int r) {
  if (r >= s.W - 1) return x + int64_t(r - s.W + 1) * s.row();
  return state ? state + int64_t(r) * s.row() : zeros;
}

// pre [C] of row t, sample b: sum over taps j (in order) of w[c, j] xin_{t+j}[b, c].
void conv_pre_row(float* pre, const ConvShape& s, const float* x, const float* state, const float* zeros,
                  const float* wt, int t, int b) {
  for (int c = 0; c < s.C; ++c) pre[c] = 0.f;
  for (int j = 0; j < s.W; ++j) {
    const float* in = xin_row(s, x, state, zeros, t + j) + int64_t(b) * s.C;
    const float* wj = wt + int64_t(j) * s.C;
    for (int c = 0; c < s.C; ++c) pre[c] += wj[c] * in[c];
  }
}

}  // namespace

void CpuBackend::short_conv_forward(float* y, float* state_out, const float* x, const float* w,
                                    const float* state_in, const ConvShape& s, bool silu) {
  const int64_t row = s.row(), n = int64_t(s.T) * row;
  const float* wt = conv_scratch.transpose(w, s);
  const float* zeros = conv_scratch.zero_row(row);
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int t = 0; t < s.T; ++t)
    for (int b = 0; b < s.B; ++b) {
      float* yr = y + t * row + int64_t(b) * s.C;
      conv_pre_row(yr, s, x, state_in, zeros, wt, t, b);
      if (silu)
        for (int c = 0; c < s.C; ++c) yr[c] = delta::conv_activation(yr[c], true);
    }
  if (state_out)
    for (int r = 0; r < s.W - 1; ++r)
      std::copy_n(xin_row(s, x, state_in, zeros, s.T + r), row, state_out + r * row);
}

void CpuBackend::short_conv_backward(float* dx, float* dw, float* dstate_in, const float* dy,
                                     const float* dstate_out, const float* x, const float* w,
                                     const float* state_in, const ConvShape& s, bool silu) {
  const int64_t row = s.row(), nt = int64_t(s.T) * row;
  ConvScratch& scratch = conv_scratch;
  const float* wt = scratch.transpose(w, s);
  const float* zeros = scratch.zero_row(row);
  // d(pre-activation) once per element (the CUDA driver recomputes it per use: the same values,
  // the same sums)
  if (int64_t(scratch.acc.size()) < nt) scratch.acc.resize(size_t(nt));
  float* dpre = scratch.acc.data();
  if (silu) {
#pragma omp parallel for schedule(static) if (nt > (1 << 14))
    for (int t = 0; t < s.T; ++t)
      for (int b = 0; b < s.B; ++b) {
        const int64_t at = t * row + int64_t(b) * s.C;
        conv_pre_row(dpre + at, s, x, state_in, zeros, wt, t, b);
        for (int c = 0; c < s.C; ++c) dpre[at + c] = delta::conv_dpre_of(dy[at + c], dpre[at + c]);
      }
  } else {
    std::copy_n(dy, nt, dpre);
  }
  // dxin over its W-1 + T rows (the first W-1 are dstate_in's, the rest dx's): sum over taps j
  // of w[c, j] dpre_{r-j}, then dstate_out for the rows state_out held.
  const int rows_in = s.W - 1 + s.T;
#pragma omp parallel for schedule(static) if (nt > (1 << 14))
  for (int r = 0; r < rows_in; ++r) {
    if (r < s.W - 1 && !dstate_in) continue;
    float* out = r < s.W - 1 ? dstate_in + r * row : dx + (r - (s.W - 1)) * row;
    for (int b = 0; b < s.B; ++b) {
      float* o = out + int64_t(b) * s.C;
      for (int c = 0; c < s.C; ++c) o[c] = 0.f;
      for (int j = 0; j < s.W; ++j) {
        const int t = r - j;
        if (t < 0 || t >= s.T) continue;
        const float* dp = dpre + t * row + int64_t(b) * s.C;
        const float* wj = wt + int64_t(j) * s.C;
        for (int c = 0; c < s.C; ++c) o[c] += wj[c] * dp[c];
      }
      if (dstate_out && r >= s.T) {
        const float* ds = dstate_out + int64_t(r - s.T) * row + int64_t(b) * s.C;
        for (int c = 0; c < s.C; ++c) o[c] += ds[c];
      }
    }
  }
  // dw[c, j] += sum over t, then b, of dpre_t xin_{t+j}: each (c, j) summed from 0 in that order,
  // by one thread (blocks of channels), into acc [W, block] with the channels contiguous.
  constexpr int kBlock = 64;
  const int blocks = (s.C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (nt * s.W > (1 << 14))
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kBlock, nc = std::min(kBlock, s.C - c0);
    float acc[64 * kBlock];  // W <= 64 (model.short_conv's range)
    std::fill(acc, acc + int64_t(s.W) * kBlock, 0.f);
    for (int t = 0; t < s.T; ++t)
      for (int b = 0; b < s.B; ++b) {
        const float* dp = dpre + t * row + int64_t(b) * s.C + c0;
        for (int j = 0; j < s.W; ++j) {
          const float* in = xin_row(s, x, state_in, zeros, t + j) + int64_t(b) * s.C + c0;
          float* a = acc + j * kBlock;
          for (int c = 0; c < nc; ++c) a[c] += dp[c] * in[c];
        }
      }
    for (int c = 0; c < nc; ++c)
      for (int j = 0; j < s.W; ++j) dw[int64_t(c0 + c) * s.W + j] += acc[j * kBlock + c];
  }
}

void CpuBackend::l2norm_forward(float* y, float* rstd, const float* x, int64_t rows, int D,
                                float eps) {
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) delta::l2norm_row(y, rstd, x, r, D, eps);
}

void CpuBackend::l2norm_backward(float* dx, const float* dy, const float* y, const float* rstd,
                                 int64_t rows, int D) {
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) delta::l2norm_backward_row(dx, dy, y, rstd, r, D);
}

void CpuBackend::rms_norm_gated_forward(float* y, float* rstd, const float* x, const float* w,
                                        const float* gate, int64_t rows, int D, float eps) {
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) delta::rms_norm_gated_row(y, rstd, x, w, gate, r, D, eps);
}

void CpuBackend::rms_norm_gated_backward(float* dx, float* dw, float* dgate, const float* dy,
                                         const float* x, const float* rstd, const float* w,
                                         const float* gate, int64_t rows, int D) {
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    delta::rms_norm_gated_backward_row(dx, dgate, dy, x, rstd, w, gate, r, D);
#pragma omp parallel for schedule(static) if (rows * D > (1 << 14))
  for (int j = 0; j < D; ++j) dw[j] += delta::rms_norm_dw_item(dy, x, rstd, gate, rows, D, j);
}

void CpuBackend::delta_gates_forward(float* beta, float* g, const float* b, const float* a,
                                     const float* A_log, const float* dt_bias, int64_t rows,
                                     int H) {
  const int64_t n = rows * H;
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    beta[i] = delta::sigmoid(b[i]);
    if (a) g[i] = delta::gate_g(a, A_log, dt_bias, i, H);
  }
}

void CpuBackend::delta_gates_backward(float* db, float* da, float* dA_log, float* ddt_bias,
                                      const float* dbeta, const float* dg, const float* beta,
                                      const float* g, const float* a, const float* A_log,
                                      const float* dt_bias, int64_t rows, int H) {
  const int64_t n = rows * H;
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    db[i] = dbeta[i] * (beta[i] * (1.f - beta[i]));
    if (a) da[i] = delta::gate_dz(dg, a, A_log, dt_bias, i, H);
  }
  if (!a) return;
  for (int h = 0; h < H; ++h) delta::gate_param_grads(dA_log, ddt_bias, dg, g, da, rows, H, h);
}

}  // namespace rmt::cpu
