// The delta mixer's kernels on the CPU, each an OpenMP loop over the per-item (or per-head) bodies
// of lib/core/delta_math.h and delta_wy.h. The delta rule (either form): one head (sample, head) per iteration; heads are
// independent and each runs its rows in order. The short convolution: one output element per
// iteration, its sums in a fixed order. Bit-identical for any thread count.
#include <omp.h>

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

void CpuBackend::short_conv_forward(float* y, float* state_out, const float* x, const float* w,
                                    const float* state_in, const ConvShape& s, bool silu) {
  const int64_t n = int64_t(s.T) * s.row(), ns = int64_t(s.W - 1) * s.row();
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) y[i] = delta::conv_item(s, x, w, state_in, i, silu);
  if (state_out)
    for (int64_t i = 0; i < ns; ++i) state_out[i] = delta::conv_state_item(s, x, state_in, i);
}

void CpuBackend::short_conv_backward(float* dx, float* dw, float* dstate_in, const float* dy,
                                     const float* dstate_out, const float* x, const float* w,
                                     const float* state_in, const ConvShape& s, bool silu) {
  const int64_t ns = int64_t(s.W - 1) * s.row(), n = int64_t(s.T) * s.row() + ns;
  // d(pre-activation) once per element (the CUDA driver recomputes it per use: the same values,
  // the same sums); host scratch of this thread (the backend is reentrant across threads)
  static thread_local std::vector<float> dpre_buffer;
  const int64_t nt = int64_t(s.T) * s.row();
  if (int64_t(dpre_buffer.size()) < nt) dpre_buffer.resize(size_t(nt));
  float* dpre = dpre_buffer.data();
#pragma omp parallel for schedule(static) if (nt > (1 << 14))
  for (int64_t i = 0; i < nt; ++i)
    dpre[i] = delta::conv_dpre(s, dy, x, w, state_in, int(i / s.row()), i % s.row(), silu);
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float d = delta::conv_dxin_from_dpre(s, dpre, dstate_out, w, i);
    if (i >= ns) dx[i - ns] = d;
    else if (dstate_in) dstate_in[i] = d;
  }
  const int64_t nw = int64_t(s.C) * s.W;
#pragma omp parallel for schedule(static) if (int64_t(s.T) * s.row() * s.W > (1 << 14))
  for (int64_t i = 0; i < nw; ++i) dw[i] += delta::conv_dw_from_dpre(s, dpre, x, state_in, i);
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
