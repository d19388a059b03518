#include "lib/core/optim.h"

#include <cmath>

namespace rmt {

void Adam::step(Backend& be, DeviceArray<float>& params, const DeviceArray<float>& grads,
                float lr) {
  t += 1;
  if (weight_decay > 0) {  // a pass of its own, as torch's: the decayed parameter is rounded first
    const float keep = float(1.0 - double(lr) * weight_decay);
    for (const ParamRange& r : decaying) be.scale(params.data() + r.offset, r.n, keep);
  }
  be.adam_update(params.data(), grads.data(), moment1.data(), moment2.data(), params.size(), lr,
                 beta1, beta2, eps, t);
}

double clip_grad_norm(Backend& be, DeviceArray<float>& grads, double max_norm) {
  const double norm = std::sqrt(be.sum_squares(grads.data(), grads.size()));
  scale_to_norm(be, grads, norm, max_norm);
  return norm;
}

void scale_to_norm(Backend& be, DeviceArray<float>& grads, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0) be.scale(grads.data(), grads.size(), float(coef));
}

}  // namespace rmt
