#pragma once
// `rmt eval` of a trained run: its checkpoint on a split of its own dataset or of another of the
// same task (length generalisation).
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/run/config.h"
#include "lib/run/evaluate.h"
#include "lib/run/run_setup.h"

namespace rmt {

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
  // With data_dir and segments 0: segments of this many positions (0: the trained longest).
  int segment_length = 0;
  int batch_size = 0;   // 0: the training batch
  int64_t samples = 0;  // 0: the whole split, else its first N samples
  int threads = 0;      // CPU threads for the process (0 = all cores), checked as --threads
  std::string device;   // the backend (backend_by_name); empty: the run's (its config's device)
  // A JSONL file of what the model predicted for each sample evaluated (rmt eval --predictions):
  // {"sample", "input" (what it reads before the answer), "target", "prediction", "correct"},
  // decoded with the dataset's vocabulary; written once the evaluation is done. Empty: none.
  std::string predictions;
  // The teacher-forced pass's order (rmt eval --schedule): sequential, or diagonal (armt only;
  // the same numbers, docs/armt.md "Diagonal evaluation"). Greedy decoding is sequential.
  EvalSchedule schedule = EvalSchedule::sequential;
  // Samples whose outputs are not finite numbers count as wrong answers (EvalResult::
  // non_finite_samples; the loss is then not reported) instead of failing the evaluation
  // (rmt eval --count-non-finite; algorithmic tasks only).
  bool count_non_finite = false;
};
struct EvalRunResult {
  EvalResult result;
  const RunFamily* family = nullptr;  // the run's
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
// `rmt eval`'s JSON object: the family's result_json keys and data, seq_len, split, checkpoint.
std::string eval_run_json(const EvalRunResult& r);

// The families' halves of `rmt eval`'s setup (RunFamily::prepare_eval): a language model on its
// own text dataset or on another text dataset (data_dir); an algorithmic run on its own dataset
// (in `segments`, or as trained) or on another dataset of its task (in segments of the trained
// length unless `segments`).
RunSetup eval_setup_text(const EvalRunRequest& req, Config config, const std::string& config_path);
RunSetup eval_setup_samples(const EvalRunRequest& req, Config config, const std::string& config_path);

}  // namespace rmt
