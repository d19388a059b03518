// The CUDA backend (lib/cuda/cuda_backend.h, docs/cuda.md).
//
// One stream carries everything in call order: kernels, cuBLAS GEMMs, memsets and copies. The
// host waits only where the Backend contract needs data on the host (copy_device_to_host,
// sum_squares) or asks for it (synchronize), and before freeing memory a queued kernel may still
// use (scratch growth).
//
// Every CUDA and cuBLAS call is checked: a failure is rmt::fail("cuda: <call>: <error string>"),
// so a bad launch or an out-of-memory is one clear error line, never a silently wrong number.
// Kernel faults surface at the next call that synchronizes; CUDA_LAUNCH_BLOCKING=1 makes every
// launch synchronous, to find the one that failed.
#include "lib/cuda/cuda_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/cuda/attention_kernels.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/kernels.h"

#ifndef RMT_CUDA_ARCHITECTURES
#define RMT_CUDA_ARCHITECTURES "unknown"
#endif

namespace rmt::cuda {

// ---- checked calls --------------------------------------------------------------------------

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so that later calls can report theirs
    fail("cuda: {}: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e));
  }
}

void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuda: {}: {}", call, cublasGetStatusString(s));
}

#define RMT_CUDA_CHECK(call) ::rmt::cuda::check((call), #call)

// ---- the launch of one pass -----------------------------------------------------------------

constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill any current GPU many times over; larger passes loop (grid-stride), so
// n is never limited by the grid size and no index overflows int (all indices are int64).
constexpr int64_t kMaxBlocks = int64_t(1) << 16;

template <class F>
__global__ void __launch_bounds__(kThreadsPerBlock) for_each_kernel(int64_t n, F f) {
  const int64_t stride = int64_t(blockDim.x) * int64_t(gridDim.x);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// A trivial kernel, to ask at start-up whether this build has code for the device.
__global__ void probe_kernel(int* p) {
  if (p) *p = 0;
}

struct CudaState;

// The Exec of lib/cuda/exec.h on the GPU: each pass one launch of for_each_kernel on the stream.
struct CudaExec {
  CudaState* state;
  template <class F>
  void for_each(int64_t n, F f);
  void* scratch(int slot, size_t bytes);
};

// What the backend creates at its first use: the context (implicitly), the stream, the cuBLAS
// handle, the scratch buffers, the pinned upload ring and the device word sum_squares writes.
struct CudaState {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* scratch[kScratchSlots] = {};
  size_t scratch_bytes[kScratchSlots] = {};
  double* sum_result = nullptr;  // device

  // Uploads from pageable memory through pinned slots: the host copies into a slot (so the
  // caller's buffer is free as soon as the call returns, as the Backend contract says), the
  // copy to the device is queued on the stream, and an event marks when the slot is free again.
  // The host never waits for the stream unless it comes round to a slot still in flight.
  static constexpr int kUploadSlots = 8;
  static constexpr size_t kUploadSlotBytes = size_t(256) << 10;
  char* upload = nullptr;  // pinned, kUploadSlots * kUploadSlotBytes
  cudaEvent_t upload_done[kUploadSlots] = {};
  int next_upload = 0;
};

template <class F>
void CudaExec::for_each(int64_t n, F f) {
  if (n <= 0) return;
  const int64_t blocks = std::min((n + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks);
  for_each_kernel<F><<<unsigned(blocks), kThreadsPerBlock, 0, state->stream>>>(n, f);
  check(cudaGetLastError(), "launch of for_each_kernel");
}

void* CudaExec::scratch(int slot, size_t bytes) {
  if (slot < 0 || slot >= kScratchSlots) fail("cuda: scratch slot {} out of range", slot);
  if (bytes > state->scratch_bytes[slot]) {
    // A kernel still queued may read the old buffer: let the stream drain before freeing it.
    RMT_CUDA_CHECK(cudaStreamSynchronize(state->stream));
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

// C[M, N] (row stride ldc) = beta * C, or 0 when beta is 0 (an empty product, K = 0: what the
// CPU backend does, whatever cuBLAS would do with k = 0).
template <class Exec>
void scale_matrix_rows(Exec& ex, float* C, int ldc, int M, int N, float beta) {
  ex.for_each(int64_t(M) * N, [=] RMT_HOST_DEVICE(int64_t i) {
    float* c = C + (i / N) * ldc + i % N;
    *c = beta == 0.f ? 0.f : beta * *c;
  });
}

// ---- why there is no device -----------------------------------------------------------------

// The device count, or why there is none ("" and count > 0 when there is one).
std::string why_no_device(int& count) {
  count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (e == cudaSuccess && count > 0) return "";
  std::string why;
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD); lib) {
    dlclose(lib);
  } else if (void* lib2 = dlopen("libcuda.so.1", RTLD_LAZY); lib2) {
    dlclose(lib2);
  } else {
    why = "no NVIDIA driver: libcuda.so.1 cannot be loaded";
  }
  if (why.empty())
    why = e == cudaSuccess ? "the driver reports 0 devices"
                           : fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"))
    why += fmt::format("; CUDA_VISIBLE_DEVICES is '{}'", visible);
  return why;
}

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// ---- the backend ----------------------------------------------------------------------------

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const std::string why = why_no_device(count);
    if (!why.empty()) fail("device 'cuda': no CUDA device found ({})", why);
  }
  // Never destroyed (cuda_backend() leaks it): at exit the CUDA runtime may already be gone.

  // ---- memory
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    ready();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);  // 256-byte aligned
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      (void)cudaGetLastError();
      fail("cuda: cudaMalloc of {} bytes: {} ({} MB of {} MB free on the device)", bytes,
           cudaGetErrorString(e), free_bytes >> 20, total_bytes >> 20);
    }
    return p;
  }
  void deallocate(void* p, size_t) override {
    // Never throws: buffers are freed by destructors, also while an earlier CUDA error unwinds
    // the stack (the runtime then refuses every call, and that error has been reported).
    // A kernel still queued may use the buffer: the stream drains first (cudaFree waits for the
    // device too; this makes it explicit). Warm steps free nothing, so no step pays for it.
    if (!p || !st_) return;
    if (cudaStreamSynchronize(st_->stream) != cudaSuccess) (void)cudaGetLastError();
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }
  void fill(float* x, int64_t n, float value) override { rmt::cuda::fill(ex(), x, n, value); }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override {
    if (bytes == 0) return;
    RMT_CUDA_CHECK(cudaMemsetAsync(p, value, bytes, stream()));
  }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    if (bytes == 0) return;
    CudaState& s = state();
    if (bytes > CudaState::kUploadSlotBytes) {  // large (parameters, checkpoints): wait for it
      RMT_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s.stream));
      RMT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      return;
    }
    const int k = s.next_upload;
    s.next_upload = (k + 1) % CudaState::kUploadSlots;
    RMT_CUDA_CHECK(cudaEventSynchronize(s.upload_done[k]));  // the slot's last copy is done
    char* slot = s.upload + size_t(k) * CudaState::kUploadSlotBytes;
    std::memcpy(slot, host, bytes);
    RMT_CUDA_CHECK(cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, s.stream));
    RMT_CUDA_CHECK(cudaEventRecord(s.upload_done[k], s.stream));
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    RMT_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream()));
    RMT_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the data is on the host on return
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    RMT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  void synchronize() override {
    if (st_) RMT_CUDA_CHECK(cudaStreamSynchronize(st_->stream));
  }

  // ---- GEMMs: row-major products through column-major cuBLAS.
  // A row-major [r, c] matrix with row stride ld is, read column-major, its transpose [c, r]
  // with leading dimension ld. So the row-major C = op(A) op(B) is, column-major,
  // C^T = op(B)^T op(A)^T: cuBLAS's first operand is B (transposed iff trans_b), its second A
  // (transposed iff trans_a), and its m, n, k are N, M, K.
  void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
              bool trans_b, float alpha, float beta) override {
    gemm(C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M,
                      int N, int K, bool trans_a, bool trans_b, float alpha, float beta) override {
    gemm(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
  }

  // ---- every other kernel: its driver, on this backend's Exec
  void add_bias(float* x, const float* bias, int rows, int cols) override {
    rmt::cuda::add_bias(ex(), x, bias, rows, cols);
  }
  void bias_backward(float* dbias, const float* dy, int rows, int cols) override {
    rmt::cuda::bias_backward(ex(), dbias, dy, rows, cols);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d,
                         float scale) override {
    rmt::cuda::embedding_forward(ex(), out, ids, table, n, d, scale);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d,
                          float scale) override {
    rmt::cuda::embedding_backward(ex(), dtable, dout, ids, n, d, scale);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                         const float* weight, const float* bias, int n, int d) override {
    rmt::cuda::layernorm_forward(ex(), out, mean, rstd, x, weight, bias, n, d);
  }
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                          const float* x, const float* mean, const float* rstd,
                          const float* weight, int n, int d) override {
    rmt::cuda::layernorm_backward(ex(), dx, dweight, dbias, dout, x, mean, rstd, weight, n, d);
  }
  void relu_forward(float* out, const float* x, int64_t n) override {
    rmt::cuda::relu_forward(ex(), out, x, n);
  }
  void relu_backward(float* dx, const float* dout, const float* y, int64_t n) override {
    rmt::cuda::relu_backward(ex(), dx, dout, y, n);
  }
  void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                       uint64_t seed) override {
    rmt::cuda::dropout_forward(ex(), out, x, keep, n, p, seed);
  }
  void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                        float p) override {
    rmt::cuda::dropout_backward(ex(), dx, dout, keep, n, p);
  }
  void positional_embedding(float* out, int klen, int d) override {
    rmt::cuda::positional_embedding(ex(), out, klen, d);
  }
  void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                             const float* u, const float* v, const uint8_t* mask,
                             const AttentionShape& s, float scale) override {
    rmt::cuda::rel_attention_forward(ex(), out, prob, qkv, r, u, v, mask, s, scale);
  }
  void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout,
                              const float* prob, const float* qkv, const float* r,
                              const float* u, const float* v, const AttentionShape& s,
                              float scale) override {
    rmt::cuda::rel_attention_backward(ex(), dqkv, dr, du, dv, dout, prob, qkv, r, u, v, s, scale);
  }
  void broadcast_batch(float* out, const float* x, int rows, int B, int width) override {
    rmt::cuda::broadcast_batch(ex(), out, x, rows, B, width);
  }
  void broadcast_batch_backward(float* dx, const float* dout, int rows, int B,
                                int width) override {
    rmt::cuda::broadcast_batch_backward(ex(), dx, dout, rows, B, width);
  }
  void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                     int n, int V, float grad_scale) override {
    rmt::cuda::cross_entropy(ex(), loss, dlogits, logits, targets, n, V, grad_scale);
  }
  double sum_squares(const float* x, int64_t n) override {
    CudaExec& e = ex();
    rmt::cuda::sum_squares(e, st_->sum_result, x, n);
    double result = 0;
    copy_device_to_host(&result, st_->sum_result, sizeof result);
    return result;
  }
  void scale(float* x, int64_t n, float alpha) override { rmt::cuda::scale(ex(), x, n, alpha); }
  void add_inplace(float* y, const float* x, int64_t n) override {
    rmt::cuda::add_inplace(ex(), y, x, n);
  }
  void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    rmt::cuda::adam_update(ex(), param, grad, m, v, n, lr, beta1, beta2, eps, t);
  }

 private:
  // The state, made at the first call that needs the device.
  CudaState& state() {
    ready();
    return *st_;
  }
  cudaStream_t stream() { return state().stream; }
  CudaExec& ex() {
    ready();
    return exec_;
  }

  void ready() {
    if (st_) return;
    // Kept only once complete: a failure here is reported, and the next call tries again.
    auto s = std::make_unique<CudaState>();
    RMT_CUDA_CHECK(cudaSetDevice(0));  // creates the primary context
    // Does this build have code for the device? (Otherwise every launch fails with "no kernel
    // image is available"; say what to rebuild with instead.)
    cudaFuncAttributes attributes;
    const cudaError_t image = cudaFuncGetAttributes(&attributes, probe_kernel);
    if (image != cudaSuccess) {
      (void)cudaGetLastError();
      cudaDeviceProp p;
      const bool known = cudaGetDeviceProperties(&p, 0) == cudaSuccess;
      (void)cudaGetLastError();
      fail("device 'cuda': this rmt has kernels for CUDA architectures {} only, not for {} "
           "(compute capability {}.{}): rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{} ({})",
           RMT_CUDA_ARCHITECTURES, known ? p.name : "device 0", known ? p.major : 0,
           known ? p.minor : 0, known ? p.major : 0, known ? p.minor : 0,
           cudaGetErrorString(image));
    }
    RMT_CUDA_CHECK(cudaStreamCreate(&s->stream));
    RMT_CUDA_CHECK(cublasCreate(&s->cublas));
    RMT_CUDA_CHECK(cublasSetStream(s->cublas, s->stream));
    // fp32 as the CPU computes it: pedantic math uses the prescribed precision throughout. The
    // default mode with fp32 compute also excludes TF32, but lets cuBLAS pick reduced-precision
    // emulation (BF16x9) when an environment variable (CUBLAS_EMULATE_SINGLE_PRECISION, the
    // emulation strategy) asks for it; pedantic does not.
    RMT_CUDA_CHECK(cublasSetMathMode(s->cublas, CUBLAS_PEDANTIC_MATH));
    RMT_CUDA_CHECK(cudaMalloc(&s->sum_result, sizeof(double)));
    RMT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s->upload),
                                  CudaState::kUploadSlots * CudaState::kUploadSlotBytes));
    for (cudaEvent_t& e : s->upload_done)
      RMT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    st_ = s.release();
    exec_.state = st_;
  }

  void gemm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
            int K, bool trans_a, bool trans_b, float alpha, float beta) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
      scale_matrix_rows(ex(), C, ldc, M, N, beta);
      return;
    }
    // cuBLAS ignores C when beta is 0 (NaN in it included), as the Backend contract says.
    RMT_CUDA_CHECK(cublasSgemm(state().cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                               trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A,
                               lda, &beta, C, ldc));
  }

  CudaState* st_ = nullptr;
  CudaExec exec_{nullptr};
};

Backend& cuda_backend() {
  // Built once; a failed construction (no device) throws and is retried at the next call.
  static CudaBackend* backend = new CudaBackend();
  return *backend;
}

std::string cuda_architectures() { return RMT_CUDA_ARCHITECTURES; }

std::string cuda_description() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 without a driver
  (void)cudaGetLastError();
  std::string text = fmt::format("CUDA runtime {}", version_string(runtime));
  if (driver > 0) text += fmt::format(", driver {}", version_string(driver));
  text += fmt::format(", kernels for CUDA architectures {}", RMT_CUDA_ARCHITECTURES);
  int count = 0;
  const std::string why = why_no_device(count);
  if (!why.empty()) return text + fmt::format("; no CUDA device ({})", why);
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return text + fmt::format("; {} device(s), properties unavailable", count);
  }
  return text + fmt::format("; device 0 of {}: {}, compute capability {}.{}, {} SMs, {} MiB", count,
                            p.name, p.major, p.minor, p.multiProcessorCount,
                            p.totalGlobalMem >> 20);
}

}  // namespace rmt::cuda

// ---- the library's entry points (lib/core/backends.cpp loads them) -------------------------

extern "C" __attribute__((visibility("default"))) rmt::Backend* rmt_cuda_backend_v1(std::string* error) {
  try {
    return &rmt::cuda::cuda_backend();
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

extern "C" __attribute__((visibility("default"))) void rmt_cuda_description_v1(std::string* out) {
  try {
    *out = rmt::cuda::cuda_description();
  } catch (const std::exception& e) {
    *out = e.what();
  }
}
