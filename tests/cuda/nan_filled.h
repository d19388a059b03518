#pragma once
// NaN where nothing was written (tests/cuda/, docs/cuda.md). cudaMalloc returns leftovers: often
// zeros, often the previous test's correct values. A kernel that reads memory it never wrote, or
// leaves part of its output unwritten, can then pass. So the GPU suite's device memory holds NaN
// before it is written:
//   * nan_filled_gpu(): the cuda backend with every new buffer filled with 0xff bytes (a NaN as
//     float, -1 as int32, 255 as a mask byte) at allocation; the kernel tests' buffers and the
//     models (parameters, gradients, activations, caches, Adam's state) are allocated through it;
//   * the backend's own scratch: every request is filled with 0xff by the backend itself, as
//     RMT_CUDA_NAN_SCRATCH=1 asks (lib/cuda/exec.h), which the suite's main() sets.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/cuda/compare.h"

namespace rmt::cuda_test {

// Every call forwards to the cuda backend; allocate also fills the new buffer with 0xff bytes.
class NanFilledBackend final : public Backend {
 public:
  explicit NanFilledBackend(Backend& inner) : be_(inner) {}

  void* allocate(size_t bytes) override {
    void* p = be_.allocate(bytes);
    if (p) be_.fill_bytes(p, 0xff, bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes) override { be_.deallocate(p, bytes); }
  void fill(float* x, int64_t n, float value) override { be_.fill(x, n, value); }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override { be_.fill_bytes(p, value, bytes); }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    be_.copy_host_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    be_.copy_device_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    be_.copy_device_to_device(dst, src, bytes);
  }
  void synchronize() override { be_.synchronize(); }

  double sum_squares(const float* x, int64_t n) override { return be_.sum_squares(x, n); }
  // Every kernel of lib/core/backend_kernels.h forwarded as it is.
#define RMT_KERNEL(name, params, args, extents) \
  void name params override { be_.name args; }
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL

  bool can_capture() const override { return be_.can_capture(); }
  void begin_capture() override { be_.begin_capture(); }
  int64_t end_capture() override { return be_.end_capture(); }
  void abort_capture() override { be_.abort_capture(); }
  void replay(int64_t id) override { be_.replay(id); }
  int64_t memory_epoch() const override { return be_.memory_epoch(); }
  // Packed runs merged as on the cuda backend itself (lib/cuda/run_merge.h).
  bool can_merge_runs() const override { return be_.can_merge_runs(); }
  void begin_run_merge(int runs) override { be_.begin_run_merge(runs); }
  void merge_run(int r) override { be_.merge_run(r); }
  void end_run_merge() override { be_.end_run_merge(); }
  void abort_run_merge() override { be_.abort_run_merge(); }

 private:
  Backend& be_;
};

// The cuda backend whose new buffers hold NaN (one for the whole suite: models and engines check
// that they share one backend object).
inline Backend& nan_filled_gpu() {
  static NanFilledBackend be(gpu());
  return be;
}

}  // namespace rmt::cuda_test
