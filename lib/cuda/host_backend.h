#pragma once
// The CUDA backend's calls run on the host, for tests: DriverBackend<HostExec>, every kernel the
// CUDA backend's driver, every GEMM the column-major call cuBLAS would get, memory on the host.
// A model trained on it runs exactly the passes the GPU would (tests/test_cuda_stream_ops.cpp
// compares it with the CPU backend and counts its stream operations per training step).
#include <cstdlib>
#include <stdexcept>

#include "lib/cuda/driver_backend.h"
#include "lib/cuda/host_exec.h"

namespace rmt::cuda {

class HostDriverBackend final : public DriverBackend<HostExec> {
 public:
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    if (exec_.capturing()) throw std::logic_error("allocate: a buffer allocated while capturing");
    ++allocations_;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void deallocate(void* p, size_t) override {
    if (p) ++allocations_;
    std::free(p);
  }
  void synchronize() override { exec_.synchronize(); }
  // What has been issued since the last reset.
  const StreamOps& ops() const { return exec_.ops; }
  void reset_ops() { exec_.ops = {}; }
  // Every scratch request filled with NaN first (as RMT_CUDA_NAN_SCRATCH=1 does, lib/cuda/exec.h).
  void set_nan_scratch(bool on) { exec_.nan_scratch = on; }

 protected:
  HostExec& ex() override { return exec_; }
  double* result_word() override { return &word_; }
  int64_t scratch_growths() const override { return exec_.scratch_growths; }

 private:
  HostExec exec_;
  double word_ = 0;
};

}  // namespace rmt::cuda
