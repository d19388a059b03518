#include "lib/run/train.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/optim.h"
#include "lib/core/provenance.h"
#include "lib/core/random.h"
#include "lib/files/io.h"
#include "lib/files/safetensors.h"
#include "lib/run/checkpoint.h"
#include "lib/run/curriculum.h"
#include "lib/run/lm.h"
#include "lib/run/schedule.h"
#include "lib/run/train_step.h"
#include "tasks/tasks.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// prepare_run with the dataset's meta already loaded (load_dataset_meta).
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

// A language model on a text dataset (docs/paper.md §7): the splits become train.batch_size
// streams, cut into segments of segment_length.
// check_splits: that every split gives each of the train.batch_size streams a target and the
// train split a whole segment (training; evaluation checks the split it reads).
RunSetup prepare_lm_run(Config config, bool check_splits = true) {
  const TrainConfig& tc = config.train;
  if (!is_lm(config))
    fail("data {} is a byte-level text dataset (rmt generate text): set segment_length, the "
         "positions per training segment of each of the train.batch_size streams, e.g. --set "
         "segment_length=128 (`segments` applies to algorithmic tasks)", config.data);
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

}  // namespace

RunSetup prepare_run(Config config) {
  validate(config);
  if (config.data.empty()) fail("config: 'data' (a dataset directory from `rmt generate`) is not set");
  if (is_text_dataset(config.data)) return prepare_lm_run(std::move(config));
  DatasetMeta meta = load_dataset_meta(config.data);
  if (is_lm(config))
    fail("segment_length {} applies to language models on text datasets (rmt generate text); {} "
         "is task {}, whose samples are cut into `segments`: leave segment_length out",
         config.segment_length, config.data, meta.task);
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

MemoryEstimate train_memory_estimate(const RunSetup& run) {
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
  // Every id of the dataset is < vocab (load_lm_split checks it); the model must cover them.
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

struct TrainState {  // what --resume restores besides parameters and Adam moments
  int64_t step = 0;
  double wall_time_s = 0;  // training wall time up to the checkpoint (summed over resumes)
  double best_val_loss = INFINITY;
  int64_t best_step = -1;
  std::string dataset_fingerprint;  // dataset_fingerprint() of the data the run started on
  Progression progression = start_progression();  // curriculum stage and target streak
};

// lm: a language model's carried state (its B streams), saved with the rest.
// with_progression: the curriculum and target progression too (runs with train.target; other
// runs' state files stay as they were).
void save_state(const std::string& path, const Model& model, const Adam& adam,
                const LrSchedule& sched, const TrainState& st, bool with_progression,
                const LmCarry* lm = nullptr, int B = 0) {
  const std::vector<float> params = model.params.download(), moment1 = adam.moment1.download(),
                           moment2 = adam.moment2.download();
  std::vector<TensorRef> refs;
  for (const auto& p : model.param_info) refs.push_back({"param." + p.name, p.shape, params.data() + p.offset});
  refs.push_back({"adam.m", {int64_t(moment1.size())}, moment1.data()});
  refs.push_back({"adam.v", {int64_t(moment2.size())}, moment2.data()});
  auto num = [](double x) { return fmt::format("{}", x); };
  std::map<std::string, std::string> lm_metadata;
  std::deque<std::vector<float>> lm_host;  // host copies the refs point into
  if (lm) add_lm_carry(*lm, model, B, refs, lm_metadata, lm_host);
  std::map<std::string, std::string> metadata =
                   {{"step", std::to_string(st.step)},
                    {"wall_time_s", num(st.wall_time_s)},
                    {"adam_t", std::to_string(adam.t)},
                    {"best_val_loss", num(st.best_val_loss)},
                    {"best_step", std::to_string(st.best_step)},
                    {"plateau_lr", num(sched.plateau_lr)},
                    {"plateau_best", num(sched.best)},
                    {"plateau_bad_evals", std::to_string(sched.bad_evals)},
                    {"plateau_has_best", sched.has_best ? "1" : "0"},
                    {"dataset_fingerprint", st.dataset_fingerprint}};
  metadata.insert(lm_metadata.begin(), lm_metadata.end());
  if (with_progression) {
    const Progression& p = st.progression;
    metadata["stage"] = std::to_string(p.stage);
    metadata["stage_first_step"] = steps_text(p.stage_first_step);
    metadata["target_streak"] = std::to_string(p.streak);
    metadata["target_streak_first_step"] = std::to_string(p.streak_first_step);
    metadata["solved_step"] = std::to_string(p.solved_step);
  }
  save_safetensors(path, refs, metadata);
}

void load_state(const std::string& path, Model& model, Adam& adam, LrSchedule& sched, TrainState& st,
                bool with_progression, LmCarry* lm = nullptr, int B = 0) {
  SafetensorsFile f = load_safetensors(path);
  if (lm) restore_lm_carry(f, path, model, B, *lm);
  auto tensor = [&](const std::string& name, int64_t numel) -> const Tensor& {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) fail("{}: missing '{}'", path, name);
    if (it->second.numel() != numel)
      fail("{}: '{}' has {} values, expected {} (was the config changed?)", path, name,
           it->second.numel(), numel);
    return it->second;
  };
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (const auto& p : model.param_info) {
    const Tensor& t = tensor("param." + p.name, p.numel);
    check_finite(path, "param." + p.name, t.data.data(), p.numel);
    std::copy(t.data.begin(), t.data.end(), params.begin() + p.offset);
  }
  const std::vector<float>& moment1 = tensor("adam.m", model.num_params()).data;
  const std::vector<float>& moment2 = tensor("adam.v", model.num_params()).data;
  check_finite(path, "adam.m", moment1.data(), model.num_params());
  check_finite(path, "adam.v", moment2.data(), model.num_params());
  model.params.upload(model.backend, params);
  adam.moment1.upload(model.backend, moment1);
  adam.moment2.upload(model.backend, moment2);
  auto md = [&](const char* key) {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) fail("{}: missing metadata '{}'", path, key);
    return it->second;
  };
  try {
    st.step = std::stoll(md("step"));
    st.wall_time_s = std::stod(md("wall_time_s"));
    adam.t = std::stoll(md("adam_t"));
    st.best_val_loss = std::stod(md("best_val_loss"));
    st.best_step = std::stoll(md("best_step"));
    sched.plateau_lr = std::stod(md("plateau_lr"));
    sched.best = std::stod(md("plateau_best"));
    sched.bad_evals = std::stoi(md("plateau_bad_evals"));
    sched.has_best = md("plateau_has_best") == "1";
    // absent from states written before fingerprints were recorded
    auto fp = f.metadata.find("dataset_fingerprint");
    st.dataset_fingerprint = fp == f.metadata.end() ? "" : fp->second;
    if (with_progression) {
      Progression& p = st.progression;
      p.stage = std::stoi(md("stage"));
      p.stage_first_step = parse_steps_text(md("stage_first_step"), path + ": stage_first_step");
      p.streak = std::stoi(md("target_streak"));
      p.streak_first_step = std::stoll(md("target_streak_first_step"));
      p.solved_step = std::stoll(md("solved_step"));
      if (p.stage < 0 || size_t(p.stage) + 1 != p.stage_first_step.size() || p.streak < 0)
        fail("{}: corrupt training state metadata (stage {} with {} stage starts)", path, p.stage,
             p.stage_first_step.size());
    }
  } catch (const std::logic_error&) {
    fail("{}: corrupt training state metadata", path);
  }
}

// Keeps the metrics lines up to `step` (a resumed run rewrites what came after).
void truncate_metrics(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a torn last line from a kill
    if (j.value("step", int64_t(0)) <= step) kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

}  // namespace

// The files a run writes into its directory (their temp files are cleaned on the next start).
static const std::vector<std::string> kRunFiles = {"config.yaml", "metrics.jsonl",
                                                   "last.safetensors", "best.safetensors",
                                                   "state.safetensors", "results.json"};

void train(const Config& config_in, const TrainOptions& opt) {
  RunSetup run = prepare_run(config_in);
  const Config& config = run.config;
  const TrainConfig& tc = config.train;
  check_threads(tc.threads, "train.threads");
  // Before anything large is allocated (or the run directory written): absurd sizes are
  // refused here, not by std::bad_alloc gigabytes later.
  const bool lm = is_lm(config);
  check_memory_fits(train_memory_estimate(run),
                    lm ? fmt::format("training ({} model, {} streams, windows of {} segments of {})",
                                     config.model.kind, tc.batch_size, lm_window(run), config.segment_length)
                       : fmt::format("training ({} model, batch {}, {} segments)", config.model.kind,
                                     tc.batch_size, config.segments));
  // The backend, before the run directory is touched: a device this build lacks is refused here.
  Backend& be = backend_by_name(config.device);
  set_num_threads(tc.threads);
  fs::path dir(opt.run_dir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail("--out {} exists and is not a directory", dir.string());
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create run directory {}: {}", dir.string(), ec.message());
  // One process at a time per run directory: the lock makes the temp-file cleanup below safe
  // (no other train can be writing here) and stops two trainings from interleaving checkpoints.
  DirectoryLock lock;
  if (!lock.try_lock(dir))
    fail("{} is in use by another rmt train (it holds the run directory's lock); wait for it "
         "to end, or choose another --out", dir.string());
  for (const fs::path& p : remove_stale_temp_files(dir, kRunFiles))
    fmt::print(stderr, "removed {}, left by a write that was killed mid-way\n", p.string());

  const fs::path config_path = dir / "config.yaml", metrics_path = dir / "metrics.jsonl",
                 state_path = dir / "state.safetensors";
  const std::string config_text = to_yaml(config);
  bool holds_run = false;
  for (const std::string& f : kRunFiles) holds_run = holds_run || fs::exists(dir / f);
  const bool has_checkpoint = fs::exists(state_path);
  // Resuming a run that has a checkpoint continues from it; resuming one that stopped before
  // its first checkpoint restarts it from step 0 (the same run, bit for bit).
  const bool resuming = opt.resume && has_checkpoint;
  if (opt.resume && holds_run) {
    if (!fs::exists(config_path)) {
      if (has_checkpoint)
        fail("{}: missing; cannot check that --resume uses the run's config", config_path.string());
    } else if (!same_config_text(read_file(config_path), config_text)) {
      fail("{}: the saved config differs from this one; resume with the same config and --set "
           "options, or train into a new directory", config_path.string());
    }
    if (!has_checkpoint) {
      // Whatever a run without a checkpoint left is redone from scratch.
      for (const char* f : {"metrics.jsonl", "last.safetensors", "best.safetensors", "results.json"})
        fs::remove(dir / f, ec);
      write_file_atomic(config_path, config_text);
      fmt::print(stderr, "{} stopped before its first checkpoint: restarting it from step 0\n",
                 dir.string());
    }
  } else if (holds_run) {
    if (has_checkpoint)
      fail("{} already holds a run; add --resume to continue it from its last checkpoint, or "
           "choose another --out", dir.string());
    fail("{} holds a run that stopped before its first checkpoint; add --resume to restart it "
         "from step 0 with the same config, or choose another --out", dir.string());
  } else {
    write_file_atomic(config_path, config_text);
  }

  // Identifies the data, so that --resume refuses a dataset regenerated in place.
  const std::string fingerprint = dataset_fingerprint(config.data);
  LmSplit train_split, val_split;
  TextStreams train_streams, val_streams;  // a language model's splits, as B streams
  if (lm) {
    train_streams = make_text_streams(load_text_split(config.data, run.text, "train"), tc.batch_size, "the train split");
    val_streams = make_text_streams(load_text_split(config.data, run.text, "val"), tc.batch_size, "the val split");
  } else {
    train_split = load_lm_split(config.data, run.meta, "train");
    val_split = load_lm_split(config.data, run.meta, "val");
  }
  // A language model's carried state: the state entering each segment of the next step's window.
  LmCarry carry(lm ? lm_window(run) - 1 : 0);
  Model model(config.model, be);
  model.init_weights(mix_seed(tc.seed, 0x1417));
  Adam adam(be, model.num_params());
  LrSchedule sched(tc);
  const bool with_progression = tc.target > 0;  // the state files of other runs stay as they were
  TrainState st;
  st.dataset_fingerprint = fingerprint;
  if (resuming) {
    load_state(state_path.string(), model, adam, sched, st, with_progression, lm ? &carry : nullptr,
               tc.batch_size);
    if (!with_progression) st.progression = fixed_progression(config, st.step);
    if (st.progression.stage >= tc.curriculum)
      fail("{}: corrupt training state: curriculum stage {} of a run with train.curriculum {}",
           state_path.string(), st.progression.stage + 1, tc.curriculum);
    if (st.dataset_fingerprint.empty()) {
      fmt::print(stderr, "note: {} records no dataset fingerprint (an older rmt wrote it); the "
                 "dataset is not checked against the one the run started on\n", state_path.string());
    } else if (st.dataset_fingerprint != fingerprint) {
      fail("--resume: dataset {} changed since the run started: its fingerprint is now {}, the "
           "run recorded {} in {}; resume on the original data, or train into a new directory",
           config.data, fingerprint, st.dataset_fingerprint, state_path.string());
    }
    st.dataset_fingerprint = fingerprint;
    truncate_metrics(metrics_path, st.step);
  }
  Engine engine(model, be);
  engine.set_recompute(config.bptt_recompute);
  if (opt.on_start) opt.on_start(run, model.num_params(), st.step);
  EvalOptions val_opts = eval_options(run, tc.batch_size, tc.eval_samples);
  val_opts.free_running = false;  // validation is teacher-forced (cheap); test reports both

  const int B = tc.batch_size, T = run.seq_len, A = run.meta.answer_size;
  SampleOrder order(train_split.n, tc.seed);
  std::vector<int32_t> input(size_t(B) * T), target(size_t(B) * T);
  auto wall_start = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto interval_start = wall_start;
  int64_t interval_steps = 0;
  double interval_loss = 0;
  TrainProgress progress;
  progress.max_steps = tc.max_steps;
  progress.lm = lm;

  const double wall_before = st.wall_time_s;
  int64_t checkpoint_step = resuming ? st.step : -1;  // of state.safetensors; -1 = none yet
  // Where --resume would continue from, for error messages.
  auto resume_point = [&]() -> std::string {
    if (checkpoint_step < 0)
      return fmt::format("no checkpoint was written yet (the first comes at step {}); "
                         "`--resume` restarts the run from step 0",
                         std::min(tc.eval_every, tc.max_steps));
    return fmt::format("the last good checkpoint is {} (step {}); `--resume` continues from it",
                       state_path.string(), checkpoint_step);
  };
  auto checkpoint = [&](bool is_best) {
    st.wall_time_s = wall_before + seconds_since(wall_start);
    try {
      save_checkpoint((dir / "last.safetensors").string(), model, model.params,
                      {{"step", std::to_string(st.step)}});
      if (is_best)
        save_checkpoint((dir / "best.safetensors").string(), model, model.params,
                        {{"step", std::to_string(st.step)}});
      save_state(state_path.string(), model, adam, sched, st, with_progression, lm ? &carry : nullptr,
                 tc.batch_size);  // the commit point for --resume
    } catch (const Error& e) {
      // A failed write (disk full, ...) leaves the previous files whole (atomic writes).
      fail("{}; the checkpoint of step {} was not saved and {}", e.what(), st.step, resume_point());
    }
    checkpoint_step = st.step;
  };

  auto announce = [&](std::string text) {  // an event, shown on its own line
    if (!opt.on_progress) return;
    TrainProgress event = progress;
    event.note = std::move(text);
    opt.on_progress(event);
  };
  // A stage that began: one metrics line (written before the checkpoint that includes it, so a
  // resumed run neither loses nor repeats it) and one progress note.
  const bool mastery = tc.curriculum_advance == "mastery";
  auto stage_began = [&](const char* why, int previous_segments) {
    const Progression& p = st.progression;
    const int segments = curriculum_stage_segments(config, p.stage);
    append_line(metrics_path, json{{"step", st.step}, {"stage", p.stage + 1}, {"segments", segments},
                                   {"why", why}}.dump());
    if (mastery && segments != previous_segments) {  // validation moves to the new segments: a new best
      st.best_val_loss = INFINITY;
      st.best_step = -1;
    }
    announce(fmt::format("curriculum stage {} of {}: {} segments from step {} ({})", p.stage + 1,
                         tc.curriculum, segments, st.step, why));
  };
  std::vector<int> step_seg_len = run.seg_len;  // this curriculum stage's segments
  const int64_t epoch_segments = lm ? lm_epoch_segments(run) : 0;
  const LmSegmentSource lm_source = lm ? text_segment_source(train_streams, T) : LmSegmentSource();
  while (st.step < tc.max_steps && !st.progression.solved()) {
    const double lr = sched.lr_at(st.step);
    const uint64_t dropout_seed = mix_seed(tc.seed, 0xD80, uint64_t(st.step));
    StepResult step;
    if (lm) {
      // Step s trains on segment s mod (segments per pass) of every stream; each pass over the
      // streams starts from the initial state.
      const int64_t segment = st.step % epoch_segments;
      if (segment == 0) carry.reset();
      if (carry.next_segment() != segment)
        fail("{}: the carried state is at segment {} of the streams, but step {} trains on "
             "segment {}", state_path.string(), carry.next_segment(), st.step + 1, segment);
      const double lm_loss = lm_train_step(engine, carry, lm_source, B, T, true, dropout_seed);
      step = optimizer_step(model, be, adam, lm_loss, tc.clip, lr);
    } else {
      const int step_segments = curriculum_stage_segments(config, st.progression.stage);
      if (int(step_seg_len.size()) != step_segments) step_seg_len = segment_lengths(T, step_segments);
      for (int b = 0; b < B; ++b) {
        int64_t row = order.at(st.step * B + b);
        std::copy_n(train_split.input.begin() + row * T, T, input.begin() + int64_t(b) * T);
        std::copy_n(train_split.target.begin() + row * T, T, target.begin() + int64_t(b) * T);
      }
      StepSettings settings;
      settings.bptt = config.bptt;
      settings.clip = tc.clip;
      settings.lr = lr;
      settings.dropout_seed = dropout_seed;
      step = train_step(engine, model, be, adam, {input.data(), target.data(), B, T, &step_seg_len, A}, settings);
    }
    const double loss = step.loss, grad_norm = step.grad_norm;
    if (!step.applied)
      fail("non-finite {} at step {} (loss {}, grad norm {}); {}",
           std::isfinite(loss) ? "gradient" : "loss", st.step + 1, loss, grad_norm,
           resume_point());
    st.step += 1;
    interval_steps += 1;
    interval_loss += loss;
    bool stage_scheduled = false;  // the stage's share of the steps ran out with this step
    int stage_segments = curriculum_stage_segments(config, st.progression.stage);
    if (!lm) progression_segments(config, st.progression, st.step, &stage_scheduled);
    if (stage_scheduled) stage_began(mastery ? "its share of the steps ran out" : "scheduled", stage_segments);

    const bool log_now = st.step % tc.log_every == 0 || st.step == tc.max_steps;
    const bool eval_now = st.step % tc.eval_every == 0 || st.step == tc.max_steps;
    if (log_now) {
      double secs = seconds_since(interval_start);
      progress.step = st.step;
      progress.loss = interval_loss / double(interval_steps);
      progress.lr = lr;
      progress.tokens_per_s = double(interval_steps) * B * T / std::max(secs, 1e-9);
      progress.elapsed_s = seconds_since(wall_start);
      progress.is_eval = false;
      append_line(metrics_path, json{{"step", st.step}, {"loss", progress.loss}, {"lr", lr},
                                     {"grad_norm", grad_norm},
                                     {"tokens_per_s", progress.tokens_per_s}}.dump());
      if (opt.on_progress) opt.on_progress(progress);
      interval_start = std::chrono::steady_clock::now();
      interval_steps = 0;
      interval_loss = 0;
    }
    if (eval_now) {
      EvalResult val;
      const int val_segments = validation_segments(config, st.progression);
      if (!lm && int(val_opts.seg_len.size()) != val_segments) val_opts.seg_len = segment_lengths(T, val_segments);
      try {
        val = lm ? evaluate_lm(engine, val_streams, T, tc.eval_samples) : evaluate(engine, val_split, val_opts);
      } catch (const Error& e) {
        fail("validation at step {}: {}; {}", st.step, e.what(), resume_point());
      }
      sched.on_eval(val.loss);
      const bool is_best = val.loss < st.best_val_loss;
      if (is_best) st.best_val_loss = val.loss, st.best_step = st.step;
      progress.step = st.step;
      progress.val_loss = val.loss;
      progress.val_acc = val.acc_teacher_forced;
      progress.val_bpc = val.bpc;
      progress.elapsed_s = seconds_since(wall_start);
      progress.is_eval = true;
      json line{{"step", st.step}, {"val_loss", val.loss},
                {"val_acc_teacher_forced", val.acc_teacher_forced},
                {"lr", sched.lr_at(st.step)}, {"best", is_best}};
      if (val.bpc) line["val_bpc"] = *val.bpc;
      if (mastery) line["val_segments"] = val_segments;
      append_line(metrics_path, line.dump());
      const ValidationOutcome outcome =
          lm ? ValidationOutcome::none
             : record_validation(config, st.progression, st.step, val.acc_teacher_forced);
      if (outcome == ValidationOutcome::stage_mastered) stage_began("mastered", val_segments);
      if (outcome == ValidationOutcome::solved) {
        append_line(metrics_path, json{{"step", st.step}, {"solved_step", st.progression.solved_step}}.dump());
      }
      checkpoint(is_best);
      if (opt.on_progress) opt.on_progress(progress);
      if (outcome == ValidationOutcome::solved)
        announce(fmt::format("solved: validation accuracy >= {} at {} evaluations in a row from step {}",
                             tc.target, tc.target_evals, st.progression.solved_step));
      interval_start = std::chrono::steady_clock::now();  // evaluation time is not training time
    }
    if (opt.abort_after_step > 0 && st.step == opt.abort_after_step) std::_Exit(86);
  }

  // Final report: the best checkpoint on the test split.
  load_parameters((dir / "best.safetensors").string(), model);
  EvalResult test;
  if (lm) {
    // the training streams are no longer needed: their bytes make room for the test split's
    train_streams = TextStreams();
    test = evaluate_lm(engine, make_text_streams(load_text_split(config.data, run.text, "test"), tc.batch_size,
                                                 "the test split"), T, 0);
  } else {
    test = evaluate(engine, load_lm_split(config.data, run.meta, "test"), eval_options(run, tc.batch_size, 0));
  }
  json results = json::parse(eval_result_json(test, run.seg_len));
  results["split"] = "test";
  results["checkpoint"] = "best";
  results["best_step"] = st.best_step;
  results["best_val_loss"] = st.best_val_loss;
  results["steps"] = st.step;
  results["wall_time_s"] = wall_before + seconds_since(wall_start);
  results["git_commit"] = RMT_GIT_COMMIT;
  results["rmt_version"] = RMT_VERSION;
  results["threads"] = num_threads();
  results["device"] = config.device;
  add_provenance(results);  // the CPU, the build and the GEMM library that made these numbers
  results["bptt"] = bptt_to_string(config.bptt);
  results["dataset_fingerprint"] = fingerprint;
  // Why the run ended, and when its curriculum stages began (lib/run/curriculum.h).
  results["end_reason"] = st.progression.solved() ? "solved" : "max_steps";
  if (tc.target > 0)
    results["solved_step"] = st.progression.solved() ? json(st.progression.solved_step) : json(nullptr);
  if (!lm && tc.curriculum > 1) {
    json stages = json::array();
    for (size_t i = 0; i < st.progression.stage_first_step.size(); ++i)
      stages.push_back({{"segments", curriculum_stage_segments(config, int(i))},
                        {"first_step", st.progression.stage_first_step[i]}});
    results["curriculum"] = stages;
  }
  // The memory estimate the run was admitted with, beside what it used (tests keep them close).
  results["memory_estimate_mb"] = std::round(train_memory_estimate(run).total() / 1e6);
  results["peak_rss_mb"] = std::round(sys::peak_rss_bytes() / (1 << 20));  // MiB, as rmt bench
  write_file_atomic(dir / "results.json", results.dump(2) + "\n");
}

namespace {

// Refuses a dataset that is not of the task a run was trained on: another task kind, or another
// vocabulary (other symbols: the ids would mean other things to the model). Lengths, pairs and
// sizes may differ: that is what evaluating on it is for.
void check_same_task(const std::string& run_dir, const std::string& trained_dir,
                     const DatasetMeta& trained, const std::string& other_dir,
                     const DatasetMeta& other) {
  // "copy", or "copy120 (a copy task)" for a preset
  auto task = [](const DatasetMeta& m) {
    return m.task == m.kind ? m.task : fmt::format("{} (a {} task)", m.task, m.kind);
  };
  const std::string trained_on =
      fmt::format("run {} was trained on {} (dataset {})", run_dir, task(trained), trained_dir);
  if (other.kind != trained.kind)
    fail("dataset {} is task {}, but {}: evaluate on a dataset of the run's task", other_dir,
         task(other), trained_on);
  const auto& a = trained.vocab;
  const auto& b = other.vocab;
  if (a.size() != b.size())
    fail("dataset {} has a vocabulary of {} ids, but {} with {}: it was generated with other "
         "options (--symbols?); evaluate on data of the same symbols", other_dir, b.size(),
         trained_on, a.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      fail("dataset {}: id {} is '{}', but '{}' in dataset {} that run {} was trained on: "
           "evaluate on data of the same symbols", other_dir, i, b[i], a[i], trained_dir, run_dir);
}

}  // namespace

namespace {

// evaluate_run of a language model: the split as --batch-size streams (default the training
// batch), segments of the run's segment_length, the state carried through.
EvalRunResult evaluate_lm_run(const EvalRunRequest& req, Config config, const std::string& config_path,
                              bool config_sets_n_token) {
  if (req.segments > 0)
    fail("--segments {}: run {} is a language model; it reads its streams in segments of its "
         "segment_length ({}), not in a number of segments", req.segments, req.run_dir,
         config.segment_length);
  if (!req.data_dir.empty()) {
    if (!is_text_dataset(req.data_dir))
      fail("dataset {} is not a text dataset, but run {} is a language model trained on text ({}): "
           "evaluate it on a dataset written by rmt generate text", req.data_dir, req.run_dir, config.data);
    config.data = req.data_dir;
  }
  validate(config);
  if (config.data.empty()) fail("{}: 'data' is not set", config_path);
  const RunSetup run = prepare_lm_run(config, false);
  const int batch = req.batch_size > 0 ? req.batch_size : run.config.train.batch_size;
  const int T = run.config.segment_length;
  std::string ck = req.checkpoint;
  if (ck == "best" || ck == "last") ck = (fs::path(req.run_dir) / (ck + ".safetensors")).string();
  if (!fs::exists(ck)) fail("checkpoint {} does not exist", ck);
  check_threads(req.threads, "--threads");
  Backend& be = run_backend(req.device, run.config, req.run_dir);
  auto model = load_checkpoint(ck, [&](const ModelConfig& c) {
    check_checkpoint_fits_run(c, ck, run, config_sets_n_token, config_path);
    Workload w;
    w.batch = batch;
    w.seg_len = {T};
    w.data_bytes = 2 * split_file_bytes(run, req.split);  // the split and its streams
    check_memory_fits(estimate_memory(c, w), fmt::format("evaluating {} ({} streams)", ck, batch));
  }, be);
  set_num_threads(req.threads);
  Engine engine(*model);
  TextStreams streams = make_text_streams(load_text_split(run.config.data, run.text, req.split), batch,
                                          fmt::format("the {} split of {}", req.split, run.config.data));
  EvalRunResult out;
  try {
    out.result = evaluate_lm(engine, streams, T, req.samples);
  } catch (const Error& e) {
    fail("{} on the {} split of {}: {}", ck, req.split, run.config.data, e.what());
  }
  out.data_dir = run.config.data;
  out.checkpoint = ck;
  out.split = req.split;
  out.seq_len = T;
  out.seg_len = {T};
  return out;
}

}  // namespace

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
  if (!fs::exists(run_dir / "config.yaml"))
    fail("{}: no config.yaml (is this an rmt run directory?)", run_dir.string());
  if (req.split != "train" && req.split != "val" && req.split != "test")
    fail("split '{}' is not one of train, val, test", req.split);
  if (req.segments < 0 || req.batch_size < 0 || req.samples < 0)
    fail("segments {}, batch size {} and samples {} must be at least 0 (0: the default)",
         req.segments, req.batch_size, req.samples);
  const std::string config_path = (run_dir / "config.yaml").string();
  Config config = load_config(config_path);
  const bool config_sets_n_token = config.model.n_token != 0;
  if (is_lm(config)) return evaluate_lm_run(req, config, config_path, config_sets_n_token);
  RunSetup run;
  if (req.data_dir.empty()) {
    if (req.segments > 0) config.segments = req.segments;
    run = prepare_run(config);
  } else {
    // The trained shape (segment length) and task come from the run's own dataset.
    validate(config);
    if (config.data.empty()) fail("{}: 'data' is not set", config_path);
    DatasetMeta trained;
    try {
      trained = load_dataset_meta(config.data);
    } catch (const Error& e) {
      fail("{} (the dataset of run {}, which evaluating on other data compares with): {}",
           config.data, run_dir.string(), e.what());
    }
    const RunSetup trained_run = prepare_run_with_meta(config, trained);
    DatasetMeta other = load_dataset_meta(req.data_dir);
    check_same_task(run_dir.string(), config.data, trained, req.data_dir, other);
    const int longest = *std::max_element(trained_run.seg_len.begin(), trained_run.seg_len.end());
    const int seq_len = other.input_length;
    config.data = req.data_dir;
    config.segments = req.segments > 0 ? req.segments : (seq_len + longest - 1) / longest;
    run = prepare_run_with_meta(config, std::move(other));
  }
  std::string ck = req.checkpoint;
  if (ck == "best" || ck == "last") ck = (run_dir / (ck + ".safetensors")).string();
  if (!fs::exists(ck)) fail("checkpoint {} does not exist", ck);
  check_threads(req.threads, "--threads");
  Backend& be = run_backend(req.device, run.config, run_dir.string());
  const int batch = req.batch_size > 0 ? req.batch_size : run.config.train.batch_size;
  auto model = load_checkpoint(ck, [&](const ModelConfig& c) {
    check_checkpoint_fits_run(c, ck, run, config_sets_n_token, config_path);
    Workload w;
    w.batch = batch;
    w.seg_len = run.seg_len;
    w.decoding = true;
    w.data_bytes = 2 * split_file_bytes(run, req.split);  // int32 arrays + int64 while read
    check_memory_fits(estimate_memory(c, w), fmt::format("evaluating {} (batch {})", ck, batch));
  }, be);
  set_num_threads(req.threads);
  Engine engine(*model);
  LmSplit split = load_lm_split(run.config.data, run.meta, req.split);
  EvalRunResult out;
  try {
    out.result = evaluate(engine, split, eval_options(run, batch, req.samples));
  } catch (const Error& e) {
    fail("{} on the {} split of {}: {}", ck, req.split, run.config.data, e.what());
  }
  out.data_dir = run.config.data;
  out.checkpoint = ck;
  out.split = req.split;
  out.seq_len = run.seq_len;
  out.seg_len = run.seg_len;
  return out;
}

std::string eval_run_json(const EvalRunResult& r) {
  json j = json::parse(eval_result_json(r.result, r.seg_len));
  j["data"] = r.data_dir;
  if (!r.result.bpc) j["seq_len"] = r.seq_len;  // a language model has streams, not samples
  j["split"] = r.split;
  j["checkpoint"] = r.checkpoint;
  return j.dump();
}

}  // namespace rmt
