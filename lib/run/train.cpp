// The training loop of `rmt train` (train.h): a run alone, or packed runs sharing one computation.
// What each run does around its steps (its files, curriculum, evaluations) is TrainingRun's.
#include "lib/run/train.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/core/optim.h"
#include "lib/run/run_family.h"
#include "lib/run/training_run.h"
#include "tasks/family.h"

namespace rmt {

void train(const Config& config_in, const TrainOptions& opt) {
  // ---- The run: its config on its dataset, its directory and data (TrainingRun).
  TrainingRun run(config_in, opt);
  const Config& config = run.config();
  Backend& be = backend_by_name(config.device);
  set_num_threads(config.train.threads);

  // ---- The model and its optimizer, initialised or resumed.
  Model model(config.model, be);
  Adam adam(be, model.num_params());
  Engine engine(model, be);
  run.attach(model, adam, engine);

  while (!run.ended()) {
    // ---- Schedule: the learning rate, the dropout stream and the segments of this step.
    int stage_segments = 0;
    const StepSettings settings = run.step_settings(&stage_segments);
    // ---- Step: forward and backward on the step's batch, clip, Adam.
    const StepResult step = run.data().train_step(engine, model, adam, run.step(), stage_segments, settings);
    // ---- Log, curriculum, evaluation and checkpoints.
    run.after_step(step, stage_segments, settings.lr);
  }
  // ---- Report: the best checkpoint on the test split, into results.json.
  run.finish();
}

std::string pack_shape(const Config& config) {
  if (!family_of(config).can_pack()) return "";  // a language model trains alone
  const ModelConfig& m = config.model;
  return fmt::format("{} L{} H{}x{} d{} ff{} dropout {} dropatt {} cache {} memory {} read_mem_from_cache {} "
                     "mem_init {} vocab {} | device {} | bptt_recompute {} | adam_beta2 {}",
                     m.kind, m.n_layer, m.n_head, m.d_head, m.d_model, m.d_inner, m.dropout, m.dropatt, m.mem_len,
                     m.num_mem_tokens, m.read_mem_from_cache, m.mem_init, m.n_token, config.device,
                     config.bptt_recompute, config.train.adam_beta2) +
         (traits_of(m.kind).has_assoc ? fmt::format(" | d_mem {}", m.d_mem) : "") +
         (config.train.weight_decay > 0 ? fmt::format(" | weight_decay {}", config.train.weight_decay) : "");
}

namespace {

// One host thread's pack: `slots` runs in one computation, taking jobs from the shared queue
// (next_job) as slots free up, until no job is left.
void run_pack(const std::vector<TrainJob>& jobs, std::vector<std::string>& errors, const RunSetup& first,
              const std::string& shape, int slots, const std::function<std::optional<size_t>()>& next_job) {
  // ---- The pack: one model, optimizer and engine with `slots` runs in every buffer.
  Backend& be = backend_by_name(first.config.device);
  PackedBackend pb(be, slots);
  Model model(first.config.model, pb);
  Adam adam(pb, model.num_params());
  Engine engine(model, pb);
  std::vector<std::unique_ptr<TrainingRun>> runs(static_cast<size_t>(slots));  // by slot
  std::vector<size_t> job_of(static_cast<size_t>(slots));
  StepCapture capture;  // on a device: the pack's step as one graph while it steps as one group
  // Ends the run in `slot`: its results when it is over, else the error that stopped it.
  auto leave = [&](int slot, const std::string& error) {
    std::unique_ptr<TrainingRun>& run = runs[size_t(slot)];
    errors[job_of[size_t(slot)]] = error;
    if (error.empty()) {
      try {
        run->finish();  // ---- Report: the best checkpoint on the test split, into results.json.
      } catch (const Error& e) {
        errors[job_of[size_t(slot)]] = e.what();
      }
    }
    run.reset();
  };

  while (true) {
    // ---- Join: free slots take the next jobs (checked against the pack as they join).
    for (int k = 0; k < slots; ++k)
      while (!runs[size_t(k)]) {
        const std::optional<size_t> j = next_job();
        if (!j) break;
        try {
          auto run = std::make_unique<TrainingRun>(jobs[*j].config, jobs[*j].options);
          if (pack_shape(run->config()) != shape)
            fail("{} cannot join a pack of {}: its model or settings differ", jobs[*j].options.run_dir, shape);
          if (run->config().train.threads != 1)
            fail("{}: train.threads {}: a packed run computes with one thread (train.threads 1)",
                 jobs[*j].options.run_dir, run->config().train.threads);
          run->attach(model, adam, engine, &pb, k);
          runs[size_t(k)] = std::move(run);
          job_of[size_t(k)] = *j;
          if (runs[size_t(k)]->ended()) leave(k, "");  // resumed after its last step
        } catch (const Error& e) {
          errors[*j] = e.what();
        }
      }
    // ---- Schedule: each run's settings and batch, in groups of one batch shape.
    struct Group {
      std::vector<PackedRunStep> steps;
      std::vector<int> stage_segments;
    };
    std::map<std::vector<int>, Group> groups;
    for (int k = 0; k < slots; ++k) {
      TrainingRun* run = runs[size_t(k)].get();
      if (!run) continue;
      int stage_segments = 0;
      const StepSettings settings = run->step_settings(&stage_segments);
      const StepBatch batch = run->data().train_batch(run->step(), stage_segments);
      // The scored positions too: the loss scale is one for a group (mqar's are B x pairs always).
      std::vector<int> key{batch.B, batch.T, batch.answer_size, settings.bptt, int(scored_positions(batch))};
      key.insert(key.end(), batch.seg_len->begin(), batch.seg_len->end());
      Group& g = groups[key];
      g.steps.push_back({k, batch, settings, run->adam_steps()});
      g.stage_segments.push_back(stage_segments);
    }
    if (groups.empty()) return;  // every job has ended
    // ---- Step: forward and backward of each group once, each run's clip and Adam; then each
    // run's log, curriculum, evaluation and checkpoints; a run that is over leaves its slot.
    for (auto& [key, g] : groups) {
      const std::vector<StepResult> results =
          packed_train_step(engine, model, pb, adam, g.steps, groups.size() == 1 ? &capture : nullptr);
      for (size_t i = 0; i < g.steps.size(); ++i) {
        const int k = g.steps[i].slot;
        try {
          runs[size_t(k)]->after_step(results[i], g.stage_segments[i], g.steps[i].settings.lr);
        } catch (const Error& e) {
          leave(k, e.what());
          continue;
        }
        if (runs[size_t(k)]->ended()) leave(k, "");
      }
    }
  }
}

}  // namespace

std::vector<std::string> train_packed(const std::vector<TrainJob>& jobs, int slots, int threads) {
  std::vector<std::string> errors(jobs.size());
  if (jobs.empty()) return errors;
  // The packs' shape, from the first job; each run is checked against it as it joins.
  const RunSetup first = prepare_run(jobs[0].config);
  const std::string shape = pack_shape(first.config);
  if (shape.empty()) fail("{}: a language model's runs train alone, not packed", jobs[0].options.run_dir);
  {
    MemoryEstimate e = first.family->train_memory_estimate(first);
    e.weights *= slots, e.optimizer *= slots, e.activations *= slots, e.data *= slots;
    check_memory_fits(e, fmt::format("{} packed runs ({})", slots, first.family->training_description(first)));
  }
  // ---- On the CPU one pack per thread, the slots split between them (a device's backend takes
  // its calls from one host thread); no more slots than the jobs fill, so that every pack trains.
  const int packs = first.config.device == "cpu" ? std::clamp(threads, 1, std::min<int>(slots, int(jobs.size()))) : 1;
  const int slots_per_pack = std::min((slots + packs - 1) / packs, int((jobs.size() + size_t(packs) - 1) / size_t(packs)));
  std::mutex queue_mutex;
  size_t next = 0;
  auto next_job = [&]() -> std::optional<size_t> {
    std::lock_guard<std::mutex> lock(queue_mutex);
    if (next >= jobs.size()) return std::nullopt;
    return next++;
  };
  // A pack's own failure (not one run's: those are in errors) ends the call once all packs ended.
  run_packs_on_threads(packs, [&](int) { run_pack(jobs, errors, first, shape, slots_per_pack, next_job); });
  return errors;
}

}  // namespace rmt
