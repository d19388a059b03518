#pragma once
// CudaExec: the Exec of lib/cuda/exec.h on the GPU. Each pass is one launch on the backend's one
// stream; GEMMs are cuBLAS calls on it; fills and copies are queued on it. Only
// lib/cuda/cuda_backend.cu includes this (nvcc).
//
// Every CUDA and cuBLAS call is checked: a failure is rmt::fail("cuda: <call>: <error string>"),
// so a bad launch or an out-of-memory is one clear error line, never a silently wrong number.
#include <algorithm>
#include <cstring>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "lib/core/error.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/run_merge.h"

namespace rmt::cuda {

// ---- checked calls --------------------------------------------------------------------------

inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so that later calls can report theirs
    fail("cuda: {}: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e));
  }
}

inline void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuda: {}: {}", call, cublasGetStatusString(s));
}

#define RMT_CUDA_CHECK(call) ::rmt::cuda::check((call), #call)

// ---- kernels --------------------------------------------------------------------------------

constexpr int kThreadsPerBlock = 256;
// cuBLAS's workspace (the size NVIDIA recommends for Hopper).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
// Enough blocks to fill any current GPU many times over; larger passes loop (grid-stride), so
// n is never limited by the grid size and no index overflows int (all indices are int64).
constexpr int64_t kMaxBlocks = int64_t(1) << 16;

template <class F>
__global__ void __launch_bounds__(kThreadsPerBlock) for_each_kernel(int64_t n, F f) {
  const int64_t stride = int64_t(blockDim.x) * int64_t(gridDim.x);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// The threads of one block of for_each_block_kernel (lib/cuda/exec.h says what each call does).
// Host-device so that the host side of a driver's host-device lambda compiles; only the device
// runs it.
struct CudaBlock {
  double* shared;  // kBlockThreads doubles of the block's shared memory

  // acc in thread t; returns the tree's result in every thread.
  template <class T, class Op>
  RMT_HOST_DEVICE T tree(T acc, Op op) const {
#ifdef __CUDA_ARCH__
    T* s = reinterpret_cast<T*>(shared);
    const int t = threadIdx.x;
    s[t] = acc;
    __syncthreads();
    for (int h = kBlockThreads / 2; h > 0; h >>= 1) {
      if (t < h) s[t] = op(s[t], s[t + h]);
      __syncthreads();
    }
    const T r = s[0];
    __syncthreads();
    return r;
#else
    return acc;
#endif
  }
  template <class Load>
  RMT_HOST_DEVICE auto sum(int64_t len, Load load) const {
    using T = decltype(load(int64_t(0)));
    T acc = T(0);
#ifdef __CUDA_ARCH__
    for (int64_t k = threadIdx.x; k < len; k += kBlockThreads) acc += load(k);
#endif
    return tree(acc, [](T a, T b) { return a + b; });
  }
  template <class Load>
  RMT_HOST_DEVICE auto max(int64_t len, Load load) const {
    using T = decltype(load(int64_t(0)));
#ifdef __CUDA_ARCH__
    const int64_t t = threadIdx.x;
    T acc = load(t < len ? t : 0);
    for (int64_t k = t + kBlockThreads; k < len; k += kBlockThreads) acc = acc < load(k) ? load(k) : acc;
#else
    T acc = load(0);
#endif
    return tree(acc, [](T a, T b) { return a < b ? b : a; });
  }
  template <class Load, class Store>
  RMT_HOST_DEVICE void columns(int64_t rows, Load load, Store store) const {
#ifdef __CUDA_ARCH__
    using T = decltype(load(int64_t(0), 0));
    constexpr int W = kColumnTile, G = kBlockThreads / kColumnTile;
    const int t = threadIdx.x, c = t % W, g = t / W;
    T acc = T(0);
    for (int64_t i = g; i < rows; i += G) acc += load(i, c);
    T* s = reinterpret_cast<T*>(shared);
    s[t] = acc;
    __syncthreads();
    for (int h = G / 2; h > 0; h >>= 1) {
      if (g < h) s[t] = s[t] + s[t + h * W];
      __syncthreads();
    }
    if (g == 0) store(c, s[c]);
    __syncthreads();
#endif
  }
  template <class F>
  RMT_HOST_DEVICE void for_each(int64_t len, F f) const {
#ifdef __CUDA_ARCH__
    for (int64_t k = threadIdx.x; k < len; k += kBlockThreads) f(k);
    __syncthreads();
#endif
  }
  RMT_HOST_DEVICE bool leader() const {
#ifdef __CUDA_ARCH__
    return threadIdx.x == 0;
#else
    return false;
#endif
  }
};

template <class F>
__global__ void __launch_bounds__(kBlockThreads) for_each_block_kernel(int64_t n, F f) {
  __shared__ double shared[kBlockThreads];
  CudaBlock blk{shared};
  for (int64_t b = blockIdx.x; b < n; b += gridDim.x) f(blk, b);  // the same b in every thread
}

// Packed runs' passes merged (lib/cuda/run_merge.h): up to Cap runs' closures and item counts as
// the launch's parameters (__grid_constant__: read in place, not copied per thread), run r on
// blockIdx.y.
template <class F, int Cap>
struct MergedClosures {
  int64_t n[Cap];
  alignas(F) unsigned char f[Cap][sizeof(F)];
};

template <class F, int Cap>
__global__ void __launch_bounds__(kThreadsPerBlock)
    merged_for_each_kernel(const __grid_constant__ MergedClosures<F, Cap> m) {
  const int r = blockIdx.y;
  const F& f = *reinterpret_cast<const F*>(m.f[r]);
  const int64_t n = m.n[r];
  const int64_t stride = int64_t(blockDim.x) * int64_t(gridDim.x);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

template <class F, int Cap>
__global__ void __launch_bounds__(kBlockThreads)
    merged_for_each_block_kernel(const __grid_constant__ MergedClosures<F, Cap> m) {
  __shared__ double shared[kBlockThreads];
  CudaBlock blk{shared};
  const int r = blockIdx.y;
  const F& f = *reinterpret_cast<const F*>(m.f[r]);
  for (int64_t b = blockIdx.x; b < m.n[r]; b += gridDim.x) f(blk, b);  // the same b in every thread
}

// ---- the Exec -------------------------------------------------------------------------------

// What the backend creates at its first use: the stream, the cuBLAS handle, the scratch buffers,
// the pinned upload ring and the device word sum_squares writes.
struct CudaState {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* scratch[kExecSlots] = {};
  size_t scratch_bytes[kExecSlots] = {};
  double* sum_result = nullptr;  // device
  void* cublas_workspace = nullptr;  // device, kCublasWorkspaceBytes

  // Uploads from pageable memory through pinned slots: the host copies into a slot (so the
  // caller's buffer is free as soon as the call returns, as the Backend contract says), the
  // copy to the device is queued on the stream, and an event marks when the slot is free again.
  // The host never waits for the stream unless it comes round to a slot still in flight.
  static constexpr int kUploadSlots = 8;
  char* upload = nullptr;  // pinned, kUploadSlots * kUploadSlotBytes
  cudaEvent_t upload_done[kUploadSlots] = {};
  int next_upload = 0;

  cudaGraphExec_t step = nullptr;  // the captured step kept (replay)
};

struct CudaExec {
  using Block = CudaBlock;
  CudaState* state = nullptr;
  StreamOps ops;

  template <class F>
  void for_each(int64_t n, F f) {
    if (n <= 0) return;
    if (merge.recording()) return merge.record_pass(n, f, &CudaExec::launch_merged<F, false>);
    const int64_t blocks = std::min((n + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
    for_each_kernel<F><<<unsigned(blocks), kThreadsPerBlock, 0, state->stream>>>(n, f);
    check(cudaGetLastError(), "launch of for_each_kernel");
    ++ops.kernels;
  }
  template <class F>
  void for_each_block(int64_t n, F f) {
    if (n <= 0) return;
    if (merge.recording()) return merge.record_pass(n, f, &CudaExec::launch_merged<F, true>);
    const int64_t blocks = std::min(n, kMaxBlocks);
    for_each_block_kernel<F><<<unsigned(blocks), kBlockThreads, 0, state->stream>>>(n, f);
    check(cudaGetLastError(), "launch of for_each_block_kernel");
    ++ops.kernels;
  }

  // Packed runs' calls recorded, then issued as one launch per pass (lib/cuda/run_merge.h).
  RunMerge<CudaExec> merge;
  template <class F, bool Blocks>
  static void launch_merged(CudaExec& ex, const std::vector<const unsigned char*>& closure, const std::vector<int64_t>& n) {
    constexpr int Cap = merged_capacity(sizeof(F));
    const int runs = int(closure.size());
    for (int r0 = 0; r0 < runs; r0 += Cap) {
      const int count = std::min(Cap, runs - r0);
      MergedClosures<F, Cap> m;
      int64_t most = 0;
      for (int r = 0; r < count; ++r) {
        m.n[r] = n[size_t(r0 + r)];
        std::memcpy(m.f[r], closure[size_t(r0 + r)], sizeof(F));
        most = std::max(most, m.n[r]);
      }
      if constexpr (Blocks) {
        const dim3 grid(unsigned(std::min(most, kMaxBlocks)), unsigned(count));
        merged_for_each_block_kernel<F, Cap><<<grid, kBlockThreads, 0, ex.state->stream>>>(m);
        check(cudaGetLastError(), "launch of merged_for_each_block_kernel");
      } else {
        const dim3 grid(unsigned(std::min((most + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks)),
                        unsigned(count));
        merged_for_each_kernel<F, Cap><<<grid, kThreadsPerBlock, 0, ex.state->stream>>>(m);
        check(cudaGetLastError(), "launch of merged_for_each_kernel");
      }
      ++ex.ops.kernels;
    }
  }

  // cuBLAS in fp32 (pedantic math, set at the handle's creation): one call, strided-batched when
  // g.batch > 1. cuBLAS ignores C when beta is 0 (NaN in it included), as the Backend contract says.
  void sgemm(const Gemm& g) {
    if (merge.recording()) return merge.record_gemm(g);
    const ColumnMajorGemm c = column_major(g);
    const cublasOperation_t op_first = c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (c.batch == 1) {
      RMT_CUDA_CHECK(cublasSgemm(state->cublas, op_first, op_second, c.m, c.n, c.k, &c.alpha,
                                 c.first, c.ld_first, c.second, c.ld_second, &c.beta, c.C, c.ldc));
    } else {
      RMT_CUDA_CHECK(cublasSgemmStridedBatched(
          state->cublas, op_first, op_second, c.m, c.n, c.k, &c.alpha, c.first, c.ld_first,
          c.stride_first, c.second, c.ld_second, c.stride_second, &c.beta, c.C, c.ldc,
          c.stride_c, c.batch));
    }
    ++ops.gemms;
  }

  // cuBLAS's SgemmBatched over the pointer arrays (device memory) a pass wrote: column-major, the
  // first operand B, the second A, as column_major() maps a Gemm.
  void sgemm_arrays(const GemmArrays& g) {
    const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    RMT_CUDA_CHECK(cublasSgemmBatched(state->cublas, op_first, op_second, g.N, g.M, g.K, &g.alpha, g.B, g.ldb,
                                      g.A, g.lda, &g.beta, g.C, g.ldc, g.count));
    ++ops.gemms;
  }

  void memset(void* p, uint8_t value, size_t bytes) {
    if (merge.recording()) return memset_pass(*this, p, value, bytes);
    memset_now(p, value, bytes);
  }
  void memset_now(void* p, uint8_t value, size_t bytes) {
    RMT_CUDA_CHECK(cudaMemsetAsync(p, value, bytes, state->stream));
    ++ops.memsets;
  }
  // Small uploads through the pinned ring, no host wait; large ones (parameters, checkpoints)
  // wait for their copy.
  void copy_to_device(void* dst, const void* host, size_t bytes) {
    no_capture("an upload");
    no_merge("an upload");
    CudaState& s = *state;
    ++ops.copies;
    if (bytes > kUploadSlotBytes) {
      RMT_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s.stream));
      RMT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      ++ops.syncs;
      return;
    }
    const int k = s.next_upload;
    s.next_upload = (k + 1) % CudaState::kUploadSlots;
    RMT_CUDA_CHECK(cudaEventSynchronize(s.upload_done[k]));  // the slot's last copy is done
    char* slot = s.upload + size_t(k) * kUploadSlotBytes;
    std::memcpy(slot, host, bytes);
    RMT_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, s.stream));
    RMT_CUDA_CHECK(cudaEventRecord(s.upload_done[k], s.stream));
  }
  // The data is on the host on return.
  void copy_to_host(void* host, const void* src, size_t bytes) {
    no_capture("a download");
    no_merge("a download");
    RMT_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, state->stream));
    RMT_CUDA_CHECK(cudaStreamSynchronize(state->stream));
    ++ops.copies;
    ++ops.syncs;
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) {
    if (merge.recording()) return copy_pass(*this, dst, src, bytes);
    RMT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, state->stream));
    ++ops.copies;
  }
  void synchronize() {
    no_capture("a wait for the stream");
    no_merge("a wait for the stream");
    RMT_CUDA_CHECK(cudaStreamSynchronize(state->stream));
    ++ops.syncs;
  }

  // A driver's scratch: the slot itself, or while packed runs are merged, the run's region of it.
  void* scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= kScratchSlots) fail("cuda: scratch slot {} out of range", slot);
    void* p = merge.recording()
                  ? merge.run_scratch(slot, bytes, [this](int s, size_t b) { return slot_buffer(s, b); })
                  : slot_buffer(slot, bytes);
    if (nan_scratch) memset_now(p, 0xff, bytes);
    return p;
  }
  // Slot `slot` (kExecSlots of them) grown to at least `bytes`.
  void* slot_buffer(int slot, size_t bytes) {
    if (bytes > state->scratch_bytes[slot]) {
      no_capture("a scratch buffer grown");
      // A kernel still queued may read the old buffer: let the stream drain before freeing it.
      RMT_CUDA_CHECK(cudaStreamSynchronize(state->stream));
      ++ops.syncs;
      ++scratch_growths;
      const size_t old_bytes = state->scratch_bytes[slot];
      if (state->scratch[slot]) RMT_CUDA_CHECK(cudaFree(state->scratch[slot]));
      state->scratch[slot] = nullptr;
      state->scratch_bytes[slot] = 0;
      // At least half as much again: a few growths reach a step's largest request.
      const size_t grown = std::max(bytes, old_bytes + old_bytes / 2);
      RMT_CUDA_CHECK(cudaMalloc(&state->scratch[slot], grown));
      state->scratch_bytes[slot] = grown;
    }
    return state->scratch[slot];
  }
  bool nan_scratch = nan_scratch_requested();  // exec.h: every request filled with 0xff first
  int64_t scratch_growths = 0;

  // Capture: the stream records instead of running (kernels, cuBLAS calls, memsets and device
  // copies become the nodes of a CUDA graph); the graph is instantiated once and replayed with
  // one launch. cuBLAS captures into its handle's workspace, allocated when the handle was made.
  void begin_capture() {
    RMT_CUDA_CHECK(cudaStreamBeginCapture(state->stream, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
  }
  void end_capture() {
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    RMT_CUDA_CHECK(cudaStreamEndCapture(state->stream, &graph));
    drop_step();
    const cudaError_t e = cudaGraphInstantiateWithFlags(&state->step, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiateWithFlags");
  }
  void abort_capture() {  // never throws: called while an error unwinds
    if (!capturing_) return;
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(state->stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  void replay() {
    RMT_CUDA_CHECK(cudaGraphLaunch(state->step, state->stream));
    ++ops.graphs;
  }
  bool capturing() const { return capturing_; }

 private:
  void no_capture(const char* what) const {
    if (capturing_) fail("cuda: {} while capturing a step (a CUDA graph cannot hold it)", what);
  }
  void no_merge(const char* what) const {
    if (merge.recording()) fail("cuda: {} inside merged packed runs", what);
  }
  void drop_step() {
    if (state->step) cudaGraphExecDestroy(state->step);
    state->step = nullptr;
  }
  bool capturing_ = false;
};

}  // namespace rmt::cuda
