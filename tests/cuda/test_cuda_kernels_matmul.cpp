// GPU suite (tests/cuda/kernel_compare.h): the GEMMs on the cuda backend against the cpu backend,
// matmul at the models' products (every transpose combination, beta 0 over NaN and beta 1), an
// empty product, and matmul_strided on column blocks of wider matrices.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/cuda/compare.h"
#include "tests/cuda/kernel_compare.h"

using namespace rmt;
using namespace rmt::cuda_test;

namespace {

struct Gemm {
  int M, N, K;
  const char* where;
  // C's M rows as time-major rows of `batch` samples in these parts (empty: no parts).
  std::vector<Part> parts = {};
  int batch = 1;
};

// The models' products (forward, and both backward products) at the copy and language-model
// shapes, and odd sizes.
const std::vector<Gemm> kGemms = {
    {37, 53, 29, "odd sizes"},
    {1, 1, 1, "1x1x1"},
    {1, 300, 7, "one row"},
    {kRows, 3 * kHD, kD, "qkv projection", kCopyRows, kB},
    {kRows, kD, kInner, "feed-forward out", kCopyRows, kB},
    {kInner, kD, kRows, "weight gradient over the rows"},
    {kQ, kHD, kD, "r projection of the positions", kCopyRows, 1},
    {kSeg * kB, kV, kD, "tied output layer"},
    {kLmKeys * kLmB, 3 * kLmHD, kLmD, "LM qkv projection over cache and segment", kLmRows, kLmB},
    {kLmSeg * kLmB, kLmInner, kLmD, "LM feed-forward in"},
    {kLmSeg * kLmB, kLmD, kLmInner, "LM feed-forward out"},
    {kLmInner, kLmD, kLmSeg * kLmB, "LM weight gradient over the rows"},
    {kLmKeys, kLmHD, kLmD, "LM r projection of 256 positions", kLmRows, 1},
    {kLmSeg * kLmB, kLmV, kLmD, "LM tied output layer"},
};

// beta 0: C holds NaN, which must not reach the result, and C is compared; beta 1: C holds values,
// and what the product added to them is compared. (Those values are kept below the products'
// size, |C| <= 1/8: the rounding of C + product, an ulp of the sum, must stay far below the limit
// relative to the product even for 1x1x1.)
void check_matmul(bool ta, bool tb, const Gemm& g, float alpha, float beta) {
  const std::string what = fmt::format("matmul {}{} {}x{}x{} ({}) alpha {} beta {}", ta ? 'T' : 'N',
                                       tb ? 'T' : 'N', g.M, g.N, g.K, g.where, alpha, beta);
  const std::vector<float> before = uniform(int64_t(g.M) * g.N, 3, -0.125f, 0.125f);
  compare(what, [&](Backend& be) {
    auto A = on(be, uniform(int64_t(g.M) * g.K, 1));
    auto B = on(be, uniform(int64_t(g.K) * g.N, 2));
    DeviceArray<float> C = beta == 0.f ? nans(be, int64_t(g.M) * g.N) : on(be, before);
    be.matmul(C.data(), A.data(), B.data(), g.M, g.N, g.K, ta, tb, alpha, beta);
    Out out{beta == 0.f ? "C" : "C - C before", beta == 0.f ? C.download() : increment(C.download(), before)};
    if (!g.parts.empty()) out.parts = g.parts, out.row_size = int64_t(g.batch) * g.N;
    return Outs{out};
  });
}

}  // namespace

TEST_CASE("cuda matmul: all four transpose combinations at the model's shapes, beta 0 over NaN, beta 1") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Gemm& g : kGemms) {
        check_matmul(ta, tb, g, 1.f, 0.f);
        check_matmul(ta, tb, g, 0.5f, 1.f);
      }
}

TEST_CASE("cuda matmul: an empty product (K = 0) zeroes C (beta 0) or scales it") {
  for (float beta : {0.f, 0.5f})
    compare(fmt::format("matmul K=0 beta {}", beta), [&](Backend& be) {
      DeviceArray<float> A(be, 1), B(be, 1);
      DeviceArray<float> C = beta == 0.f ? nans(be, 6 * 5) : on(be, uniform(6 * 5, 4));
      be.matmul(C.data(), A.data(), B.data(), 6, 5, 0, false, false, 1.f, beta);
      return Outs{{"C", C.download()}};
    });
}

TEST_CASE("cuda matmul_strided: column blocks of wider matrices, every transpose combination") {
  // C, A and B are blocks inside buffers with longer rows, starting a few columns in (as the
  // key/value columns of the qkv projection); what lies outside the blocks must stay as it was
  // (beta 0: the whole buffer is compared; beta 1: what was added to it, zero outside the block).
  struct Case {
    int M, N, K, pad_c, pad_a, pad_b, col_c, col_a, col_b;
  };
  for (const Case& c : {Case{37, 29, 23, 5, 7, 3, 2, 4, 1},
                        Case{kQ * kB, kHD, kDh, kHD, 2 * kHD, 2 * kHD, 0, kHD, 2 * kHD},
                        Case{kSeg, kQ + kSeg, kDh, 0, 3 * kHD - kDh, 3 * kHD - kDh, 0, 0, kHD},
                        Case{kLmKeys * kLmB, kLmHD, kLmDh, kLmHD, 2 * kLmHD, 2 * kLmHD, 0, kLmHD, 2 * kLmHD},
                        Case{kLmSeg, kLmKeys, kLmDh, 0, 3 * kLmHD - kLmDh, 3 * kLmHD - kLmDh, 0, 0, kLmHD}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.f, 1.f}) {
          const int rows_a = ta ? c.K : c.M, cols_a = ta ? c.M : c.K;
          const int rows_b = tb ? c.N : c.K, cols_b = tb ? c.K : c.N;
          const int lda = cols_a + c.pad_a + c.col_a, ldb = cols_b + c.pad_b + c.col_b,
                    ldc = c.N + c.pad_c + c.col_c;
          const std::string what =
              fmt::format("matmul_strided {}{} {}x{}x{} ldc {} lda {} ldb {} beta {}", ta ? 'T' : 'N',
                          tb ? 'T' : 'N', c.M, c.N, c.K, ldc, lda, ldb, beta);
          const std::vector<float> before = uniform(int64_t(c.M) * ldc, 7);
          compare(what, [&](Backend& be) {
            auto A = on(be, uniform(int64_t(rows_a) * lda, 5));
            auto B = on(be, uniform(int64_t(rows_b) * ldb, 6));
            auto C = on(be, before);
            be.matmul_strided(C.data() + c.col_c, ldc, A.data() + c.col_a, lda, B.data() + c.col_b,
                              ldb, c.M, c.N, c.K, ta, tb, 0.75f, beta);
            return Outs{beta == 0.f ? Out{"C (whole buffer)", C.download()}
                                    : Out{"C - C before (whole buffer)", increment(C.download(), before)}};
          });
        }
}
