#pragma once
// Adam (as torch.optim.Adam, no weight decay), gradient-norm clipping (as
// torch.nn.utils.clip_grad_norm_) and the learning-rate schedules of `rmt train`.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/backend.h"
#include "lib/config.h"

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

// Learning rate per step: linear warm-up over warmup_steps, then constant, cosine (down to
// min_lr at max_steps) or plateau (ReduceLROnPlateau on the validation loss, mode min,
// relative threshold 1e-4, as torch).
struct LrSchedule {
  TrainConfig config;
  double plateau_lr = 0;  // current plateau learning rate
  double best = 0;        // best validation loss seen (plateau)
  int bad_evals = 0;      // evaluations without improvement (plateau)
  bool has_best = false;
  explicit LrSchedule(const TrainConfig& c) : config(c), plateau_lr(c.lr) {}
  double lr_at(int64_t step) const;  // step counts from 0
  void on_eval(double val_loss);
};

}  // namespace rmt
