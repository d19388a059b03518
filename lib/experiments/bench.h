#pragma once
// `rmt bench`: times full training steps (forward, backward, clip, Adam) of the paper's copy
// workload (all segments of a batch, backward through every segment), of its longer copy120
// workload (360 positions) and of a byte-level language model (one segment of B streams per
// step, the cache and memory carried from step to step, lib/run/lm.h), and counts the model
// FLOPs they stand for. bench/pytorch_reference.py measures the same workloads in PyTorch with
// the same report keys. On a device (--device cuda) every timed region ends with
// Backend::synchronize(), so the clock reads finished work.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/run/config.h"

namespace rmt {

// The workload of one benchmarked model.
struct BenchWorkload {
  std::string name;         // the bench model: baseline | xl | rmt | lm_baseline | lm_xl |
                            // lm_rmt | copy120_baseline | copy120_xl | copy120_rmt |
                            // repro_copy_rmt | repro_retrieval_rmt | deltanet |
                            // gated_deltanet | seg64_* | seg256_* (of those two)
  std::string workload;     // copy | copy120 | lm | repro_copy | repro_retrieval | seg64 | seg256
  ModelConfig model;        // kind, sizes, mem_len / num_mem_tokens, dropout; n_token set
  int batch = 32;           // copy: samples; language model: streams
  double clip = 0.25, lr = 1e-4;
  // copy task (or, retrieval_pairs > 0, associative retrieval)
  int copy_length = 24;     // copy task length L: input T = 3L, answer 2L
  int retrieval_pairs = 0;  // retrieval: K key-value pairs and a query, input T = 2K + 2, answer 1
  int segments = 3;
  int bptt = -1;            // all
  // language model (lm = true): each step trains on the next segment of every stream
  bool lm = false;
  int lm_segment = 0;       // positions per segment
  int lm_window = 0;        // earlier segments a step re-runs (RMT's bptt k; 0 without memory)
  // Positions a step trains on per row (tokens per step = batch * seq_len()): the copy
  // sample's 3L, or the language model's new segment.
  int seq_len() const { return lm ? lm_segment : retrieval_pairs > 0 ? 2 * retrieval_pairs + 2 : 3 * copy_length; }
  int answer_size() const { return lm ? lm_segment : retrieval_pairs > 0 ? 1 : 2 * copy_length; }
};

// Every bench model, in the order reports list them: the copy models, the language models,
// the copy120 models, the reproduction's models.
const std::vector<std::string>& bench_models();
// The groups --model also takes: copy, lm, copy120, repro, and all = copy + lm (the CPU bench's
// set, `make bench`; the copy120 models take seconds per step on a CPU, so they run only when
// asked for by name or by their group; the repro models are `make reproduce`'s own small
// shapes, run by name or as the group repro).
const std::vector<std::string>& bench_groups();
// The models a --model value selects (a model or a group), in bench_models() order; fails
// listing the models and groups otherwise.
std::vector<std::string> bench_selection(const std::string& model_or_group);

// baseline | xl | rmt: the paper's copy config (docs/paper.md §3): 4 layers, 4 heads x 64,
// d_model 128, d_inner 256, vocab 12, batch 32, 72 positions in 3 segments of 24, xl mem_len
// 24, rmt 24 memory tokens, dropout 0.1.
// lm_baseline | lm_xl | lm_rmt: the paper's 12-layer enwik8 model (docs/paper.md §7: d_model
// 512, 8 heads x 64, d_inner 2048, vocab 256, dropout 0.1) in its "more recurrent steps"
// setting, segments of 128 bytes, with 2 streams (the paper's batch does not fit a 2-core
// CPU); lm_xl caches 128 rows per layer (= the segment, Transformer-XL's enwik8 setting),
// lm_rmt has 10 memory tokens and BPTT-1 (each step re-runs the previous segment from the
// carried state), as in the paper's enwik8 RMT rows. clip 0.25, lr 2.5e-4.
// copy120_baseline | copy120_xl | copy120_rmt: the paper's copy120 task (docs/paper.md §1, §4
// Figure 5: copy of 120 symbols of 8, vocab 10, 360 input positions, answer 240), issue 13's
// "copy-360 config", in 3 segments of 120 with the copy model above; xl caches 60 rows and rmt
// has 60 memory tokens (half the segment: the paper's Figure 5b "cache 60" / "mem 60" rows and
// experiments/fig5a_copy360_segments.yaml's choice at 3 segments). batch 32.
// repro_copy_rmt | repro_retrieval_rmt: the runs `rmt reproduce` trains, read from its manifest
// (`manifest`, experiments/reproduce/reproduce.yaml) so that they cannot drift from it: the RMT
// run with the most segments of item fig4_copy's sweep (copy of 6 symbols in 9 segments of 2)
// and of fig4_retrieval's (retrieval of 4 pairs in 5 segments of 2), its model, batch, lr, clip
// and BPTT as planned. Their steps are small: per-call overhead decides their speed.
// deltanet | gated_deltanet: the copy config with the delta rule as every layer's mixer
// (docs/deltanet.md; d_k = 64, d_v = expand_v's default x 64, short_conv 4); seg64_* and
// seg256_*: the same on copy of 64 / 256 symbols in 3 segments of 64 / 256 (the group delta).
// tiny: a few-ms stand-in with the same structure (1 layer, 2 heads x 8, d_model 16; copy:
// batch 4, 18 positions; copy120: the same with vocab 10 and memory / cache 3, half the segment;
// language model: 2 streams, segments of 8, xl cache 8, rmt 2 memory tokens with BPTT-1), for
// tests.
// batch > 0 replaces the workload's batch (copy: samples, language model: streams); 0 keeps it.
// manifest: where the repro_* models' runs are read from (relative to the working directory, as
// `rmt reproduce --manifest`); the other models do not read it.
inline constexpr const char* kReproManifest = "experiments/reproduce/reproduce.yaml";
BenchWorkload bench_workload(const std::string& name, bool tiny, int batch = 0,
                             const std::string& manifest = kReproManifest);
// Language model: the untimed steps that bring the carried state to its steady size (the
// cache full, the BPTT window of earlier segments full); every timed step then does the same
// work. 0 for the copy workload.
int lm_fill_steps(const BenchWorkload& w);

// Model FLOPs of one forward pass over all segments (language model: of one segment in the
// steady state, with the write block): every GEMM and attention product at
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
// Language model, in the steady state: 3 x the forward of every segment of the window (the
// earlier segments with the memory they pass on as their live last-layer rows and no output
// layer, the new one with its token rows and the output layer, no write block), plus, once,
// the forward of the new segment's write block, which only the next step's memory needs.
double step_flops(const BenchWorkload& w);
const char* flop_formula();  // the formula above in one line, for reports
const char* delta_flop_formula();  // the delta-rule kinds' layer, in one line

// The best rate of a large single-precision GEMM (n x n x n, also n/2 and n/4) through the
// backend's matmul on the backend's own buffers, in GFLOP/s, and the n that reached it.
// device: backend_by_name. On the CPU backends each call is timed alone; on a device a timed
// sample is as many calls as fill about 2 ms, ended by synchronize() (one call at n = 512 is a
// few microseconds there, of the order of the launch and synchronisation it would otherwise time).
struct GemmPeak {
  double gflops = 0;
  int n = 0;
};
GemmPeak measure_gemm_gflops(int n, int reps, const std::string& device = kDefaultDevice);

struct BenchOptions {
  int threads = 0;             // 0 = all cores
  int reps = 10, warmup = 3;
  int batch = 0;               // > 0: replaces the workload's batch (--batch)
  bool tiny = false;
  std::string device = kDefaultDevice;  // the backend (backend_by_name)
  bool eval = true;            // also time a greedy free-running evaluation of one batch
                               // (language model: greedy sampling of one segment)
  bool capture = true;         // copy steps captured on a device that can (StepCapture)
  uint64_t seed = 1;
  // > 1: that many runs of the model packed into one computation (lib/core/packed_backend.h),
  // each with its own weights, batches and dropout; `threads` then runs that many runs at a time,
  // each run's kernels on one thread. Not for the language models (their runs train alone).
  int pack = 1;
  std::string manifest = kReproManifest;  // the repro_* models' runs (bench_workload)
};

struct BenchResult {
  std::string model;
  std::string workload;        // copy | copy120 | lm
  std::string device;          // BenchOptions::device
  int threads = 0, batch = 0, seq_len = 0, segments = 0, reps = 0;
  int bptt_window = 0;         // language model: earlier segments re-run per step
  int warmup = 0;              // untimed steps run (language model: at least lm_fill_steps)
  int64_t params = 0;
  int pack = 1;                // runs per step (BenchOptions::pack); the figures below are of all of them
  bool merged_runs = false;    // the packed runs' calls merged, one launch per pass (lib/cuda/run_merge.h)
  double step_ms_min = 0, step_ms_median = 0;  // one step of every packed run together
  double steps_per_s = 0;      // training steps of single runs per second: pack / min step time
  double tokens_per_s = 0;     // pack * B*T / min step time (language model: T = one new segment)
  double gflop_per_step = 0, gflops = 0;  // of all packed runs; gflops at the min step time
  double peak_gflops = 0, mfu = 0;        // filled in by the caller once the peak is known
  double peak_rss_mb = 0;      // process high-water mark (getrusage ru_maxrss) after this model, MiB
  double loss = 0;             // last step's loss (a sanity check that training runs)
  int64_t replayed_steps = 0;  // steps run as a replay of a captured step (StepCapture)
  // one batch; -1 = not run. free_running: with cached keys/values; _rerun: re-running segments
  double eval_teacher_forced_ms = -1, eval_free_running_ms = -1, eval_free_running_rerun_ms = -1;
  // language model (opt.eval): rmt sample's path, one stream: a prompt of one segment, then
  // sample_bytes (one segment) generated greedily; -1 = not run
  double sample_ms = -1;
  int sample_bytes = 0;
};

BenchResult run_bench(const std::string& name, const BenchOptions& options);
// One JSON object (one line) describing a bench model's workload without running it: sizes,
// memory, batch, positions per step, BPTT window, parameters, untimed fill steps, GFLOP per
// step and per evaluation forward (`rmt bench --list`).
std::string bench_workload_json(const std::string& name, bool tiny, int batch = 0,
                                const std::string& manifest = kReproManifest);
void set_peak(BenchResult& r, double peak_gflops);  // peak_gflops and mfu
// One JSON object (one line) with the keys bench/pytorch_reference.py also prints.
std::string bench_json(const BenchResult& r, const std::string& peak_source);

// `rmt bench --diagonal`: the teacher-forced evaluation of one armt batch segment by segment and
// by diagonals of the (segment, layer) grid (Engine::forward_diagonal; docs/armt.md "Diagonal
// evaluation"), timed in alternating rounds (sequential then diagonal, diagonal then sequential,
// ...) after untimed evaluations of each (--warmup, at least 1), so that a change of the
// machine's load or a cold start falls on both. The model: 4 layers (--diagonal-layers), d_model 64, 4 heads
// x 16, d_inner 128, vocab 16, 8 memory tokens, d_mem 8; segments of 16 tokens, 1024 of them
// (--diagonal-segments), the answer the last segment; batch 8 (--batch). --tiny: 2 layers,
// d_model 16, 2 heads x 8, segments of 4, batch 2.
struct DiagonalBenchOptions {
  int layers = 4, segments = 1024;
  int batch = 0;  // 0: 8 (--tiny: 2)
  int reps = 3, warmup = 1;
  bool tiny = false;
  std::string device = kDefaultDevice;
};
struct DiagonalBenchResult {
  std::string device;
  int threads = 0, layers = 0, segments = 0, segment_length = 0, batch = 0, d_model = 0, reps = 0;
  int64_t tokens = 0;  // per evaluation: batch x segments x segment length
  double sequential_s_min = 0, sequential_s_median = 0, diagonal_s_min = 0, diagonal_s_median = 0;
  double sequential_tokens_per_s = 0, diagonal_tokens_per_s = 0;  // at the median times
  double speedup = 0;       // sequential median / diagonal median
  bool identical = false;   // the two schedules' losses and accuracies have the same bits
  int warmup = 0;           // untimed evaluations of each schedule first (at least 1)
  // The diagonal schedule runs the sequential path (one thread, or a backend other than the
  // CPU: Engine::diagonal_overlaps): the speed-up can only be noise, and the text says so.
  bool schedules_coincide = false;
};
DiagonalBenchResult run_diagonal_bench(const DiagonalBenchOptions& options);
std::string diagonal_bench_json(const DiagonalBenchResult& r);
std::string diagonal_bench_text(const DiagonalBenchResult& r);

}  // namespace rmt
