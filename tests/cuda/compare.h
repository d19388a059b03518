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
#include <functional>
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

// A tensor in blocks (rows of the segment, of the memory, of the cache): one line per block, its
// max |diff| relative to its own max |ref|, so that a block of small values (rows fed only by the
// memory or the cache) is not hidden behind a block of large ones. block_of(i) is the block of
// element i (an index into names); a block no element falls in is left out.
inline bool close_blocks(const std::string& what, const std::vector<float>& ref,
                         const std::vector<float>& got, double limit,
                         const std::vector<std::string>& names,
                         const std::function<int(size_t)>& block_of) {
  if (ref.size() != got.size()) return close(what, ref, got, limit);  // prints the sizes
  std::vector<std::vector<float>> ref_blocks(names.size()), got_blocks(names.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const size_t b = size_t(block_of(i));
    ref_blocks[b].push_back(ref[i]);
    got_blocks[b].push_back(got[i]);
  }
  bool ok = true;
  for (size_t b = 0; b < names.size(); ++b)
    if (!ref_blocks[b].empty())
      ok = close(what + " [" + names[b] + "]", ref_blocks[b], got_blocks[b], limit) && ok;
  return ok;
}

// Consecutive parts of one axis (rows of a time-major tensor): the read memory, the segment's
// tokens, the write memory, the cache.
struct Part {
  std::string name;
  int rows;
};
inline std::vector<std::string> part_names(const std::vector<Part>& parts) {
  std::vector<std::string> names;
  for (const Part& p : parts) names.push_back(p.name);
  return names;
}
// The part that row r of the axis falls in (the last one past the end).
inline int part_of_row(const std::vector<Part>& parts, int64_t r) {
  int64_t end = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    end += parts[k].rows;
    if (r < end) return int(k);
  }
  return int(parts.size()) - 1;
}
// The parts that overlap rows [begin, end) of the axis, cut to them.
inline std::vector<Part> parts_within(const std::vector<Part>& parts, int begin, int end) {
  std::vector<Part> out;
  int start = 0;
  for (const Part& p : parts) {
    const int a = std::max(start, begin), b = std::min(start + p.rows, end);
    if (a < b) out.push_back({p.name, b - a});
    start += p.rows;
  }
  return out;
}
// A time-major tensor [rows, ...] with `row_size` elements a row, compared per part of its rows.
inline bool close_rows(const std::string& what, const std::vector<float>& ref,
                       const std::vector<float>& got, double limit, const std::vector<Part>& parts,
                       int64_t row_size) {
  return close_blocks(what, ref, got, limit, part_names(parts),
                      [&](size_t i) { return part_of_row(parts, int64_t(i) / row_size); });
}

// What an accumulating kernel added (after - before), the quantity to compare: compared as the
// final values, an increment small against what was there before would hide in its rounding.
inline std::vector<float> increment(const std::vector<float>& after, const std::vector<float>& before) {
  REQUIRE(after.size() == before.size());
  std::vector<float> d(after.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = float(double(after[i]) - double(before[i]));
  return d;
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
