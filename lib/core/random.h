#pragma once
// The engine's random numbers (parameter init, batch order, dropout masks, bench batches):
// splitmix64, the same seed gives the same numbers on every machine and standard library, which
// std::*_distribution does not promise. The dataset generators use their own TaskRng
// (tasks/rng.h, std::mt19937_64): distinct names, so the two can never collide (ODR).
#include <cmath>
#include <cstdint>

#include "lib/core/host_device.h"

namespace rmt {

RMT_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Dropout's draw for element i of a call whose mask key is splitmix64(seed): uniform in [0, 1),
// the top 24 bits, exactly representable in float. A pure function of (key, i), so the mask does
// not depend on the thread count, and the CUDA backend draws the same mask as the CPU's.
RMT_HOST_DEVICE inline float dropout_uniform(uint64_t key, int64_t i) {
  return (float)(splitmix64(key ^ (uint64_t)i) >> 40) * (1.f / 16777216.f);
}

// Mixes several values into one seed (e.g. run seed, step, segment, layer).
RMT_HOST_DEVICE inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
}

// The mask key of a dropout call (Backend::dropout_forward, DropoutSeed): the seed it reads and
// where in the model the call is (tag, layer). The CPU and the CUDA kernels both derive it here.
RMT_HOST_DEVICE inline uint64_t dropout_key(uint64_t seed, uint64_t tag, uint64_t layer) {
  return splitmix64(mix_seed(seed, tag, layer));
}

struct SplitMixRng {
  uint64_t state;
  explicit SplitMixRng(uint64_t seed) : state(seed) {}
  uint64_t next() { return splitmix64(state++); }
  // uniform in [0, 1) with 53 random bits
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // unbiased integer in [0, n)
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next(); while (x >= limit);
    return x % n;
  }
  // standard normal (Box-Muller; one value per call keeps the stream simple)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace rmt
