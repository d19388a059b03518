#pragma once
// What --resume restores besides the parameters and Adam's moments, and the files it lives in:
// state.safetensors (parameters, moments, counters and the data's carried state, in one file so
// that a kill never leaves it half-updated) and the metrics lines a resumed run rewrites.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>

#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/run/curriculum.h"
#include "lib/run/schedule.h"
#include "lib/run/training_data.h"

namespace rmt {

struct TrainState {  // what --resume restores besides parameters and Adam moments
  int64_t step = 0;
  double wall_time_s = 0;  // training wall time up to the checkpoint (summed over resumes)
  double best_val_loss = INFINITY;
  int64_t best_step = -1;
  std::string dataset_fingerprint;  // dataset_fingerprint() of the data the run started on
  Progression progression = start_progression();  // curriculum stage and target streak
};

// Writes state.safetensors atomically. with_progression: the curriculum stage and target streak
// too (runs with train.target; other runs' state files stay as they were).
void save_state(const std::string& path, const Model& model, const Adam& adam,
                const LrSchedule& sched, const TrainState& st, bool with_progression,
                const TrainingData& data);
// Reads it back into model, adam, sched, st and data (its carried state); fails naming `path` and
// what is missing, non-finite or of the wrong size.
void load_state(const std::string& path, Model& model, Adam& adam, LrSchedule& sched, TrainState& st,
                bool with_progression, TrainingData& data);
// Keeps the metrics lines up to `step` (a resumed run rewrites what came after).
void truncate_metrics(const std::filesystem::path& path, int64_t step);

}  // namespace rmt
