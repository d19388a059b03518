// Kernel tests for the CPU backend, its products: matmul (every transpose combination, alpha and
// beta) against a naive double-precision product and its gradients against central finite
// differences of a random projection loss L = sum(w * out) (tests/kernel_checks.h); the
// attention's register-tiled small_gemm and transpose_padded; and the same bits at every buffer
// alignment.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/cpu_kernels.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;

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
