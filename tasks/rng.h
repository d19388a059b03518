#pragma once
// TaskRng, the one PRNG behind every dataset (the engine's is SplitMixRng, lib/core/random.h):
// std::mt19937_64 (its output sequence is fixed by the C++ standard) plus our own bounded-int and uniform-real helpers, because std::uniform_*_distribution
// differ between standard libraries. Generation is single-threaded, so files are byte-identical
// across machines, compilers and thread counts.
#include <cstdint>
#include <random>

namespace rmt {

struct TaskRng {
  std::mt19937_64 engine;
  explicit TaskRng(uint64_t seed) : engine(seed) {}

  // Uniform integer in [0, bound), unbiased: reject the top sliver that would favour small values.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // = 2^64 mod bound
    for (;;) {
      uint64_t r = engine();
      if (r >= threshold) return r % bound;
    }
  }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t between(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo) + 1)); }
  // Uniform double in [0, 1) from the top 53 bits.
  double unit() { return double(engine() >> 11) * 0x1.0p-53; }
};

}  // namespace rmt
