#pragma once
// Adam (as torch.optim.Adam; with weight_decay > 0 as torch.optim.AdamW) and gradient-norm
// clipping (as torch.nn.utils.clip_grad_norm_). The learning-rate schedules are in
// lib/run/schedule.h.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/model.h"

namespace rmt {

struct Adam {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  // First and second moments (torch's exp_avg, exp_avg_sq; "adam.m", "adam.v" in state files),
  // one allocation each in the backend's memory, zero at first.
  DeviceArray<float> moment1, moment2;
  int64_t t = 0;  // steps taken
  // AdamW's decoupled weight decay (train.weight_decay; 0: Adam): each step first multiplies the
  // parameters of `decaying` by 1 - lr * weight_decay, as torch.optim.AdamW's param.mul_, then
  // takes the Adam update. decaying: offsets into the parameters (decaying_ranges of the layout).
  double weight_decay = 0;
  std::vector<ParamRange> decaying;
  Adam(Backend& be, int64_t num_params) {
    moment1.zeroed(be, num_params);
    moment2.zeroed(be, num_params);
  }
  void set_weight_decay(double wd, const std::vector<ParamInfo>& layout) {
    weight_decay = wd;
    decaying = decaying_ranges(layout);
  }
  void step(Backend& be, DeviceArray<float>& params, const DeviceArray<float>& grads, float lr);
};

// Scales grads so that their global L2 norm is at most max_norm (max_norm <= 0: no clipping);
// returns the norm before.
double clip_grad_norm(Backend& be, DeviceArray<float>& grads, double max_norm);
// The same with the norm already known (a training step reads it with its loss).
void scale_to_norm(Backend& be, DeviceArray<float>& grads, double norm, double max_norm);

}  // namespace rmt
