// The delta rule on the CPU (Backend::delta_rule_forward / delta_rule_backward): one head
// (sample, head) per OpenMP iteration, each the per-head body of lib/core/delta_math.h. Heads
// are independent and each runs its rows in order: bit-identical for any thread count.
#include <omp.h>

#include <cstdint>

#include "lib/core/cpu_backend.h"
#include "lib/core/delta_math.h"

namespace rmt::cpu {

void CpuBackend::delta_rule_forward(float* o, float* S_out, float* S_chunks, const float* q,
                                    const float* k, const float* v, const float* beta,
                                    const float* g, const float* S_in, const DeltaShape& s,
                                    float scale) {
  const int64_t heads = s.heads();
#pragma omp parallel for schedule(static) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh)
    delta::forward_head(s, bh, o, S_out, S_chunks, q, k, v, beta, g, S_in, scale);
}

void CpuBackend::delta_rule_backward(float* dq, float* dk, float* dv, float* dbeta, float* dg,
                                     float* dS_in, float* work, const float* dout,
                                     const float* dS_out, const float* q, const float* k,
                                     const float* v, const float* beta, const float* g,
                                     const float* S_chunks, const DeltaShape& s, float scale) {
  const int64_t heads = s.heads();
#pragma omp parallel for schedule(static) if (heads > 1)
  for (int64_t bh = 0; bh < heads; ++bh)
    delta::backward_head(s, bh, dq, dk, dv, dbeta, dg, dS_in, dout, dS_out, q, k, v, beta, g,
                         S_chunks, work + bh * s.work_per_head(), scale);
}

}  // namespace rmt::cpu
