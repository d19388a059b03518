#pragma once
// The delta mixer's kernels (Backend::delta_rule_*, short_conv_*, l2norm_*, rms_norm_gated_*,
// delta_gates_*; docs/deltanet.md) as drivers
// on an Exec (lib/cuda/exec.h): the delta rule one item per (sample, head), the convolution one
// per output element, each the body of lib/core/delta_math.h that the CPU backend's loop runs,
// so HostExec is bit-identical to the CPU backend (tests/test_delta_kernels.cpp).
//
// Parallelisation: one thread walks a head's rows in order, its state in the output buffer.
// Correct, not fast: a GPU session should give a head a block (the state's Dv columns evolve
// independently in the forward) or run the chunked form's products through cuBLAS.
#include <cstdint>

#include "lib/core/delta_wy.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

template <class Exec>
void delta_rule_forward(Exec& ex, float* o, float* S_out, float* S_chunks, float* work, const float* q,
                        const float* k, const float* v, const float* beta, const float* g,
                        const float* S_in, const DeltaShape& shape, float scale) {
  const DeltaShape s = shape;  // captured by value
  if (s.heads() <= 0) return;
  ex.for_each(s.heads(), [=] RMT_HOST_DEVICE(int64_t bh) {
    delta::rule_forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in, work, scale);
  });
}

template <class Exec>
void delta_rule_backward(Exec& ex, float* dq, float* dk, float* dv, float* dbeta, float* dg,
                         float* dS_in, float* work, const float* dout, const float* dS_out,
                         const float* q, const float* k, const float* v, const float* beta,
                         const float* g, const float* S_chunks, const DeltaShape& shape,
                         float scale) {
  const DeltaShape s = shape;
  if (s.heads() <= 0) return;
  ex.for_each(s.heads(), [=] RMT_HOST_DEVICE(int64_t bh) {
    delta::rule_backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta,
                              g, S_chunks, work, scale);
  });
}

template <class Exec>
void short_conv_forward(Exec& ex, float* y, float* state_out, const float* x, const float* w,
                        const float* state_in, const ConvShape& shape, bool silu) {
  const ConvShape s = shape;
  const int64_t n = int64_t(s.T) * s.row(), ns = int64_t(s.W - 1) * s.row();
  if (n > 0)
    ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
      y[i] = delta::conv_item(s, x, w, state_in, i, silu);
    });
  if (state_out && ns > 0)
    ex.for_each(ns, [=] RMT_HOST_DEVICE(int64_t i) {
      state_out[i] = delta::conv_state_item(s, x, state_in, i);
    });
}

template <class Exec>
void short_conv_backward(Exec& ex, float* dx, float* dw, float* dstate_in, const float* dy,
                         const float* dstate_out, const float* x, const float* w,
                         const float* state_in, const ConvShape& shape, bool silu) {
  const ConvShape s = shape;
  const int64_t ns = int64_t(s.W - 1) * s.row(), n = int64_t(s.T) * s.row() + ns;
  if (n > 0)
    ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
      const float d = delta::conv_dxin_item(s, dy, dstate_out, x, w, state_in, i, silu);
      if (i >= ns) dx[i - ns] = d;
      else if (dstate_in) dstate_in[i] = d;
    });
  ex.for_each(int64_t(s.C) * s.W, [=] RMT_HOST_DEVICE(int64_t i) {
    dw[i] += delta::conv_dw_item(s, dy, x, w, state_in, i, silu);
  });
}

template <class Exec>
void l2norm_forward(Exec& ex, float* y, float* rstd, const float* x, int64_t rows, int D,
                    float eps) {
  if (rows <= 0) return;
  ex.for_each(rows, [=] RMT_HOST_DEVICE(int64_t r) { delta::l2norm_row(y, rstd, x, r, D, eps); });
}

template <class Exec>
void l2norm_backward(Exec& ex, float* dx, const float* dy, const float* y, const float* rstd,
                     int64_t rows, int D) {
  if (rows <= 0) return;
  ex.for_each(rows, [=] RMT_HOST_DEVICE(int64_t r) {
    delta::l2norm_backward_row(dx, dy, y, rstd, r, D);
  });
}

template <class Exec>
void rms_norm_gated_forward(Exec& ex, float* y, float* rstd, const float* x, const float* w,
                            const float* gate, int64_t rows, int D, float eps) {
  if (rows <= 0) return;
  ex.for_each(rows, [=] RMT_HOST_DEVICE(int64_t r) {
    delta::rms_norm_gated_row(y, rstd, x, w, gate, r, D, eps);
  });
}

template <class Exec>
void rms_norm_gated_backward(Exec& ex, float* dx, float* dw, float* dgate, const float* dy,
                             const float* x, const float* rstd, const float* w, const float* gate,
                             int64_t rows, int D) {
  if (rows <= 0) return;
  ex.for_each(rows, [=] RMT_HOST_DEVICE(int64_t r) {
    delta::rms_norm_gated_backward_row(dx, dgate, dy, x, rstd, w, gate, r, D);
  });
  ex.for_each(D, [=] RMT_HOST_DEVICE(int64_t j) {
    dw[j] += delta::rms_norm_dw_item(dy, x, rstd, gate, rows, D, int(j));
  });
}

template <class Exec>
void delta_gates_forward(Exec& ex, float* beta, float* g, const float* b, const float* a,
                         const float* A_log, const float* dt_bias, int64_t rows, int H) {
  if (rows * H <= 0) return;
  ex.for_each(rows * H, [=] RMT_HOST_DEVICE(int64_t i) {
    beta[i] = delta::sigmoid(b[i]);
    if (a) g[i] = delta::gate_g(a, A_log, dt_bias, i, H);
  });
}

template <class Exec>
void delta_gates_backward(Exec& ex, float* db, float* da, float* dA_log, float* ddt_bias,
                          const float* dbeta, const float* dg, const float* beta, const float* g,
                          const float* a, const float* A_log, const float* dt_bias, int64_t rows,
                          int H) {
  if (rows * H <= 0) return;
  ex.for_each(rows * H, [=] RMT_HOST_DEVICE(int64_t i) {
    db[i] = dbeta[i] * (beta[i] * (1.f - beta[i]));
    if (a) da[i] = delta::gate_dz(dg, a, A_log, dt_bias, i, H);
  });
  if (!a) return;
  ex.for_each(H, [=] RMT_HOST_DEVICE(int64_t h) {
    delta::gate_param_grads(dA_log, ddt_bias, dg, g, da, rows, H, int(h));
  });
}

}  // namespace rmt::cuda
