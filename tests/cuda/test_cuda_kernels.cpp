// Every Backend kernel on the cuda backend against the cpu backend, at random inputs, the shapes
// of the paper's copy model (4 layers, 4 heads x 64, d_model 128, d_inner 256, batch 32, 3
// segments of 24 with 24 memory tokens) and those of the language model (rmt bench's lm_*: 8 heads
// x 64, d_model 512, d_inner 2048, batch 2, segments of 128 with a cache of 128, so 256 keys, or
// 10 memory tokens): this proves the launches, the drivers and the cuBLAS mappings on the device.
// max |diff| / max |ref| <= 1e-5 per output (masks and ids: exact). So that the suite cannot pass
// while wrong:
//   * the device memory a kernel gets holds NaN until written (tests/cuda/nan_filled.h: new
//     buffers, and the backend's scratch as far as a test can reach it);
//   * outputs made of rows of different kinds (the read memory, the segment's tokens, the write
//     memory, the cache) are compared per block of rows, each relative to its own largest value;
//   * accumulating outputs (beta 1 GEMMs, gradients that add up) are compared as what the kernel
//     added, not as the sum with what was there before.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/error.h"
#include "tests/cuda/compare.h"
#include "tests/cuda/nan_filled.h"

using namespace rmt;
using namespace rmt::cuda_test;

namespace {

constexpr double kKernelLimit = 1e-5;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The copy model's sizes.
constexpr int kB = 32, kD = 128, kH = 4, kDh = 64, kHD = kH * kDh, kInner = 256, kV = 12;
constexpr int kSeg = 24, kMem = 24;
constexpr int kQ = kMem + kSeg + kMem;  // rmt query rows: read memory, tokens, write memory
constexpr int kRows = kQ * kB;          // activation rows of one segment
// The language model's (lib/experiments/bench.cpp, lm_*): a segment of 128 bytes after a cache of
// 128 (xl: 256 keys), or between 10 read and 10 write memory tokens (rmt).
constexpr int kLmB = 2, kLmD = 512, kLmH = 8, kLmDh = 64, kLmHD = kLmH * kLmDh, kLmInner = 2048,
              kLmV = 256, kLmSeg = 128, kLmCache = 128, kLmMem = 10;
constexpr int kLmKeys = kLmCache + kLmSeg;  // 256

// The rows of one copy-model segment with memory, and of the language model's keys (xl).
const std::vector<Part> kCopyRows = {{"read memory", kMem}, {"tokens", kSeg}, {"write memory", kMem}};
const std::vector<Part> kLmRows = {{"cache", kLmCache}, {"tokens", kLmSeg}};

struct Out {
  std::string name;
  std::vector<float> values;
  double limit = kKernelLimit;  // 0: exact
  // Compared per part of its rows (time-major, row_size elements a row); empty: as one tensor.
  std::vector<Part> parts = {};
  int64_t row_size = 0;
};
using Outs = std::vector<Out>;

template <typename T>
std::vector<float> as_float(const std::vector<T>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// Runs `kernel` on each backend (it builds its inputs from fixed seeds, so both get the same) and
// compares every output it returns. On the device, new buffers and the scratch hold NaN first.
void compare(const std::string& what, const std::function<Outs(Backend&)>& kernel) {
  CAPTURE(what);
  const Outs ref = kernel(cpu());
  const Outs got = kernel(nan_filled_gpu());
  REQUIRE(ref.size() == got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const std::string name = what + ": " + ref[i].name;
    if (ref[i].parts.empty())
      CHECK(close(name, ref[i].values, got[i].values, ref[i].limit));
    else
      CHECK(close_rows(name, ref[i].values, got[i].values, ref[i].limit, ref[i].parts, ref[i].row_size));
  }
}

// A [rows, ld] buffer holding NaN, for outputs that must be overwritten.
DeviceArray<float> nans(Backend& be, int64_t n) {
  DeviceArray<float> a(be, n);
  be.fill(a.data(), n, kNaN);
  return a;
}

// ---- GEMMs ----------------------------------------------------------------------------------

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

// ---- element-wise and row kernels ------------------------------------------------------------

TEST_CASE("cuda fill, fill_bytes, scale, add_inplace, relu") {
  for (int64_t n : {int64_t(1), int64_t(1000003), int64_t(kRows) * kInner, int64_t(kLmSeg) * kLmB * kLmInner}) {
    compare(fmt::format("fill and fill_bytes n={}", n), [&](Backend& be) {
      DeviceArray<float> x(be, n);
      be.fill(x.data(), n, 0.375f);
      DeviceArray<uint8_t> m(be, n);
      be.fill_bytes(m.data(), 7, size_t(n));
      return Outs{{"fill", x.download()}, {"fill_bytes", as_float(m.download()), 0}};
    });
    const std::vector<float> y0 = uniform(n, 11);
    compare(fmt::format("scale and add_inplace n={}", n), [&](Backend& be) {
      auto x = on(be, uniform(n, 10)), y = on(be, y0);
      be.scale(x.data(), n, -0.3f);
      be.add_inplace(y.data(), x.data(), n);
      return Outs{{"scale", x.download()}, {"add_inplace: y - y before", increment(y.download(), y0)}};
    });
    compare(fmt::format("relu forward/backward n={}", n), [&](Backend& be) {
      auto x = on(be, uniform(n, 12)), dout = on(be, uniform(n, 13));
      DeviceArray<float> y = nans(be, n), dx = nans(be, n);
      be.relu_forward(y.data(), x.data(), n);
      be.relu_backward(dx.data(), dout.data(), y.data(), n);
      be.relu_forward(x.data(), x.data(), n);            // in place
      be.relu_backward(dout.data(), dout.data(), x.data(), n);  // in place
      return Outs{{"y", y.download()}, {"dx", dx.download()}, {"y in place", x.download()},
                  {"dx in place", dout.download()}};
    });
  }
}

TEST_CASE("cuda dropout: the same mask as the cpu (a pure function of seed and index)") {
  for (int64_t n : {int64_t(7), int64_t(kRows) * kInner + 3, int64_t(kLmSeg) * kLmB * kLmInner})
    for (float p : {0.1f, 0.5f})
      compare(fmt::format("dropout n={} p={}", n, p), [&](Backend& be) {
        auto x = on(be, uniform(n, 14)), dout = on(be, uniform(n, 15));
        DeviceArray<float> y = nans(be, n), dx = nans(be, n);
        DeviceArray<uint8_t> keep(be, n);
        DeviceArray<uint64_t> seeds;  // read from the backend's memory when the kernel runs
        seeds.upload(be, {0x5eed + uint64_t(n), 99});
        be.dropout_forward(y.data(), x.data(), keep.data(), n, p, {seeds.data(), 3, 1});
        be.dropout_backward(dx.data(), dout.data(), keep.data(), n, p);
        be.dropout_forward(x.data(), x.data(), keep.data(), n, p, {seeds.data() + 1});  // in place, another seed
        return Outs{{"out", y.download()},
                    {"keep", as_float(keep.download()), 0},
                    {"dx", dx.download()},
                    {"out in place", x.download()}};
      });
}

TEST_CASE("cuda add_bias, bias_backward, broadcast_batch and its backward") {
  struct Shape { int rows, cols; std::vector<Part> parts; int batch; };
  for (const Shape& s : {Shape{kRows, 3 * kHD, kCopyRows, kB}, Shape{kRows, kInner, kCopyRows, kB},
                         Shape{3, 5, {}, 1}, Shape{kSeg * kB, kV, {}, 1},
                         Shape{kLmKeys * kLmB, 3 * kLmHD, kLmRows, kLmB},
                         Shape{kLmSeg * kLmB, kLmInner, {}, 1}}) {
    const std::vector<float> dbias0 = uniform(s.cols, 18);
    compare(fmt::format("add_bias/bias_backward {}x{}", s.rows, s.cols), [&](Backend& be) {
      auto x = on(be, uniform(int64_t(s.rows) * s.cols, 16));
      auto bias = on(be, uniform(s.cols, 17));
      auto dbias = on(be, dbias0);  // accumulates
      be.add_bias(x.data(), bias.data(), s.rows, s.cols);
      be.bias_backward(dbias.data(), x.data(), s.rows, s.cols);
      Out xb{"x + bias", x.download()};
      if (!s.parts.empty()) xb.parts = s.parts, xb.row_size = int64_t(s.batch) * s.cols;
      return Outs{xb, {"dbias - dbias before", increment(dbias.download(), dbias0)}};
    });
  }
  struct Broadcast { int rows, B, width; };
  for (Broadcast c : {Broadcast{kMem, 1, kD}, Broadcast{kMem, kB, kD}, Broadcast{kLmMem, kLmB, kLmD}}) {
    const std::vector<float> dx0 = uniform(int64_t(c.rows) * c.width, 21);
    compare(fmt::format("broadcast_batch rows {} B {} width {}", c.rows, c.B, c.width), [&](Backend& be) {
      auto x = on(be, uniform(int64_t(c.rows) * c.width, 19));
      DeviceArray<float> out = nans(be, int64_t(c.rows) * c.B * c.width);
      be.broadcast_batch(out.data(), x.data(), c.rows, c.B, c.width);
      auto dout = on(be, uniform(int64_t(c.rows) * c.B * c.width, 20));
      auto dx = on(be, dx0);  // accumulates
      be.broadcast_batch_backward(dx.data(), dout.data(), c.rows, c.B, c.width);
      return Outs{{"out", out.download()}, {"dx - dx before", increment(dx.download(), dx0)}};
    });
  }
}

TEST_CASE("cuda embedding forward and backward (repeated ids add up)") {
  struct Case { int V, n, d; };
  for (Case c : {Case{kV, kSeg * kB, kD}, Case{kV, 5, kD}, Case{256, kSeg * kB, kD}, Case{256, 5, kD},
                 Case{kLmV, kLmSeg * kLmB, kLmD}}) {
    const std::vector<float> dtable0 = uniform(int64_t(c.V) * c.d, 25);
    compare(fmt::format("embedding V={} n={} d={}", c.V, c.n, c.d), [&](Backend& be) {
      auto id = on(be, ids(c.n, c.V, 22));
      auto table = on(be, uniform(int64_t(c.V) * c.d, 23));
      DeviceArray<float> out = nans(be, int64_t(c.n) * c.d);
      const float scale = std::sqrt(float(c.d));
      be.embedding_forward(out.data(), id.data(), table.data(), c.n, c.d, scale);
      auto dout = on(be, uniform(int64_t(c.n) * c.d, 24));
      auto dtable = on(be, dtable0);  // accumulates
      be.embedding_backward(dtable.data(), dout.data(), id.data(), c.n, c.d, scale);
      return Outs{{"out", out.download()}, {"dtable - dtable before", increment(dtable.download(), dtable0)}};
    });
  }
}

namespace {

// The cpu's LayerNorm statistics of the inputs the layernorm test makes (mean or rstd).
std::vector<float> cpu_stats(int n, int d, bool want_mean) {
  Backend& be = cpu();
  auto x = on(be, uniform(int64_t(n) * d, 26, -2.f, 3.f));
  auto w = on(be, uniform(d, 27, 0.5f, 1.5f)), b = on(be, uniform(d, 28));
  DeviceArray<float> out(be, int64_t(n) * d), mean(be, n), rstd(be, n);
  be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, d);
  return want_mean ? mean.download() : rstd.download();
}

}  // namespace

TEST_CASE("cuda layernorm forward and backward") {
  struct Shape { int n, d; std::vector<Part> parts; int batch; };
  for (const Shape& s : {Shape{kRows, kD, kCopyRows, kB}, Shape{7, 37, {}, 1}, Shape{1, 1024, {}, 1},
                         Shape{kLmKeys * kLmB, kLmD, kLmRows, kLmB}}) {
    const int64_t nd = int64_t(s.n) * s.d;
    const std::vector<float> dw0 = uniform(s.d, 30), db0 = uniform(s.d, 31);
    const std::vector<float> ref_mean_host = cpu_stats(s.n, s.d, true), ref_rstd_host = cpu_stats(s.n, s.d, false);
    compare(fmt::format("layernorm n={} d={}", s.n, s.d), [&](Backend& be) {
      auto x = on(be, uniform(nd, 26, -2.f, 3.f));
      auto w = on(be, uniform(s.d, 27, 0.5f, 1.5f)), b = on(be, uniform(s.d, 28));
      DeviceArray<float> out = nans(be, nd), mean = nans(be, s.n), rstd = nans(be, s.n);
      be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s.n, s.d);
      // Backward from the cpu's saved statistics, so that it is compared on its own.
      auto ref_mean = on(be, ref_mean_host), ref_rstd = on(be, ref_rstd_host);
      auto dout = on(be, uniform(nd, 29));
      DeviceArray<float> dx = nans(be, nd);
      auto dw = on(be, dw0), db = on(be, db0);  // accumulate
      be.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), ref_mean.data(),
                            ref_rstd.data(), w.data(), s.n, s.d);
      Outs outs{{"out", out.download()}, {"mean", mean.download()}, {"rstd", rstd.download()},
                {"dx", dx.download()}, {"dweight - dweight before", increment(dw.download(), dw0)},
                {"dbias - dbias before", increment(db.download(), db0)}};
      if (!s.parts.empty())
        for (int k : {0, 3}) outs[size_t(k)].parts = s.parts, outs[size_t(k)].row_size = int64_t(s.batch) * s.d;
      return outs;
    });
  }
}

TEST_CASE("cuda fused add_bias_relu and add_layernorm_forward (with and without the bias, out = residual)") {
  for (const bool with_bias : {false, true}) {
    compare(fmt::format("add_bias_relu, add_layernorm_forward{}", with_bias ? " with bias" : ""), [&](Backend& be) {
      const int n = kRows, d = kD;
      const int64_t nd = int64_t(n) * d;
      auto f1 = on(be, uniform(int64_t(n) * kInner, 40, -1.f, 1.f));
      auto b1 = on(be, uniform(kInner, 41));
      be.add_bias_relu(f1.data(), b1.data(), n, kInner);
      auto x = on(be, uniform(nd, 42, -2.f, 3.f)), res = on(be, uniform(nd, 43));
      auto bx = on(be, uniform(d, 44));
      auto w = on(be, uniform(d, 45, 0.5f, 1.5f)), b = on(be, uniform(d, 46));
      DeviceArray<float> out = nans(be, nd), mean = nans(be, n), rstd = nans(be, n);
      be.add_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), with_bias ? bx.data() : nullptr,
                               res.data(), w.data(), b.data(), n, d);
      // out the residual itself (the row decoding's step)
      auto x2 = on(be, uniform(nd, 42, -2.f, 3.f)), inplace = on(be, uniform(nd, 43));
      DeviceArray<float> mean2 = nans(be, n), rstd2 = nans(be, n);
      be.add_layernorm_forward(inplace.data(), mean2.data(), rstd2.data(), x2.data(), with_bias ? bx.data() : nullptr,
                               inplace.data(), w.data(), b.data(), n, d);
      return Outs{{"relu(f1 + b1)", f1.download()}, {"x + bias + residual", x.download()},
                  {"out", out.download()}, {"mean", mean.download()}, {"rstd", rstd.download()},
                  {"out, in place", inplace.download()}};
    });
  }
}

// The positions' sines and cosines: the same float argument p * inv_freq gives the same value to
// within a rounding or two (1e-6 of the largest, 1), but an inv_freq one ulp off moves the
// argument of a far position (p up to 511 here) by ~3e-5: rows are compared in blocks of near and
// far positions, and the limit asks for the same arguments as the cpu (docs/cuda.md).
TEST_CASE("cuda positional_embedding") {
  constexpr double kPositionLimit = 1e-6;
  struct Case { int klen, d; };
  for (Case c : {Case{1, kD}, Case{kQ, kD}, Case{kSeg + kQ, kD}, Case{kQ + 2 * kSeg + kMem, kD},
                 Case{kLmKeys, kLmD}, Case{kLmKeys + 2 * kLmMem, kLmD}, Case{2 * kLmKeys, kLmD}}) {
    // Row j holds position klen-1-j: the far positions come first.
    const int far = c.klen / 2;
    const std::vector<Part> rows = {{fmt::format("positions {}..{}", c.klen - 1, c.klen - far), far},
                                    {fmt::format("positions {}..0", c.klen - far - 1), c.klen - far}};
    compare(fmt::format("positional_embedding klen={} d={}", c.klen, c.d), [&](Backend& be) {
      DeviceArray<float> out = nans(be, int64_t(c.klen) * c.d);
      be.positional_embedding(out.data(), c.klen, c.d);
      return Outs{{"out", out.download(), kPositionLimit, rows, c.d}};
    });
  }
}

namespace {

// A [qlen, klen] mask (1 = blocked): causal over the mlen cached rows and the query rows, or
// random with the diagonal key (j = i + mlen) always open, so every row keeps a key.
std::vector<uint8_t> attention_mask(int qlen, int klen, bool random) {
  const int mlen = klen - qlen;
  SplitMixRng rng(32);
  std::vector<uint8_t> m(size_t(qlen) * klen);
  for (int i = 0; i < qlen; ++i)
    for (int j = 0; j < klen; ++j)
      m[size_t(i) * klen + j] = j == i + mlen ? 0 : random ? uint8_t(rng.uniform() < 0.3) : uint8_t(j > i + mlen);
  return m;
}

struct AttentionCase {
  AttentionShape s;
  bool random_mask;
  const char* where;
  std::vector<Part> rows;  // the klen key rows: the cache, then the query rows' parts
};

std::string describe(const AttentionCase& c) {
  return fmt::format("rel_attention B={} H={} Dh={} qlen={} klen={} rows [{}, {}) {} ({})", c.s.B, c.s.H,
                     c.s.Dh, c.s.qlen, c.s.klen, c.s.q_begin, c.s.q_stop(),
                     c.random_mask ? "random mask" : "causal", c.where);
}

// The parts of the computed query rows [q_begin, q_stop) (rows mlen + q_begin.. of the keys).
std::vector<Part> computed_rows(const AttentionCase& c) {
  return parts_within(c.rows, c.s.mlen() + c.s.q_begin, c.s.mlen() + c.s.q_stop());
}

// Rows [q_begin, q_stop) of out [qlen, B, HD] and of prob [B, H, qlen, klen]: only they are
// computed.
std::vector<float> computed_out(const std::vector<float>& out, const AttentionShape& s) {
  const int64_t row = int64_t(s.B) * s.H * s.Dh;
  return std::vector<float>(out.begin() + s.q_begin * row, out.begin() + s.q_stop() * row);
}
std::vector<float> computed_prob(const std::vector<float>& prob, const AttentionShape& s) {
  std::vector<float> kept;
  for (int bh = 0; bh < s.B * s.H; ++bh)
    for (int i = s.q_begin; i < s.q_stop(); ++i) {
      auto row = prob.begin() + (int64_t(bh) * s.qlen + i) * s.klen;
      kept.insert(kept.end(), row, row + s.klen);
    }
  return kept;
}

// The computed probabilities compared per (part of the query rows, part of the keys): the
// attention paid to the memory or the cache is not hidden by the rest, and a block the mask
// closes must be exactly 0.
bool close_prob(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got,
                const AttentionCase& c) {
  const std::vector<Part> queries = computed_rows(c);
  int nq = 0;
  for (const Part& p : queries) nq += p.rows;
  std::vector<std::string> names;
  for (const Part& q : queries)
    for (const Part& k : c.rows) names.push_back("queries " + q.name + ", keys " + k.name);
  const int64_t klen = c.s.klen;
  return close_blocks(what, ref, got, kKernelLimit, names, [&](size_t i) {
    const int64_t key = int64_t(i) % klen, query = (int64_t(i) / klen) % nq;
    return part_of_row(queries, query) * int(c.rows.size()) + part_of_row(c.rows, key);
  });
}

struct AttentionInputs {
  DeviceArray<float> qkv, r, u, v;
  DeviceArray<uint8_t> mask;
  AttentionInputs(Backend& be, const AttentionCase& c) {
    const AttentionShape& s = c.s;
    const int64_t HD = int64_t(s.H) * s.Dh;
    qkv = on(be, uniform(int64_t(s.klen) * s.B * 3 * HD, 33));
    r = on(be, uniform(s.klen * HD, 34));
    u = on(be, uniform(HD, 35));
    v = on(be, uniform(HD, 36));
    mask = on(be, attention_mask(s.qlen, s.klen, c.random_mask));
  }
};

// The cpu's saved probabilities for a case (backward is compared from the same ones).
std::vector<float> cpu_prob(const AttentionCase& c) {
  Backend& be = cpu();
  AttentionInputs in(be, c);
  const AttentionShape& s = c.s;
  DeviceArray<float> out(be, int64_t(s.qlen) * s.B * s.H * s.Dh), prob(be, int64_t(s.B) * s.H * s.qlen * s.klen);
  be.fill(prob.data(), prob.size(), 0.f);
  be.rel_attention_forward(out.data(), prob.data(), in.qkv.data(), in.r.data(), in.u.data(),
                           in.v.data(), in.mask.data(), s, 1.f / std::sqrt(float(s.Dh)));
  return prob.download();
}

}  // namespace

TEST_CASE("cuda rel_attention forward and backward at the copy model's and the language model's shapes") {
  auto shape = [](int qlen, int klen, int q_begin = 0, int q_end = 0) {
    AttentionShape s{kB, kH, kDh, qlen, klen};
    s.q_begin = q_begin, s.q_end = q_end;
    return s;
  };
  const Part cache{"cache", kSeg}, read{"read memory", kMem}, tokens{"tokens", kSeg}, write{"write memory", kMem};
  const Part lm_cache{"cache", kLmCache}, lm_read{"read memory", kLmMem}, lm_tokens{"tokens", kLmSeg},
      lm_write{"write memory", kLmMem};
  const std::vector<AttentionCase> cases = {
      {shape(kQ, kQ), true, "rmt segment: read, tokens, write", {read, tokens, write}},
      {shape(kSeg, 2 * kSeg), false, "xl: a cached segment", {cache, tokens}},
      {shape(kQ, kQ + kSeg), true, "xl_rmt", {cache, read, tokens, write}},
      {shape(kQ, kQ, kMem, kMem + kSeg), true, "last layer: token rows only", {read, tokens, write}},
      {shape(kSeg, kSeg), false, "baseline", {tokens}},
      {AttentionShape{3, 2, 5, 7, 11}, true, "odd sizes", {{"cache", 4}, {"rows", 7}}},
      {AttentionShape{kLmB, kLmH, kLmDh, kLmSeg, kLmKeys}, false, "LM xl: 128 rows after a cache of 128",
       {lm_cache, lm_tokens}},
      {AttentionShape{kLmB, kLmH, kLmDh, kLmMem + kLmSeg + kLmMem, kLmMem + kLmSeg + kLmMem}, true,
       "LM rmt: 128 rows between 10 memory tokens", {lm_read, lm_tokens, lm_write}},
      {AttentionShape{kLmB, kLmH, kLmDh, kLmMem + kLmSeg + kLmMem, kLmCache + kLmMem + kLmSeg + kLmMem}, true,
       "LM xl_rmt", {lm_cache, lm_read, lm_tokens, lm_write}},
  };
  for (const AttentionCase& c : cases) {
    const AttentionShape& s = c.s;
    const int64_t HD = int64_t(s.H) * s.Dh;
    const float scale = 1.f / std::sqrt(float(s.Dh));
    const std::string forward = describe(c) + " forward";
    std::vector<float> ref_out, ref_prob;
    for (Backend* be : {&cpu(), &nan_filled_gpu()}) {
      AttentionInputs in(*be, c);
      DeviceArray<float> out = nans(*be, int64_t(s.qlen) * s.B * HD);
      DeviceArray<float> prob = nans(*be, int64_t(s.B) * s.H * s.qlen * s.klen);
      be->rel_attention_forward(out.data(), prob.data(), in.qkv.data(), in.r.data(), in.u.data(),
                                in.v.data(), in.mask.data(), s, scale);
      if (be == &cpu()) {
        ref_out = computed_out(out.download(), s), ref_prob = computed_prob(prob.download(), s);
        continue;
      }
      CAPTURE(forward);
      CHECK(close_rows(forward + ": out", ref_out, computed_out(out.download(), s), kKernelLimit,
                       computed_rows(c), int64_t(s.B) * HD));
      CHECK(close_prob(forward + ": prob", ref_prob, computed_prob(prob.download(), s), c));
    }
    const std::vector<float> prob_host = cpu_prob(c);
    const std::vector<float> dr0 = uniform(s.klen * HD, 38), du0 = uniform(HD, 39), dv0 = uniform(HD, 40);
    compare(describe(c) + " backward", [&](Backend& be) {
      AttentionInputs in(be, c);
      auto prob = on(be, prob_host);
      auto dout = on(be, uniform(int64_t(s.qlen) * s.B * HD, 37));
      DeviceArray<float> dqkv = nans(be, int64_t(s.klen) * s.B * 3 * HD);
      auto dr = on(be, dr0), du = on(be, du0), dv = on(be, dv0);  // dr, du, dv accumulate
      be.rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), dout.data(), prob.data(),
                                in.qkv.data(), in.r.data(), in.u.data(), in.v.data(), s, scale);
      return Outs{{"dqkv", dqkv.download(), kKernelLimit, c.rows, int64_t(s.B) * 3 * HD},
                  {"dr - dr before", increment(dr.download(), dr0)},
                  {"du - du before", increment(du.download(), du0)},
                  {"dv - dv before", increment(dv.download(), dv0)}};
    });
  }
}

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

// ARMT's associative memory (docs/armt.md) at a CPU-scale model's shapes (d_model 128, d_mem 16:
// keys of 96, 24 memory tokens after 24 tokens, batch 32) and odd ones. Not yet run on a GPU:
// `rmt train --device cuda` refuses armt until this case has passed on one (docs/cuda.md).
TEST_CASE("cuda armt: dpfp, associative read and delta-rule write, forward and backward") {
  struct Shape { int rows, B, dm, d, m; };
  for (Shape s : {Shape{3, 2, 3, 5, 2}, Shape{2 * kSeg, kB, 16, kD, kMem}}) {
    const int Dk = 6 * s.dm;
    const int64_t n = int64_t(s.rows) * s.B;
    const std::vector<float> dphi0 = uniform(n * Dk, 74), dA0 = uniform(int64_t(s.B) * Dk * s.d, 75),
                             dz0 = uniform(int64_t(s.B) * Dk, 76);
    compare(fmt::format("armt rows {} B {} d_mem {} d {} m {}", s.rows, s.B, s.dm, s.d, s.m), [&](Backend& be) {
      auto x = on(be, uniform(n * s.dm, 70));
      auto A = on(be, uniform(int64_t(s.B) * Dk * s.d, 71));
      auto z = on(be, uniform(int64_t(s.B) * Dk, 72, 0.1f, 1.f));
      auto dout = on(be, uniform(n * s.d, 73));
      auto v = on(be, uniform(int64_t(s.m) * s.B * s.d, 77));
      auto bl = on(be, uniform(int64_t(s.m) * s.B, 78));
      DeviceArray<float> phi = nans(be, n * Dk), out = nans(be, n * s.d), den = nans(be, n), dx = nans(be, n * s.dm);
      be.dpfp_forward(phi.data(), x.data(), n, s.dm);
      auto dphi_in = on(be, dphi0), dA_in = on(be, dA0), dz_in = on(be, dz0);  // the write's dA, dz
      be.dpfp_backward(dx.data(), dphi_in.data(), x.data(), n, s.dm);
      be.assoc_read_forward(out.data(), den.data(), phi.data(), A.data(), z.data(), s.rows, s.B, Dk, s.d, 1e-5f);
      auto dphi = on(be, dphi0), dA = on(be, dA0), dz = on(be, dz0);  // accumulate
      be.assoc_read_backward(dphi.data(), dA.data(), dz.data(), dout.data(), out.data(), den.data(), phi.data(),
                             A.data(), z.data(), s.rows, s.B, Dk, s.d);
      const int64_t nA = int64_t(s.B) * Dk * s.d, nz = int64_t(s.B) * Dk, mj = int64_t(s.m) * s.B;
      DeviceArray<float> Ao = nans(be, nA), zo = nans(be, nz), A1 = nans(be, nA), z1 = nans(be, nz),
                         dk = nans(be, mj * Dk), dv = nans(be, mj * s.d), db = nans(be, mj);
      be.assoc_write_forward(Ao.data(), zo.data(), A.data(), z.data(), phi.data(), v.data(), out.data(), den.data(),
                             bl.data(), s.m, s.B, Dk, s.d, 1e-5f);
      be.assoc_write_forward(A1.data(), z1.data(), nullptr, nullptr, phi.data(), v.data(), nullptr, nullptr,
                             bl.data(), s.m, s.B, Dk, s.d, 1e-5f);
      be.assoc_write_backward(dk.data(), dv.data(), db.data(), dA_in.data(), dz_in.data(), phi.data(),
                              v.data(), out.data(), den.data(), bl.data(), s.m, s.B, Dk, s.d, 1e-5f);
      return Outs{{"dpfp", phi.download()},
                  {"dpfp dx", dx.download()},
                  {"read out", out.download()},
                  {"read den", den.download()},
                  {"read dphi - before", increment(dphi.download(), dphi0)},
                  {"read dA - before", increment(dA.download(), dA0)},
                  {"read dz - before", increment(dz.download(), dz0)},
                  {"write A", Ao.download()},
                  {"write z", zo.download()},
                  {"first write A", A1.download()},
                  {"first write z", z1.download()},
                  {"write dkey", dk.download()},
                  {"write dv", dv.download()},
                  {"write dblogit", db.download()}};
    });
  }
}
