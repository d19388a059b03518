#pragma once
// How the CUDA backend's kernels are written, so that their arithmetic can be tested on any
// machine, GPU or not.
//
// Every kernel of the Backend set (lib/core/backend.h) has a driver here, in lib/cuda/*.h:
//
//   template <class Exec> void layernorm_forward(Exec& ex, <the arguments of Backend's kernel>);
//
// A driver does its work as passes, run one after the other in the order called:
//   * `ex.for_each(n, f)`: f(i) for every item i in [0, n), in any order and in parallel;
//   * `ex.for_each_block(n, f)`: f(blk, i) for every block i in [0, n), where the kBlockThreads
//     threads of a block run f together and cooperate through `blk` (below): a row of a
//     LayerNorm, a softmax, a chunk of a sum;
//   * `ex.sgemm(...)`: one cuBLAS-style product (column-major, strided batches) on the stream.
// While packed runs are merged (lib/cuda/run_merge.h) an Exec records these per run instead of
// issuing them, and issues each once for all the runs (`ex.sgemm_arrays`: products over arrays of
// pointers); drivers are written as for one run and need not know.
// So:
//   * f writes only what its item or block owns, and reads nothing another item or block of the
//     same pass writes;
//   * no atomics: every sum is a loop in a fixed order or a fixed tree, and results are
//     deterministic (bit-identical run to run);
//   * f is a `[=] RMT_HOST_DEVICE (...) { ... }` lambda: it captures pointers and sizes by
//     value and calls only RMT_HOST_DEVICE functions and <cmath>'s float functions. Lambdas
//     inside it are plain `[=](...)` (they take its execution space).
// `ex.scratch(slot, bytes)` gives a buffer of the Exec's memory (slot 0..kScratchSlots-1, at least
// `bytes`, contents unspecified) for a driver's temporaries, valid until the driver returns.
// With RMT_CUDA_NAN_SCRATCH=1 in the environment (a debug switch; the GPU suite sets it) both
// Execs fill the `bytes` of every scratch request with 0xff (NaN as float) first, so a driver that
// reads scratch it did not write gives NaN instead of a stale, plausible value.
//
// A block's body f(blk, i) runs once per thread on the GPU and once per block on the host, so it
// must be written as the same straight-line code for every thread of the block:
//   * `blk.sum(len, load)`: sum over k < len of load(k), in the type load returns (float or
//     double), the same value in every thread.
//     Thread t adds k = t, t + kBlockThreads, .. in order, then the kBlockThreads partials are
//     added in a fixed tree (partial[t] += partial[t + s] for s = kBlockThreads/2, .., 1);
//     `blk.max(len, load)` the same with max. Every thread of the block must reach the call.
//   * `blk.columns(rows, load, store)`: kColumnTile column sums of a [rows, kColumnTile] tile,
//     load(i, c) its element: thread t sums column t % kColumnTile over rows g, g + G, ..
//     (g = t / kColumnTile,
//     G = kBlockThreads / kColumnTile) in order, then the G partials of a column in a fixed tree;
//     store(c, total) is called once per column (reads of a warp cover 32 adjacent columns).
//   * `blk.for_each(len, f)`: f(k) for k < len, spread over the threads (each k once);
//   Each of these ends with a barrier of the block (__syncthreads), so what one writes, the next
//   may read, whichever thread wrote it.
//   * `blk.leader()`: true in one thread of the block (per-block scalars are written under it).
// The host emulates exactly this order (lib/cuda/host_exec.h), so a block's sums are
// bit-identical on the host and the GPU up to FMA contraction inside `load`.
//
// Two Execs run the same drivers:
//   * CudaExec (lib/cuda/cuda_exec.cuh): one launch per pass on the backend's stream, cuBLAS for
//     sgemm; scratch is device memory kept by the backend.
//   * HostExec (lib/cuda/host_exec.h): plain loops on the host, for the tests
//     (tests/test_cuda_*_host.cpp), which compare every driver with the CPU backend without a GPU.
// Both count what they issue (StreamOps), so the host can tell how many stream operations a
// training step costs on the GPU (tests/test_cuda_stream_ops.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lib/core/host_device.h"

namespace rmt::cuda {

inline constexpr int kScratchSlots = 5;
// One more slot, not the drivers': the pointer arrays of merged GEMMs (lib/cuda/run_merge.h).
inline constexpr int kPointerSlot = kScratchSlots;
inline constexpr int kExecSlots = kScratchSlots + 1;

// RMT_CUDA_NAN_SCRATCH set and not "0" (read when an Exec is made).
inline bool nan_scratch_requested() {
  const char* v = std::getenv("RMT_CUDA_NAN_SCRATCH");
  return v && *v && std::strcmp(v, "0") != 0;
}
// Threads of a block of for_each_block, and the columns of a tile of blk.columns.
inline constexpr int kBlockThreads = 128;
inline constexpr int kColumnTile = 32;
static_assert((kBlockThreads & (kBlockThreads - 1)) == 0, "the tree halves the block");
static_assert(kBlockThreads % kColumnTile == 0, "whole row groups");
// Uploads up to this size go through the CUDA backend's pinned ring without a host wait; larger
// ones wait for their copy (lib/cuda/cuda_exec.cuh).
inline constexpr size_t kUploadSlotBytes = size_t(256) << 10;

// What an Exec issued on its stream, by kind: the numbers a CUDA graph would replay and a profiler
// would show per training step.
struct StreamOps {
  int64_t kernels = 0;  // kernel launches (for_each, for_each_block)
  int64_t gemms = 0;    // cuBLAS calls (one strided-batched call counts once)
  int64_t memsets = 0;
  int64_t copies = 0;   // host to device, device to host, device to device
  int64_t syncs = 0;    // the host waits for the stream
  int64_t graphs = 0;   // replays of a captured step (each one launch)
  int64_t total() const { return kernels + gemms + memsets + copies + graphs; }
};

// A row-major product, `batch` of them at fixed strides (the attention's per-(b, h) products):
// for q < batch, C_q[M, N] = alpha * op(A_q) op(B_q) + beta * C_q with X_q = X + q * stride_x,
// op(A) [M, K] (A is [K, M] when trans_a), op(B) [K, N]; lda, ldb, ldc the row strides.
// K > 0; beta 0 ignores C's old contents (NaN included).
struct Gemm {
  float* C;
  int ldc;
  int64_t stride_c;
  const float* A;
  int lda;
  int64_t stride_a;
  const float* B;
  int ldb;
  int64_t stride_b;
  int M, N, K;
  bool trans_a, trans_b;
  float alpha = 1.f, beta = 0.f;
  int batch = 1;
};

// `count` row-major products given by arrays of pointers in the Exec's memory (cuBLAS's
// SgemmBatched): C[q][M, N] = alpha * op(A[q]) op(B[q]) + beta * C[q], the rest as Gemm's. The
// merged GEMMs of packed runs whose operands are not at one stride (lib/cuda/run_merge.h).
struct GemmArrays {
  float* const* C;
  int ldc;
  const float* const* A;
  int lda;
  const float* const* B;
  int ldb;
  int M, N, K;
  bool trans_a, trans_b;
  float alpha, beta;
  int count;
};

// Runs of a pack whose closures of `closure_bytes` one merged launch carries as its parameters
// (lib/cuda/run_merge.h): as many as fit 4000 bytes (the kernel-parameter limit of every CUDA
// version), at most 64; more runs take more launches. The host counts launches the same way.
inline constexpr int merged_capacity(size_t closure_bytes) {
  const size_t fit = 3968 / (closure_bytes + sizeof(int64_t));
  return fit < 1 ? 1 : fit > 64 ? 64 : int(fit);
}
inline int64_t merged_launches(size_t closure_bytes, int64_t runs) {
  const int cap = merged_capacity(closure_bytes);
  return (runs + cap - 1) / cap;
}

// The same product as cuBLAS (column-major) computes it. A row-major [r, c] matrix with row
// stride ld is, read column-major, its transpose [c, r] with leading dimension ld; so the
// row-major C = op(A) op(B) is, column-major, C^T = op(B)^T op(A)^T: cuBLAS's first operand is
// B (transposed iff trans_b), its second A (transposed iff trans_a), and its m, n, k are N, M, K.
struct ColumnMajorGemm {
  bool trans_first, trans_second;
  int m, n, k;
  const float* first;
  int ld_first;
  int64_t stride_first;
  const float* second;
  int ld_second;
  int64_t stride_second;
  float* C;
  int ldc;
  int64_t stride_c;
  float alpha, beta;
  int batch;
};
inline ColumnMajorGemm column_major(const Gemm& g) {
  return {g.trans_b, g.trans_a, g.N,        g.M,   g.K,        g.B,     g.ldb,   g.stride_b,
          g.A,       g.lda,     g.stride_a, g.C,   g.ldc,      g.stride_c, g.alpha, g.beta,
          g.batch};
}

RMT_HOST_DEVICE inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

}  // namespace rmt::cuda
