// Kernel tests for the CPU backend, the loss and the optimizer's kernels: cross_entropy against a
// stable double-precision reference and its dlogits against central finite differences
// (tests/kernel_checks.h); sum_squares and scale (the gradient norm and its clipping) at every
// thread count; adam_update against torch.optim.Adam worked by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "lib/core/backend.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;

TEST_CASE("cross_entropy: stable values, ignored targets, FD of dlogits") {
  const int n = 6, V = 9;
  const float gs = 0.37f;
  Vec logits = randn(n * V, 2.f, 40);
  for (int k = 0; k < V; ++k) logits[2 * V + k] += 1000.f;  // would overflow a naive exp
  std::vector<int32_t> t = {3, -1, 8, 0, -5, 4};
  Vec loss(n), dl(n * V, std::numeric_limits<float>::quiet_NaN());
  be().cross_entropy(loss.data(), dl.data(), logits.data(), t.data(), n, V, gs);
  for (int i = 0; i < n; ++i) {
    if (t[i] < 0) {
      CHECK(loss[i] == 0.f);
      for (int k = 0; k < V; ++k) CHECK(dl[i * V + k] == 0.f);
      continue;
    }
    double mx = -1e300, s = 0;
    for (int k = 0; k < V; ++k) mx = std::max(mx, (double)logits[i * V + k]);
    for (int k = 0; k < V; ++k) s += std::exp(logits[i * V + k] - mx);
    CHECK(loss[i] == doctest::Approx(std::log(s) - (logits[i * V + t[i]] - mx)).epsilon(1e-5));
  }
  Vec ev(n);
  be().cross_entropy(ev.data(), nullptr, logits.data(), t.data(), n, V, gs);  // evaluation
  CHECK(ev == loss);

  auto sumloss = [&]() {
    Vec l(n);
    be().cross_entropy(l.data(), nullptr, logits.data(), t.data(), n, V, gs);
    double s = 0;
    for (float x : l) s += x;
    return s * gs;
  };
  // the +1000 row has float spacing 6e-5: use a larger step there (loss is smooth)
  check_close("dlogits", dl, fd(logits, sumloss, 3e-2), 1e-2);
}

TEST_CASE("sum_squares and scale") {
  const int64_t n = 100003;
  Vec x = randn(n, 1.f, 50);
  double ref = 0;
  for (float t : x) ref += (double)t * t;
  const int threads = num_threads();
  set_num_threads(1);
  const double s1 = be().sum_squares(x.data(), n);
  set_num_threads(threads > 1 ? threads : 2);
  const double s2 = be().sum_squares(x.data(), n);
  set_num_threads(threads);
  CHECK(s1 == doctest::Approx(ref).epsilon(1e-12));
  CHECK(s1 == s2);
  CHECK(be().sum_squares(x.data(), n) == s2);
  Vec y = x;
  be().scale(y.data(), n, -0.5f);
  for (int64_t i = 0; i < n; i += 997) CHECK(y[i] == x[i] * -0.5f);
}

TEST_CASE("adam_update: two steps match torch.optim.Adam by hand") {
  // p = 1, g = 0.5 then -0.25, lr 0.1, betas (0.9, 0.999), eps 1e-8.
  // step 1: m = 0.05, v = 2.5e-4, p = 1 - 0.1 * 0.5 / (0.5 + 1e-8)            = 0.900000002
  // step 2: m = 0.02, v = 3.1225e-4,
  //         p -= 0.1/0.19 * 0.02 / (sqrt(3.1225e-4)/sqrt(0.001999) + 1e-8)    = 0.8733662987
  float p = 1.f, m = 0.f, v = 0.f;
  float g = 0.5f;
  be().adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 1);
  CHECK(m == doctest::Approx(0.05).epsilon(1e-6));
  CHECK(v == doctest::Approx(2.5e-4).epsilon(1e-6));
  CHECK(p == doctest::Approx(0.900000002).epsilon(1e-6));
  g = -0.25f;
  be().adam_update(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 2);
  CHECK(m == doctest::Approx(0.02).epsilon(1e-5));
  CHECK(v == doctest::Approx(3.1225e-4).epsilon(1e-5));
  CHECK(p == doctest::Approx(0.8733662987).epsilon(1e-6));
}
