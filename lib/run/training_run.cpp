// One run's part of the training loop (training_run.h): set up, after each step the log, the
// curriculum, validation and checkpoints, and at the end the report.
#include "lib/run/training_run.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "lib/core/error.h"
#include "lib/core/provenance.h"
#include "lib/core/random.h"
#include "lib/core/system.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config_family.h"
#include "lib/run/curriculum.h"
#include "tasks/family.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// What a run reports as it goes: metrics.jsonl (one JSON object per log interval, evaluation and
// event) and the caller's progress callback (TrainOptions::on_progress).
class RunLog {
 public:
  RunLog(fs::path metrics_path, const TrainOptions& opt, int64_t max_steps, bool lm)
      : path_(std::move(metrics_path)), opt_(opt) {
    progress_.max_steps = max_steps;
    progress_.lm = lm;
  }
  // One training step done (its loss); every log_every steps, the interval's mean loss and speed.
  void step(double loss) {
    interval_steps_ += 1;
    interval_loss_ += loss;
  }
  // The interval's line; reported unless an evaluation of this step reports it (one line, with
  // the new validation value, not two with the old one first).
  void interval(int64_t step, double lr, double grad_norm, int64_t tokens_per_step, double elapsed_s, bool report) {
    so_far(step, lr, tokens_per_step, elapsed_s);
    line(json{{"step", step}, {"loss", progress_.loss}, {"lr", lr}, {"grad_norm", grad_norm},
              {"tokens_per_s", progress_.tokens_per_s}});
    if (report && opt_.on_progress) opt_.on_progress(progress_);
    restart_interval();
  }
  // The progress of the interval so far (its mean loss, speed and learning rate): what an
  // evaluation between two log lines reports, rather than nothing yet.
  void so_far(int64_t step, double lr, int64_t tokens_per_step, double elapsed_s) {
    progress_.step = step;
    progress_.elapsed_s = elapsed_s;
    progress_.is_eval = false;
    if (interval_steps_ == 0) return;
    progress_.loss = interval_loss_ / double(interval_steps_);
    progress_.lr = lr;
    progress_.tokens_per_s = double(interval_steps_) * double(tokens_per_step) /
                             std::max(seconds_since(interval_start_), 1e-9);
  }
  // An evaluation: its metrics line now, its progress report by evaluated() once checkpointed.
  void evaluation(int64_t step, const EvalResult& val, double elapsed_s, json metrics) {
    progress_.step = step;
    progress_.val_loss = val.loss;
    progress_.val_acc = val.acc_teacher_forced;
    progress_.val_bpc = val.bpc;
    progress_.elapsed_s = elapsed_s;
    progress_.is_eval = true;
    line(metrics);
  }
  void evaluated() {
    if (opt_.on_progress) opt_.on_progress(progress_);
  }
  // An event shown on its own line (a stage began, the run is solved).
  void note(std::string text) {
    if (!opt_.on_progress) return;
    TrainProgress event = progress_;
    event.note = std::move(text);
    opt_.on_progress(event);
  }
  void line(const json& j) { append_line(path_, j.dump()); }
  void restart_interval() {  // evaluation time is not training time
    interval_start_ = std::chrono::steady_clock::now();
    interval_steps_ = 0;
    interval_loss_ = 0;
  }

 private:
  fs::path path_;
  const TrainOptions& opt_;
  TrainProgress progress_;
  std::chrono::steady_clock::time_point interval_start_ = std::chrono::steady_clock::now();
  int64_t interval_steps_ = 0;
  double interval_loss_ = 0;
};

namespace {

// Restores a run's state for --resume and checks it against the run: its curriculum stage, and
// its dataset (refused if regenerated in place since the run started).
void resume_state(const Config& config, const fs::path& dir, Model& model, Adam& adam, LrSchedule& sched,
                  TrainState& st, bool with_progression, TrainingData& data) {
  const fs::path state_path = dir / "state.safetensors";
  const std::string fingerprint = st.dataset_fingerprint;
  load_state(state_path.string(), model, adam, sched, st, with_progression, data);
  if (!with_progression) st.progression = fixed_progression(config, st.step);
  if (st.progression.stage >= config.train.curriculum)
    fail("{}: corrupt training state: curriculum stage {} of a run with train.curriculum {}",
         state_path.string(), st.progression.stage + 1, config.train.curriculum);
  if (st.dataset_fingerprint.empty()) {
    fmt::print(stderr, "note: {} records no dataset fingerprint (an older rmt wrote it); the "
               "dataset is not checked against the one the run started on\n", state_path.string());
  } else if (st.dataset_fingerprint != fingerprint) {
    fail("--resume: dataset {} changed since the run started: its fingerprint is now {}, the "
         "run recorded {} in {}; resume on the original data, or train into a new directory",
         config.data, fingerprint, st.dataset_fingerprint, state_path.string());
  }
  st.dataset_fingerprint = fingerprint;
  truncate_metrics(dir / "metrics.jsonl", st.step);
}

// results.json: the test metrics of the best checkpoint, how the run went, and what made it.
json run_results(const RunSetup& run, const EvalResult& test, const TrainState& st, double wall_time_s) {
  const Config& config = run.config;
  json results = json::parse(run.family->result_json(test, run.seg_len));
  results["split"] = "test";
  results["checkpoint"] = "best";
  results["best_step"] = st.best_step;
  results["best_val_loss"] = st.best_val_loss;
  results["steps"] = st.step;
  results["wall_time_s"] = wall_time_s;
  results["git_commit"] = RMT_GIT_COMMIT;
  results["rmt_version"] = RMT_VERSION;
  results["threads"] = num_threads();
  results["device"] = config.device;
  add_provenance(results);  // the CPU, the build and the GEMM library that made these numbers
  results["bptt"] = bptt_to_string(config.bptt);
  results["dataset_fingerprint"] = st.dataset_fingerprint;
  // Why the run ended, and when its curriculum stages began (lib/run/curriculum.h).
  results["end_reason"] = st.progression.solved() ? "solved" : st.progression.unmastered() ? "unmastered" : "max_steps";
  if (config.train.target > 0)
    results["solved_step"] = st.progression.solved() ? json(st.progression.solved_step) : json(nullptr);
  if (config.train.curriculum > 1) {
    json stages = json::array();
    for (size_t i = 0; i < st.progression.stage_first_step.size(); ++i)
      stages.push_back({{"segments", curriculum_stage_segments(config, int(i))},
                        {"first_step", st.progression.stage_first_step[i]}});
    results["curriculum"] = stages;
  }
  // The memory estimate the run was admitted with, beside what it used (tests keep them close);
  // both in MiB, as rmt bench's peak_rss_mb.
  results["memory_estimate_mb"] = std::round(run.family->train_memory_estimate(run).total() / (1 << 20));
  results["peak_rss_mb"] = std::round(sys::peak_rss_bytes() / (1 << 20));
  return results;
}

}  // namespace

TrainingRun::TrainingRun(const Config& config_in, const TrainOptions& opt)
    : opt_(opt), run_(prepare_run(config_in)), dir_(opt.run_dir), state_path_(dir_ / "state.safetensors"),
      sched_(run_.config.train) {
  const Config& config = run_.config;
  const TrainConfig& tc = config.train;
  check_threads(tc.threads, "train.threads");
  check_memory_fits(run_.family->train_memory_estimate(run_), run_.family->training_description(run_));
  backend_by_name(config.device);  // a device this build or machine lacks: refused here

  // ---- The run directory and the data.
  check_run_dir_outside_data(dir_, config.data);
  resuming_ = open_run_directory(dir_, to_yaml(config), opt.resume, lock_);
  st_.dataset_fingerprint = dataset_fingerprint(config.data);  // --resume refuses other data
  data_ = run_.family->open_training_data(run_);
  with_progression_ = tc.target > 0;  // the state files of other runs stay as they were
  mastery_ = tc.curriculum_advance == "mastery";
  log_ = std::make_unique<RunLog>(dir_ / "metrics.jsonl", opt_, tc.max_steps, config_family(run_.config).validates_bpc());
}

TrainingRun::~TrainingRun() = default;

void TrainingRun::use() {
  if (!packed_) return;
  packed_->activate(slot_);
  adam_->t = adam_steps_;
}

void TrainingRun::attach(Model& model, Adam& adam, Engine& engine, PackedBackend* packed, int slot) {
  const TrainConfig& tc = run_.config.train;
  model_ = &model, adam_ = &adam, engine_ = &engine, packed_ = packed, slot_ = slot;
  use();
  // ---- The model and its optimizer, resumed if asked.
  model.init_weights(mix_seed(tc.seed, 0x1417));
  if (packed_) {  // a slot an earlier run held: its moments start from zero again
    adam.moment1.zeroed(*packed_, adam.moment1.size());
    adam.moment2.zeroed(*packed_, adam.moment2.size());
    adam.t = 0;
  }
  adam.beta2 = float(tc.adam_beta2);
  adam.set_weight_decay(tc.weight_decay, model.param_info);
  if (resuming_) resume_state(run_.config, dir_, model, adam, sched_, st_, with_progression_, *data_);
  adam_steps_ = adam.t;
  engine.set_recompute(run_.config.bptt_recompute);
  if (opt_.on_start) opt_.on_start(run_, model.num_params(), st_.step);
  wall_start_ = std::chrono::steady_clock::now();
  wall_before_ = st_.wall_time_s;
  checkpoint_step_ = resuming_ ? st_.step : -1;
}

double TrainingRun::elapsed() const { return wall_before_ + seconds_since(wall_start_); }

bool TrainingRun::ended() const { return st_.step >= run_.config.train.max_steps || st_.progression.ended(); }

// Where --resume would continue from.
std::string TrainingRun::resume_point() const {
  const TrainConfig& tc = run_.config.train;
  if (checkpoint_step_ < 0)
    return fmt::format("no checkpoint was written yet (the first comes at step {}); "
                       "`--resume` restarts the run from step 0", std::min(tc.eval_every, tc.max_steps));
  return fmt::format("the last good checkpoint is {} (step {}); `--resume` continues from it",
                     state_path_.string(), checkpoint_step_);
}

// A curriculum stage began: a metrics line (before the checkpoint that includes it, so a
// resumed run neither loses nor repeats it) and a note. Under mastery, validation moves to the
// stage's segments, so the best checkpoint starts anew when their number changes.
void TrainingRun::stage_began(const char* why, int previous_segments) {
  const Config& config = run_.config;
  const int segments = curriculum_stage_segments(config, st_.progression.stage);
  log_->line({{"step", st_.step}, {"stage", st_.progression.stage + 1}, {"segments", segments}, {"why", why}});
  if (mastery_ && segments != previous_segments) st_.best_val_loss = INFINITY, st_.best_step = -1;
  log_->note(fmt::format("curriculum stage {} of {}: {} segments from step {} ({})", st_.progression.stage + 1,
                         config.train.curriculum, segments, st_.step, why));
}

StepSettings TrainingRun::step_settings(int* stage_segments) const {
  const Config& config = run_.config;
  StepSettings settings;
  settings.bptt = config.bptt;
  settings.clip = config.train.clip;
  settings.lr = sched_.lr_at(st_.step);
  settings.dropout_seed = mix_seed(config.train.seed, 0xD80, uint64_t(st_.step));
  *stage_segments = curriculum_stage_segments(config, st_.progression.stage);
  return settings;
}

void TrainingRun::after_step(const StepResult& step, int stage_segments, double lr) {
  const Config& config = run_.config;
  const TrainConfig& tc = config.train;
  const double loss = step.loss;
  if (!step.applied)
    fail("non-finite {} at step {} (loss {}, grad norm {}); {}", std::isfinite(loss) ? "gradient" : "loss",
         st_.step + 1, loss, step.grad_norm, resume_point());
  st_.step += 1;
  log_->step(loss);
  bool stage_scheduled = false;  // the stage's share of the steps ran out with this step
  progression_segments(config, st_.progression, st_.step, &stage_scheduled);
  if (stage_scheduled) stage_began(mastery_ ? "its share of the steps ran out" : "scheduled", stage_segments);
  if (st_.progression.unmastered() && st_.progression.unmastered_step == st_.step)
    log_->note(fmt::format("stage {} of {} ({} segments) was not mastered in its share of the steps: the run "
                           "ends at step {} (train.stop_unmastered)", st_.progression.stage + 1, tc.curriculum,
                           stage_segments, st_.step));

  // ---- Log: the interval's mean loss and speed.
  const bool evaluating = st_.step % tc.eval_every == 0 || st_.step == tc.max_steps || st_.progression.unmastered();
  const int64_t tokens_per_step = int64_t(tc.batch_size) * run_.seq_len;
  if (st_.step % tc.log_every == 0 || st_.step == tc.max_steps)
    log_->interval(st_.step, lr, step.grad_norm, tokens_per_step, elapsed(), !evaluating);
  else if (evaluating)
    log_->so_far(st_.step, lr, tokens_per_step, elapsed());

  // ---- Evaluate and checkpoint.
  if (evaluating) evaluate_and_checkpoint();
  if (opt_.abort_after_step > 0 && st_.step == opt_.abort_after_step) std::_Exit(86);  // tests: a kill
}

// Validation, the curriculum and the stopping rule, then the checkpoints (state.safetensors
// last: the commit point for --resume).
void TrainingRun::evaluate_and_checkpoint() {
  const Config& config = run_.config;
  use();
  const int val_segments = validation_segments(config, st_.progression);
  EvalResult val;
  try {
    val = data_->validate(*engine_, val_segments);
  } catch (const Error& e) {
    fail("validation at step {}: {}; {}", st_.step, e.what(), resume_point());
  }
  sched_.on_eval(val.loss);
  const bool is_best = val.loss < st_.best_val_loss;
  if (is_best) st_.best_val_loss = val.loss, st_.best_step = st_.step;
  json line{{"step", st_.step}, {"val_loss", val.loss}, {"val_acc_teacher_forced", val.acc_teacher_forced},
            {"lr", sched_.lr_at(st_.step)}, {"best", is_best}};
  if (val.bpc) line["val_bpc"] = *val.bpc;
  if (mastery_) line["val_segments"] = val_segments;
  log_->evaluation(st_.step, val, elapsed(), line);
  const ValidationOutcome outcome = record_validation(config, st_.progression, st_.step, val.acc_teacher_forced);
  if (outcome == ValidationOutcome::stage_mastered) stage_began("mastered", val_segments);
  if (outcome == ValidationOutcome::solved) log_->line({{"step", st_.step}, {"solved_step", st_.progression.solved_step}});
  st_.wall_time_s = elapsed();
  Model& model = *model_;
  try {
    save_checkpoint((dir_ / "last.safetensors").string(), model, model.params, {{"step", std::to_string(st_.step)}});
    if (is_best)
      save_checkpoint((dir_ / "best.safetensors").string(), model, model.params, {{"step", std::to_string(st_.step)}});
    save_state(state_path_.string(), model, *adam_, sched_, st_, with_progression_, *data_);
  } catch (const Error& e) {  // a failed write (disk full, ...) leaves the previous files whole
    fail("{}; the checkpoint of step {} was not saved and {}", e.what(), st_.step, resume_point());
  }
  checkpoint_step_ = st_.step;
  log_->evaluated();
  if (outcome == ValidationOutcome::solved)
    log_->note(fmt::format("solved: validation accuracy >= {} at {} evaluations in a row from step {}",
                           config.train.target, config.train.target_evals, st_.progression.solved_step));
  log_->restart_interval();
}

void TrainingRun::finish() {
  use();
  load_parameters((dir_ / "best.safetensors").string(), *model_);
  const EvalResult test = data_->test(*engine_);
  write_file_atomic(dir_ / "results.json", run_results(run_, test, st_, elapsed()).dump(2) + "\n");
}

}  // namespace rmt
