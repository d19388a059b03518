#pragma once
// The GPU suite's comparisons (tests/cuda/, docs/cuda.md): the same inputs through the cpu
// backend (the reference) and the cuda backend, every output compared as
//   ratio = max |cuda - cpu| / max |cpu|
// and printed, one line per tensor, so the device output can be quoted:
//   cuda-vs-cpu  <what>: max|diff| 1.2e-07 / max|ref| 3.4e-01 = ratio 3.5e-07 (limit 1e-05) ok
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/error.h"
#include "lib/core/random.h"

namespace rmt::cuda_test {

// The two backends every test compares.
inline Backend& cpu() { return cpu_backend(); }
inline Backend& gpu() { return backend_by_name("cuda"); }

// Prints the comparison of one tensor and says whether it is within `limit`. A reference that is
// all zeros must be matched exactly (there is no scale to be relative to). Sizes must agree and
// every value must be finite on both sides.
inline bool close(const std::string& what, const std::vector<float>& ref,
                  const std::vector<float>& got, double limit) {
  if (ref.size() != got.size()) {
    std::printf("cuda-vs-cpu  %s: sizes differ (cpu %zu, cuda %zu) FAIL\n", what.c_str(),
                ref.size(), got.size());
    return false;
  }
  double max_diff = 0, max_ref = 0;
  size_t worst = 0;
  bool finite = true;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(got[i])) finite = false;
    const double d = std::abs(double(got[i]) - double(ref[i]));
    if (d > max_diff) max_diff = d, worst = i;
    max_ref = std::max(max_ref, std::abs(double(ref[i])));
  }
  const double ratio = max_ref > 0 ? max_diff / max_ref : (max_diff > 0 ? INFINITY : 0.0);
  const bool ok = finite && ratio <= limit;
  std::printf("cuda-vs-cpu  %s: max|diff| %.3e / max|ref| %.3e = ratio %.3e (limit %.0e)%s%s\n",
              what.c_str(), max_diff, max_ref, ratio, limit, finite ? "" : " NOT FINITE",
              ok ? " ok" : " FAIL");
  if (!ok && !ref.empty())
    std::printf("             worst at [%zu]: cpu %.9g, cuda %.9g\n", worst, double(ref[worst]),
                double(got[worst]));
  std::fflush(stdout);
  return ok;
}

// A scalar (a loss): |cuda - cpu| / |cpu|.
inline bool close_scalar(const std::string& what, double ref, double got, double limit) {
  return close(what, {float(ref)}, {float(got)}, limit);
}

// Exact equality for integer and mask outputs (dropout masks, token ids): prints how many differ.
template <typename T>
bool same(const std::string& what, const std::vector<T>& ref, const std::vector<T>& got) {
  size_t differ = ref.size() == got.size() ? 0 : std::max(ref.size(), got.size());
  if (ref.size() == got.size())
    for (size_t i = 0; i < ref.size(); ++i) differ += ref[i] != got[i];
  std::printf("cuda-vs-cpu  %s: %zu of %zu differ%s\n", what.c_str(), differ, ref.size(),
              differ == 0 ? " ok" : " FAIL");
  std::fflush(stdout);
  return differ == 0;
}

// n values uniform in [lo, hi) from a seed: the same on every call, so both backends get them.
inline std::vector<float> uniform(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  SplitMixRng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = lo + (hi - lo) * float(rng.uniform());
  return x;
}
inline std::vector<int32_t> ids(int64_t n, int V, uint64_t seed) {
  SplitMixRng rng(seed);
  std::vector<int32_t> x(static_cast<size_t>(n));
  for (int32_t& v : x) v = int32_t(rng.below(uint64_t(V)));
  return x;
}

// The message of the rmt::Error that `action` throws ("" if it throws nothing).
template <typename Action>
std::string error_of_call(Action action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A host vector in a backend's memory.
template <typename T>
DeviceArray<T> on(Backend& be, const std::vector<T>& host) {
  DeviceArray<T> a;
  a.upload(be, host);
  return a;
}

}  // namespace rmt::cuda_test
