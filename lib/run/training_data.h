#pragma once
// What a training run reads from its dataset, one interface for every dataset family: the batch
// and the forward and backward of each training step, validation, and the test split. train()
// and its state file use only this; which family a run has follows from its dataset
// (prepare_run), and its RunFamily (lib/run/run_family.h) picks the implementation.
//   algorithmic tasks (tasks/dataset.h): step s takes B samples in the order of a fresh
//     permutation of the train split per epoch, each cut into the curriculum stage's segments;
//     scored on the answer positions.
//   text (tasks/text.h, lib/run/lm.h): the split is B streams; step s trains on segment
//     s mod (segments per pass) of every stream, the cache and memory carried from step to step
//     (saved with the training state); every position is scored.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "lib/files/safetensors.h"
#include "lib/run/evaluate.h"
#include "lib/run/run_setup.h"
#include "lib/run/train_step.h"

namespace rmt {

class TrainingData {
 public:
  virtual ~TrainingData() = default;
  // Training step `step` (0-based) on `segments` segments per sample (the curriculum stage's; a
  // language model's step is one segment): forward, backward, clip and Adam (lib/run/train_step.h;
  // algorithmic tasks capture it on a device that can). settings.training is true.
  virtual StepResult train_step(Engine& engine, Model& model, Adam& adam, int64_t step,
                                int segments, const StepSettings& settings) = 0;
  // The batch of training step `step` alone (packed runs step several runs' batches at once,
  // lib/run/train_step.h packed_train_step); valid until the next call. Algorithmic tasks only:
  // a language model's step carries state, and its runs train alone.
  virtual StepBatch train_batch(int64_t step, int segments) {
    (void)step, (void)segments;
    throw std::logic_error("train_batch: a language model's runs train alone, not packed");
  }
  // Teacher-forced validation at `segments` segments per sample, on at most train.eval_samples.
  virtual EvalResult validate(Engine& engine, int segments) = 0;
  // The test split in full (free-running too, for algorithmic tasks). Training ends with it:
  // the training data is released first.
  virtual EvalResult test(Engine& engine) = 0;
  // The state carried from one step to the next, as tensors and metadata of the training state
  // file (refs point into `host`, which must outlive them), and read back from it. Algorithmic
  // tasks carry nothing.
  virtual void save_carry(const Model& model, std::vector<TensorRef>& refs,
                          std::map<std::string, std::string>& metadata,
                          std::deque<std::vector<float>>& host) const {}
  virtual void restore_carry(const SafetensorsFile& file, const std::string& path, const Model& model) {}
};

// The families' halves (lib/run/run_family.h picks one): a task's train and val splits as
// samples, a text's as streams (the test split is read at the end, by test()).
std::unique_ptr<TrainingData> open_sample_data(const RunSetup& run);
std::unique_ptr<TrainingData> open_text_data(const RunSetup& run);
// `split` in full, or its first `samples` samples (text: positions), in batches (streams) of
// `batch`: what rmt eval reports and training's test.
EvalResult evaluate_sample_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                                 int64_t samples, const PredictionCallback& on_predictions = {},
                                 EvalSchedule schedule = EvalSchedule::sequential, bool count_non_finite = false);
EvalResult evaluate_text_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                               int64_t samples);

}  // namespace rmt
