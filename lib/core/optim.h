#pragma once
// Adam (as torch.optim.Adam, no weight decay) and gradient-norm clipping (as
// torch.nn.utils.clip_grad_norm_). The learning-rate schedules are in lib/run/schedule.h.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/backend.h"

namespace rmt {

struct Adam {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  std::vector<float> m, v;  // first and second moments, one allocation each
  int64_t t = 0;            // steps taken
  explicit Adam(int64_t num_params) : m(size_t(num_params), 0.f), v(size_t(num_params), 0.f) {}
  void step(Backend& be, std::vector<float>& params, const std::vector<float>& grads, float lr);
};

// Scales grads so that their global L2 norm is at most max_norm (max_norm <= 0: no clipping);
// returns the norm before.
double clip_grad_norm(Backend& be, std::vector<float>& grads, double max_norm);

}  // namespace rmt
