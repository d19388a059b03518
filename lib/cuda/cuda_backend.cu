// The CUDA backend (lib/cuda/cuda_backend.h, docs/cuda.md).
//
// DriverBackend<CudaExec> (lib/cuda/driver_backend.h, lib/cuda/cuda_exec.cuh) with device memory.
// One stream carries everything in call order: kernels, cuBLAS GEMMs, memsets and copies. The
// host waits only where the Backend contract needs data on the host (copy_device_to_host,
// sum_squares) or asks for it (synchronize), and before freeing memory a queued kernel may still
// use (scratch growth).
//
// Every CUDA and cuBLAS call is checked (lib/cuda/cuda_exec.cuh). Kernel faults surface at the
// next call that synchronizes; CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous, to find
// the one that failed.
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
#include "lib/cuda/cuda_exec.cuh"
#include "lib/cuda/driver_backend.h"

#ifndef RMT_CUDA_ARCHITECTURES
#define RMT_CUDA_ARCHITECTURES "unknown"
#endif

namespace rmt::cuda {

// A trivial kernel, to ask at start-up whether this build has code for the device.
__global__ void probe_kernel(int* p) {
  if (p) *p = 0;
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

class CudaBackend final : public DriverBackend<CudaExec> {
 public:
  CudaBackend() {
    int count = 0;
    const std::string why = why_no_device(count);
    if (!why.empty()) fail("device 'cuda': no CUDA device found ({})", why);
  }
  // Never destroyed (cuda_backend() leaks it): at exit the CUDA runtime may already be gone.

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    ready();
    if (exec_.capturing()) fail("cuda: a buffer allocated while capturing a step");
    ++allocations_;
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
    ++allocations_;
    if (cudaStreamSynchronize(st_->stream) != cudaSuccess) (void)cudaGetLastError();
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }
  void synchronize() override {
    if (st_) exec_.synchronize();  // nothing issued yet: nothing to wait for
  }

 protected:
  CudaExec& ex() override {
    ready();
    return exec_;
  }
  double* result_word() override {
    ready();
    return st_->sum_result;
  }
  int64_t scratch_growths() const override { return exec_.scratch_growths; }

 private:
  // The state, made at the first call that needs the device.
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
    // cuBLAS's workspace, ours and fixed (after cublasSetStream, which resets it): a captured
    // step's GEMMs then use this buffer, not one cuBLAS allocates per capture.
    RMT_CUDA_CHECK(cudaMalloc(&s->cublas_workspace, kCublasWorkspaceBytes));
    RMT_CUDA_CHECK(cublasSetWorkspace(s->cublas, s->cublas_workspace, kCublasWorkspaceBytes));
    RMT_CUDA_CHECK(cudaMalloc(&s->sum_result, sizeof(double)));
    RMT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s->upload),
                                  CudaState::kUploadSlots * kUploadSlotBytes));
    for (cudaEvent_t& e : s->upload_done)
      RMT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    st_ = s.release();
    exec_.state = st_;
  }

  CudaState* st_ = nullptr;
  CudaExec exec_;
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

extern "C" __attribute__((visibility("default"))) rmt::Backend* rmt_cuda_backend_v3(std::string* error) {
  try {
    return &rmt::cuda::cuda_backend();
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

extern "C" __attribute__((visibility("default"))) void rmt_cuda_description_v3(std::string* out) {
  try {
    *out = rmt::cuda::cuda_description();
  } catch (const std::exception& e) {
    *out = e.what();
  }
}
