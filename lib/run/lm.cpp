#include "lib/run/lm.h"

#include <algorithm>

#include "lib/core/error.h"

namespace rmt {

void LmCarry::restore(int64_t next_segment, std::deque<RecurrentState> stored) {
  if (next_segment < 0 || int64_t(stored.size()) > std::min<int64_t>(next_segment, window_ + 1))
    fail("a language-model state at segment {} cannot hold {} carried states (window {})",
         next_segment, stored.size(), window_);
  if (next_segment > 0 && stored.empty())
    fail("a language-model state at segment {} holds no carried state", next_segment);
  next_ = next_segment;
  stored_ = std::move(stored);
}

double lm_train_step(Engine& engine, LmCarry& carry, const LmSegmentSource& source, int B, int T,
                     bool training, uint64_t dropout_seed) {
  const int64_t s = carry.next_;
  const int w = int(std::min<int64_t>(carry.window_, s));
  // The state entering segment s - w: the initial one at the start of the streams, else the
  // one stored when the step before it ended.
  const RecurrentState* start = nullptr;
  if (s - w > 0) {
    const int64_t first_stored = s - int64_t(carry.stored_.size()) + 1;
    if (s - w < first_stored) fail("internal: the state entering segment {} was not kept", s - w);
    start = &carry.stored_[size_t(s - w - first_stored)];
  }
  const int n = w + 1;
  std::vector<int32_t> input(size_t(B) * n * T), target(size_t(B) * n * T), in, tg;
  for (int j = 0; j < n; ++j) {
    source(s - w + j, in, tg);
    if (in.size() != size_t(B) * T || tg.size() != size_t(B) * T)
      fail("internal: segment {} has {} inputs, expected {} x {}", s - w + j, in.size(), B, T);
    for (int b = 0; b < B; ++b) {
      std::copy_n(in.begin() + int64_t(b) * T, T, input.begin() + (int64_t(b) * n + j) * T);
      std::copy_n(tg.begin() + int64_t(b) * T, T, target.begin() + (int64_t(b) * n + j) * T);
    }
  }
  const double loss = engine.forward(input.data(), target.data(), B, n * T, std::vector<int>(size_t(n), T),
                                     T, training, dropout_seed, Carry{start, true});
  engine.backward(-1);  // through the whole window: only its last segment is scored
  // Copied before the deque changes: `start` may point into it.
  RecurrentState after = engine.state(n);
  carry.stored_.push_back(std::move(after));
  while (int64_t(carry.stored_.size()) > carry.window_ + 1) carry.stored_.pop_front();
  carry.next_ = s + 1;
  return loss;
}

}  // namespace rmt
