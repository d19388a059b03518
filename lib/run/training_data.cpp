#include "lib/run/training_data.h"

#include <algorithm>

#include "lib/core/error.h"
#include "lib/core/random.h"
#include "lib/run/lm.h"
#include "lib/run/train_step.h"

namespace rmt {

namespace {

// The sample order: a fresh permutation of the training split every epoch, a pure function of
// (seed, epoch), so a resumed run sees exactly the batches an uninterrupted one would.
class SampleOrder {
 public:
  SampleOrder(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  int64_t at(int64_t global_index) {
    int64_t epoch = global_index / n_;
    if (epoch != epoch_) {
      perm_.resize(size_t(n_));
      for (int64_t i = 0; i < n_; ++i) perm_[size_t(i)] = i;
      SplitMixRng rng(mix_seed(seed_, 0x5A4D, uint64_t(epoch)));
      for (int64_t i = n_ - 1; i > 0; --i) std::swap(perm_[size_t(i)], perm_[rng.below(uint64_t(i) + 1)]);
      epoch_ = epoch;
    }
    return perm_[size_t(global_index % n_)];
  }

 private:
  int64_t n_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> perm_;
};

// An algorithmic task: samples of seq_len positions, in segments.
class SampleData : public TrainingData {
 public:
  explicit SampleData(const RunSetup& run)
      : run_(run),
        B_(run.config.train.batch_size),
        T_(run.seq_len),
        train_(load_sample_split(run.config.data, run.meta, "train")),
        val_(load_sample_split(run.config.data, run.meta, "val")),
        order_(train_.n, run.config.train.seed),
        input_(size_t(B_) * T_),
        target_(size_t(B_) * T_),
        step_seg_len_(run.seg_len),
        val_opts_(eval_options(run, B_, run.config.train.eval_samples)) {
    val_opts_.free_running = false;  // validation is teacher-forced (cheap); test reports both
  }

  StepBatch train_batch(int64_t step, int segments) override {
    if (int(step_seg_len_.size()) != segments) step_seg_len_ = segment_lengths(T_, segments);
    for (int b = 0; b < B_; ++b) {
      const int64_t row = order_.at(step * B_ + b);
      std::copy_n(train_.input.begin() + row * T_, T_, input_.begin() + int64_t(b) * T_);
      std::copy_n(train_.target.begin() + row * T_, T_, target_.begin() + int64_t(b) * T_);
    }
    return StepBatch{input_.data(), target_.data(), B_, T_, &step_seg_len_, run_.meta.answer_size};
  }

  StepResult train_step(Engine& engine, Model& model, Adam& adam, int64_t step, int segments,
                        const StepSettings& settings) override {
    return rmt::train_step(engine, model, model.backend, adam, train_batch(step, segments), settings, &capture_);
  }

  EvalResult validate(Engine& engine, int segments) override {
    if (int(val_opts_.seg_len.size()) != segments) val_opts_.seg_len = segment_lengths(T_, segments);
    return evaluate(engine, val_, val_opts_);
  }

  EvalResult test(Engine& engine) override {
    train_ = SampleSplit();  // its memory makes room for the test split
    return evaluate_sample_split(engine, run_, "test", B_, 0);
  }

 private:
  const RunSetup& run_;
  const int B_, T_;
  SampleSplit train_, val_;
  SampleOrder order_;
  std::vector<int32_t> input_, target_;  // the step's batch [B, T]
  std::vector<int> step_seg_len_;        // the curriculum stage's segments
  EvalOptions val_opts_;
  StepCapture capture_;                  // the step, captured on a device that can
};

// A language model on a text dataset: B streams, segments of segment_length.
class TextData : public TrainingData {
 public:
  explicit TextData(const RunSetup& run)
      : run_(run),
        B_(run.config.train.batch_size),
        T_(run.config.segment_length),
        train_(make_text_streams(load_text_split(run.config.data, run.text, "train"), B_, "the train split")),
        val_(make_text_streams(load_text_split(run.config.data, run.text, "val"), B_, "the val split")),
        epoch_segments_(lm_epoch_segments(run)),
        carry_(lm_window(run) - 1),
        source_(text_segment_source(train_, T_)) {}

  StepResult train_step(Engine& engine, Model& model, Adam& adam, int64_t step, int segments,
                        const StepSettings& settings) override {
    (void)segments;  // one segment a step; bptt is the carry's window (lm_window)
    // Each pass over the streams starts from the initial state.
    const int64_t segment = step % epoch_segments_;
    if (segment == 0) carry_.reset();
    if (carry_.next_segment() != segment)
      fail("the carried state is at segment {} of the streams, but step {} trains on segment {}",
           carry_.next_segment(), step + 1, segment);
    return lm_train_step(engine, model, model.backend, adam, carry_, source_, B_, T_, settings, &capture_);
  }

  EvalResult validate(Engine& engine, int segments) override {
    (void)segments;
    return evaluate_lm(engine, val_, T_, run_.config.train.eval_samples);
  }

  EvalResult test(Engine& engine) override {
    train_ = TextStreams();  // its bytes make room for the test split's
    return evaluate_text_split(engine, run_, "test", B_, 0);
  }

  void save_carry(const Model& model, std::vector<TensorRef>& refs, std::map<std::string, std::string>& metadata,
                  std::deque<std::vector<float>>& host) const override {
    add_lm_carry(carry_, model, B_, refs, metadata, host);
  }
  void restore_carry(const SafetensorsFile& file, const std::string& path, const Model& model) override {
    restore_lm_carry(file, path, model, B_, carry_);
  }

 private:
  const RunSetup& run_;
  const int B_, T_;
  TextStreams train_, val_;
  int64_t epoch_segments_;
  LmCarry carry_;  // the state entering each segment of the next step's window
  LmSegmentSource source_;
  StepCapture capture_;  // the step, captured on a device that can
};

}  // namespace

EvalResult evaluate_text_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                               int64_t samples) {
  const std::string& data = run.config.data;
  return evaluate_lm(engine, make_text_streams(load_text_split(data, run.text, split), batch,
                                               fmt::format("the {} split of {}", split, data)),
                     run.config.segment_length, samples);
}

EvalResult evaluate_sample_split(Engine& engine, const RunSetup& run, const std::string& split, int batch,
                                 int64_t samples, const PredictionCallback& on_predictions,
                                 EvalSchedule schedule, bool count_non_finite) {
  // A batch at a time from the files: evaluation far past the trained length (hundreds of MB of
  // test split) needs memory for one batch only.
  SampleSplitReader reader(run.config.data, run.meta, split);
  auto read = [&](int64_t start, int B, std::vector<int32_t>& input, std::vector<int32_t>& target) {
    reader.read(start, B, input, target);
  };
  EvalOptions options = eval_options(run, batch, samples);
  options.on_predictions = on_predictions;
  options.schedule = schedule;
  options.count_non_finite = count_non_finite;
  return evaluate(engine, reader.n(), reader.seq_len(), read, options);
}

std::unique_ptr<TrainingData> open_sample_data(const RunSetup& run) { return std::make_unique<SampleData>(run); }
std::unique_ptr<TrainingData> open_text_data(const RunSetup& run) { return std::make_unique<TextData>(run); }

}  // namespace rmt
