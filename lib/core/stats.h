#pragma once
// Small statistics over measured values (step times, solved steps).
#include <algorithm>
#include <vector>

namespace rmt {

// The median of xs (the mean of the two middle values for an even count); xs must not be empty.
inline double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

}  // namespace rmt
