#include "lib/run/eval_run.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/config.h"
#include "lib/run/run_data.h"
#include "lib/run/training_data.h"
#include "lib/run/run_directory.h"
#include "tasks/dataset.h"
#include "tasks/family.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Refuses a dataset that is not of the task a run was trained on: another task kind, or another
// vocabulary (other symbols: the ids would mean other things to the model). Lengths, pairs and
// sizes may differ: that is what evaluating on it is for.
void check_same_task(const std::string& run_dir, const std::string& trained_dir,
                     const DatasetMeta& trained, const std::string& other_dir,
                     const DatasetMeta& other) {
  // "copy", or "copy120 (a copy task)" for a preset
  auto task = [](const DatasetMeta& m) {
    const bool vowel = !m.kind.empty() && std::string("aeiou").find(m.kind[0]) != std::string::npos;
    return m.task == m.kind ? m.task : fmt::format("{} ({} {} task)", m.task, vowel ? "an" : "a", m.kind);
  };
  const std::string trained_on =
      fmt::format("run {} was trained on {} (dataset {})", run_dir, task(trained), trained_dir);
  // The run's own dataset is the reference only while it is what the run trained on: one
  // regenerated since (other symbols) is the one at fault, not the dataset being evaluated.
  auto refuse_if_own_dataset_changed = [&] {
    const std::string recorded = recorded_dataset_fingerprint(run_dir);
    if (!recorded.empty() && recorded != dataset_fingerprint(trained_dir))
      fail("dataset {} changed since run {} was trained (the fingerprint the run recorded is {}): it no "
           "longer says what the run's ids mean, so dataset {} cannot be checked against it; regenerate it "
           "with the run's options", trained_dir, run_dir, recorded, other_dir);
  };
  // The generate options that set a task's vocabulary, for the advice.
  const TaskKindTraits* trained_kind = find_task_kind(trained.kind);
  const std::string vocabulary_options = trained_kind ? trained_kind->vocabulary_options : "";
  if (other.kind != trained.kind) {
    refuse_if_own_dataset_changed();
    fail("dataset {} is task {}, but {}: evaluate on a dataset of the run's task", other_dir,
         task(other), trained_on);
  }
  const auto& a = trained.vocab;
  const auto& b = other.vocab;
  if (a != b) refuse_if_own_dataset_changed();
  if (a.size() != b.size())
    fail("dataset {} has a vocabulary of {} ids, but {} with {}: it was generated with other "
         "options{}; evaluate on data of the same vocabulary", other_dir, b.size(), trained_on, a.size(),
         vocabulary_options.empty() ? "" : " (" + vocabulary_options + "?)");
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      fail("dataset {}: id {} is '{}', but '{}' in dataset {} that run {} was trained on: "
           "evaluate on data of the same symbols", other_dir, i, b[i], a[i], trained_dir, run_dir);
}

// The ids of a model-view input row that a predictions line shows as the sample's input. Stacked
// (input = concat(X, y)[:-1]): X, its first len_x ids; the answer is y's last answer_size ids, so
// T - answer_size ids would drop X's last one where the answer is all of y (ar_remember). Aligned
// (sqeq: input X, target y position by position): X's ids before the first answer position.
// With unscored targets (mqar) the answer is spread through the row: all of it is shown.
int prediction_input_length(const DatasetMeta& meta, int seq_len) {
  if (meta.unscored_targets) return seq_len;
  return meta.stacked ? meta.len_x : seq_len - meta.answer_size;
}

// Appends one JSON line per sample of a batch to `out`: the sample's input, the target answer,
// the predicted one, decoded with the dataset's vocabulary.
PredictionCallback prediction_lister(const RunSetup& run, std::string& out) {
  return [&run, &out](int64_t start, int B, const int32_t* input, const int32_t* target, const int32_t* pred) {
    const int T = run.seq_len, A = run.meta.answer_size, shown = prediction_input_length(run.meta, T);
    auto text = [&](const int32_t* ids, int n) {
      const std::vector<int64_t> wide(ids, ids + n);
      return decode_ids(run.meta, wide.data(), n);
    };
    std::vector<int32_t> want, got;  // the answer's scored positions (target not -1)
    for (int b = 0; b < B; ++b) {
      const int32_t* in = input + int64_t(b) * T;
      nlohmann::ordered_json line;  // in the order a reader expects
      want.clear(), got.clear();
      std::vector<int> positions;
      for (int p = T - A; p < T; ++p)
        if (target[int64_t(b) * T + p] >= 0) {
          want.push_back(target[int64_t(b) * T + p]), got.push_back(pred[int64_t(b) * T + p]);
          positions.push_back(p);
        }
      line["sample"] = start + b;
      line["input"] = text(in, shown);
      if (run.meta.unscored_targets) line["positions"] = positions;  // where the scored ids are
      line["target"] = text(want.data(), int(want.size()));
      line["prediction"] = text(got.data(), int(got.size()));
      line["correct"] = want == got;
      out += line.dump() + "\n";
    }
  };
}

}  // namespace

RunSetup eval_setup_text(const EvalRunRequest& req, Config config, const std::string& config_path) {
  if (req.count_non_finite)
    fail("--count-non-finite: run {} is a language model; its loss is over every position of its "
         "streams, with no samples to score as wrong", req.run_dir);
  if (req.segments > 0)
    fail("--segments {}: run {} is a language model; it reads its streams in segments of its "
         "segment_length ({}), not in a number of segments", req.segments, req.run_dir,
         config.segment_length);
  if (!req.data_dir.empty()) {
    if (&family_of_data(req.data_dir) != &text_family())
      fail("dataset {} is not a text dataset, but run {} is a language model trained on text ({}): "
           "evaluate it on a dataset written by rmt generate text", req.data_dir, req.run_dir, config.data);
    config.data = req.data_dir;
  }
  validate(config);
  if (config.data.empty()) fail("{}: 'data' is not set", config_path);
  return text_family().prepare(config, false);
}

RunSetup eval_setup_samples(const EvalRunRequest& req, Config config, const std::string& config_path) {
  if (req.data_dir.empty()) {
    if (req.segments > 0) config.segments = req.segments;
    return prepare_run(config);
  }
  // The trained shape (segment length) and task come from the run's own dataset.
  validate(config);
  if (config.data.empty()) fail("{}: 'data' is not set", config_path);
  DatasetMeta trained;
  try {
    trained = dataset_family(config.data).samples_meta(config.data);
  } catch (const Error& e) {
    fail("{} (the dataset of run {}, which evaluating on other data compares with): {}", config.data,
         req.run_dir, e.what());
  }
  DatasetMeta other = dataset_family(req.data_dir).samples_meta(req.data_dir);
  check_same_task(req.run_dir, config.data, trained, req.data_dir, other);
  const RunSetup trained_run = prepare_run_with_meta(config, trained);
  const int longest = req.segment_length > 0 ? req.segment_length
                                             : *std::max_element(trained_run.seg_len.begin(), trained_run.seg_len.end());
  const int seq_len = other.input_length;
  config.data = req.data_dir;
  config.segments = req.segments > 0 ? req.segments : (seq_len + longest - 1) / longest;
  return prepare_run_with_meta(config, std::move(other));
}


Backend& run_backend(const std::string& device, const Config& run_config, const std::string& run_dir) {
  if (!device.empty()) return backend_by_name(device);
  try {
    return backend_by_name(run_config.device);
  } catch (const Error& e) {
    fail("{} (the device run {} was trained on, from its config.yaml); --device chooses another",
         e.what(), run_dir);
  }
}

EvalRunResult evaluate_run(const EvalRunRequest& req) {
  const fs::path run_dir(req.run_dir);
  if (!fs::is_directory(run_dir)) fail("{}: no such directory", run_dir.string());
  if (req.split != "train" && req.split != "val" && req.split != "test")
    fail("split '{}' is not one of train, val, test", req.split);
  if (req.segment_length < 0) fail("segment length {} must be at least 0 (0: the trained one)", req.segment_length);
  if (req.segment_length > 0 && (req.data_dir.empty() || req.segments > 0))
    fail("a segment length ({}) is for evaluating on other data (--data) without --segments", req.segment_length);
  if (req.segments < 0 || req.batch_size < 0 || req.samples < 0)
    fail("segments {}, batch size {} and samples {} must be at least 0 (0: the default)",
         req.segments, req.batch_size, req.samples);
  const std::string config_path = (run_dir / "config.yaml").string();
  const Config config = load_run_config(req.run_dir);
  const bool config_sets_n_token = config.model.n_token != 0;
  const RunSetup run = family_of(config).prepare_eval(req, config, config_path);
  if (req.schedule == EvalSchedule::diagonal && !kind_has_assoc(run.config.model.kind))
    fail("--schedule diagonal is for model.kind armt only, and run {} is {}: its memory goes from "
         "the last layer of a segment to the first layer of the next, or it has none, so no two "
         "layer-steps are independent (docs/armt.md, \"Diagonal evaluation\"); use --schedule sequential",
         req.run_dir, run.config.model.kind);
  if (!req.predictions.empty()) {
    run.family->check_command("rmt eval --predictions", req.run_dir, config);
    std::error_code ec;
    if (fs::is_directory(req.predictions, ec))
      fail("--predictions {} is a directory; give the file to write (JSON lines)", req.predictions);
  }

  // The checkpoint, on the backend, refused if it is not the run's model or would not fit.
  std::string ck = req.checkpoint;
  if (ck == "best" || ck == "last") ck = (run_dir / (ck + ".safetensors")).string();
  if (!fs::exists(ck)) fail("checkpoint {} does not exist", ck);
  check_threads(req.threads, "--threads");
  Backend& be = run_backend(req.device, run.config, run_dir.string());
  const int batch = req.batch_size > 0 ? req.batch_size : run.config.train.batch_size;
  auto model = load_checkpoint(ck, [&](const ModelConfig& c) {
    check_kind_runs_on(c.kind, req.device.empty() ? run.config.device : req.device);
    check_checkpoint_fits_run(c, ck, run, config_sets_n_token, config_path);
    check_memory_fits(estimate_memory(c, run.family->eval_workload(run, batch, req.split)),
                      fmt::format("evaluating {} ({})", ck, run.family->batch_text(batch)));
  }, be);
  set_num_threads(req.threads);

  // The split, evaluated (and each sample's prediction listed).
  Engine engine(*model);
  EvalRunResult out;
  std::string predictions;
  PredictionCallback list_predictions;
  if (!req.predictions.empty()) list_predictions = prediction_lister(run, predictions);
  try {
    out.result = run.family->evaluate_split(engine, run, req.split, batch, req.samples, list_predictions,
                                            req.schedule, req.count_non_finite);
  } catch (const Error& e) {
    fail("{} on the {} split of {}: {}", ck, req.split, run.config.data, e.what());
  }
  if (!req.predictions.empty()) write_file_atomic(req.predictions, predictions);
  out.family = run.family;
  out.data_dir = run.config.data;
  out.checkpoint = ck;
  out.split = req.split;
  out.seq_len = run.seq_len;
  out.seg_len = run.seg_len;
  return out;
}

std::string eval_run_json(const EvalRunResult& r) {
  json j = json::parse(r.family->result_json(r.result, r.seg_len));
  j["data"] = r.data_dir;
  if (!r.result.bpc) j["seq_len"] = r.seq_len;  // a language model has streams, not samples
  j["split"] = r.split;
  j["checkpoint"] = r.checkpoint;
  return j.dump();
}


}  // namespace rmt
