#pragma once
// The learning-rate schedules of `rmt train`.
#include <cstdint>

#include "lib/run/config.h"

namespace rmt {

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
