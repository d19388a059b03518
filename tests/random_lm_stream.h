#pragma once
// A language model's input for tests: B streams of random bytes, long enough for `steps` segments
// of T tokens and their next-token targets, served segment by segment as lm_train_step reads them.
#include <cstdint>
#include <vector>

#include "lib/core/random.h"
#include "lib/run/lm.h"

struct RandomLmStream {
  int B, T, steps;
  std::vector<int32_t> bytes;  // [B, steps * T + 1]

  RandomLmStream(int B_, int T_, int steps_, uint64_t seed) : B(B_), T(T_), steps(steps_) {
    rmt::SplitMixRng rng(seed);
    bytes.resize(size_t(B) * row_length());
    for (int32_t& x : bytes) x = int32_t(rng.below(256));
  }
  size_t row_length() const { return size_t(steps) * size_t(T) + 1; }
  // Segment s of every stream: inputs [B, T] and targets shifted by one.
  rmt::LmSegmentSource source() const {
    return [this](int64_t s, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
      in.clear();
      tg.clear();
      for (int b = 0; b < B; ++b) {
        const size_t row = size_t(b) * row_length() + size_t(s) * size_t(T);
        in.insert(in.end(), bytes.begin() + row, bytes.begin() + row + T);
        tg.insert(tg.end(), bytes.begin() + row + 1, bytes.begin() + row + 1 + T);
      }
    };
  }
};
