#pragma once
// `rmt train`: the training loop, checkpoints, resume, and the final test evaluation.
//
// RUN_DIR layout:
//   config.yaml            the resolved config
//   metrics.jsonl          one JSON object per log interval and per evaluation
//   last.safetensors       parameters at the last evaluation (authors' names)
//   best.safetensors       parameters with the best validation loss
//   state.safetensors      everything --resume needs (parameters, Adam moments, counters),
//                          in one file so that a kill can never leave it half-updated
//   results.json           test metrics of the best checkpoint (as `rmt eval` prints them)
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/run/config.h"
#include "lib/run/run_setup.h"

namespace rmt {

struct TrainProgress {
  int64_t step = 0, max_steps = 0;
  double loss = 0, lr = 0, tokens_per_s = 0, elapsed_s = 0;
  std::optional<double> val_loss, val_acc;  // of the last evaluation
  std::optional<double> val_bpc;            // of the last evaluation of a language model
  bool lm = false;                          // a language model (validation reports bpc)
  bool is_eval = false;                     // this report follows an evaluation
  std::optional<std::string> note;          // an event to show on its own line (a stage began, solved)
};

struct TrainOptions {
  std::string run_dir;
  bool resume = false;
  std::function<void(const TrainProgress&)> on_progress;  // called every log interval and eval
  // called once before the first step: the resolved run, parameter count, step resumed from
  std::function<void(const RunSetup&, int64_t num_params, int64_t start_step)> on_start;
  // Tests only: end the process abruptly (no cleanup, exit status 86) once this step is done,
  // as a kill would, to prove that --resume loses and duplicates nothing.
  int64_t abort_after_step = 0;
};

void train(const Config& config, const TrainOptions& options);

// Packed runs (issue 40; lib/core/packed_backend.h): the runs of `jobs` trained `slots` at a time
// in one process and one computation per step; on the CPU `threads` packs, one per host thread,
// share the slots and the jobs (a device gets one pack). A
// run that ends (its ceiling, solved, unmastered) writes its results and leaves its slot, and the
// next job takes it; runs at different curriculum stages (other batch shapes) step in groups of
// one shape. Each run keeps its own seed, data order, dropout, curriculum, evaluations, stopping
// rule, checkpoints, metrics.jsonl and results.json in its own directory, bit-identical to the
// run trained alone by train() (tests/test_packed.cpp), and resumes packed or alone.
// Every job must have the same model, device, bptt_recompute, Adam beta2 and weight decay (pack_shape), one
// thread (train.threads 1: a packed run computes as a lone run of one thread), and samples of an
// algorithmic task (a language model's runs train alone). Returns per job the error that ended
// it ("" = finished); one run's failure does not stop the others.
struct TrainJob {
  Config config;
  TrainOptions options;
};
std::vector<std::string> train_packed(const std::vector<TrainJob>& jobs, int slots, int threads);
// What runs must share to be packed together, as text ("" for a run that cannot be packed: a
// language model); runs of one sweep with equal texts go into one pack.
std::string pack_shape(const Config& config);

}  // namespace rmt
