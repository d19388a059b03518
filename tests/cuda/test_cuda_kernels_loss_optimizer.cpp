// GPU suite (tests/cuda/kernel_compare.h): the loss and the optimizer's kernels on the cuda
// backend against the cpu backend: cross_entropy (ignored targets, with and without dlogits),
// sum_squares and adam_update.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/cuda/compare.h"
#include "tests/cuda/kernel_compare.h"
#include "tests/cuda/nan_filled.h"

using namespace rmt;
using namespace rmt::cuda_test;

TEST_CASE("cuda cross_entropy (ignored targets, with and without dlogits)") {
  struct Case { int n, V; };
  for (Case c : {Case{kSeg * kB, kV}, Case{3, kV}, Case{kSeg * kB, 256}, Case{3, 256}, Case{kLmSeg * kLmB, kLmV}}) {
    const int n = c.n, V = c.V;
    compare(fmt::format("cross_entropy n={} V={}", n, V), [&](Backend& be) {
      auto logits = on(be, uniform(int64_t(n) * V, 41, -8.f, 8.f));
      std::vector<int32_t> t = ids(n, V, 42);
      for (int i = 0; i < n; i += 3) t[size_t(i)] = -1;  // not scored
      auto targets = on(be, t);
      DeviceArray<float> loss = nans(be, n), dlogits = nans(be, int64_t(n) * V), loss_eval = nans(be, n);
      be.cross_entropy(loss.data(), dlogits.data(), logits.data(), targets.data(), n, V, 1.f / float(n));
      be.cross_entropy(loss_eval.data(), nullptr, logits.data(), targets.data(), n, V, 1.f);
      return Outs{{"loss", loss.download()}, {"dlogits", dlogits.download()},
                  {"loss without dlogits", loss_eval.download()}};
    });
  }
}

TEST_CASE("cuda sum_squares (one double read back) and adam_update") {
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000003), int64_t(kRows) * kInner}) {
    const std::vector<float> x = uniform(n, 43);
    const double ref = cpu().sum_squares(on(cpu(), x).data(), n);
    const double got = nan_filled_gpu().sum_squares(on(nan_filled_gpu(), x).data(), n);
    CHECK(close_scalar(fmt::format("sum_squares n={}", n), ref, got, kKernelLimit));
    if (n == 0) CHECK(got == 0.0);
  }
  // The step (about lr = 1e-3) is compared as what it changed, from parameters of its size:
  // against parameters of O(1) its errors would hide in their rounding (an ulp of 1 is 1e-4 of
  // the step).
  const int64_t n = 1000003;
  const std::vector<float> p0 = uniform(n, 44, -2e-3f, 2e-3f);
  for (int64_t t : {int64_t(1), int64_t(7)})
    compare(fmt::format("adam_update n={} t={}", n, t), [&](Backend& be) {
      auto p = on(be, p0), g = on(be, uniform(n, 45, -1e-3f, 1e-3f));
      auto m = on(be, uniform(n, 46, -1e-3f, 1e-3f)), v = on(be, uniform(n, 47, 0.f, 1e-6f));
      be.adam_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, t);
      return Outs{{"param - param before", increment(p.download(), p0)}, {"m", m.download()}, {"v", v.download()}};
    });
}
