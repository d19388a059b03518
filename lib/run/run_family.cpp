// The two run families (lib/run/run_family.h): samples of an algorithmic task, and text streams.
#include "lib/run/run_family.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "lib/run/config_family.h"

#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/run/curriculum.h"
#include "lib/run/eval_run.h"
#include "lib/run/run_setup.h"
#include "lib/run/training_data.h"
#include "tasks/family.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// JSON has no NaN: nlohmann would print null, a number that silently went missing. The one
// exception is said aloud: the loss of an evaluation that counted samples whose outputs were not
// finite (EvalOptions::count_non_finite), written as null beside their number.
void refuse_non_finite(const EvalResult& r) {
  const double loss = r.non_finite_samples > 0 ? 0.0 : r.loss;  // written as null
  for (double x : {loss, r.acc_teacher_forced, r.acc_free_running.value_or(0.0), r.solve_rate.value_or(0.0),
                   r.solve_rate_teacher_forced.value_or(0.0), r.exact_match.value_or(0.0),
                   r.exact_match_teacher_forced.value_or(0.0), r.bpc.value_or(0.0)})
    if (!std::isfinite(x)) fail("a non-finite evaluation metric ({}); no result is reported", x);
}

// ---- samples of an algorithmic task ------------------------------------------------------------

class SamplesFamily : public RunFamily {
 public:
  const char* name() const override { return "samples"; }

  RunSetup prepare(Config config, bool) const override {
    DatasetMeta meta = load_dataset_meta(config.data);
    check_config(config, config.data, meta.task);
    return prepare_run_with_meta(std::move(config), std::move(meta));
  }

  RunSetup prepare_eval(const EvalRunRequest& request, Config config, const std::string& config_path) const override {
    return eval_setup_samples(request, std::move(config), config_path);
  }

  void check_config(const Config& config, const std::string& data, const std::string& task) const override {
    config_family(FamilyKind::samples).check_config_of_data(config, data, task);
  }

  std::string start_line(const RunSetup& run, int64_t params, int64_t start, int threads) const override {
    std::string stages;  // "; curriculum: 3, 6, 9 segments"
    const TrainConfig& tc = run.config.train;
    for (int s = 0; tc.curriculum > 1 && s < tc.curriculum; ++s)
      stages += fmt::format("{}{}", s ? ", " : "; curriculum: ", curriculum_stage_segments(run.config, s));
    if (!stages.empty())
      stages += fmt::format(" segment{} ({})", curriculum_stage_segments(run.config, tc.curriculum - 1) == 1 ? "" : "s",
                            tc.curriculum_advance == "mastery"
                                ? "a stage ends once mastered or when its share of the steps runs out"
                                : "equal shares of the steps");
    if (tc.target > 0)
      stages += fmt::format("; stops once validation accuracy >= {} at {} evaluations in a row", tc.target,
                            tc.target_evals);
    return fmt::format("{} {} on {}: {} segment{} of {}{}, bptt {}, {} parameters, device {}, {} threads, about {} of "
                       "memory{}", start > 0 ? "resuming" : "training", run.config.model.kind, run.meta.task,
                       run.config.segments, run.config.segments == 1 ? "" : "s", describe_segments(run.seg_len), stages,
                       bptt_to_string(run.config.bptt), params, run.config.device, threads,
                       format_bytes(train_memory_estimate(run).total()),
                       start > 0 ? fmt::format(" (from step {})", start) : "");
  }

  Workload train_workload(const RunSetup& run) const override {
    Workload w;
    w.batch = run.config.train.batch_size;
    w.seg_len = run.seg_len;
    w.training = true;
    w.recompute = run.config.bptt_recompute;
    w.decoding = true;  // the final test evaluation decodes greedily
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

  // The largest estimate over the curriculum's stages (earlier stages have fewer, longer segments).
  MemoryEstimate train_memory_estimate(const RunSetup& run) const override {
    MemoryEstimate largest;
    for (int stage = 0; stage < run.config.train.curriculum; ++stage) {
      Workload w = train_workload(run);
      w.seg_len = segment_lengths(run.seq_len, curriculum_stage_segments(run.config, stage));
      MemoryEstimate e = estimate_memory(run.config.model, w);
      if (e.total() > largest.total()) largest = e;
    }
    return largest;
  }

  std::string training_description(const RunSetup& run) const override {
    const Config& c = run.config;
    return fmt::format("training ({} model, batch {}, {} segments)", c.model.kind, c.train.batch_size, c.segments);
  }

  std::string batch_text(int batch) const override { return fmt::format("batch {}", batch); }

  Workload eval_workload(const RunSetup& run, int batch, const std::string& split) const override {
    Workload w;
    w.batch = batch;
    w.seg_len = run.seg_len;
    w.decoding = true;  // free-running accuracy decodes greedily
    w.data_bytes = 2 * split_file_bytes(run, split);  // the split's int64 files and their int32 arrays
    return w;
  }

  double split_file_bytes(const RunSetup& run, const std::string& split) const override {
    double bytes = 0;
    for (const char* part : {"X", "y"}) {
      std::error_code ec;
      auto n = fs::file_size(fs::path(run.config.data) / fmt::format("{}_{}_{}.npy", run.meta.file_prefix, split, part), ec);
      if (!ec) bytes += double(n);
    }
    return bytes;
  }

  std::unique_ptr<TrainingData> open_training_data(const RunSetup& run) const override {
    return open_sample_data(run);
  }

  EvalResult evaluate_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                            int64_t samples, const PredictionCallback& on_predictions,
                            EvalSchedule schedule, bool count_non_finite) const override {
    return evaluate_sample_split(engine, run, split, batch, samples, on_predictions, schedule, count_non_finite);
  }

  std::string result_json(const EvalResult& r, const std::vector<int>& seg_len) const override {
    refuse_non_finite(r);
    json j;
    j["loss"] = r.non_finite_samples > 0 ? json(nullptr) : json(r.loss);
    // Always written, 0 included: an absent count reads as "not counted", not as "none".
    j["non_finite_samples"] = r.non_finite_samples;
    j["acc_teacher_forced"] = r.acc_teacher_forced;
    j["acc_free_running"] = r.acc_free_running ? json(*r.acc_free_running) : json(nullptr);
    j["solve_rate"] = r.solve_rate ? json(*r.solve_rate) : json(nullptr);
    j["solve_rate_teacher_forced"] = r.solve_rate_teacher_forced ? json(*r.solve_rate_teacher_forced) : json(nullptr);
    j["exact_match"] = r.exact_match ? json(*r.exact_match) : json(nullptr);
    j["exact_match_teacher_forced"] = r.exact_match_teacher_forced ? json(*r.exact_match_teacher_forced) : json(nullptr);
    j["segments"] = int(seg_len.size());
    j["segment_lengths"] = seg_len;
    j["samples"] = r.samples;
    return j.dump();
  }

  bool can_pack() const override { return true; }

  void check_command(const std::string& command, const std::string& run_dir, const Config& config) const override {
    if (command == "rmt sample")
      fail("run {} is not a language model: it was trained on {} in segments of a sample "
           "(segments: {}); rmt sample needs a run trained on a text dataset (rmt generate text, "
           "segment_length set)", run_dir, config.data.empty() ? "an algorithmic task" : config.data,
           config.segments);
  }
};

// ---- text streams (a language model) -----------------------------------------------------------

class TextFamily : public RunFamily {
 public:
  const char* name() const override { return "text"; }

  RunSetup prepare(Config config, bool check_splits) const override {
    const TrainConfig& tc = config.train;
    check_config(config, fmt::format("data {}", config.data), "text");
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
    run.meta = text_dataset_meta();
    run.seq_len = T;
    run.seg_len = {T};
    run.config = config;
    run.family = this;
    return run;
  }

  RunSetup prepare_eval(const EvalRunRequest& request, Config config, const std::string& config_path) const override {
    return eval_setup_text(request, std::move(config), config_path);
  }

  void check_config(const Config& config, const std::string& data, const std::string&) const override {
    config_family(FamilyKind::text).check_config_of_data(config, data, "text");
  }

  std::string start_line(const RunSetup& run, int64_t params, int64_t start, int threads) const override {
    return fmt::format("{} {} on text ({}): {} streams, segments of {} ({} per pass), bptt {} (windows of {} "
                       "segments), {} parameters, {} threads, about {} of memory{}",
                       start > 0 ? "resuming" : "training", run.config.model.kind, run.config.data,
                       run.config.train.batch_size, run.config.segment_length, lm_epoch_segments(run),
                       bptt_to_string(run.config.bptt), lm_window(run), params, threads,
                       format_bytes(train_memory_estimate(run).total()),
                       start > 0 ? fmt::format(" (from step {})", start) : "");
  }

  // The window of a step, its carried states (the cache rows count as segment rows), and the
  // bytes of the three splits, with one split's streams copied while it is evaluated.
  Workload train_workload(const RunSetup& run) const override {
    Workload w;
    w.batch = run.config.train.batch_size;
    w.training = true;
    w.recompute = run.config.bptt_recompute;
    w.seg_len.assign(size_t(lm_window(run)), run.config.segment_length);
    w.decoding = false;
    for (int64_t n : run.text.counts) w.data_bytes += double(n);
    w.data_bytes += double(*std::max_element(run.text.counts.begin(), run.text.counts.end())) * 2;
    const ModelConfig& mc = run.config.model;
    const double state = (double(mc.num_mem_tokens) + double(mc.n_layer) * mc.mem_len) * w.batch * mc.d_model * 4;
    w.data_bytes += state * (lm_window(run) + 2);  // the stored states and evaluation's two
    return w;
  }

  // No curriculum: every step is a window of segments of segment_length.
  MemoryEstimate train_memory_estimate(const RunSetup& run) const override {
    return estimate_memory(run.config.model, train_workload(run));
  }

  std::string training_description(const RunSetup& run) const override {
    const Config& c = run.config;
    return fmt::format("training ({} model, {} streams, windows of {} segments of {})", c.model.kind,
                       c.train.batch_size, lm_window(run), c.segment_length);
  }

  std::string batch_text(int batch) const override { return fmt::format("{} streams", batch); }

  Workload eval_workload(const RunSetup& run, int batch, const std::string& split) const override {
    Workload w;
    w.batch = batch;
    w.seg_len = run.seg_len;
    w.decoding = false;
    w.data_bytes = 2 * split_file_bytes(run, split);  // the split's file and its streams
    return w;
  }

  double split_file_bytes(const RunSetup& run, const std::string& split) const override {
    std::error_code ec;
    auto n = fs::file_size(text_split_file(run.config.data, split), ec);
    return ec ? 0.0 : double(n);
  }

  std::unique_ptr<TrainingData> open_training_data(const RunSetup& run) const override {
    return open_text_data(run);
  }

  EvalResult evaluate_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                            int64_t samples, const PredictionCallback& on_predictions,
                            EvalSchedule schedule, bool count_non_finite) const override {
    if (on_predictions) throw std::logic_error("a language model's evaluation has no per-sample predictions");
    if (count_non_finite) throw std::logic_error("a language model's evaluation has no samples to count");
    if (schedule != EvalSchedule::sequential)
      throw std::logic_error("a language model's evaluation carries its state stream by stream: sequential only");
    return evaluate_text_split(engine, run, split, batch, samples);
  }

  // Next-byte loss over every position of the split.
  std::string result_json(const EvalResult& r, const std::vector<int>& seg_len) const override {
    refuse_non_finite(r);
    json j;
    j["loss"] = r.loss;
    j["bpc"] = r.bpc.value_or(0.0);
    j["acc_teacher_forced"] = r.acc_teacher_forced;
    j["positions"] = r.positions;
    j["streams"] = r.streams;
    j["segment_length"] = seg_len.at(0);
    return j.dump();
  }

  bool can_pack() const override { return false; }

  void check_command(const std::string& command, const std::string& run_dir, const Config& config) const override {
    if (command == "rmt attn")
      fail("run {} is a language model (segment_length {}, text {}): rmt attn draws one sample of an "
           "algorithmic task across its segments; a language model's attention over its streams is "
           "not drawn", run_dir, config.segment_length, config.data);
    if (command == "rmt eval --predictions")
      fail("--predictions: run {} is a language model; it has no samples whose answers could be listed "
           "(rmt sample writes what it generates)", run_dir);
  }
};

}  // namespace

const RunFamily& samples_family() {
  static const SamplesFamily family;
  return family;
}

const RunFamily& text_family() {
  static const TextFamily family;
  return family;
}

const RunFamily& run_family(FamilyKind kind) {
  static const RunFamily* const families[] = {&samples_family(), &text_family()};  // in FamilyKind's order
  return *families[int(kind)];
}

const RunFamily& family_of(const Config& config) { return run_family(config_family(config).kind()); }

const RunFamily& family_of_data(const std::string& dir) { return run_family(dataset_family(dir).kind()); }

}  // namespace rmt
