#include "lib/run/run_setup.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/run/curriculum.h"
#include "tasks/family.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

RunSetup prepare_run_with_meta(Config config, DatasetMeta meta) {
  RunSetup run;
  run.meta = std::move(meta);
  const int vocab = int(run.meta.vocab.size());
  if (config.model.n_token == 0) config.model.n_token = vocab;
  if (config.model.n_token < vocab)
    fail("model.n_token {} is smaller than the dataset's vocabulary ({})", config.model.n_token, vocab);
  resolve_kind(config.model);
  run.seq_len = run.meta.stacked ? run.meta.len_x + run.meta.len_y - 1 : run.meta.len_x;
  if (config.segments > run.seq_len)
    fail("segments: {} is more than the {} input positions of task {}", config.segments,
         run.seq_len, run.meta.task);
  run.seg_len = segment_lengths(run.seq_len, config.segments);
  run.config = config;
  run.family = &samples_family();
  return run;
}

RunSetup prepare_run(Config config) {
  validate(config);
  if (config.data.empty()) fail("config: 'data' (a dataset directory from `rmt generate`) is not set");
  return family_of_data(config.data).prepare(std::move(config));
}

int64_t lm_epoch_segments(const RunSetup& run) {
  const int64_t length = run.text.counts[0] / run.config.train.batch_size;
  return (length - 1) / run.config.segment_length;
}

int lm_window(const RunSetup& run) {
  // the state's gradient reaches back bptt segments: the memory tokens', or the mixers' state's
  const ModelConfig& m = run.config.model;
  if ((m.num_mem_tokens == 0 && !kind_has_mixer_state(m.kind)) || run.config.bptt <= 0) return 1;
  return int(std::min<int64_t>(run.config.bptt, lm_epoch_segments(run) - 1)) + 1;
}

EvalOptions eval_options(const RunSetup& run, int batch_size, int64_t max_samples) {
  EvalOptions o;
  o.seg_len = run.seg_len;
  o.answer_size = run.meta.answer_size;
  o.unscored_targets = run.meta.unscored_targets;
  o.batch_size = batch_size;
  o.max_samples = max_samples;
  o.solve_positions = task_solve_positions(run.meta.kind);  // the kind: the authors' sqeq_cd too
  return o;
}

void check_checkpoint_fits_run(const ModelConfig& checkpoint, const std::string& checkpoint_path,
                               const RunSetup& run, bool config_sets_n_token,
                               const std::string& config_path) {
  const int vocab = int(run.meta.vocab.size());
  // Every id of the dataset is < vocab (load_sample_split checks it); the model must cover them.
  if (checkpoint.n_token < vocab)
    fail("{}: the checkpoint's vocabulary has {} ids but dataset {} ({}) has {}: it was trained "
         "on other data (or the dataset was regenerated with other options)", checkpoint_path,
         checkpoint.n_token, run.config.data, run.meta.task, vocab);
  ModelConfig a = checkpoint, b = run.config.model;
  resolve_kind(a);
  resolve_kind(b);
  auto differ = [&](const char* key, const auto& in_checkpoint, const auto& in_config) {
    if (in_checkpoint != in_config)
      fail("{}: model.{} is {} in the checkpoint but {} in {}; the checkpoint is not this run's "
           "model", checkpoint_path, key, in_checkpoint, in_config, config_path);
  };
  differ("kind", a.kind, b.kind);
  if (config_sets_n_token) differ("n_token", a.n_token, b.n_token);
  differ("n_layer", a.n_layer, b.n_layer);
  differ("n_head", a.n_head, b.n_head);
  differ("d_head", a.d_head, b.d_head);
  differ("d_model", a.d_model, b.d_model);
  differ("d_inner", a.d_inner, b.d_inner);
  differ("mem_len", a.mem_len, b.mem_len);
  differ("num_mem_tokens", a.num_mem_tokens, b.num_mem_tokens);
  if (traits_of(b.kind).reads_memory_from_cache())  // other kinds ignore it
    differ("read_mem_from_cache", a.read_mem_from_cache, b.read_mem_from_cache);
  if (traits_of(b.kind).has_mixer_state()) {  // the delta rule's sizes
    differ("expand_v", a.expand_v, b.expand_v);
    differ("short_conv", a.short_conv, b.short_conv);
  }
}

}  // namespace rmt
