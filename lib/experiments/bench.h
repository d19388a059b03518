#pragma once
// `rmt bench`: times full training steps (forward over all segments, backward through every
// segment, clip, Adam) of the paper's copy workload, and counts the model FLOPs they stand for.
// bench/pytorch_reference.py measures the same workload in PyTorch with the same report keys.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/run/config.h"

namespace rmt {

// The workload of one benchmarked model.
struct BenchWorkload {
  ModelConfig model;        // kind, sizes, mem_len / num_mem_tokens, dropout; n_token set
  int batch = 32;
  int copy_length = 24;     // copy task length L: input T = 3L, answer 2L
  int segments = 3;
  int bptt = -1;            // all
  double clip = 0.25, lr = 1e-4;
  int seq_len() const { return 3 * copy_length; }
  int answer_size() const { return 2 * copy_length; }
};

// The models rmt bench times (bench/pytorch_reference.py measures the same): the paper's copy
// models baseline, xl and rmt.
std::vector<std::string> bench_kinds();

// The paper's copy config (docs/paper.md §3) for kind baseline | xl | rmt: 4 layers, 4 heads
// x 64, d_model 128, d_inner 256, vocab 12, batch 32, 72 positions in 3 segments of 24, xl
// mem_len 24, rmt 24 memory tokens, dropout 0.1. tiny: a few-ms stand-in with the same
// structure (1 layer, 2 heads x 8, d_model 16, batch 4, 18 positions), for tests.
BenchWorkload bench_workload(const std::string& kind, bool tiny);

// Model FLOPs of one forward pass over all segments: every GEMM and attention product at
// 2 FLOPs per multiply-add, over all query rows (memory rows included) and all key rows
// (Transformer-XL cache rows included). Per segment with q query rows, klen = cache + q key
// rows, hd = heads * d_head, per layer:
//   qkv 2*B*klen*d*3hd + r_net 2*klen*d*hd + scores (q+u)k and (q+v)r 2 * 2*B*H*q*klen*Dh
//   + prob*v 2*B*H*q*klen*Dh + o_net 2*B*q*hd*d + FF 2 * 2*B*q*d*d_inner
// plus the tied output layer over the token rows, 2*B*T_seg*d*V. Element-wise work (LayerNorm,
// softmax, dropout, Adam) is not counted.
double forward_flops(const BenchWorkload& w);
// The FLOPs a training step needs: each segment's forward through the layers something depends
// on, and twice that in backward (2 GEMMs per forward GEMM) where gradients flow. Without memory
// tokens (baseline, xl) a segment with no scored position needs no backward, no output layer and
// (baseline) no forward; xl still needs its layer inputs for the next segment's cache, i.e.
// all layers but the last. In the last layer only the rows something reads (the scored tokens,
// the memory passed on) need attention, o_net and FF; the output layer only scored segments;
// the last segment of rmt passes no memory on, so it runs without the write block. (The engine
// skips exactly this work; see Engine::forward.)
double step_flops(const BenchWorkload& w);
const char* flop_formula();  // the formula above in one line, for reports

// The best rate of a large single-precision GEMM (n x n x n, also n/2 and n/4) through the
// backend's matmul, in GFLOP/s, and the n that reached it.
struct GemmPeak {
  double gflops = 0;
  int n = 0;
};
GemmPeak measure_gemm_gflops(int n, int reps);

struct BenchOptions {
  int threads = 0;             // 0 = all cores
  int reps = 10, warmup = 3;
  bool tiny = false;
  bool eval = true;            // also time a greedy free-running evaluation of one batch
  uint64_t seed = 1;
};

struct BenchResult {
  std::string model;
  int threads = 0, batch = 0, seq_len = 0, segments = 0, reps = 0;
  int64_t params = 0;
  double step_ms_min = 0, step_ms_median = 0;
  double tokens_per_s = 0;     // B*T / min step time
  double gflop_per_step = 0, gflops = 0;  // gflops at the min step time
  double peak_gflops = 0, mfu = 0;        // filled in by the caller once the peak is known
  double peak_rss_mb = 0;      // process high-water mark (getrusage ru_maxrss) after this model
  double loss = 0;             // last step's loss (a sanity check that training runs)
  // one batch; -1 = not run. free_running: with cached keys/values; _rerun: re-running segments
  double eval_teacher_forced_ms = -1, eval_free_running_ms = -1, eval_free_running_rerun_ms = -1;
};

BenchResult run_bench(const std::string& kind, const BenchOptions& options);
void set_peak(BenchResult& r, double peak_gflops);  // peak_gflops and mfu
double peak_rss_mb();
// One JSON object (one line) with the keys bench/pytorch_reference.py also prints.
std::string bench_json(const BenchResult& r, const std::string& peak_source);

}  // namespace rmt
