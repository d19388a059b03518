// `rmt bench --diagonal`: armt's teacher-forced evaluation segment by segment against by
// diagonals (lib/experiments/bench.h states the workload).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/random.h"
#include "lib/core/stats.h"
#include "lib/experiments/bench.h"
#include "lib/run/evaluate.h"

namespace rmt {

namespace {

ModelConfig diagonal_bench_model(const DiagonalBenchOptions& o) {
  ModelConfig c;
  c.kind = "armt";
  c.n_layer = o.tiny ? 2 : o.layers;
  c.n_token = 16;
  c.n_head = o.tiny ? 2 : 4;
  c.d_head = o.tiny ? 8 : 16;
  c.d_model = o.tiny ? 16 : 64;
  c.d_inner = 2 * c.d_model;
  c.num_mem_tokens = o.tiny ? 2 : 8;
  c.d_mem = o.tiny ? 4 : 8;
  c.dropout = 0;
  return c;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

DiagonalBenchResult run_diagonal_bench(const DiagonalBenchOptions& o) {
  if (o.layers < 1 || o.segments < 1 || o.reps < 1 || o.warmup < 0)
    fail("diagonal bench: layers {}, segments {} and reps {} must be at least 1", o.layers,
         o.segments, o.reps);
  Backend& be = backend_by_name(o.device);
  Model model(diagonal_bench_model(o), be);
  model.init_weights(1);
  // W_mv starts at zero (the authors' initialisation); a trained model's is not, and the read's
  // work is the same either way: every parameter random, as after training.
  SplitMixRng rng(2);
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (auto& p : params) p = float(0.1 * rng.normal());
  model.params.upload(be, params);
  Engine engine(model);

  DiagonalBenchResult r;
  r.device = o.device;
  r.threads = num_threads();
  r.layers = model.L;
  r.segments = o.tiny ? std::min(o.segments, 8) : o.segments;
  r.segment_length = o.tiny ? 4 : 16;
  r.batch = o.batch > 0 ? o.batch : o.tiny ? 2 : 8;
  r.d_model = model.d;
  r.reps = o.reps;
  const int T = r.segments * r.segment_length, B = r.batch;
  r.tokens = int64_t(B) * T;
  SampleSplit split;  // one batch of random tokens, the answer the last segment
  split.n = B, split.seq_len = T;
  split.input.resize(size_t(r.tokens));
  split.target.resize(size_t(r.tokens));
  for (auto& x : split.input) x = int32_t(rng.below(16));
  for (auto& x : split.target) x = int32_t(rng.below(16));
  EvalOptions eo;
  eo.seg_len.assign(size_t(r.segments), r.segment_length);
  eo.answer_size = r.segment_length;
  eo.batch_size = B;
  eo.free_running = false;

  auto now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  std::vector<double> times[2];
  EvalResult results[2];
  const EvalSchedule schedules[2] = {EvalSchedule::sequential, EvalSchedule::diagonal};
  auto run_schedule = [&](int k, bool timed) {
    eo.schedule = schedules[k];
    const double t0 = now_s();
    results[k] = evaluate(engine, split, eo);
    be.synchronize();
    if (timed) times[k].push_back(now_s() - t0);
  };
  // Untimed first, each schedule at least once: a first evaluation pays for a cold start (pages
  // touched for the first time, the allocator's first blocks, cold caches), which timed would
  // pass for a difference between the schedules even where they run the same path.
  r.warmup = std::max(o.warmup, 1);
  for (int rep = 0; rep < r.warmup; ++rep)
    for (int k = 0; k < 2; ++k) run_schedule(k, false);
  // Timed rounds alternate which schedule goes first (sequential in even rounds, diagonal in odd
  // ones), so that neither always runs in the other's wake.
  for (int rep = 0; rep < o.reps; ++rep)
    for (int i = 0; i < 2; ++i) run_schedule(rep % 2 == 0 ? i : 1 - i, true);
  r.schedules_coincide = !engine.diagonal_overlaps();
  r.sequential_s_min = *std::min_element(times[0].begin(), times[0].end());
  r.diagonal_s_min = *std::min_element(times[1].begin(), times[1].end());
  r.sequential_s_median = median(times[0]);
  r.diagonal_s_median = median(times[1]);
  r.sequential_tokens_per_s = double(r.tokens) / r.sequential_s_median;
  r.diagonal_tokens_per_s = double(r.tokens) / r.diagonal_s_median;
  r.speedup = r.sequential_s_median / r.diagonal_s_median;
  r.identical = same_bits(results[0].loss, results[1].loss) &&
                same_bits(results[0].acc_teacher_forced, results[1].acc_teacher_forced);
  return r;
}

std::string diagonal_bench_json(const DiagonalBenchResult& r) {
  nlohmann::json j;
  j["bench"] = "diagonal";
  j["kind"] = "armt";
  j["device"] = r.device;
  j["threads"] = r.threads;
  j["layers"] = r.layers;
  j["segments"] = r.segments;
  j["segment_length"] = r.segment_length;
  j["batch"] = r.batch;
  j["d_model"] = r.d_model;
  j["reps"] = r.reps;
  j["warmup"] = r.warmup;
  j["tokens"] = r.tokens;
  j["sequential_s_min"] = r.sequential_s_min;
  j["sequential_s_median"] = r.sequential_s_median;
  j["diagonal_s_min"] = r.diagonal_s_min;
  j["diagonal_s_median"] = r.diagonal_s_median;
  j["sequential_tokens_per_s"] = r.sequential_tokens_per_s;
  j["diagonal_tokens_per_s"] = r.diagonal_tokens_per_s;
  j["speedup"] = r.speedup;
  j["identical"] = r.identical;
  j["schedules_coincide"] = r.schedules_coincide;
  return j.dump();
}

std::string diagonal_bench_text(const DiagonalBenchResult& r) {
  std::string text = fmt::format(
      "armt teacher-forced evaluation, device {}, {} threads: {} layers x {} segments of {} tokens, "
      "batch {}, d_model {} ({} timed evaluations of each schedule, alternating, after {} untimed)\n"
      "  sequential  {:8.3f} s median ({:.3f} min)  {:9.0f} tokens/s\n"
      "  diagonal    {:8.3f} s median ({:.3f} min)  {:9.0f} tokens/s\n"
      "  speed-up {:.2f}x; loss and accuracy bit-identical: {}\n",
      r.device, r.threads, r.layers, r.segments, r.segment_length, r.batch, r.d_model, r.reps, r.warmup,
      r.sequential_s_median, r.sequential_s_min, r.sequential_tokens_per_s, r.diagonal_s_median,
      r.diagonal_s_min, r.diagonal_tokens_per_s, r.speedup, r.identical ? "yes" : "NO");
  if (r.schedules_coincide)
    text += fmt::format("  the two schedules coincide: {} the diagonal schedule runs each diagonal's layer-steps "
                        "in turn, the sequential path, so a speed-up away from 1.00x is noise\n",
                        r.threads == 1 ? "with one thread" : fmt::format("on device {}", r.device));
  return text;
}

}  // namespace rmt
