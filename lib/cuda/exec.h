#pragma once
// How the CUDA backend's kernels are written, so that their arithmetic can be tested on any
// machine, GPU or not.
//
// Every kernel of the Backend set (lib/core/backend.h) has a driver here, in lib/cuda/*.h:
//
//   template <class Exec> void layernorm_forward(Exec& ex, <the arguments of Backend's kernel>);
//
// A driver does its work as one or more passes, each `ex.for_each(n, f)`: f(i) for every item i in
// [0, n), in any order and in parallel. Passes run one after the other, in the order called. So:
//   * f(i) writes only what item i owns, and reads nothing another item of the same pass writes;
//   * no atomics: every sum is a loop in a fixed order, and results are deterministic;
//   * f is a `[=] RMT_HOST_DEVICE (int64_t i) { ... }` lambda: it captures pointers and sizes by
//     value and calls only RMT_HOST_DEVICE functions and <cmath>'s float functions.
// `ex.scratch(slot, bytes)` gives a buffer of the Exec's memory (slot 0..kScratchSlots-1, at least
// `bytes`, contents unspecified) for a driver's temporaries, valid until the driver returns.
//
// Two Execs run the same drivers:
//   * CudaExec (lib/cuda/cuda_backend.cu): one launch of a grid over the n items per pass, on the
//     backend's stream; scratch is device memory kept by the backend.
//   * HostExec (below): a plain loop on the host, for the tests (tests/test_cuda_kernels_host.cpp),
//     which compare every driver with the CPU backend without a GPU.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/core/host_device.h"

namespace rmt::cuda {

inline constexpr int kScratchSlots = 4;

// Runs the passes as loops over the items on the host. The tests run every driver in both orders
// and demand the same bits: an item that reads what another item of its pass writes shows up.
struct HostExec {
  bool reverse = false;  // items n-1 .. 0 instead of 0 .. n-1
  template <class F>
  void for_each(int64_t n, F f) {
    for (int64_t k = 0; k < n; ++k) f(reverse ? n - 1 - k : k);
  }
  void* scratch(int slot, size_t bytes) {
    std::vector<unsigned char>& b = scratch_[slot];
    if (b.size() < bytes) b.resize(bytes);
    return b.data();
  }

 private:
  std::vector<unsigned char> scratch_[kScratchSlots];
};

}  // namespace rmt::cuda
