#pragma once
// The delta rule of DeltaNet and Gated DeltaNet (Backend::delta_rule_forward /
// delta_rule_backward, docs/deltanet.md) as drivers on an Exec (lib/cuda/exec.h): one item per
// (sample, head), each the per-head body of lib/core/delta_math.h that the CPU backend's loop
// runs, so HostExec is bit-identical to the CPU backend (tests/test_cuda_delta_host.cpp).
//
// Parallelisation: one thread walks a head's rows in order, its state in the output buffer.
// Correct, not fast: a GPU session should give a head a block (the state's Dv columns evolve
// independently in the forward) or run the chunked form's products through cuBLAS.
#include <cstdint>

#include "lib/core/delta_math.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

template <class Exec>
void delta_rule_forward(Exec& ex, float* o, float* S_out, float* S_chunks, const float* q,
                        const float* k, const float* v, const float* beta, const float* g,
                        const float* S_in, const DeltaShape& shape, float scale) {
  const DeltaShape s = shape;  // captured by value
  if (s.heads() <= 0) return;
  ex.for_each(s.heads(), [=] RMT_HOST_DEVICE(int64_t bh) {
    delta::forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in, scale);
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
    delta::backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta, g,
                         S_chunks, work + bh * s.work_per_head(), scale);
  });
}

}  // namespace rmt::cuda
