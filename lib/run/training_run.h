#pragma once
// One training run's own part of the training loop (lib/run/train.cpp): its config on its data,
// its run directory, curriculum, learning-rate schedule, metrics, evaluations, checkpoints and
// results. The model, optimizer and engine it trains are handed to it (attach): a run alone has
// its own, packed runs (lib/core/packed_backend.h) share one with a slot each. So a run's files
// are written by this one piece of code however it was trained.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/packed_backend.h"
#include "lib/run/run_directory.h"
#include "lib/run/run_setup.h"
#include "lib/run/schedule.h"
#include "lib/run/train.h"
#include "lib/run/train_state.h"
#include "lib/run/train_step.h"
#include "lib/run/training_data.h"

namespace rmt {

class RunLog;

class TrainingRun {
 public:
  // The run's config on its dataset (refused before anything large is allocated or the run
  // directory is touched: absurd sizes, memory, a device this build lacks); its directory
  // opened (locked; new, or resumed with options.resume) and its data loaded. Nothing trains yet.
  TrainingRun(const Config& config, const TrainOptions& options);
  ~TrainingRun();

  const RunSetup& setup() const { return run_; }
  const Config& config() const { return run_.config; }
  TrainingData& data() { return *data_; }

  // Takes its place: the weights initialised from the run's seed (or resumed), Adam's moments
  // zero (or resumed). With `packed`, the run is slot `slot` of it: whatever the run reads or
  // writes of the model and optimizer, it does with its slot alone active, and it keeps its own
  // Adam step count (adam_steps()).
  void attach(Model& model, Adam& adam, Engine& engine, PackedBackend* packed = nullptr, int slot = 0);
  int slot() const { return slot_; }
  int64_t* adam_steps() { return &adam_steps_; }

  // Steps taken; whether the run is over (its step ceiling, or its curriculum ended it).
  int64_t step() const { return st_.step; }
  bool ended() const;
  // Schedule: this step's settings (learning rate, dropout stream) and its curriculum stage's
  // segments.
  StepSettings step_settings(int* stage_segments) const;
  // The rest of the step once it ran: log, curriculum, and every eval_every steps validation,
  // the stopping rule and the checkpoints. Fails (rmt::Error) on a non-finite loss or gradient.
  void after_step(const StepResult& result, int stage_segments, double lr);
  // Report: the best checkpoint on the test split, into results.json (written last).
  void finish();

 private:
  void use();  // its slot active (packed), with its Adam step count
  std::string resume_point() const;
  void stage_began(const char* why, int previous_segments);
  void evaluate_and_checkpoint();
  double elapsed() const;

  const TrainOptions opt_;
  const RunSetup run_;
  const std::filesystem::path dir_, state_path_;
  DirectoryLock lock_;
  bool resuming_ = false;
  TrainState st_;
  std::unique_ptr<TrainingData> data_;
  LrSchedule sched_;
  bool with_progression_ = false, mastery_ = false;
  std::unique_ptr<RunLog> log_;
  Model* model_ = nullptr;
  Adam* adam_ = nullptr;
  Engine* engine_ = nullptr;
  PackedBackend* packed_ = nullptr;
  int slot_ = 0;
  int64_t adam_steps_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
  double wall_before_ = 0;
  int64_t checkpoint_step_ = -1;  // of state.safetensors; -1 = none yet
};

}  // namespace rmt
