#include "lib/experiments/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <exception>
#include <memory>
#include <thread>
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
#include "tasks/tasks.h"

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

const std::vector<std::string>& bench_models() {
  static const std::vector<std::string> models = [] {
    std::vector<std::string> copy, lm, copy120;
    for (ModelKind k : {ModelKind::baseline, ModelKind::xl, ModelKind::rmt}) {
      copy.push_back(traits_of(k).name);
      lm.push_back(std::string("lm_") + traits_of(k).name);
      copy120.push_back(std::string("copy120_") + traits_of(k).name);
    }
    copy.insert(copy.end(), lm.begin(), lm.end());
    copy.insert(copy.end(), copy120.begin(), copy120.end());
    for (const char* repro : {"repro_copy_rmt", "repro_retrieval_rmt"}) copy.push_back(repro);
    return copy;
  }();
  return models;
}

const std::vector<std::string>& bench_groups() {
  static const std::vector<std::string> groups = {"copy", "lm", "copy120", "repro", "all"};
  return groups;
}

namespace {
// copy | copy120 | lm | repro_copy | repro_retrieval, from the model's name.
std::string workload_of(const std::string& name) {
  if (name.rfind("lm_", 0) == 0) return "lm";
  if (name.rfind("copy120_", 0) == 0) return "copy120";
  if (name.rfind("repro_", 0) == 0) return name.substr(0, name.rfind('_'));
  return "copy";
}
// The group a workload belongs to (--model GROUP).
std::string group_of(const std::string& workload) {
  return workload.rfind("repro_", 0) == 0 ? "repro" : workload;
}
}  // namespace

std::vector<std::string> bench_selection(const std::string& m) {
  const std::vector<std::string>& all = bench_models();
  const std::vector<std::string>& groups = bench_groups();
  if (std::find(all.begin(), all.end(), m) == all.end() &&
      std::find(groups.begin(), groups.end(), m) == groups.end())
    fail("--model must be one of {}, {} (got '{}')", fmt::join(all, ", "), fmt::join(groups, ", "), m);
  std::vector<std::string> out;
  for (const std::string& name : all) {
    const std::string g = group_of(workload_of(name));
    if (name == m || g == m || (m == "all" && (g == "copy" || g == "lm"))) out.push_back(name);
  }
  return out;
}

BenchWorkload bench_workload(const std::string& name, bool tiny, int batch) {
  const std::vector<std::string>& all = bench_models();
  if (std::find(all.begin(), all.end(), name) == all.end())
    fail("bench model must be one of {} (got '{}')", fmt::join(all, ", "), name);
  if (batch < 0) fail("--batch must be at least 1 (got {})", batch);
  BenchWorkload w;
  w.name = name;
  w.workload = workload_of(name);
  w.lm = w.workload == "lm";
  const std::string kind = w.workload == "copy" ? name : name.substr(name.rfind('_') + 1);
  const ModelKindTraits& traits = traits_of(kind);
  ModelConfig& m = w.model;
  m.kind = kind;
  m.dropout = 0.1;
  m.dropatt = 0.0;
  if (w.lm) {
    m.n_token = 256;
    m.n_layer = 12, m.n_head = 8, m.d_head = 64, m.d_model = 512, m.d_inner = 2048;
    w.batch = 2;
    w.lm_segment = 128;
    w.lr = 2.5e-4;
    int memory = 10;
    if (tiny) {
      m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
      w.lm_segment = 8;
      memory = 2;
    }
    m.mem_len = traits.has_cache ? w.lm_segment : 0;
    m.num_mem_tokens = traits.has_memory ? memory : 0;
    w.lm_window = traits.has_memory ? 1 : 0;
    w.segments = 1;
    w.bptt = w.lm_window;
    if (batch > 0) w.batch = batch;
    return w;
  }
  if (group_of(w.workload) == "repro") {  // the reproduction's recipe (bench.h)
    const bool retrieval = w.workload == "repro_retrieval";
    m.dropout = 0.0;
    m.n_layer = 2, m.n_head = retrieval ? 4 : 2, m.d_head = 16, m.d_model = retrieval ? 64 : 32;
    m.d_inner = 2 * m.d_model;
    m.num_mem_tokens = 2;
    m.mem_len = 0;
    w.retrieval_pairs = retrieval ? 4 : 0;
    m.n_token = retrieval ? int(task_vocab(resolve_task("retrieval", {}, {}, 4)).size()) : 12;
    w.copy_length = 6;
    w.segments = retrieval ? 5 : 9;
    w.clip = 1.0;
    w.lr = retrieval ? 1e-3 : 2e-3;
    if (tiny) {
      m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
      w.batch = 4;
    }
    if (batch > 0) w.batch = batch;
    return w;
  }
  // copy: 12 ids (10 symbols); copy120: 10 ids (8 symbols), L 120 (docs/paper.md §1).
  const bool long_copy = w.workload == "copy120";
  m.n_token = long_copy ? 10 : 12;
  w.copy_length = long_copy ? 120 : 24;
  if (tiny) {
    m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
    w.batch = 4;
    w.copy_length = 6;
  }
  if (batch > 0) w.batch = batch;
  const int seg = w.seq_len() / w.segments;
  const int memory = long_copy ? seg / 2 : seg;  // copy120: the paper's cache / memory 60
  m.mem_len = traits.has_cache ? memory : 0;
  m.num_mem_tokens = traits.has_memory ? memory : 0;
  return w;
}

int lm_fill_steps(const BenchWorkload& w) {
  if (!w.lm) return 0;
  const int per_step = w.model.num_mem_tokens + w.lm_segment;  // cache rows one segment adds
  const int cache_steps = w.model.mem_len > 0 ? (w.model.mem_len + per_step - 1) / per_step : 0;
  return std::max(w.lm_window, cache_steps);
}

namespace {
// Forward FLOPs of one layer for a segment with klen = cache + q key rows, of which n query
// rows run attention and what follows it (see forward_flops in bench.h).
double layer_flops(const BenchWorkload& w, double n, double klen) {
  const ModelConfig& c = w.model;
  const double B = w.batch, d = c.d_model, H = c.n_head, Dh = c.d_head, hd = H * Dh;
  const double di = c.d_inner;
  return 2 * B * klen * d * 3 * hd        // qkv_net over [cache; segment]
         + 2 * klen * d * hd              // r_net over the position embeddings
         + 2 * 2 * B * H * n * klen * Dh  // (q+u)k^T and (q+v)r^T
         + 2 * B * H * n * klen * Dh      // prob * v
         + 2 * B * n * hd * d             // o_net
         + 2 * 2 * B * n * d * di;        // FF in and out
}

// A segment as planned (lib/core/segment_plan.h) through all layers: n_layer - 1 layers with
// every query row, the last with its live rows past its keys and values; plus the tied output
// layer over its token rows when it computes logits.
double segment_forward(const BenchWorkload& w, const SegmentPlan& p) {
  const ModelConfig& c = w.model;
  return (c.n_layer - 1) * layer_flops(w, p.q, p.klen) + layer_flops(w, p.live(), p.klen) +
         (p.logits ? 2.0 * w.batch * p.T * c.d_model * c.n_token : 0.0);
}

// A segment run only as far as the next cache needs: the input of every layer, i.e. all layers
// but the last (an xl segment without a loss).
double segment_cache_only(const BenchWorkload& w, const SegmentPlan& p) {
  return (w.model.n_layer - 1) * layer_flops(w, p.q, p.klen);
}

// The language model in the steady state: the cache full (xl), the window full (rmt).
struct LmFlops {
  double eval_forward = 0;  // one segment, every row, with the write block
  double step = 0;          // a training step (step_flops in bench.h)
};
LmFlops lm_flops(const BenchWorkload& w) {
  const SegmentModel model = segment_model(w.model);
  const int T = w.lm_segment;
  // A step's forward (lm_train_step): the lm_window earlier segments of the window, then the
  // new one, the only one scored, from a full cache (lm_fill_steps).
  const std::vector<int> window(size_t(w.lm_window) + 1, T);
  const int first_scored = w.lm_window * T;
  // As the step runs it: the state after the new segment is carried on (its write block) ...
  const std::vector<SegmentPlan> step = plan_forward(model, window, first_scored, true, true, model.mem_len);
  // ... and as its loss alone needs it (the new segment without its write block).
  const std::vector<SegmentPlan> loss =
      plan_forward(model, window, first_scored, true, false, model.mem_len);
  LmFlops f;
  f.eval_forward = segment_forward(w, plan_largest_segment(model, T));
  // The earlier segments: their live rows are the memory they pass on, no output layer.
  double earlier = 0;
  for (int s = 0; s < w.lm_window; ++s) earlier += segment_forward(w, step[size_t(s)]);
  const double scored = segment_forward(w, loss.back());
  // The new segment's write block, forward only: the memory the next step starts from.
  const double state = segment_forward(w, step.back()) - scored;
  f.step = 3 * (earlier + scored) + state;
  return f;
}

// The plan of every segment of a copy / retrieval sample. training: what a training step needs
// of each segment (the last segment passes no memory on, so rmt runs it without the write block;
// the last layer computes past its keys and values only the rows something reads; the output
// layer runs only for scored segments). Otherwise (evaluation) every row of every segment.
std::vector<SegmentPlan> sample_plan(const BenchWorkload& w, bool training) {
  return plan_forward(segment_model(w.model), segment_lengths(w.seq_len(), w.segments),
                      w.seq_len() - w.answer_size(), training, false);
}
}  // namespace

double forward_flops(const BenchWorkload& w) {
  if (w.lm) return lm_flops(w).eval_forward;
  double total = 0;
  for (const SegmentPlan& p : sample_plan(w, false)) total += segment_forward(w, p);
  return total;
}

double step_flops(const BenchWorkload& w) {
  if (w.lm) return lm_flops(w).step;
  double total = 0;
  for (const SegmentPlan& p : sample_plan(w, true)) {
    if (p.backward) total += 3 * segment_forward(w, p);      // forward + backward
    else if (p.run) total += segment_cache_only(w, p);       // forward for the cache
  }
  return total;
}

const char* flop_formula() {
  return "step = 3 x the forward of each segment the loss depends on (baseline/xl: segments with "
         "a scored position; xl adds n_layer-1 layers of an unscored segment for its cache); "
         "forward = sum over layers of [2B*klen*d*3hd (qkv) + 2*klen*d*hd (r_net) + "
         "3 x 2B*H*n*klen*Dh (AC, BD, prob*V) + 2B*n*hd*d (o_net) + 4B*n*d*d_inner (FF)] + "
         "2B*T_seg*d*V (output, scored segments); n = q query rows incl. memory, in the last "
         "layer only those something reads (scored tokens, memory passed on); rmt's last "
         "segment has no write block; klen = cache + q, hd = H*Dh. Language model (steady "
         "state): 3 x the forward of the BPTT window (earlier segments: live rows = the memory "
         "passed on, no output layer; the new segment without its write block) + the new "
         "segment's write block once (forward only: the next step's memory)";
}

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
                                      Adam& adam, const BenchOptions& opt, int first_run, double* loss) {
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
  return time_steps(pb, opt.warmup, opt.reps, prepare, [&](int) {
    *loss = packed_train_step(engine, model, pb, adam, group).front().loss;
  });
}

// opt.pack runs of the copy workload packed: on the CPU one pack per thread (the runs split
// between them, each pack on its own host thread, as rmt train-pack trains them), on a device one.
// The figures are of all runs together: steps/s adds up each pack's runs / its step time.
void bench_packed(BenchResult& r, const BenchWorkload& w, const ModelConfig& mc, Backend& be,
                  const BenchOptions& opt) {
  const int packs = opt.device == "cpu" ? std::clamp(num_threads(), 1, opt.pack) : 1;
  std::vector<std::vector<double>> times(static_cast<size_t>(packs));
  std::vector<int> runs(static_cast<size_t>(packs));
  std::vector<std::exception_ptr> failures(static_cast<size_t>(packs));
  auto pack = [&](int p) {
    try {
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
      times[size_t(p)] = bench_copy_packed(w, model, engine, pb, adam, opt, first_run, &loss);
      runs[size_t(p)] = K;
      if (p == 0) r.loss = loss;
      if (p == 0) r.params = model.num_params();
    } catch (...) {
      failures[size_t(p)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int p = 1; p < packs; ++p) workers.emplace_back(pack, p);
  pack(0);
  for (auto& t : workers) t.join();
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
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
  const BenchWorkload w = bench_workload(name, opt.tiny, opt.batch);
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

std::string bench_workload_json(const std::string& name, bool tiny, int batch) {
  const BenchWorkload w = bench_workload(name, tiny, batch);
  ModelConfig mc = w.model;
  resolve_kind(mc);
  nlohmann::ordered_json j;
  j["model"] = name;
  j["workload"] = w.workload;
  j["kind"] = mc.kind;
  j["n_layer"] = mc.n_layer;
  j["d_model"] = mc.d_model;
  j["n_head"] = mc.n_head;
  j["d_head"] = mc.d_head;
  j["d_inner"] = mc.d_inner;
  j["vocab"] = mc.n_token;
  j["mem_len"] = mc.mem_len;
  j["num_mem_tokens"] = mc.num_mem_tokens;
  j["dropout"] = mc.dropout;
  j["batch"] = w.batch;
  j["seq_len"] = w.seq_len();
  j["segments"] = w.segments;
  j["answer_size"] = w.answer_size();
  j["bptt_window"] = w.lm ? w.lm_window : 0;
  j["fill_steps"] = lm_fill_steps(w);
  j["clip"] = w.clip;
  j["lr"] = w.lr;
  j["params"] = int64_t(model_param_count(mc));
  j["gflop_per_step"] = step_flops(w) * 1e-9;
  j["gflop_forward"] = forward_flops(w) * 1e-9;
  return j.dump();
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
