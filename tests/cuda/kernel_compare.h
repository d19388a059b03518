#pragma once
// The GPU suite's kernel tests (tests/cuda/test_cuda_kernels_*.cpp): every Backend kernel on the
// cuda backend against the cpu backend, at random inputs, the shapes of the paper's copy model
// (4 layers, 4 heads x 64, d_model 128, d_inner 256, batch 32, 3 segments of 24 with 24 memory
// tokens) and those of the language model (rmt bench's lm_*: 8 heads x 64, d_model 512, d_inner
// 2048, batch 2, segments of 128 with a cache of 128, so 256 keys, or 10 memory tokens): this
// proves the launches, the drivers and the cuBLAS mappings on the device.
// max |diff| / max |ref| <= 1e-5 per output (masks and ids: exact). So that the suite cannot pass
// while wrong:
//   * the device memory a kernel gets holds NaN until written (tests/cuda/nan_filled.h: new
//     buffers, and the backend's scratch as far as a test can reach it);
//   * outputs made of rows of different kinds (the read memory, the segment's tokens, the write
//     memory, the cache) are compared per block of rows, each relative to its own largest value;
//   * accumulating outputs (beta 1 GEMMs, gradients that add up) are compared as what the kernel
//     added, not as the sum with what was there before.
// Here: the models' sizes, and compare(), which runs a kernel on both backends and compares every
// output it returns.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/cuda/compare.h"
#include "tests/cuda/nan_filled.h"

namespace rmt::cuda_test {

constexpr double kKernelLimit = 1e-5;
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The copy model's sizes.
constexpr int kB = 32, kD = 128, kH = 4, kDh = 64, kHD = kH * kDh, kInner = 256, kV = 12;
constexpr int kSeg = 24, kMem = 24;
constexpr int kQ = kMem + kSeg + kMem;  // rmt query rows: read memory, tokens, write memory
constexpr int kRows = kQ * kB;          // activation rows of one segment
// The language model's (lib/experiments/bench.cpp, lm_*): a segment of 128 bytes after a cache of
// 128 (xl: 256 keys), or between 10 read and 10 write memory tokens (rmt).
constexpr int kLmB = 2, kLmD = 512, kLmH = 8, kLmDh = 64, kLmHD = kLmH * kLmDh, kLmInner = 2048,
              kLmV = 256, kLmSeg = 128, kLmCache = 128, kLmMem = 10;
constexpr int kLmKeys = kLmCache + kLmSeg;  // 256

// The rows of one copy-model segment with memory, and of the language model's keys (xl).
inline const std::vector<Part> kCopyRows = {{"read memory", kMem}, {"tokens", kSeg}, {"write memory", kMem}};
inline const std::vector<Part> kLmRows = {{"cache", kLmCache}, {"tokens", kLmSeg}};

struct Out {
  std::string name;
  std::vector<float> values;
  double limit = kKernelLimit;  // 0: exact
  // Compared per part of its rows (time-major, row_size elements a row); empty: as one tensor.
  std::vector<Part> parts = {};
  int64_t row_size = 0;
};
using Outs = std::vector<Out>;

template <typename T>
std::vector<float> as_float(const std::vector<T>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// Runs `kernel` on each backend (it builds its inputs from fixed seeds, so both get the same) and
// compares every output it returns. On the device, new buffers and the scratch hold NaN first.
inline void compare(const std::string& what, const std::function<Outs(Backend&)>& kernel) {
  CAPTURE(what);
  const Outs ref = kernel(cpu());
  const Outs got = kernel(nan_filled_gpu());
  REQUIRE(ref.size() == got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string name = what + ": " + ref[i].name;
    if (ref[i].parts.empty())
      CHECK(close(name, ref[i].values, got[i].values, ref[i].limit));
    else
      CHECK(close_rows(name, ref[i].values, got[i].values, ref[i].limit, ref[i].parts, ref[i].row_size));
  }
}

// A [rows, ld] buffer holding NaN, for outputs that must be overwritten.
inline DeviceArray<float> nans(Backend& be, int64_t n) {
  DeviceArray<float> a(be, n);
  be.fill(a.data(), n, kNaN);
  return a;
}

}  // namespace rmt::cuda_test
