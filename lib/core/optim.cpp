#include "lib/core/optim.h"

#include <cmath>

namespace rmt {

void Adam::step(Backend& be, std::vector<float>& params, const std::vector<float>& grads, float lr) {
  t += 1;
  be.adam_update(params.data(), grads.data(), m.data(), v.data(), int64_t(params.size()), lr,
                 beta1, beta2, eps, t);
}

double clip_grad_norm(Backend& be, std::vector<float>& grads, double max_norm) {
  double norm = std::sqrt(be.sum_squares(grads.data(), int64_t(grads.size())));
  double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0) be.scale(grads.data(), int64_t(grads.size()), float(coef));
  return norm;
}

}  // namespace rmt
