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

#include "lib/core/model.h"
#include "lib/run/config.h"
#include "lib/run/curriculum.h"
#include "lib/run/evaluate.h"
#include "tasks/dataset.h"
#include "tasks/text.h"

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

// Everything derived from a config and its dataset that training and evaluation share.
struct RunSetup {
  Config config;             // resolved (n_token set, unused memory sizes zeroed)
  DatasetMeta meta;          // a language model's: task and kind "text", the 256 byte values
  std::vector<int> seg_len;  // segment lengths of the model input (a language model: {T})
  int seq_len = 0;           // input positions of a sample (a language model: T, one segment)
  TextMeta text;             // the text dataset of a language model (is_lm(config))
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

RunSetup prepare_run(Config config);
EvalOptions eval_options(const RunSetup& run, int batch_size, int64_t max_samples);
// `rmt eval`'s JSON object (shared with results.json).
std::string eval_result_json(const EvalResult& r, const std::vector<int>& seg_len);

// Refuses a checkpoint that cannot evaluate this run: a vocabulary smaller than the dataset's
// (its ids would index past the embedding), or a model config other than the run's (kind,
// layers, sizes, memory). n_token is compared only when the run's config sets it explicitly.
void check_checkpoint_fits_run(const ModelConfig& checkpoint, const std::string& checkpoint_path,
                               const RunSetup& run, bool config_sets_n_token,
                               const std::string& config_path);

// Training steps of one pass over a language model's training streams (text_full_segments).
int64_t lm_epoch_segments(const RunSetup& run);
// The segments a language model's training step runs at most: the new one and, with memory
// tokens, the bptt window of earlier ones (fewer when an epoch has fewer segments).
int lm_window(const RunSetup& run);

// Bytes of a split's X and y files (0 where missing); a text dataset: its split file.
double split_file_bytes(const RunSetup& run, const std::string& split);
// What `rmt train` of this run keeps in memory (for estimate_memory).
Workload train_workload(const RunSetup& run);
// The largest estimate over the curriculum's stages (earlier stages have fewer, longer segments).
MemoryEstimate train_memory_estimate(const RunSetup& run);

void train(const Config& config, const TrainOptions& options);

// `rmt eval`: a checkpoint of a trained run on a split of the run's own dataset or, with
// data_dir, of another dataset of the same task (length generalisation: longer sequences in more
// segments of the trained length).
struct EvalRunRequest {
  std::string run_dir;              // written by rmt train (config.yaml, checkpoints)
  std::string checkpoint = "best";  // best | last | a .safetensors file
  std::string split = "test";       // train | val | test
  std::string data_dir;             // empty: the run's dataset; else one of the same task
  // 0: as trained without data_dir; with it, ceil(seq_len / the trained longest segment), so
  // the segments keep the trained length.
  int segments = 0;
  int batch_size = 0;   // 0: the training batch
  int64_t samples = 0;  // 0: the whole split, else its first N samples
  int threads = 0;      // CPU threads for the process (0 = all cores), checked as --threads
  std::string device;   // the backend (backend_by_name); empty: the run's (its config's device)
};
struct EvalRunResult {
  EvalResult result;
  std::string data_dir;               // the dataset evaluated
  std::string checkpoint;             // the checkpoint file
  std::string split;
  int seq_len = 0;                    // input positions of a sample of data_dir
  std::vector<int> seg_len;           // segment lengths evaluated
};
// Loads the run's config and checkpoint, checks that the checkpoint is the run's model, that the
// evaluation fits in memory, and (data_dir) that the dataset is of the run's task: same task
// kind and vocabulary as the run's dataset (which must still be readable). Fails (rmt::Error)
// naming what does not fit. Sets the process's thread count.
EvalRunResult evaluate_run(const EvalRunRequest& request);
// The backend of a trained run: `device` when given, else the device in the run's config
// (config.yaml); fails naming the run when this build lacks it.
Backend& run_backend(const std::string& device, const Config& run_config, const std::string& run_dir);
// `rmt eval`'s JSON object: eval_result_json's keys and data, seq_len, split, checkpoint.
std::string eval_run_json(const EvalRunResult& r);

}  // namespace rmt
