#include "lib/experiments/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/core/optim.h"
#include "lib/core/packed_backend.h"
#include "lib/core/random.h"
#include "lib/core/segment_plan.h"
#include "lib/core/stats.h"
#include "lib/core/system.h"
#include "lib/run/evaluate.h"
#include "lib/run/lm.h"
#include "lib/run/sample.h"
#include "lib/run/train_step.h"
#include "tasks/dataset.h"
#include "tasks/rng.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The task of a copy or retrieval workload, as tasks/ states it.
TaskOptions workload_task(const BenchWorkload& w) {
  if (w.retrieval_pairs > 0) return resolve_task("retrieval", {}, {}, w.retrieval_pairs);
  return resolve_task("copy", w.copy_length, w.model.n_token - 2);  // ids 0, 1: <pad>, <go>
}

// A batch of fresh samples of the workload's task, in the model's view (tasks/: i.i.d. draws,
// sample_model_view).
void task_batch(TaskRng& rng, const BenchWorkload& w, std::vector<int32_t>& input,
                std::vector<int32_t>& target) {
  const TaskOptions task = workload_task(w);
  const int B = w.batch, len_x = task_len_x(task), len_y = task_len_y(task), T = w.seq_len();
  input.resize(size_t(B) * T);
  target.resize(size_t(B) * T);
  std::vector<int64_t> x(static_cast<size_t>(len_x)), y(static_cast<size_t>(len_y));
  for (int b = 0; b < B; ++b) {
    draw_sample(task, rng, x.data(), y.data());
    sample_model_view(task_stacked(task), x.data(), len_x, y.data(), len_y,
                      input.data() + int64_t(b) * T, target.data() + int64_t(b) * T);
  }
}

}  // namespace

GemmPeak measure_gemm_gflops(int n, int reps, const std::string& device) {
  // n, n/2 and n/4, each repeated for at least reps samples and 0.3 s; the best rate wins. On a
  // shared machine the best of many short calls is the closest to what the cores can do.
  Backend& be = backend_by_name(device);
  const bool host = device == "cpu" || device == "cpu-guarded";  // synchronous backends
  GemmPeak best;
  for (int size = n; size >= std::max(64, n / 4); size /= 2) {
    std::vector<float> host_a(size_t(size) * size), host_b(size_t(size) * size);
    SplitMixRng rng(7);
    for (auto& x : host_a) x = float(rng.uniform() - 0.5);
    for (auto& x : host_b) x = float(rng.uniform() - 0.5);
    DeviceArray<float> A, B, C(be, int64_t(size) * size);  // the backend's memory
    A.upload(be, host_a);
    B.upload(be, host_b);
    auto gemm = [&] { be.matmul(C.data(), A.data(), B.data(), size, size, size, false, false); };
    gemm();  // warm-up (a device: also the library's first-call setup)
    be.synchronize();
    // Calls per timed sample: one on the CPU; on a device enough to fill about 2 ms.
    int calls = 1;
    if (!host) {
      double t0 = now_s();
      gemm();
      be.synchronize();
      const double one = std::max(now_s() - t0, 1e-7);
      calls = int(std::clamp(std::ceil(2e-3 / one), 1.0, 10000.0));
    }
    const double flop = 2.0 * double(size) * size * size * calls;
    const double start = now_s();
    for (int r = 0; r < reps || now_s() - start < 0.3; ++r) {
      double t0 = now_s();
      for (int c = 0; c < calls; ++c) gemm();
      be.synchronize();
      double g = flop / (now_s() - t0) * 1e-9;
      if (g > best.gflops) best = {g, size};
    }
  }
  return best;
}

namespace {

// The untimed then timed steps of one model; each call of `step` runs one training step, after
// `prepare` (not timed) made its batch. The clock is read with the backend idle at both ends
// (synchronize: a no-op on the CPU), so a device's queued work counts in the step that issued it.
std::vector<double> time_steps(Backend& be, int warmup, int reps,
                               const std::function<void(int)>& prepare,
                               const std::function<void(int)>& step) {
  std::vector<double> times;
  for (int i = 0; i < warmup + reps; ++i) {
    prepare(i);
    be.synchronize();
    double t0 = now_s();
    step(i);
    be.synchronize();
    double dt = now_s() - t0;
    if (i >= warmup) times.push_back(dt);
  }
  return times;
}

void fill_times(BenchResult& r, const BenchWorkload& w, const std::vector<double>& times) {
  const double best = *std::min_element(times.begin(), times.end());
  r.step_ms_min = best * 1e3;
  r.step_ms_median = median(times) * 1e3;
  r.steps_per_s = 1 / best;
  r.tokens_per_s = double(w.batch) * w.seq_len() / best;
  r.gflop_per_step = step_flops(w) * 1e-9;
  r.gflops = r.gflop_per_step / best;
}

// The copy workload: fresh random batches (made outside the timed region), one train_step each.
void bench_copy(BenchResult& r, const BenchWorkload& w, Model& model, Engine& engine, Backend& be,
                Adam& adam, const BenchOptions& opt) {
  const int B = w.batch, T = w.seq_len(), A = w.answer_size();
  const std::vector<int> seg_len = segment_lengths(T, w.segments);
  TaskRng rng(mix_seed(opt.seed, 0xBE7C));
  std::vector<int32_t> input, target;
  StepSettings settings;
  settings.bptt = w.bptt;
  settings.clip = w.clip;
  settings.lr = w.lr;
  auto prepare = [&](int step) {
    task_batch(rng, w, input, target);
    settings.dropout_seed = mix_seed(opt.seed, 0xD80, uint64_t(step));
  };
  StepCapture capture;
  std::vector<double> times = time_steps(be, opt.warmup, opt.reps, prepare, [&](int) {
    r.loss = train_step(engine, model, be, adam, {input.data(), target.data(), B, T, &seg_len, A},
                        settings, opt.capture ? &capture : nullptr).loss;
  });
  r.replayed_steps = capture.replayed;
  r.warmup = opt.warmup;
  fill_times(r, w, times);

  if (opt.eval) {
    // One batch through rmt eval's path: teacher-forced alone, then with greedy decoding,
    // both with cached keys/values (the default) and re-running the segment per token.
    SampleSplit split;
    split.n = B;
    split.seq_len = T;
    task_batch(rng, w, split.input, split.target);
    EvalOptions eo;
    eo.seg_len = seg_len;
    eo.answer_size = A;
    eo.batch_size = B;
    eo.free_running = false;
    // Each evaluation timed from an idle backend to an idle backend (as the steps).
    auto timed_ms = [&] {
      be.synchronize();
      const double t0 = now_s();
      evaluate(engine, split, eo);
      be.synchronize();
      return (now_s() - t0) * 1e3;
    };
    r.eval_teacher_forced_ms = timed_ms();
    eo.free_running = true;
    r.eval_free_running_ms = timed_ms();
    eo.kv_cache_decoding = false;
    r.eval_free_running_rerun_ms = timed_ms();
  }
}

// The copy workload with `pb.runs()` runs packed (lib/core/packed_backend.h), run `first_run`
// of the bench onwards: each step, every run its own fresh batch and dropout seed, one
// packed_train_step for all of them. Returns the step times; *loss is the first run's last loss.
std::vector<double> bench_copy_packed(const BenchWorkload& w, Model& model, Engine& engine, PackedBackend& pb,
                                      Adam& adam, const BenchOptions& opt, int first_run, double* loss,
                                      int64_t* replayed) {
  const int B = w.batch, T = w.seq_len(), A = w.answer_size(), K = pb.runs();
  const std::vector<int> seg_len = segment_lengths(T, w.segments);
  std::vector<TaskRng> rngs;
  for (int k = 0; k < K; ++k) rngs.emplace_back(mix_seed(opt.seed, 0xBE7C, uint64_t(first_run + k)));
  std::vector<std::vector<int32_t>> inputs(static_cast<size_t>(K)), targets(static_cast<size_t>(K));
  std::vector<int64_t> adam_steps(static_cast<size_t>(K), 0);
  std::vector<PackedRunStep> group(static_cast<size_t>(K));
  auto prepare = [&](int step) {
    for (int k = 0; k < K; ++k) {
      task_batch(rngs[size_t(k)], w, inputs[size_t(k)], targets[size_t(k)]);
      PackedRunStep& g = group[size_t(k)];
      g.slot = k;
      g.batch = {inputs[size_t(k)].data(), targets[size_t(k)].data(), B, T, &seg_len, A};
      g.settings.bptt = w.bptt;
      g.settings.clip = w.clip;
      g.settings.lr = w.lr;
      g.settings.dropout_seed = mix_seed(opt.seed, 0xD80, uint64_t(step), uint64_t(first_run + k));
      g.adam_steps = &adam_steps[size_t(k)];
    }
  };
  StepCapture capture;
  std::vector<double> times = time_steps(pb, opt.warmup, opt.reps, prepare, [&](int) {
    *loss = packed_train_step(engine, model, pb, adam, group, opt.capture ? &capture : nullptr).front().loss;
  });
  *replayed = capture.replayed;
  return times;
}

// opt.pack runs of the copy workload packed: on the CPU one pack per thread (the runs split
// between them, each pack on its own host thread, as rmt train-pack trains them), on a device one.
// The figures are of all runs together: steps/s adds up each pack's runs / its step time.
void bench_packed(BenchResult& r, const BenchWorkload& w, const ModelConfig& mc, Backend& be,
                  const BenchOptions& opt) {
  const int packs = opt.device == "cpu" ? std::clamp(num_threads(), 1, opt.pack) : 1;
  std::vector<std::vector<double>> times(static_cast<size_t>(packs));
  std::vector<int> runs(static_cast<size_t>(packs));
  run_packs_on_threads(packs, [&](int p) {
    const int K = opt.pack / packs + (p < opt.pack % packs ? 1 : 0);
    const int first_run = p * (opt.pack / packs) + std::min(p, opt.pack % packs);
    PackedBackend pb(be, K);
    Model model(mc, pb);
    for (int k = 0; k < K; ++k) {  // each run its own weights (the lone run's are run 0's)
      pb.activate(k);
      model.init_weights(mix_seed(opt.seed, 0x1417) + uint64_t(first_run + k));
    }
    pb.activate_all();
    Adam adam(pb, model.num_params());
    Engine engine(model, pb);
    double loss = 0;
    int64_t replayed = 0;
    times[size_t(p)] = bench_copy_packed(w, model, engine, pb, adam, opt, first_run, &loss, &replayed);
    runs[size_t(p)] = K;
    if (p == 0) r.loss = loss, r.params = model.num_params(), r.replayed_steps = replayed;
  });
  double best_rate = 0, median_rate = 0;  // steps of single runs per second
  for (int p = 0; p < packs; ++p) {
    best_rate += runs[size_t(p)] / *std::min_element(times[size_t(p)].begin(), times[size_t(p)].end());
    median_rate += runs[size_t(p)] / median(times[size_t(p)]);
  }
  r.threads = packs;
  r.warmup = opt.warmup;
  r.steps_per_s = best_rate;
  r.step_ms_min = opt.pack / best_rate * 1e3;  // the time a step of every run takes, all packs together
  r.step_ms_median = opt.pack / median_rate * 1e3;
  r.tokens_per_s = best_rate * w.batch * w.seq_len();
  r.gflop_per_step = opt.pack * step_flops(w) * 1e-9;
  r.gflops = best_rate * step_flops(w) * 1e-9;
}

// The language model: B streams of random bytes; step s trains on segment s of every stream
// from the state step s-1 carried (lm_train_step: RMT re-runs its BPTT window), then clips and
// takes an Adam step. The first lm_fill_steps steps (at least) are untimed, so every timed step
// does the steady state's work.
void bench_lm(BenchResult& r, const BenchWorkload& w, Model& model, Engine& engine, Backend& be,
              Adam& adam, const BenchOptions& opt) {
  const int B = w.batch, T = w.seq_len();
  const int warmup = std::max(opt.warmup, lm_fill_steps(w));
  const int64_t segments = int64_t(warmup) + opt.reps;
  const int64_t length = segments * T + 1;  // bytes per stream: every segment's inputs and targets
  std::vector<int32_t> streams(size_t(B * length));
  SplitMixRng rng(mix_seed(opt.seed, 0x1B7E));
  for (auto& x : streams) x = int32_t(rng.below(uint64_t(w.model.n_token)));
  LmSegmentSource source = [&](int64_t s, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    for (int b = 0; b < B; ++b) {
      const int32_t* stream = streams.data() + int64_t(b) * length + s * T;
      std::copy_n(stream, T, in.begin() + int64_t(b) * T);
      std::copy_n(stream + 1, T, tg.begin() + int64_t(b) * T);
    }
  };
  LmCarry carry(w.lm_window);
  StepSettings settings;
  settings.clip = w.clip;
  settings.lr = w.lr;
  StepCapture capture;
  // The segment source copies B x T ids per segment (inside the step, as rmt train's does).
  std::vector<double> times = time_steps(be, warmup, opt.reps, [](int) {}, [&](int step) {
    settings.dropout_seed = mix_seed(opt.seed, 0xD81, uint64_t(step));
    r.loss = lm_train_step(engine, model, be, adam, carry, source, B, T, settings,
                           opt.capture ? &capture : nullptr).loss;
  });
  r.replayed_steps = capture.replayed;
  r.warmup = warmup;
  fill_times(r, w, times);

  if (opt.eval) {
    // rmt sample's path: the first stream's first segment as the prompt, then one segment of
    // greedy bytes (decoded row by row against the segment's keys and values).
    std::vector<int32_t> prompt(streams.begin(), streams.begin() + T);
    be.synchronize();  // from an idle backend to an idle backend, as the steps
    const double t0 = now_s();
    sample_continuation(engine, T, prompt, T, SampleSettings{});
    be.synchronize();
    r.sample_ms = (now_s() - t0) * 1e3;
    r.sample_bytes = T;
  }
}

}  // namespace

BenchResult run_bench(const std::string& name, const BenchOptions& opt) {
  if (opt.reps < 1) fail("--reps must be at least 1");
  if (opt.warmup < 0) fail("--warmup must be at least 0");
  Backend& be = backend_by_name(opt.device);
  set_num_threads(opt.threads);
  const BenchWorkload w = bench_workload(name, opt.tiny, opt.batch, opt.manifest);
  ModelConfig mc = w.model;
  resolve_kind(mc);
  if (opt.pack < 1) fail("--pack must be at least 1");
  if (opt.pack > 1 && w.lm) fail("--pack {}: {} is a language model, whose runs train alone", opt.pack, name);
  {  // refuse, before allocating, what does not fit in this machine's memory
    Workload mw;
    mw.batch = w.batch, mw.training = true;
    mw.seg_len = w.lm ? std::vector<int>(size_t(w.lm_window) + 1, w.lm_segment)
                      : segment_lengths(w.seq_len(), w.segments);
    MemoryEstimate e = estimate_memory(mc, mw);
    e.weights *= opt.pack, e.optimizer *= opt.pack, e.activations *= opt.pack;  // every run its own
    check_memory_fits(e, opt.pack > 1 ? fmt::format("rmt bench {} --pack {}", name, opt.pack) : "rmt bench " + name);
  }
  BenchResult r;
  r.model = name;
  r.workload = w.workload;
  r.device = opt.device;
  r.pack = opt.pack;
  r.merged_runs = opt.pack > 1 && be.can_merge_runs();
  if (opt.pack > 1) {
    bench_packed(r, w, mc, be, opt);
  } else {
    Model model(mc, be);
    model.init_weights(mix_seed(opt.seed, 0x1417));
    Adam adam(be, model.num_params());
    Engine engine(model, be);
    if (w.lm) bench_lm(r, w, model, engine, be, adam, opt);
    else bench_copy(r, w, model, engine, be, adam, opt);
    r.threads = num_threads();
    r.params = model.num_params();
  }
  r.batch = w.batch, r.seq_len = w.seq_len(), r.segments = w.segments, r.reps = opt.reps;
  r.bptt_window = w.lm ? w.lm_window : 0;
  r.peak_rss_mb = sys::peak_rss_bytes() / (1 << 20);  // MiB
  return r;
}

void set_peak(BenchResult& r, double peak_gflops) {
  r.peak_gflops = peak_gflops;
  r.mfu = peak_gflops > 0 ? r.gflops / peak_gflops : 0;
}

std::string bench_json(const BenchResult& r, const std::string& peak_source) {
  nlohmann::ordered_json j;
  j["engine"] = "rmt";
  j["model"] = r.model;
  j["workload"] = r.workload;
  j["device"] = r.device;
  j["threads"] = r.threads;
  j["batch"] = r.batch;
  j["seq_len"] = r.seq_len;
  j["segments"] = r.segments;
  j["bptt_window"] = r.bptt_window;
  j["warmup"] = r.warmup;
  j["params"] = r.params;
  j["reps"] = r.reps;
  j["pack"] = r.pack;
  j["merged_runs"] = r.merged_runs;
  j["steps_per_s"] = r.steps_per_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["step_ms"] = r.step_ms_min;
  j["step_ms_median"] = r.step_ms_median;
  j["gflop_per_step"] = r.gflop_per_step;
  j["gflops"] = r.gflops;
  j["mfu"] = r.mfu;
  j["peak_gflops"] = r.peak_gflops;
  j["peak_source"] = peak_source;
  j["peak_rss_mb"] = r.peak_rss_mb;
  j["loss"] = r.loss;
  j["replayed_steps"] = r.replayed_steps;
  if (r.eval_free_running_ms >= 0) {
    j["eval_teacher_forced_ms"] = r.eval_teacher_forced_ms;
    j["eval_free_running_ms"] = r.eval_free_running_ms;
    j["eval_free_running_rerun_ms"] = r.eval_free_running_rerun_ms;
  }
  if (r.sample_ms >= 0) {
    j["sample_ms"] = r.sample_ms;
    j["sample_bytes"] = r.sample_bytes;
  }
  return j.dump();
}

}  // namespace rmt
