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
  return run;
}

RunSetup prepare_lm_run(Config config, bool check_splits) {
  const TrainConfig& tc = config.train;
  check_config_fits_data(config, true, fmt::format("data {}", config.data), "text");
  if (tc.eval_samples < 0) fail("train.eval_samples must be >= 0");
  RunSetup run;
  run.text = load_text_meta(config.data);
  if (config.model.n_token == 0) config.model.n_token = kTextVocab;
  if (config.model.n_token < kTextVocab)
    fail("model.n_token {} is smaller than a text dataset's vocabulary ({}: one id per byte "
         "value)", config.model.n_token, kTextVocab);
  resolve_kind(config.model);
  const int T = config.segment_length, B = tc.batch_size;
  // Every split must give each of the B streams at least one target; training needs a whole
  // segment per stream.
  const char* names[3] = {"train", "val", "test"};
  for (int k = 0; k < (check_splits ? 3 : 0); ++k) {
    const int64_t n = run.text.counts[size_t(k)], length = n / B;
    if (length < 2)
      fail("the {} split of {} has {} bytes: train.batch_size {} streams of {} byte{} each, but a "
           "stream needs at least 2 (an input and its target); use a train.batch_size of at most {}",
           names[k], config.data, n, B, length, length == 1 ? "" : "s", std::max<int64_t>(1, n / 2));
    if (k == 0 && (length - 1) / T < 1)
      fail("segment_length {} is longer than the train split's streams: {} bytes in "
           "train.batch_size {} streams leave {} target positions each; use a segment_length "
           "of at most {} or a smaller batch", T, n, B, length - 1, length - 1);
  }
  run.meta.task = run.meta.kind = run.meta.file_prefix = "text";
  run.meta.vocab.resize(size_t(kTextVocab));
  for (int i = 0; i < kTextVocab; ++i) {
    const uint8_t byte = uint8_t(i);
    run.meta.vocab[size_t(i)] = escape_text_bytes(&byte, 1);
  }
  run.meta.from_meta_yaml = true;
  run.seq_len = T;
  run.seg_len = {T};
  run.config = config;
  return run;
}

RunSetup prepare_run(Config config) {
  validate(config);
  if (config.data.empty()) fail("config: 'data' (a dataset directory from `rmt generate`) is not set");
  if (dataset_family(config.data).language_model()) return prepare_lm_run(std::move(config));
  DatasetMeta meta = load_dataset_meta(config.data);
  check_config_fits_data(config, false, config.data, meta.task);
  return prepare_run_with_meta(std::move(config), std::move(meta));
}

int64_t lm_epoch_segments(const RunSetup& run) {
  const int64_t length = run.text.counts[0] / run.config.train.batch_size;
  return (length - 1) / run.config.segment_length;
}

int lm_window(const RunSetup& run) {
  if (run.config.model.num_mem_tokens == 0 || run.config.bptt <= 0) return 1;
  return int(std::min<int64_t>(run.config.bptt, lm_epoch_segments(run) - 1)) + 1;
}

EvalOptions eval_options(const RunSetup& run, int batch_size, int64_t max_samples) {
  EvalOptions o;
  o.seg_len = run.seg_len;
  o.answer_size = run.meta.answer_size;
  o.batch_size = batch_size;
  o.max_samples = max_samples;
  o.solve_positions = task_solve_positions(run.meta.kind);  // the kind: the authors' sqeq_cd too
  return o;
}

std::string eval_result_json(const EvalResult& r, const std::vector<int>& seg_len) {
  // JSON has no NaN: nlohmann would print null, a number that silently went missing.
  for (double x : {r.loss, r.acc_teacher_forced, r.acc_free_running.value_or(0.0), r.solve_rate.value_or(0.0),
                   r.solve_rate_teacher_forced.value_or(0.0), r.bpc.value_or(0.0)})
    if (!std::isfinite(x)) fail("a non-finite evaluation metric ({}); no result is reported", x);
  json j;
  if (r.bpc) {  // a language model: next-byte loss over every position of the split
    j["loss"] = r.loss;
    j["bpc"] = *r.bpc;
    j["acc_teacher_forced"] = r.acc_teacher_forced;
    j["positions"] = r.positions;
    j["streams"] = r.streams;
    j["segment_length"] = seg_len.at(0);
    return j.dump();
  }
  j["loss"] = r.loss;
  j["acc_teacher_forced"] = r.acc_teacher_forced;
  j["acc_free_running"] = r.acc_free_running ? json(*r.acc_free_running) : json(nullptr);
  j["solve_rate"] = r.solve_rate ? json(*r.solve_rate) : json(nullptr);
  j["solve_rate_teacher_forced"] = r.solve_rate_teacher_forced ? json(*r.solve_rate_teacher_forced) : json(nullptr);
  j["segments"] = int(seg_len.size());
  j["segment_lengths"] = seg_len;
  j["samples"] = r.samples;
  return j.dump();
}

double split_file_bytes(const RunSetup& run, const std::string& split) {
  if (is_lm(run.config)) {
    std::error_code ec;
    auto n = fs::file_size(text_split_file(run.config.data, split), ec);
    return ec ? 0.0 : double(n);
  }
  double bytes = 0;
  for (const char* part : {"X", "y"}) {
    std::error_code ec;
    auto n = fs::file_size(fs::path(run.config.data) / fmt::format("{}_{}_{}.npy", run.meta.file_prefix, split, part), ec);
    if (!ec) bytes += double(n);
  }
  return bytes;
}

std::string training_description(const RunSetup& run) {
  const Config& c = run.config;
  if (is_lm(c))
    return fmt::format("training ({} model, {} streams, windows of {} segments of {})", c.model.kind,
                       c.train.batch_size, lm_window(run), c.segment_length);
  return fmt::format("training ({} model, batch {}, {} segments)", c.model.kind, c.train.batch_size, c.segments);
}

Workload eval_workload(const RunSetup& run, int batch, const std::string& split) {
  Workload w;
  w.batch = batch;
  w.seg_len = run.seg_len;
  w.decoding = !is_lm(run.config);  // algorithmic tasks decode greedily as well
  // the split's file and what it becomes: streams, or int32 arrays (int64 while read)
  w.data_bytes = 2 * split_file_bytes(run, split);
  return w;
}

std::string eval_batch_text(const RunSetup& run, int batch) {
  return is_lm(run.config) ? fmt::format("{} streams", batch) : fmt::format("batch {}", batch);
}

MemoryEstimate train_memory_estimate(const RunSetup& run) {
  // A language model has no curriculum: its step is a window of segments of segment_length.
  if (is_lm(run.config)) return estimate_memory(run.config.model, train_workload(run));
  MemoryEstimate largest;
  for (int stage = 0; stage < run.config.train.curriculum; ++stage) {
    Workload w = train_workload(run);
    w.seg_len = segment_lengths(run.seq_len, curriculum_stage_segments(run.config, stage));
    MemoryEstimate e = estimate_memory(run.config.model, w);
    if (e.total() > largest.total()) largest = e;
  }
  return largest;
}

Workload train_workload(const RunSetup& run) {
  Workload w;
  w.batch = run.config.train.batch_size;
  w.seg_len = run.seg_len;
  w.training = true;
  w.recompute = run.config.bptt_recompute;
  w.decoding = true;  // the final test evaluation decodes greedily
  if (is_lm(run.config)) {
    // The window of a step, its carried states (the cache rows count as segment rows), and the
    // bytes of the three splits, with one split's streams copied while it is evaluated.
    w.seg_len.assign(size_t(lm_window(run)), run.config.segment_length);
    w.decoding = false;
    for (int64_t n : run.text.counts) w.data_bytes += double(n);
    w.data_bytes += double(*std::max_element(run.text.counts.begin(), run.text.counts.end())) * 2;
    const ModelConfig& mc = run.config.model;
    const double state = (double(mc.num_mem_tokens) + double(mc.n_layer) * mc.mem_len) * w.batch * mc.d_model * 4;
    w.data_bytes += state * (lm_window(run) + 2);  // the stored states and evaluation's two
    return w;
  }
  // The three splits as int32 (about their int64 files' size) and, while one is read, its
  // int64 arrays as well.
  double largest = 0;
  for (const char* split : {"train", "val", "test"}) {
    w.data_bytes += split_file_bytes(run, split);
    largest = std::max(largest, split_file_bytes(run, split));
  }
  w.data_bytes += largest;
  return w;
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
}

}  // namespace rmt
