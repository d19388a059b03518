#include "lib/run/schedule.h"

#include <algorithm>
#include <cmath>

namespace rmt {

double LrSchedule::lr_at(int64_t step) const {
  double warm = 1.0;
  if (config.warmup_steps > 0 && step < config.warmup_steps)
    warm = double(step + 1) / double(config.warmup_steps);
  if (config.schedule == "plateau") return warm * plateau_lr;
  if (config.schedule == "cosine") {
    double progress = std::min(1.0, double(step) / double(std::max<int64_t>(1, config.max_steps)));
    double lr = config.min_lr + (config.lr - config.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    return warm * lr;
  }
  return warm * config.lr;  // constant
}

void LrSchedule::on_eval(double val_loss) {
  if (!has_best || val_loss < best * (1.0 - 1e-4)) {
    best = val_loss;
    has_best = true;
    bad_evals = 0;
    return;
  }
  if (++bad_evals > config.patience) {
    double reduced = std::max(plateau_lr * config.factor, config.min_lr);
    if (plateau_lr - reduced > 1e-8) plateau_lr = reduced;
    bad_evals = 0;
  }
}

}  // namespace rmt
