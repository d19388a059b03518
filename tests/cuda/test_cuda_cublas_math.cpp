// cuBLAS's two fp32 math modes timed against each other on this GPU, at the products of the
// benchmark's models (issue #20). The backend sets CUBLAS_PEDANTIC_MATH (fp32 throughout,
// docs/cuda.md); CUBLAS_DEFAULT_MATH with fp32 compute also excludes TF32 (TF32 needs
// CUBLAS_TF32_TENSOR_OP_MATH, asked for by neither), but lets cuBLAS pick other algorithms, and
// BF16x9 emulation when an environment variable asks for it. Whether pedantic costs speed is what
// this measures: the same cublasSgemm, on a handle of its own, under each mode, on the device
// buffers of the backend. Both results are also compared with the cpu (a TF32 result, off by
// ~1e-3, fails); the timings are printed, not judged:
//   cublas-math  LM feed-forward in 256x2048x512 NT: default 10.1 us, pedantic 10.3 us (pedantic / default 1.02)
// Switching the backend's mode would be a change in lib/cuda/cuda_backend.cu; this only measures.
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/error.h"
#include "tests/cuda/compare.h"

using namespace rmt;
using namespace rmt::cuda_test;

namespace {

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) fail("{}: {}", call, cudaGetErrorString(e));
}
void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("{}: {}", call, cublasGetStatusString(s));
}

// A row-major product C[M,N] = op(A) op(B), as the engine calls it (forward X W^T: NT; backward
// dY W: NN; weight gradients dY^T X: TN).
struct TimedGemm {
  int M, N, K;
  bool ta, tb;
  const char* where;
};

// The copy model of rmt bench (batch 32, an rmt segment of 72 rows: 2304 rows; d_model 128,
// 4 heads x 64, d_inner 256) and its language model (batch 2, 128 rows: 256, or 512 with the
// cache; d_model 512, 8 heads x 64, d_inner 2048, 256 byte values), and bench's peak GEMM.
const std::vector<TimedGemm> kTimed = {
    {2304, 768, 128, false, true, "copy qkv projection"},
    {2304, 256, 128, false, true, "copy feed-forward in"},
    {2304, 128, 256, false, true, "copy feed-forward out"},
    {2304, 128, 768, false, false, "copy d(input) of the qkv projection"},
    {768, 128, 2304, true, false, "copy qkv weight gradient"},
    {512, 1536, 512, false, true, "LM qkv projection over cache and segment"},
    {256, 2048, 512, false, true, "LM feed-forward in"},
    {256, 512, 2048, false, true, "LM feed-forward out"},
    {256, 2048, 512, false, false, "LM d(hidden) of the feed-forward out"},
    {2048, 512, 256, true, false, "LM feed-forward in weight gradient"},
    {256, 256, 512, false, true, "LM tied output layer"},
    {2048, 2048, 2048, false, false, "bench's peak GEMM"},
};

// The row-major product as the backend maps it to column-major cuBLAS: C^T = op(B)^T op(A)^T.
void sgemm(cublasHandle_t h, const TimedGemm& g, const float* A, const float* B, float* C) {
  const float alpha = 1.f, beta = 0.f;
  check_cublas(cublasSgemm(h, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, g.N,
                           g.M, g.K, &alpha, B, g.tb ? g.K : g.N, A, g.ta ? g.M : g.K, &beta, C, g.N),
               "cublasSgemm");
}

// Microseconds a call, over `reps` calls after `warmup`, on the handle's stream.
double time_sgemm(cublasHandle_t h, cudaStream_t stream, const TimedGemm& g, const float* A,
                  const float* B, float* C) {
  const int warmup = 3, reps = 20;
  for (int i = 0; i < warmup; ++i) sgemm(h, g, A, B, C);
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) sgemm(h, g, A, B, C);
  check_cuda(cudaEventRecord(stop, stream), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / reps;
}

const char* env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "unset";
}

}  // namespace

TEST_CASE("cuda cublas: CUBLAS_PEDANTIC_MATH against CUBLAS_DEFAULT_MATH in fp32 (no TF32), timed at the bench's products") {
  Backend& be = gpu();  // the context; the buffers below are the backend's device memory
  std::printf("cublas-math  environment: NVIDIA_TF32_OVERRIDE=%s CUBLAS_EMULATE_SINGLE_PRECISION=%s "
              "CUBLAS_EMULATION_STRATEGY=%s\n",
              env_or_unset("NVIDIA_TF32_OVERRIDE"), env_or_unset("CUBLAS_EMULATE_SINGLE_PRECISION"),
              env_or_unset("CUBLAS_EMULATION_STRATEGY"));
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cublasHandle_t h;
  check_cublas(cublasCreate(&h), "cublasCreate");
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  for (const TimedGemm& g : kTimed) {
    const std::string what = fmt::format("{} {}x{}x{} {}{}", g.where, g.M, g.N, g.K, g.ta ? 'T' : 'N', g.tb ? 'T' : 'N');
    CAPTURE(what);
    const std::vector<float> a = uniform(int64_t(g.M) * g.K, 51), b = uniform(int64_t(g.K) * g.N, 52);
    std::vector<float> ref;
    {
      auto A = on(cpu(), a), B = on(cpu(), b);
      DeviceArray<float> C(cpu(), int64_t(g.M) * g.N);
      cpu().matmul(C.data(), A.data(), B.data(), g.M, g.N, g.K, g.ta, g.tb);
      ref = C.download();
    }
    auto A = on(be, a), B = on(be, b);
    DeviceArray<float> C(be, int64_t(g.M) * g.N);
    double us[2] = {0, 0};
    const cublasMath_t modes[2] = {CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH};
    const char* names[2] = {"default", "pedantic"};
    for (int m = 0; m < 2; ++m) {
      be.fill(C.data(), C.size(), std::numeric_limits<float>::quiet_NaN());  // beta 0 ignores it
      be.synchronize();  // the uploads and the fill, on the backend's stream, before this stream
      check_cublas(cublasSetMathMode(h, modes[m]), "cublasSetMathMode");
      sgemm(h, g, A.data(), B.data(), C.data());
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      CHECK(close(fmt::format("cublas {} math {}", names[m], what), ref, C.download(), 1e-5));
      us[m] = time_sgemm(h, stream, g, A.data(), B.data(), C.data());
    }
    const double gflop = 2.0 * g.M * g.N * g.K * 1e-9;
    std::printf("cublas-math  %s: default %.1f us (%.0f GFLOP/s), pedantic %.1f us (%.0f GFLOP/s) "
                "(pedantic / default %.2f)\n",
                what.c_str(), us[0], gflop / (us[0] * 1e-6), us[1], gflop / (us[1] * 1e-6), us[1] / us[0]);
    std::fflush(stdout);
  }
  cublasDestroy(h);
  cudaStreamDestroy(stream);
}
