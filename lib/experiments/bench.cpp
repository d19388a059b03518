#include "lib/experiments/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "lib/run/evaluate.h"
#include "lib/run/train_step.h"

namespace rmt {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// A batch of the copy task: X uniform over the symbols 2..V-1, S = X ++ [1] ++ X ++ X,
// input = S[:-1], target = S[1:] (docs/paper.md §1, "stacked").
void copy_batch(SplitMixRng& rng, int B, int L, int V, std::vector<int32_t>& input,
                std::vector<int32_t>& target) {
  const int T = 3 * L;
  input.resize(size_t(B) * T);
  target.resize(size_t(B) * T);
  std::vector<int32_t> s(size_t(T) + 1);
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < L; ++i) s[size_t(i)] = int32_t(2 + rng.below(uint64_t(V - 2)));
    s[size_t(L)] = 1;
    for (int i = 0; i < L; ++i) s[size_t(L + 1 + i)] = s[size_t(L + 1 + L + i)] = s[size_t(i)];
    std::copy(s.begin(), s.end() - 1, input.begin() + int64_t(b) * T);
    std::copy(s.begin() + 1, s.end(), target.begin() + int64_t(b) * T);
  }
}

}  // namespace

std::vector<std::string> bench_kinds() {
  std::vector<std::string> kinds;
  for (ModelKind k : {ModelKind::baseline, ModelKind::xl, ModelKind::rmt}) kinds.push_back(traits_of(k).name);
  return kinds;
}

BenchWorkload bench_workload(const std::string& kind, bool tiny) {
  const std::vector<std::string> kinds = bench_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    fail("bench model must be one of {} (got '{}')", fmt::join(kinds, ", "), kind);
  const ModelKindTraits& traits = traits_of(kind);
  BenchWorkload w;
  ModelConfig& m = w.model;
  m.kind = kind;
  m.n_token = 12;
  m.dropout = 0.1;
  m.dropatt = 0.0;
  if (tiny) {
    m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
    w.batch = 4;
    w.copy_length = 6;
  }
  const int seg = w.seq_len() / w.segments;
  m.mem_len = traits.has_cache ? seg : 0;
  m.num_mem_tokens = traits.has_memory ? seg : 0;
  return w;
}

namespace {
// Forward FLOPs of each segment: through all layers plus the output layer, and through all
// layers but the last (what an xl segment without a loss still needs for the cache).
struct SegmentFlops {
  double full, cache_only;
  bool scored;
};

// training: what a training step needs of each segment. The last segment passes no memory on,
// so rmt runs it without the write block; the last layer computes past its keys and values only
// the rows something reads (the scored token rows, the memory passed on), and the output layer
// runs only for scored segments. Otherwise (evaluation) every row of every segment.
std::vector<SegmentFlops> segment_flops(const BenchWorkload& w, bool training) {
  const ModelConfig& c = w.model;
  const ModelKindTraits& kind = traits_of(c.kind);
  const bool xl = kind.has_cache;
  const int m = kind.has_memory ? c.num_mem_tokens : 0;                    // read block
  const int writes = kind.has_write_block ? m : 0;
  const double B = w.batch, d = c.d_model, H = c.n_head, Dh = c.d_head, hd = H * Dh;
  const double di = c.d_inner, V = c.n_token;
  std::vector<SegmentFlops> out;
  int cache = 0;  // Transformer-XL cache rows entering the segment
  int t0 = 0;
  const std::vector<int> lengths = segment_lengths(w.seq_len(), w.segments);
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int Ts = lengths[s];
    const bool last = s + 1 == lengths.size();
    const bool scored = t0 + Ts > w.seq_len() - w.answer_size();
    const double q = m + Ts + (training && last ? 0 : writes), klen = cache + q;
    // One layer whose attention and everything after it run for `rows` of the q query rows.
    auto layer = [&](double rows) {
      return 2 * B * klen * d * 3 * hd           // qkv_net over [cache; segment]
             + 2 * klen * d * hd                 // r_net over the position embeddings
             + 2 * 2 * B * H * rows * klen * Dh  // (q+u)k^T and (q+v)r^T
             + 2 * B * H * rows * klen * Dh      // prob * v
             + 2 * B * rows * hd * d             // o_net
             + 2 * 2 * B * rows * d * di;        // FF in and out
    };
    const bool memory_out = m > 0 && !last;
    const double live = training ? (scored ? Ts : 0) + (memory_out ? m : 0) : q;
    const double output = !training || scored ? 2 * B * Ts * d * V : 0;  // tied, token rows
    out.push_back({(c.n_layer - 1) * layer(q) + layer(live) + output, (c.n_layer - 1) * layer(q),
                   scored});
    if (xl) cache = std::min(c.mem_len, cache + int(q));
    t0 += Ts;
  }
  return out;
}
}  // namespace

double forward_flops(const BenchWorkload& w) {
  double total = 0;
  for (const SegmentFlops& f : segment_flops(w, false)) total += f.full;
  return total;
}

double step_flops(const BenchWorkload& w) {
  const ModelKindTraits& kind = traits_of(w.model.kind);
  const bool memory = kind.has_memory, cache = kind.has_cache;
  const std::vector<SegmentFlops> segs = segment_flops(w, true);
  double total = 0;
  for (size_t s = 0; s < segs.size(); ++s) {
    if (segs[s].scored || memory) total += 3 * segs[s].full;      // forward + backward
    else if (cache && s + 1 < segs.size()) total += segs[s].cache_only;  // forward for the cache
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
         "segment has no write block; klen = cache + q, hd = H*Dh";
}

GemmPeak measure_gemm_gflops(int n, int reps) {
  // n, n/2 and n/4, each repeated for at least reps calls and 0.3 s; the best rate wins. On a
  // shared machine the best of many short calls is the closest to what the cores can do.
  Backend& be = cpu_backend();
  GemmPeak best;
  for (int size = n; size >= std::max(64, n / 4); size /= 2) {
    std::vector<float> A(size_t(size) * size), B(size_t(size) * size), C(size_t(size) * size);
    SplitMixRng rng(7);
    for (auto& x : A) x = float(rng.uniform() - 0.5);
    for (auto& x : B) x = float(rng.uniform() - 0.5);
    be.matmul(C.data(), A.data(), B.data(), size, size, size, false, false);  // warm-up
    const double start = now_s();
    for (int r = 0; r < reps || now_s() - start < 0.3; ++r) {
      double t0 = now_s();
      be.matmul(C.data(), A.data(), B.data(), size, size, size, false, false);
      double g = 2.0 * double(size) * size * size / (now_s() - t0) * 1e-9;
      if (g > best.gflops) best = {g, size};
    }
  }
  return best;
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

BenchResult run_bench(const std::string& kind, const BenchOptions& opt) {
  if (opt.reps < 1) fail("--reps must be at least 1");
  if (opt.warmup < 0) fail("--warmup must be at least 0");
  set_num_threads(opt.threads);
  const BenchWorkload w = bench_workload(kind, opt.tiny);
  ModelConfig mc = w.model;
  resolve_kind(mc);
  {  // refuse, before allocating, what does not fit in this machine's memory
    Workload mw;
    mw.batch = w.batch, mw.seg_len = segment_lengths(w.seq_len(), w.segments), mw.training = true;
    check_memory_fits(estimate_memory(mc, mw), "rmt bench " + kind);
  }
  Backend& be = cpu_backend();
  Model model(mc);
  model.init_weights(mix_seed(opt.seed, 0x1417));
  Adam adam(model.num_params());
  Engine engine(model, be);
  const int B = w.batch, T = w.seq_len(), A = w.answer_size();
  const std::vector<int> seg_len = segment_lengths(T, w.segments);

  // Fresh random batches, made outside the timed region.
  SplitMixRng rng(mix_seed(opt.seed, 0xBE7C));
  std::vector<int32_t> input, target;
  BenchResult r;
  std::vector<double> times;
  StepSettings settings;
  settings.bptt = w.bptt;
  settings.clip = w.clip;
  settings.lr = w.lr;
  for (int step = 0; step < opt.warmup + opt.reps; ++step) {
    copy_batch(rng, B, T / 3, mc.n_token, input, target);
    settings.dropout_seed = mix_seed(opt.seed, 0xD80, uint64_t(step));
    double t0 = now_s();
    r.loss = train_step(engine, model, be, adam, {input.data(), target.data(), B, T, &seg_len, A},
                        settings).loss;
    double dt = now_s() - t0;
    if (step >= opt.warmup) times.push_back(dt);
  }
  const double best = *std::min_element(times.begin(), times.end());

  r.model = kind;
  r.threads = num_threads();
  r.batch = B, r.seq_len = T, r.segments = w.segments, r.reps = opt.reps;
  r.params = model.num_params();
  r.step_ms_min = best * 1e3;
  r.step_ms_median = median(times) * 1e3;
  r.tokens_per_s = double(B) * T / best;
  r.gflop_per_step = step_flops(w) * 1e-9;
  r.gflops = r.gflop_per_step / best;

  if (opt.eval) {
    // One batch through rmt eval's path: teacher-forced alone, then with greedy decoding,
    // both with cached keys/values (the default) and re-running the segment per token.
    LmSplit split;
    split.n = B;
    split.seq_len = T;
    copy_batch(rng, B, T / 3, mc.n_token, split.input, split.target);
    EvalOptions eo;
    eo.seg_len = seg_len;
    eo.answer_size = A;
    eo.batch_size = B;
    eo.free_running = false;
    double t0 = now_s();
    evaluate(engine, split, eo);
    r.eval_teacher_forced_ms = (now_s() - t0) * 1e3;
    eo.free_running = true;
    t0 = now_s();
    evaluate(engine, split, eo);
    r.eval_free_running_ms = (now_s() - t0) * 1e3;
    eo.kv_cache_decoding = false;
    t0 = now_s();
    evaluate(engine, split, eo);
    r.eval_free_running_rerun_ms = (now_s() - t0) * 1e3;
  }
  r.peak_rss_mb = peak_rss_mb();
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
  j["threads"] = r.threads;
  j["batch"] = r.batch;
  j["seq_len"] = r.seq_len;
  j["segments"] = r.segments;
  j["params"] = r.params;
  j["reps"] = r.reps;
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
  if (r.eval_free_running_ms >= 0) {
    j["eval_teacher_forced_ms"] = r.eval_teacher_forced_ms;
    j["eval_free_running_ms"] = r.eval_free_running_ms;
    j["eval_free_running_rerun_ms"] = r.eval_free_running_rerun_ms;
  }
  return j.dump();
}

}  // namespace rmt
