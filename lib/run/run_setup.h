#pragma once
// A run as its config and dataset define it, before anything trains: the resolved config, the
// dataset's meta, the segment lengths, what it keeps in memory. Shared by rmt train, rmt eval,
// sweeps, the benchmark and the reproduction.
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/run/config.h"
#include "lib/run/evaluate.h"
#include "lib/run/run_family.h"
#include "tasks/dataset.h"
#include "tasks/text.h"

namespace rmt {

// Everything derived from a config and its dataset that training and evaluation share.
struct RunSetup {
  Config config;             // resolved (n_token set, unused memory sizes zeroed)
  DatasetMeta meta;          // a language model's: task and kind "text", the 256 byte values
  std::vector<int> seg_len;  // segment lengths of the model input (a language model: {T})
  int seq_len = 0;           // input positions of a sample (a language model: T, one segment)
  TextMeta text;             // the text dataset of a language model
  const RunFamily* family = nullptr;  // samples or text: everything that differs between them
};

// The run a config describes on its dataset: the dataset's family (tasks/family.h) decides the
// run's (lib/run/run_family.h), which checks the config against the dataset and resolves the
// model (n_token from the vocabulary, the kind's sizes).
RunSetup prepare_run(Config config);
// A run on samples of an algorithmic task whose meta is already loaded (load_dataset_meta).
RunSetup prepare_run_with_meta(Config config, DatasetMeta meta);
EvalOptions eval_options(const RunSetup& run, int batch_size, int64_t max_samples);

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

}  // namespace rmt
