// Kernel tests for the CPU backend: every forward against a naive double-precision reference,
// every backward against central finite differences of a random projection loss
// L = sum(w * out). Attention backward is additionally checked against FD of the double
// reference (tighter), and the rel_shift against a literal pad/reshape implementation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/cpu_kernels.h"
#include "lib/core/device_array.h"
#include "tests/random_vectors.h"

using namespace rmt;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

namespace {

Backend& be() { return cpu_backend(); }


template <class A, class B>
double dot(const A& a, const B& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double)a[i] * (double)b[i];
  return s;
}

// Central differences of loss() wrt every element of x. For float x the step actually taken
// (after rounding) is used in the denominator.
template <class T>
DVec fd(std::vector<T>& x, const std::function<double()>& loss, double h) {
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const T save = x[i];
    x[i] = (T)(save + h);
    const double xp = x[i], lp = loss();
    x[i] = (T)(save - h);
    const double xm = x[i], lm = loss();
    x[i] = save;
    g[i] = (lp - lm) / (xp - xm);
  }
  return g;
}

// max |analytic - numeric| relative to max |numeric| (or 1e-3, whichever is larger).
template <class A>
void check_close(const char* what, const A& analytic, const DVec& numeric, double tol) {
  REQUIRE(analytic.size() == numeric.size());
  double err = 0, ref = 1e-3;
  for (size_t i = 0; i < numeric.size(); ++i) {
    err = std::max(err, std::fabs((double)analytic[i] - numeric[i]));
    ref = std::max(ref, std::fabs(numeric[i]));
  }
  INFO(std::string(what) << ": max err " << err << " / max ref " << ref);
  CHECK(err <= tol * ref);
}

// Elementwise |a - b| <= tol (absolute).
template <class A, class B>
void check_abs(const char* what, const A& a, const B& b, double tol) {
  REQUIRE(a.size() == b.size());
  double err = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs((double)a[i] - (double)b[i]));
  INFO(std::string(what) << ": max abs err " << err);
  CHECK(err <= tol);
}

Vec minus(const Vec& a, float c) {
  Vec r(a);
  for (auto& x : r) x -= c;
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------
TEST_CASE("matmul: forward vs naive, FD wrt A and B for all transpose combos") {
  const int M = 5, N = 4, K = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(ta);
      CAPTURE(tb);
      Vec A = randn(M * K, 1.f, 1), B = randn(K * N, 1.f, 2), W = randn(M * N, 1.f, 3);
      auto a = [&](int m, int k) { return ta ? A[k * M + m] : A[m * K + k]; };
      auto b = [&](int k, int n) { return tb ? B[n * K + k] : B[k * N + n]; };
      Vec C(M * N, std::numeric_limits<float>::quiet_NaN());  // beta = 0 ignores garbage
      be().matmul(C.data(), A.data(), B.data(), M, N, K, ta, tb);
      DVec ref(M * N);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n)
          for (int k = 0; k < K; ++k) ref[m * N + n] += (double)a(m, k) * b(k, n);
      check_abs("forward", C, ref, 1e-5);

      // alpha/beta: C = 2 op(A)op(B) + 0.5 C0
      Vec C0 = randn(M * N, 1.f, 4), C2 = C0;
      be().matmul(C2.data(), A.data(), B.data(), M, N, K, ta, tb, 2.f, 0.5f);
      DVec ref2(M * N);
      for (int i = 0; i < M * N; ++i) ref2[i] = 2 * ref[i] + 0.5 * C0[i];
      check_abs("alpha/beta", C2, ref2, 1e-5);

      // Gradients of L = sum(W * C): dop(A) = W op(B)^T, dop(B) = op(A)^T W, expressed with
      // the kernel itself in the stored layout of A and B (as the model will do).
      auto loss = [&]() {
        Vec c(M * N);
        be().matmul(c.data(), A.data(), B.data(), M, N, K, ta, tb);
        return dot(c, W);
      };
      Vec dA(M * K), dB(K * N);
      if (!ta) be().matmul(dA.data(), W.data(), B.data(), M, K, N, false, !tb);  // [M,K]
      else be().matmul(dA.data(), B.data(), W.data(), K, M, N, tb, true);        // [K,M]
      if (!tb) be().matmul(dB.data(), A.data(), W.data(), K, N, M, !ta, false);  // [K,N]
      else be().matmul(dB.data(), W.data(), A.data(), N, K, M, true, ta);        // [N,K]
      check_close("dA", dA, fd(A, loss, 1e-2), 1e-3);
      check_close("dB", dB, fd(B, loss, 1e-2), 1e-3);
    }
}

TEST_CASE("matmul: beta = 1 accumulates, larger sizes match naive") {
  const int M = 70, N = 33, K = 129;
  Vec A = randn(M * K, 1.f, 5), B = randn(K * N, 1.f, 6);
  Vec C1(M * N), C2(M * N, 1.f);
  be().matmul(C1.data(), A.data(), B.data(), M, N, K, false, false);
  be().matmul(C2.data(), A.data(), B.data(), M, N, K, false, false, 1.f, 1.f);
  be().matmul(C2.data(), A.data(), B.data(), M, N, K, false, false, 1.f, 1.f);
  DVec ref(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k) ref[m * N + n] += (double)A[m * K + k] * B[k * N + n];
  check_abs("C1", C1, ref, 1e-3);
  DVec ref2(M * N);
  for (int i = 0; i < M * N; ++i) ref2[i] = 1.0 + 2 * ref[i];
  check_abs("C2 (beta=1 twice)", C2, ref2, 2e-3);
}

// The same product must give the same bits wherever the heap puts the operands (a GEMM whose
// vectorised and peeled paths round differently breaks run-to-run reproducibility) and on
// every repeat, including shapes large enough to run on several threads.
TEST_CASE("matmul: bit-identical across repeats and buffer alignments") {
  struct Shape { int M, N, K; bool ta, tb; };
  const Shape shapes[] = {{768, 384, 128, false, true}, {384, 128, 768, true, false},
                          {300, 128, 384, false, false}, {128, 12, 300, true, false},
                          {37, 91, 200, true, true}};
  for (const Shape& sh : shapes) {
    const size_t na = size_t(sh.M) * sh.K, nb = size_t(sh.K) * sh.N, nc = size_t(sh.M) * sh.N;
    const Vec a0 = randn(na, 1.f, 40), b0 = randn(nb, 1.f, 41);
    Vec A(na + 16), B(nb + 16), C(nc + 16), ref;
    for (int off = 0; off < 16; off += 3) {
      std::copy(a0.begin(), a0.end(), A.begin() + off);
      std::copy(b0.begin(), b0.end(), B.begin() + (15 - off));
      float* c = C.data() + (off * 7) % 16;
      be().matmul(c, A.data() + off, B.data() + (15 - off), sh.M, sh.N, sh.K, sh.ta, sh.tb);
      if (ref.empty()) {
        ref.assign(c, c + nc);
        continue;
      }
      INFO("shape " << sh.M << "x" << sh.N << "x" << sh.K << " offset " << off);
      CHECK(std::memcmp(ref.data(), c, nc * sizeof(float)) == 0);
    }
  }
}

// The attention's register-tiled GEMM: every column block width (1-5 packets and the element-wise
// tail past the last whole packet), every row remainder, K = 0, A row-major or transposed, and
// accumulate, against a double-precision product.
TEST_CASE("small_gemm matches a naive product for every tile shape") {
  for (int M : {1, 5, 7, 13, 72})
    for (int N : {1, 16, 24, 33, 48, 64, 80, 112, 144})
      for (int K : {0, 1, 9, 64})
        for (bool trans_a : {false, true})
          for (bool accumulate : {false, true}) {
            const int lda = (trans_a ? M : K) + 3, ldb = N + 5, ldc = N + 2;
            const Vec A = randn(size_t(trans_a ? K : M) * lda, 1.f, 50 + M + K);
            const Vec B = randn(size_t(K) * ldb, 1.f, 60 + N + K);
            const Vec C0 = randn(size_t(M) * ldc, 1.f, 70 + M);
            Vec C = C0;
            const int a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
            cpu::small_gemm(C.data(), ldc, A.data(), a_row, a_col, B.data(), ldb, M, N, K,
                            accumulate);
            double err = 0;
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < ldc; ++j) {
                double want = C0[size_t(i) * ldc + j];  // columns past N untouched
                if (j < N) {
                  double sum = 0;
                  for (int k = 0; k < K; ++k)
                    sum += (double)A[size_t(i) * a_row + size_t(k) * a_col] *
                           B[size_t(k) * ldb + j];
                  want = accumulate ? want + sum : sum;
                }
                err = std::max(err, std::fabs(C[size_t(i) * ldc + j] - want));
              }
            INFO(M << "x" << N << "x" << K << " trans_a " << trans_a << " acc " << accumulate);
            CHECK(err <= 1e-5 * (K + 1));
          }
}

TEST_CASE("small_gemm: bit-identical across buffer alignments") {
  const int M = 72, N = 80, K = 64;
  const Vec a0 = randn(size_t(M) * K, 1.f, 80), b0 = randn(size_t(K) * N, 1.f, 81);
  Vec A(a0.size() + 16), B(b0.size() + 16), C(size_t(M) * N + 16), ref;
  for (int off = 0; off < 16; off += 3) {
    std::copy(a0.begin(), a0.end(), A.begin() + off);
    std::copy(b0.begin(), b0.end(), B.begin() + (15 - off));
    float* c = C.data() + (off * 7) % 16;
    cpu::small_gemm(c, N, A.data() + off, K, 1, B.data() + (15 - off), N, M, N, K, false);
    if (ref.empty()) ref.assign(c, c + size_t(M) * N);
    else CHECK(std::memcmp(ref.data(), c, ref.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("transpose_padded: whole packets, partial blocks and zero padding") {
  for (int rows : {1, 8, 17, 72})
    for (int cols : {1, 5, 16, 64, 70}) {
      const int lds = cols + 4, ldd = cpu::packet_round_up(rows) + 16;
      const Vec src = randn(size_t(rows) * lds, 1.f, 90 + rows + cols);
      Vec dst(size_t(cols) * ldd, 7.f);
      cpu::transpose_padded(dst.data(), ldd, src.data(), lds, rows, cols);
      bool ok = true;
      for (int c = 0; c < cols; ++c)
        for (int r = 0; r < ldd; ++r)
          ok = ok && dst[size_t(c) * ldd + r] == (r < rows ? src[size_t(r) * lds + c] : 0.f);
      INFO(rows << "x" << cols);
      CHECK(ok);
    }
}

// ---------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------
// Relative attention

namespace {

// Literal Transformer-XL _rel_shift on a row-major [qlen, klen] matrix: pad a zero column on
// the left -> [qlen, klen+1], view as [klen+1, qlen], drop the first row, view as [qlen, klen].
template <class T>
std::vector<T> literal_rel_shift(const std::vector<T>& x, int qlen, int klen) {
  std::vector<T> padded((size_t)qlen * (klen + 1), T(0));
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j < klen; ++j) padded[i * (klen + 1) + j + 1] = x[i * klen + j];
  // dropping the first row of the [klen+1, qlen] view skips qlen elements of the flat buffer
  return std::vector<T>(padded.begin() + qlen, padded.begin() + qlen + (size_t)qlen * klen);
}

// Naive double reference of rel_attention_forward.
void ref_attention(DVec& out, DVec& prob, const std::vector<double>& qkv,
                   const std::vector<double>& r, const std::vector<double>& u,
                   const std::vector<double>& v, const std::vector<uint8_t>& mask,
                   const AttentionShape& s, double scale) {
  const int B = s.B, H = s.H, Dh = s.Dh, ql = s.qlen, kl = s.klen, ml = s.mlen();
  const int HD = H * Dh;
  out.assign((size_t)B * ql * HD, 0);
  prob.assign((size_t)B * H * ql * kl, 0);
  // qkv [klen, B, 3HD], out [qlen, B, HD] (time-major)
  auto q = [&](int b, int t, int h, int d) { return qkv[((size_t)(ml + t) * B + b) * 3 * HD + h * Dh + d]; };
  auto k = [&](int b, int j, int h, int d) { return qkv[((size_t)j * B + b) * 3 * HD + HD + h * Dh + d]; };
  auto vv = [&](int b, int j, int h, int d) { return qkv[((size_t)j * B + b) * 3 * HD + 2 * HD + h * Dh + d]; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      DVec ac(ql * kl), bd(ql * kl);
      for (int i = 0; i < ql; ++i)
        for (int j = 0; j < kl; ++j)
          for (int d = 0; d < Dh; ++d) {
            ac[i * kl + j] += (q(b, i, h, d) + u[h * Dh + d]) * k(b, j, h, d);
            bd[i * kl + j] += (q(b, i, h, d) + v[h * Dh + d]) * r[j * HD + h * Dh + d];
          }
      DVec bds = literal_rel_shift(bd, ql, kl);
      for (int i = 0; i < ql; ++i) {
        DVec sc(kl);
        double mx = -1e300, sum = 0;
        for (int j = 0; j < kl; ++j) {
          sc[j] = scale * (ac[i * kl + j] + bds[i * kl + j]);
          if (!mask[i * kl + j]) mx = std::max(mx, sc[j]);
        }
        for (int j = 0; j < kl; ++j) sum += mask[i * kl + j] ? 0 : std::exp(sc[j] - mx);
        for (int j = 0; j < kl; ++j) {
          const double pij = mask[i * kl + j] ? 0 : std::exp(sc[j] - mx) / sum;
          prob[(((size_t)b * H + h) * ql + i) * kl + j] = pij;
          for (int d = 0; d < Dh; ++d) out[((size_t)i * B + b) * HD + h * Dh + d] += pij * vv(b, j, h, d);
        }
      }
    }
}

std::vector<uint8_t> causal_mask(int qlen, int mlen) {
  std::vector<uint8_t> m(qlen * (qlen + mlen));
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j < qlen + mlen; ++j) m[i * (qlen + mlen) + j] = j > i + mlen;
  return m;
}

// RMT: causal, plus the first nread rows (read memory) see each other and the last nwrite rows
// (write memory) see each other.
std::vector<uint8_t> rmt_mask(int qlen, int mlen, int nread, int nwrite) {
  auto m = causal_mask(qlen, mlen);
  const int klen = qlen + mlen;
  for (int i = 0; i < nread; ++i)
    for (int j = 0; j < nread; ++j) m[i * klen + mlen + j] = 0;
  for (int i = qlen - nwrite; i < qlen; ++i)
    for (int j = qlen - nwrite; j < qlen; ++j) m[i * klen + mlen + j] = 0;
  return m;
}

template <class T>
std::vector<double> to_d(const std::vector<T>& x) { return std::vector<double>(x.begin(), x.end()); }

void check_attention(const AttentionShape s, const std::vector<uint8_t>& mask, uint32_t seed) {
  const int HD = s.H * s.Dh, ql = s.qlen, kl = s.klen;
  const float scale = 1.f / std::sqrt((float)s.Dh);
  Vec qkv = randn((size_t)s.B * kl * 3 * HD, 0.7f, seed), r = randn((size_t)kl * HD, 0.7f, seed + 1),
      u = randn(HD, 0.5f, seed + 2), v = randn(HD, 0.5f, seed + 3),
      W = randn((size_t)s.B * ql * HD, 1.f, seed + 4);
  Vec out((size_t)s.B * ql * HD), prob((size_t)s.B * s.H * ql * kl);
  be().rel_attention_forward(out.data(), prob.data(), qkv.data(), r.data(), u.data(), v.data(),
                             mask.data(), s, scale);
  // forward against the naive double reference
  DVec rout, rprob;
  ref_attention(rout, rprob, to_d(qkv), to_d(r), to_d(u), to_d(v), mask, s, scale);
  check_abs("out", out, rout, 1e-5);
  check_abs("prob", prob, rprob, 1e-5);

  // backward; dqkv is garbage first (overwrite), dr/du/dv accumulate onto 0.5
  Vec dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN()), dr(r.size(), 0.5f),
      du(HD, 0.5f), dv(HD, 0.5f);
  be().rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), W.data(), prob.data(),
                              qkv.data(), r.data(), u.data(), v.data(), s, scale);
  dr = minus(dr, 0.5f);
  du = minus(du, 0.5f);
  dv = minus(dv, 0.5f);
  // cached rows: q part exactly 0
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.mlen(); ++t)
      for (int c = 0; c < HD; ++c) REQUIRE(dqkv[((size_t)t * s.B + b) * 3 * HD + c] == 0.f);

  // FD of the float kernel (the brief's check)
  auto loss = [&]() {
    Vec o(out.size()), pr(prob.size());
    be().rel_attention_forward(o.data(), pr.data(), qkv.data(), r.data(), u.data(), v.data(),
                               mask.data(), s, scale);
    return dot(o, W);
  };
  check_close("dqkv (fd float)", dqkv, fd(qkv, loss, 1e-2), 1e-2);
  check_close("dr (fd float)", dr, fd(r, loss, 1e-2), 1e-2);
  check_close("du (fd float)", du, fd(u, loss, 1e-2), 1e-2);
  check_close("dv (fd float)", dv, fd(v, loss, 1e-2), 1e-2);

  // FD of the double reference: much tighter
  DVec dq = to_d(qkv), dR = to_d(r), dU = to_d(u), dV = to_d(v);
  auto dloss = [&]() {
    DVec o, pr;
    ref_attention(o, pr, dq, dR, dU, dV, mask, s, scale);
    return dot(o, W);
  };
  check_close("dqkv (fd double)", dqkv, fd(dq, dloss, 1e-5), 1e-4);
  check_close("dr (fd double)", dr, fd(dR, dloss, 1e-5), 1e-4);
  check_close("du (fd double)", du, fd(dU, dloss, 1e-5), 1e-4);
  check_close("dv (fd double)", dv, fd(dV, dloss, 1e-5), 1e-4);
}

// How many unmasked (i, j) read wrapped-around values (j > i+mlen+1)?
int wrapped_visible(const std::vector<uint8_t>& mask, int qlen, int mlen) {
  int n = 0, klen = qlen + mlen;
  for (int i = 0; i < qlen; ++i)
    for (int j = i + mlen + 2; j < klen; ++j) n += !mask[i * klen + j];
  return n;
}

}  // namespace

TEST_CASE("rel_shift matches the literal pad/reshape trick; backward is its adjoint") {
  for (int mlen : {0, 1, 3, 6}) {
    const int qlen = 5, klen = qlen + mlen;
    Vec x(qlen * klen);
    for (int i = 0; i < qlen * klen; ++i) x[i] = (float)(i + 1);  // distinct values
    Vec out(qlen * klen);
    cpu::rel_shift_forward(out.data(), x.data(), qlen, klen);
    CHECK(out == literal_rel_shift(x, qlen, klen));
    // the header's closed form, including the wrap-around from row i+1
    for (int i = 0; i < qlen; ++i)
      for (int j = 0; j < klen; ++j) {
        float e = j <= i + mlen ? x[i * klen + j + qlen - 1 - i]
                  : j == i + mlen + 1 ? 0.f
                                      : x[(i + 1) * klen + j - i - mlen - 2];
        CHECK(out[i * klen + j] == e);
      }
    // adjoint: <shift(x), g> == <x, shift^T(g)>
    Vec g = randn(qlen * klen, 1.f, 20 + mlen), dx(qlen * klen, 9.f);
    cpu::rel_shift_backward(dx.data(), g.data(), qlen, klen);
    CHECK(dot(out, g) == doctest::Approx(dot(x, dx)).epsilon(1e-6));
  }
}

TEST_CASE("rel_attention: causal, mlen = 0") {
  AttentionShape s{2, 2, 4, 7, 7};
  check_attention(s, causal_mask(7, 0), 100);
}

TEST_CASE("rel_attention: causal, mlen = 3") {
  AttentionShape s{2, 2, 4, 7, 10};
  check_attention(s, causal_mask(7, 3), 200);
}

TEST_CASE("rel_attention: RMT masks (read/write memory rows see the future)") {
  SUBCASE("2 read rows + 2 write rows") {
    auto m = rmt_mask(7, 3, 2, 2);
    check_attention(AttentionShape{2, 2, 4, 7, 10}, m, 300);
  }
  SUBCASE("3 read rows + 3 write rows: wrap-around values are used") {
    auto m = rmt_mask(7, 3, 3, 3);
    REQUIRE(wrapped_visible(m, 7, 3) > 0);
    check_attention(AttentionShape{2, 2, 4, 7, 10}, m, 400);
  }
  SUBCASE("no mask at all, mlen = 2") {
    std::vector<uint8_t> m(7 * 9, 0);
    REQUIRE(wrapped_visible(m, 7, 2) > 0);
    check_attention(AttentionShape{1, 3, 4, 7, 9}, m, 500);
  }
  SUBCASE("random mask") {
    std::mt19937 g(7);
    std::vector<uint8_t> m(6 * 10);
    for (auto& x : m) x = g() % 2;
    for (int i = 0; i < 6; ++i) m[i * 10 + (i * 3) % 10] = 0;  // keep one key per row
    REQUIRE(wrapped_visible(m, 6, 4) > 0);
    check_attention(AttentionShape{2, 2, 3, 6, 10}, m, 600);
  }
}

TEST_CASE("rel_attention: bit-identical across repeated runs, buffer alignments and thread counts") {
  const AttentionShape s{4, 4, 32, 24, 32};  // big enough to run in parallel
  const int HD = s.H * s.Dh;
  auto mask = rmt_mask(24, 8, 3, 3);
  Vec qkv = randn((size_t)s.B * s.klen * 3 * HD, 1.f, 30), r = randn((size_t)s.klen * HD, 1.f, 31),
      u = randn(HD, 1.f, 32), v = randn(HD, 1.f, 33), W = randn((size_t)s.B * s.qlen * HD, 1.f, 34);
  // `shift` moves the probability buffer by a few floats: the results must not depend on where
  // a buffer sits in memory (a vectorised exp that peels to an aligned address would).
  auto run = [&](int shift = 0) {
    Vec out((size_t)s.B * s.qlen * HD), prob_buf((size_t)s.B * s.H * s.qlen * s.klen + 16);
    float* probp = prob_buf.data() + shift;
    be().rel_attention_forward(out.data(), probp, qkv.data(), r.data(), u.data(), v.data(),
                               mask.data(), s, 0.25f);
    Vec prob(probp, probp + (size_t)s.B * s.H * s.qlen * s.klen);
    Vec dqkv(qkv.size()), dr(r.size()), du(HD), dv(HD);
    be().rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), W.data(),
                                probp, qkv.data(), r.data(), u.data(), v.data(), s, 0.25f);
    Vec all = out;
    for (const Vec* x : {&prob, &dqkv, &dr, &du, &dv}) all.insert(all.end(), x->begin(), x->end());
    return all;
  };
  Vec a = run(), b = run();
  REQUIRE(a.size() == b.size());
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  for (int shift : {1, 3, 7}) {
    CAPTURE(shift);
    Vec e = run(shift);
    CHECK(std::memcmp(a.data(), e.data(), a.size() * sizeof(float)) == 0);
  }
  // Stronger than the contract (same thread count): our own per-(b,h) work is single-threaded
  // and our reductions over b run in a fixed order, so the thread count does not change out,
  // prob, dqkv, du or dv. dr is one library GEMM per head whose reduction runs over all
  // samples' rows, and oneDNN's sgemm splits that reduction by thread count on some CPUs (seen
  // on AVX2 without AVX-512), so across thread counts dr agrees to rounding only.
  const int threads = num_threads();
  set_num_threads(1);
  Vec c = run();
  set_num_threads(threads > 1 ? threads : 2);
  Vec d = run();
  set_num_threads(threads);
  const size_t dr_begin = (size_t)s.B * s.qlen * HD + (size_t)s.B * s.H * s.qlen * s.klen + qkv.size();
  const size_t dr_end = dr_begin + r.size();
  for (const Vec* other : {&c, &d}) {
    CHECK(std::memcmp(a.data(), other->data(), dr_begin * sizeof(float)) == 0);
    CHECK(std::memcmp(a.data() + dr_end, other->data() + dr_end, (a.size() - dr_end) * sizeof(float)) == 0);
    float worst = 0.f, scale = 0.f;
    for (size_t i = dr_begin; i < dr_end; ++i) {
      worst = std::max(worst, std::fabs(a[i] - (*other)[i]));
      scale = std::max(scale, std::fabs(a[i]));
    }
    CHECK(worst <= 1e-5f * scale);
  }
}

// ---------------------------------------------------------------------------------------
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

TEST_CASE("memory API: allocate, fill, copies both ways and on the device, on every backend") {
  for (const char* device : {"cpu", "cpu-guarded"}) {
    CAPTURE(device);
    Backend& b = backend_by_name(device);
    CHECK(b.allocate(0) == nullptr);
    b.deallocate(nullptr, 0);
    const int64_t n = 1000;
    float* x = static_cast<float*>(b.allocate(n * sizeof(float)));
    float* y = static_cast<float*>(b.allocate(n * sizeof(float)));
    CHECK(reinterpret_cast<uintptr_t>(x) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(y) % 64 == 0);
    Vec host = randn(n, 1.f, 90), back(n, 0.f);
    b.copy_host_to_device(x, host.data(), n * sizeof(float));
    b.copy_device_to_device(y, x, n * sizeof(float));
    b.copy_device_to_host(back.data(), y, n * sizeof(float));
    CHECK(back == host);
    b.fill(y + 10, 20, 2.5f);
    b.fill_bytes(y + 40, 0, 8 * sizeof(float));
    b.copy_device_to_host(back.data(), y, n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float expect = i >= 10 && i < 30 ? 2.5f : i >= 40 && i < 48 ? 0.f : host[size_t(i)];
      REQUIRE(back[size_t(i)] == expect);
    }
    b.deallocate(x, n * sizeof(float));
    b.deallocate(y, n * sizeof(float));
  }
}

TEST_CASE("DeviceArray: grows keeping its capacity, uploads, downloads, copies on the device") {
  for (const char* device : {"cpu", "cpu-guarded"}) {
    CAPTURE(device);
    Backend& b = backend_by_name(device);
    DeviceArray<float> a;
    CHECK(a.empty());
    float* p = a.sized(b, 100);
    CHECK(a.size() == 100);
    CHECK(a.sized(b, 40) == p);  // shrinking and regrowing within the capacity reuses it
    CHECK(a.sized(b, 100) == p);
    Vec host = randn(100, 1.f, 91);
    a.upload(b, host);
    CHECK(a.data() == p);
    CHECK(a.download() == host);
    DeviceArray<float> c = a;  // a device copy, not the same buffer
    CHECK(c.data() != a.data());
    CHECK(c.download() == host);
    const float v = 7.f;
    c.write(3, &v, 1);
    float got = 0;
    c.read(3, &got, 1);
    CHECK(got == 7.f);
    CHECK(a.download() == host);
    CHECK_THROWS_AS(c.write(99, host.data(), 2), std::logic_error);
    DeviceArray<int32_t> z;
    z.zeroed(b, 5);
    CHECK(z.download() == std::vector<int32_t>(5, 0));
    DeviceArray<float> moved = std::move(c);
    CHECK(moved.download()[3] == 7.f);
    CHECK(c.empty());
  }
}

TEST_CASE("threads: set_num_threads / num_threads") {
  const int t = num_threads();
  set_num_threads(1);
  CHECK(num_threads() == 1);
  set_num_threads(0);
  CHECK(num_threads() >= 1);
  set_num_threads(t);
}

TEST_CASE("add_inplace adds elementwise, also above the parallel grain") {
  for (size_t n : {size_t(5), size_t(100000)}) {
    Vec y = randn(n, 1.f, 70), x = randn(n, 1.f, 71), expect(n);
    for (size_t i = 0; i < n; ++i) expect[i] = y[i] + x[i];
    be().add_inplace(y.data(), x.data(), (int64_t)n);
    CHECK(y == expect);
  }
}

TEST_CASE("rel_attention: a range of query rows equals those rows of the full computation") {
  // RMT mask with a cache; rows [5, 11) of 14, so the last computed row's wrap-around reads the
  // first row outside the range.
  AttentionShape s{3, 2, 8, 14, 17};
  const int HD = s.H * s.Dh;
  auto mask = rmt_mask(14, 3, 4, 4);
  Vec qkv = randn((size_t)s.B * s.klen * 3 * HD, 0.7f, 60), r = randn((size_t)s.klen * HD, 0.7f, 61),
      u = randn(HD, 0.5f, 62), v = randn(HD, 0.5f, 63), W = randn((size_t)s.qlen * s.B * HD, 1.f, 64);
  auto run = [&](int i0, int i1, Vec& out, Vec& prob, Vec& dqkv, Vec& dr, Vec& du, Vec& dv) {
    AttentionShape t = s;
    t.q_begin = i0, t.q_end = i1;
    out.assign((size_t)s.qlen * s.B * HD, 0.f);
    prob.assign((size_t)s.B * s.H * s.qlen * s.klen, 0.f);
    be().rel_attention_forward(out.data(), prob.data(), qkv.data(), r.data(), u.data(), v.data(),
                               mask.data(), t, 0.3f);
    Vec dout = W;  // the output gradient outside the range is zero
    for (int i = 0; i < s.qlen; ++i)
      if (i < i0 || i >= i1)
        std::fill(dout.begin() + (size_t)i * s.B * HD, dout.begin() + (size_t)(i + 1) * s.B * HD, 0.f);
    dqkv.assign(qkv.size(), 0.f), dr.assign(r.size(), 0.f), du.assign(HD, 0.f), dv.assign(HD, 0.f);
    be().rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), dout.data(),
                                prob.data(), qkv.data(), r.data(), u.data(), v.data(), t, 0.3f);
  };
  Vec o1, p1, q1, r1, u1, v1, o2, p2, q2, r2, u2, v2;
  run(0, s.qlen, o1, p1, q1, r1, u1, v1);  // full forward; backward of the rows' gradient only
  run(5, 11, o2, p2, q2, r2, u2, v2);
  Vec o1r(o1.begin() + 5 * s.B * HD, o1.begin() + 11 * s.B * HD),
      o2r(o2.begin() + 5 * s.B * HD, o2.begin() + 11 * s.B * HD);
  check_abs("out rows", o2r, o1r, 1e-6);
  // run(0, qlen) above zeroed nothing: redo its backward with the same zeroed output gradient
  AttentionShape full = s;
  Vec dout = W;
  for (int i = 0; i < s.qlen; ++i)
    if (i < 5 || i >= 11)
      std::fill(dout.begin() + (size_t)i * s.B * HD, dout.begin() + (size_t)(i + 1) * s.B * HD, 0.f);
  std::fill(q1.begin(), q1.end(), 0.f), std::fill(r1.begin(), r1.end(), 0.f);
  std::fill(u1.begin(), u1.end(), 0.f), std::fill(v1.begin(), v1.end(), 0.f);
  be().rel_attention_backward(q1.data(), r1.data(), u1.data(), v1.data(), dout.data(), p1.data(),
                              qkv.data(), r.data(), u.data(), v.data(), full, 0.3f);
  check_abs("dqkv", q2, q1, 1e-5);
  check_abs("dr", r2, r1, 1e-5);
  check_abs("du", u2, u1, 1e-5);
  check_abs("dv", v2, v1, 1e-5);
}
