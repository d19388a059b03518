#pragma once
// The CPU backend's class (cpu_backend() in lib/core/backend.h is the way to reach it). Its
// kernels are declared from the one list (lib/core/backend_kernels.h); each is defined where its
// body lives: cpu_backend.cpp, cpu_attention.cpp (rel_attention_*), cpu_assoc.cpp (dpfp_*,
// assoc_*).
#include <cstdint>
#include <vector>

#include "lib/core/backend.h"

namespace rmt::cpu {

// The attention's host scratch, grown on use and kept (no allocation in the steady state):
// rt, R^T per head; mask_blocked, mask_keep, the mask as floats; qv, Q+v of every sample
// [H, B*qlen, Dh] and bd, the position scores' gradient [H, B*qlen, klen], for one dR GEMM per
// head; du_part, dv_part, per-sample partials of the deterministic reduction over samples.
struct AttentionBuffers {
  std::vector<float> rt, mask_blocked, mask_keep, qv, bd, du_part, dv_part;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend();

  // Memory: host memory, aligned to a cache line; copies are memcpy.
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void fill(float* x, int64_t n, float value) override;
  void fill_bytes(void* p, uint8_t value, size_t bytes) override;
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override;
  void copy_device_to_host(void* host, const void* src, size_t bytes) override;
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override;
  double sum_squares(const float* x, int64_t n) override;

#define RMT_KERNEL(name, params, args, extents) void name params override;
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL

 private:
  // The attention's scratch, one per host thread: packed runs (packed_backend.h) call the
  // backend from several threads at once, one run each.
  static AttentionBuffers& attention_buffers();
};

}  // namespace rmt::cpu
