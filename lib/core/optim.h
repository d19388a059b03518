#pragma once
// Adam (as torch.optim.Adam, no weight decay) and gradient-norm clipping (as
// torch.nn.utils.clip_grad_norm_). The learning-rate schedules are in lib/run/schedule.h.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"

namespace rmt {

struct Adam {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  // First and second moments (torch's exp_avg, exp_avg_sq; "adam.m", "adam.v" in state files),
  // one allocation each in the backend's memory, zero at first.
  DeviceArray<float> moment1, moment2;
  int64_t t = 0;  // steps taken
  Adam(Backend& be, int64_t num_params) {
    moment1.zeroed(be, num_params);
    moment2.zeroed(be, num_params);
  }
  void step(Backend& be, DeviceArray<float>& params, const DeviceArray<float>& grads, float lr);
};

// Scales grads so that their global L2 norm is at most max_norm (max_norm <= 0: no clipping);
// returns the norm before.
double clip_grad_norm(Backend& be, DeviceArray<float>& grads, double max_norm);
// The same with the norm already known (a training step reads it with its loss).
void scale_to_norm(Backend& be, DeviceArray<float>& grads, double norm, double max_norm);

}  // namespace rmt
