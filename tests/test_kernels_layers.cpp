// Kernel tests for the CPU backend, the layers' kernels: bias, the fused forward kernels,
// embedding, LayerNorm, ReLU, dropout, the positional embedding, broadcast_batch and add_inplace.
// Every forward against a naive double-precision reference, every backward against central
// finite differences of a random projection loss L = sum(w * out) (tests/kernel_checks.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "lib/core/backend.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;

TEST_CASE("add_bias / bias_backward") {
  const int rows = 6, cols = 70;  // cols spans two column blocks
  Vec x = randn(rows * cols, 1.f, 7), bias = randn(cols, 1.f, 8), W = randn(rows * cols, 1.f, 9);
  Vec y = x;
  be().add_bias(y.data(), bias.data(), rows, cols);
  DVec ref(rows * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) ref[i * cols + j] = (double)x[i * cols + j] + bias[j];
  check_abs("forward", y, ref, 1e-6);
  auto loss = [&]() {
    Vec t = x;
    be().add_bias(t.data(), bias.data(), rows, cols);
    return dot(t, W);
  };
  Vec db(cols, 0.25f);  // accumulates
  be().bias_backward(db.data(), W.data(), rows, cols);
  check_close("dbias", minus(db, 0.25f), fd(bias, loss, 1e-2), 1e-3);
}

TEST_CASE("fused kernels: add_bias_relu and add_layernorm_forward give the bits of the kernels in turn") {
  // The fused forward kernels (fewer launches on a device) against add_bias, relu_forward,
  // add_inplace and layernorm_forward called one after the other: the same bits, with and without
  // the bias, with out the residual itself (the row decoding's in-place step), above and below the
  // parallel grain. Their gradients are those kernels' (tested above).
  for (int rows : {3, 700}) {
    CAPTURE(rows);
    const int d = 96;
    const Vec x = randn(rows * d, 2.f, 70), bias = randn(d, 1.f, 71), res = randn(rows * d, 1.f, 72);
    const Vec w = randn(d, 1.f, 73), b = randn(d, 1.f, 74);
    Vec fused = x, apart = x;
    be().add_bias_relu(fused.data(), bias.data(), rows, d);
    be().add_bias(apart.data(), bias.data(), rows, d);
    be().relu_forward(apart.data(), apart.data(), int64_t(rows) * d);
    CHECK(fused == apart);
    CHECK(std::count(fused.begin(), fused.end(), 0.f) > rows * d / 4);  // the ReLU cut some
    for (const bool with_bias : {false, true}) {
      CAPTURE(with_bias);
      Vec xf = x, xa = x, out_f(rows * d), out_a(rows * d), mf(rows), ma(rows), rf(rows), ra(rows);
      be().add_layernorm_forward(out_f.data(), mf.data(), rf.data(), xf.data(), with_bias ? bias.data() : nullptr,
                                 res.data(), w.data(), b.data(), rows, d);
      if (with_bias) be().add_bias(xa.data(), bias.data(), rows, d);
      be().add_inplace(xa.data(), res.data(), int64_t(rows) * d);
      be().layernorm_forward(out_a.data(), ma.data(), ra.data(), xa.data(), w.data(), b.data(), rows, d);
      CHECK(xf == xa);  // the sum is kept for the backward
      CHECK(out_f == out_a);
      CHECK(mf == ma);
      CHECK(rf == ra);
      // out = residual: each row read before it is written
      Vec xi = x, inplace = res, mi(rows), ri(rows);
      be().add_layernorm_forward(inplace.data(), mi.data(), ri.data(), xi.data(), with_bias ? bias.data() : nullptr,
                                 inplace.data(), w.data(), b.data(), rows, d);
      CHECK(inplace == out_a);
      CHECK(xi == xa);
    }
  }
}

TEST_CASE("embedding forward/backward with repeated ids") {
  const int V = 7, d = 5, n = 9;
  const float scale = 1.7f;
  std::vector<int32_t> ids = {3, 1, 3, 0, 6, 3, 1, 2, 6};
  Vec table = randn(V * d, 1.f, 10), W = randn(n * d, 1.f, 11);
  Vec out(n * d);
  be().embedding_forward(out.data(), ids.data(), table.data(), n, d, scale);
  DVec ref(n * d);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) ref[i * d + k] = (double)table[ids[i] * d + k] * scale;
  check_abs("forward", out, ref, 1e-6);
  auto loss = [&]() {
    Vec o(n * d);
    be().embedding_forward(o.data(), ids.data(), table.data(), n, d, scale);
    return dot(o, W);
  };
  Vec dt(V * d, 0.5f);
  be().embedding_backward(dt.data(), W.data(), ids.data(), n, d, scale);
  check_close("dtable", minus(dt, 0.5f), fd(table, loss, 1e-2), 1e-3);
}

// ---------------------------------------------------------------------------------------
TEST_CASE("layernorm forward vs torch formula, FD of dx/dweight/dbias") {
  const int n = 5, d = 70;
  Vec x = randn(n * d, 2.f, 12), w = randn(d, 1.f, 13), b = randn(d, 1.f, 14),
      W = randn(n * d, 1.f, 15);
  for (auto& t : x) t += 3.f;  // offset: the variance must be centred
  Vec out(n * d), mean(n), rstd(n);
  be().layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d);
  DVec ref(n * d);
  for (int i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int k = 0; k < d; ++k) m += x[i * d + k];
    m /= d;
    for (int k = 0; k < d; ++k) v += (x[i * d + k] - m) * (x[i * d + k] - m);
    v /= d;  // biased, as torch
    for (int k = 0; k < d; ++k)
      ref[i * d + k] = (x[i * d + k] - m) / std::sqrt(v + 1e-5) * w[k] + b[k];
    CHECK(mean[i] == doctest::Approx(m).epsilon(1e-6));
    CHECK(rstd[i] == doctest::Approx(1 / std::sqrt(v + 1e-5)).epsilon(1e-6));
  }
  check_abs("forward", out, ref, 1e-5);

  auto loss = [&]() {
    Vec o(n * d), mu(n), rs(n);
    be().layernorm_forward(o.data(), mu.data(), rs.data(), x.data(), w.data(), b.data(), n, d);
    return dot(o, W);
  };
  Vec dx(n * d, std::numeric_limits<float>::quiet_NaN()), dw(d, 0.5f), db(d, 0.5f);
  be().layernorm_backward(dx.data(), dw.data(), db.data(), W.data(), x.data(), mean.data(),
                          rstd.data(), w.data(), n, d);
  check_close("dx", dx, fd(x, loss, 1e-2), 1e-2);
  check_close("dweight", minus(dw, 0.5f), fd(w, loss, 1e-2), 1e-2);
  check_close("dbias", minus(db, 0.5f), fd(b, loss, 1e-2), 1e-2);
}

TEST_CASE("relu forward/backward (incl. in-place aliasing)") {
  const int n = 50;
  Vec x = randn(n, 1.f, 16), W = randn(n, 1.f, 17);
  for (auto& t : x)
    if (std::fabs(t) < 0.1f) t = 0.3f;  // stay away from the kink for FD
  auto loss = [&]() {
    Vec y(n);
    be().relu_forward(y.data(), x.data(), n);
    return dot(y, W);
  };
  Vec y = x;
  be().relu_forward(y.data(), y.data(), n);  // in place
  for (int i = 0; i < n; ++i) CHECK(y[i] == std::max(x[i], 0.f));
  Vec dx = W;
  be().relu_backward(dx.data(), dx.data(), y.data(), n);  // in place
  check_close("dx", dx, fd(x, loss, 1e-2), 1e-4);
}

TEST_CASE("dropout: mask statistics, thread independence, FD") {
  const int64_t n = 200000;
  const float p = 0.3f;
  Vec x = randn(n, 1.f, 18), y1 = x, y2 = x;
  std::vector<uint8_t> k1(n), k2(n);
  const uint64_t seed = 1234, other_seed = 1235, seed0 = 99, seed7 = 7;
  const int threads = num_threads();
  set_num_threads(1);
  be().dropout_forward(y1.data(), y1.data(), k1.data(), n, p, {&seed});
  set_num_threads(threads > 1 ? threads : 2);
  be().dropout_forward(y2.data(), y2.data(), k2.data(), n, p, {&seed});
  set_num_threads(threads);
  CHECK(k1 == k2);
  CHECK(std::memcmp(y1.data(), y2.data(), n * sizeof(float)) == 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += k1[i];
    CHECK(y1[i] == (k1[i] ? x[i] * (1.f / (1.f - p)) : 0.f));
  }
  CHECK(std::fabs((double)kept / n - 0.7) < 0.005);
  // another seed, another place in the model (tag) or another layer gives another mask
  for (DropoutSeed other : {DropoutSeed{&other_seed}, DropoutSeed{&seed, 1}, DropoutSeed{&seed, 0, 1}}) {
    Vec y3 = x;
    std::vector<uint8_t> k3(n);
    be().dropout_forward(y3.data(), y3.data(), k3.data(), n, p, other);
    CHECK(k3 != k1);
  }
  // p = 0 keeps everything unchanged
  Vec y0 = x;
  std::vector<uint8_t> k0(n, 7);
  be().dropout_forward(y0.data(), y0.data(), k0.data(), n, 0.f, {&seed0});
  CHECK(y0 == x);
  for (auto k : k0) REQUIRE(k == 1);

  // FD on a small slice with a fixed seed (the mask is the same in every evaluation)
  const int m = 40;
  Vec xs(x.begin(), x.begin() + m), W = randn(m, 1.f, 19);
  auto loss = [&]() {
    Vec t = xs;
    std::vector<uint8_t> k(m);
    be().dropout_forward(t.data(), t.data(), k.data(), m, 0.5f, {&seed7});
    return dot(t, W);
  };
  Vec t = xs;
  std::vector<uint8_t> km(m);
  be().dropout_forward(t.data(), t.data(), km.data(), m, 0.5f, {&seed7});
  Vec dx = W;
  be().dropout_backward(dx.data(), dx.data(), km.data(), m, 0.5f);
  check_close("dx", dx, fd(xs, loss, 1e-2), 1e-4);
}

TEST_CASE("positional_embedding") {
  const int klen = 20, d = 16;
  Vec out(klen * d);
  be().positional_embedding(out.data(), klen, d);
  DVec ref(klen * d);
  for (int j = 0; j < klen; ++j)
    for (int i = 0; i < d / 2; ++i) {
      const double f = 1.0 / std::pow(10000.0, 2.0 * i / d), p = klen - 1 - j;
      ref[j * d + i] = std::sin(p * f);
      ref[j * d + d / 2 + i] = std::cos(p * f);
    }
  check_abs("pos_emb", out, ref, 1e-5);
  CHECK(out[(klen - 1) * d + 0] == 0.f);       // p = 0: sin 0
  CHECK(out[(klen - 1) * d + d / 2] == 1.f);   //        cos 0
}

TEST_CASE("broadcast_batch: literal reference, its backward sums over the batch in order, FD") {
  // Small, and above the parallel grain (rows x B x width > 2^14).
  struct Size { int rows, B, width; };
  for (Size z : {Size{3, 4, 5}, Size{7, 33, 130}}) {
    CAPTURE(z.rows);
    const size_t nx = (size_t)z.rows * z.width, nout = nx * z.B;
    Vec x = randn(nx, 1.f, 80), out(nout, std::numeric_limits<float>::quiet_NaN());
    be().broadcast_batch(out.data(), x.data(), z.rows, z.B, z.width);
    Vec expect(nout);
    for (int i = 0; i < z.rows; ++i)
      for (int b = 0; b < z.B; ++b)
        for (int c = 0; c < z.width; ++c)
          expect[((size_t)i * z.B + b) * z.width + c] = x[(size_t)i * z.width + c];
    CHECK(out == expect);

    // Backward accumulates, each element summed over b = 0.. in order: bit-equal to the loop.
    Vec dout = randn(nout, 1.f, 81), dx0 = randn(nx, 1.f, 82), dx = dx0, ref = dx0;
    be().broadcast_batch_backward(dx.data(), dout.data(), z.rows, z.B, z.width);
    for (int i = 0; i < z.rows; ++i)
      for (int b = 0; b < z.B; ++b)
        for (int c = 0; c < z.width; ++c)
          ref[(size_t)i * z.width + c] += dout[((size_t)i * z.B + b) * z.width + c];
    CHECK(dx == ref);

    // FD of L = sum(dout * broadcast(x)) wrt x: the backward (from zero) is its gradient.
    if (nx > 100) continue;
    auto loss = [&]() {
      Vec o(nout);
      be().broadcast_batch(o.data(), x.data(), z.rows, z.B, z.width);
      return dot(o, dout);
    };
    Vec g(nx, 0.f);
    be().broadcast_batch_backward(g.data(), dout.data(), z.rows, z.B, z.width);
    check_close("dx", g, fd(x, loss, 1e-2), 1e-3);
  }
}

TEST_CASE("add_inplace adds elementwise, also above the parallel grain") {
  for (size_t n : {size_t(5), size_t(100000)}) {
    Vec y = randn(n, 1.f, 70), x = randn(n, 1.f, 71), expect(n);
    for (size_t i = 0; i < n; ++i) expect[i] = y[i] + x[i];
    be().add_inplace(y.data(), x.data(), (int64_t)n);
    CHECK(y == expect);
  }
}
