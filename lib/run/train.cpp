#include "lib/run/train.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/optim.h"
#include "lib/core/provenance.h"
#include "lib/core/random.h"
#include "lib/core/system.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/curriculum.h"
#include "lib/run/run_directory.h"
#include "lib/run/schedule.h"
#include "lib/run/train_state.h"
#include "lib/run/train_step.h"
#include "lib/run/training_data.h"
#include "tasks/family.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

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
  void interval(int64_t step, double lr, double grad_norm, int64_t tokens_per_step, double elapsed_s) {
    progress_.step = step;
    progress_.loss = interval_loss_ / double(interval_steps_);
    progress_.lr = lr;
    progress_.tokens_per_s = double(interval_steps_) * double(tokens_per_step) /
                             std::max(seconds_since(interval_start_), 1e-9);
    progress_.elapsed_s = elapsed_s;
    progress_.is_eval = false;
    line(json{{"step", step}, {"loss", progress_.loss}, {"lr", lr}, {"grad_norm", grad_norm},
              {"tokens_per_s", progress_.tokens_per_s}});
    if (opt_.on_progress) opt_.on_progress(progress_);
    restart_interval();
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
  json results = json::parse(eval_result_json(test, run.seg_len));
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
  results["memory_estimate_mb"] = std::round(train_memory_estimate(run).total() / (1 << 20));
  results["peak_rss_mb"] = std::round(sys::peak_rss_bytes() / (1 << 20));
  return results;
}

}  // namespace

void train(const Config& config_in, const TrainOptions& opt) {
  // ---- The run: its config on its dataset, refused before anything large is allocated or
  // the run directory is touched (absurd sizes, a device this build lacks).
  const RunSetup run = prepare_run(config_in);
  const Config& config = run.config;
  const TrainConfig& tc = config.train;
  check_threads(tc.threads, "train.threads");
  check_memory_fits(train_memory_estimate(run), training_description(run));
  Backend& be = backend_by_name(config.device);
  set_num_threads(tc.threads);

  // ---- The run directory, the data, the model and its optimizer, resumed if asked.
  const fs::path dir(opt.run_dir), state_path = dir / "state.safetensors";
  check_run_dir_outside_data(dir, config.data);
  DirectoryLock lock;
  const bool resuming = open_run_directory(dir, to_yaml(config), opt.resume, lock);
  TrainState st;
  st.dataset_fingerprint = dataset_fingerprint(config.data);  // --resume refuses other data
  const std::unique_ptr<TrainingData> data = open_training_data(run);
  Model model(config.model, be);
  model.init_weights(mix_seed(tc.seed, 0x1417));
  Adam adam(be, model.num_params());
  adam.beta2 = float(tc.adam_beta2);
  LrSchedule sched(tc);
  const bool with_progression = tc.target > 0;  // the state files of other runs stay as they were
  if (resuming) resume_state(config, dir, model, adam, sched, st, with_progression, *data);
  Engine engine(model, be);
  engine.set_recompute(config.bptt_recompute);
  if (opt.on_start) opt.on_start(run, model.num_params(), st.step);

  RunLog log(dir / "metrics.jsonl", opt, tc.max_steps, is_lm(config));
  const auto wall_start = std::chrono::steady_clock::now();
  const double wall_before = st.wall_time_s;
  auto elapsed = [&] { return wall_before + seconds_since(wall_start); };
  int64_t checkpoint_step = resuming ? st.step : -1;  // of state.safetensors; -1 = none yet
  auto resume_point = [&]() -> std::string {          // where --resume would continue from
    if (checkpoint_step < 0)
      return fmt::format("no checkpoint was written yet (the first comes at step {}); "
                         "`--resume` restarts the run from step 0", std::min(tc.eval_every, tc.max_steps));
    return fmt::format("the last good checkpoint is {} (step {}); `--resume` continues from it",
                       state_path.string(), checkpoint_step);
  };
  // A curriculum stage began: a metrics line (before the checkpoint that includes it, so a
  // resumed run neither loses nor repeats it) and a note. Under mastery, validation moves to the
  // stage's segments, so the best checkpoint starts anew when their number changes.
  const bool mastery = tc.curriculum_advance == "mastery";
  auto stage_began = [&](const char* why, int previous_segments) {
    const int segments = curriculum_stage_segments(config, st.progression.stage);
    log.line({{"step", st.step}, {"stage", st.progression.stage + 1}, {"segments", segments}, {"why", why}});
    if (mastery && segments != previous_segments) st.best_val_loss = INFINITY, st.best_step = -1;
    log.note(fmt::format("curriculum stage {} of {}: {} segments from step {} ({})", st.progression.stage + 1,
                         tc.curriculum, segments, st.step, why));
  };

  while (st.step < tc.max_steps && !st.progression.ended()) {
    // ---- Schedule: the learning rate, the dropout stream and the segments of this step.
    const double lr = sched.lr_at(st.step);
    const uint64_t dropout_seed = mix_seed(tc.seed, 0xD80, uint64_t(st.step));
    const int stage_segments = curriculum_stage_segments(config, st.progression.stage);

    // ---- Step: forward and backward on the step's batch, clip, Adam.
    StepSettings settings;
    settings.bptt = config.bptt;
    settings.clip = tc.clip;
    settings.lr = lr;
    settings.dropout_seed = dropout_seed;
    const StepResult step = data->train_step(engine, model, adam, st.step, stage_segments, settings);
    const double loss = step.loss;
    if (!step.applied)
      fail("non-finite {} at step {} (loss {}, grad norm {}); {}", std::isfinite(loss) ? "gradient" : "loss",
           st.step + 1, loss, step.grad_norm, resume_point());
    st.step += 1;
    log.step(loss);
    bool stage_scheduled = false;  // the stage's share of the steps ran out with this step
    progression_segments(config, st.progression, st.step, &stage_scheduled);
    if (stage_scheduled) stage_began(mastery ? "its share of the steps ran out" : "scheduled", stage_segments);
    if (st.progression.unmastered() && st.progression.unmastered_step == st.step)
      log.note(fmt::format("stage {} of {} ({} segments) was not mastered in its share of the steps: the run "
                           "ends at step {} (train.stop_unmastered)", st.progression.stage + 1, tc.curriculum,
                           stage_segments, st.step));

    // ---- Log: the interval's mean loss and speed.
    if (st.step % tc.log_every == 0 || st.step == tc.max_steps)
      log.interval(st.step, lr, step.grad_norm, int64_t(tc.batch_size) * run.seq_len, elapsed());

    // ---- Evaluate and checkpoint: validation, the curriculum and the stopping rule, then the
    // checkpoints (state.safetensors last: the commit point for --resume).
    if (st.step % tc.eval_every == 0 || st.step == tc.max_steps || st.progression.unmastered()) {
      const int val_segments = validation_segments(config, st.progression);
      EvalResult val;
      try {
        val = data->validate(engine, val_segments);
      } catch (const Error& e) {
        fail("validation at step {}: {}; {}", st.step, e.what(), resume_point());
      }
      sched.on_eval(val.loss);
      const bool is_best = val.loss < st.best_val_loss;
      if (is_best) st.best_val_loss = val.loss, st.best_step = st.step;
      json line{{"step", st.step}, {"val_loss", val.loss}, {"val_acc_teacher_forced", val.acc_teacher_forced},
                {"lr", sched.lr_at(st.step)}, {"best", is_best}};
      if (val.bpc) line["val_bpc"] = *val.bpc;
      if (mastery) line["val_segments"] = val_segments;
      log.evaluation(st.step, val, elapsed(), line);
      const ValidationOutcome outcome = record_validation(config, st.progression, st.step, val.acc_teacher_forced);
      if (outcome == ValidationOutcome::stage_mastered) stage_began("mastered", val_segments);
      if (outcome == ValidationOutcome::solved) log.line({{"step", st.step}, {"solved_step", st.progression.solved_step}});
      st.wall_time_s = elapsed();
      try {
        save_checkpoint((dir / "last.safetensors").string(), model, model.params, {{"step", std::to_string(st.step)}});
        if (is_best)
          save_checkpoint((dir / "best.safetensors").string(), model, model.params, {{"step", std::to_string(st.step)}});
        save_state(state_path.string(), model, adam, sched, st, with_progression, *data);
      } catch (const Error& e) {  // a failed write (disk full, ...) leaves the previous files whole
        fail("{}; the checkpoint of step {} was not saved and {}", e.what(), st.step, resume_point());
      }
      checkpoint_step = st.step;
      log.evaluated();
      if (outcome == ValidationOutcome::solved)
        log.note(fmt::format("solved: validation accuracy >= {} at {} evaluations in a row from step {}",
                             tc.target, tc.target_evals, st.progression.solved_step));
      log.restart_interval();
    }
    if (opt.abort_after_step > 0 && st.step == opt.abort_after_step) std::_Exit(86);  // tests: a kill
  }

  // ---- Report: the best checkpoint on the test split, into results.json.
  load_parameters((dir / "best.safetensors").string(), model);
  const EvalResult test = data->test(engine);
  write_file_atomic(dir / "results.json", run_results(run, test, st, elapsed()).dump(2) + "\n");
}

}  // namespace rmt
