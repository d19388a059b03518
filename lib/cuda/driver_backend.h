#pragma once
// The Backend kernel set (lib/core/backend.h) on an Exec (lib/cuda/exec.h): every kernel is its
// driver of the same name (lib/cuda/kernels.h, reduction_kernels.h, attention_kernels.h,
// assoc_kernels.h; a GEMM is one ex.sgemm), every fill, copy and wait one call of the Exec. The
// CUDA backend is DriverBackend<CudaExec> (lib/cuda/cuda_backend.cu, which adds device memory);
// the tests' host stand-in is DriverBackend<HostExec> (lib/cuda/host_backend.h), so that whole
// training steps run on the host through exactly the calls the GPU gets, and their stream
// operations can be counted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/cuda/assoc_kernels.h"
#include "lib/cuda/attention_kernels.h"
#include "lib/cuda/delta_kernels.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/kernels.h"

namespace rmt::cuda {

// Unless RMT_CUDA_MERGE_RUNS is "0" (read when a backend is made).
inline bool merge_runs_requested() {
  const char* v = std::getenv("RMT_CUDA_MERGE_RUNS");
  return !(v && std::strcmp(v, "0") == 0);
}

template <class Exec>
class DriverBackend : public Backend {
 public:
  // ---- memory, besides allocate and deallocate (the derived backend's)
  void fill(float* x, int64_t n, float value) override { rmt::cuda::fill(ex(), x, n, value); }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override {
    if (bytes > 0) ex().memset(p, value, bytes);
  }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) ex().copy_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) ex().copy_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) ex().copy_on_device(dst, src, bytes);
  }

  // ---- kernels (lib/core/backend_kernels.h): each its driver of the same name, which takes the
  // kernel's arguments after the Exec (lib/cuda/kernels.h and its neighbours)
#define RMT_KERNEL(name, params, args, extents) \
  void name params override { rmt::cuda::name(ex(), RMT_ARGS args); }
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL

  // The sum in the Exec's memory, then one download (the host waits for the stream here).
  double sum_squares(const float* x, int64_t n) override {
    Exec& e = ex();
    double* word = result_word();
    rmt::cuda::sum_squares(e, word, x, n);
    double result = 0;
    e.copy_to_host(&result, word, sizeof result);
    return result;
  }

  // ---- capture: the Exec records (a CUDA graph; the host's list of passes) and replays
  bool can_capture() const override { return true; }
  void begin_capture() override { ex().begin_capture(); }
  int64_t end_capture() override {
    ex().end_capture();
    return ++captures_;
  }
  void abort_capture() override { ex().abort_capture(); }
  void replay(int64_t id) override {
    if (id <= 0 || id != captures_)
      throw std::logic_error(fmt::format("replay: capture {} is not the one kept ({})", id, captures_));
    ex().replay();
  }
  int64_t memory_epoch() const override { return allocations_ + scratch_growths(); }

  // ---- packed runs merged: the Exec records each run's calls, then issues them once for all
  // (lib/cuda/run_merge.h). RMT_CUDA_MERGE_RUNS=0 in the environment (or set_merge_runs(false))
  // runs each run's calls in turn instead, to measure what merging gains.
  bool can_merge_runs() const override { return merge_runs_; }
  void begin_run_merge(int runs) override { ex().merge.begin(runs); }
  void merge_run(int r) override { ex().merge.set_run(r); }
  void end_run_merge() override { ex().merge.issue(ex()); }
  void abort_run_merge() override { ex().merge.abort(); }
  void set_merge_runs(bool on) { merge_runs_ = on; }

 protected:
  // The Exec every call goes through (a device backend makes its stream on first use here).
  virtual Exec& ex() = 0;
  // One double of the Exec's memory: sum_squares's result before its download.
  virtual double* result_word() = 0;
  // Allocations and frees so far (the derived backend counts them), and the Exec's scratch
  // growths: memory_epoch.
  int64_t allocations_ = 0;
  virtual int64_t scratch_growths() const = 0;

 private:
  int64_t captures_ = 0;  // the number of the capture kept
  bool merge_runs_ = merge_runs_requested();
};

}  // namespace rmt::cuda
