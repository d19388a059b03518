// GPU suite (tests/cuda/kernel_compare.h): the element-wise and row kernels on the cuda backend
// against the cpu backend: fill, scale, add_inplace, ReLU, dropout (the cpu's mask), bias,
// broadcast_batch, embedding, LayerNorm, the fused forward kernels and the positional embedding.
#include <doctest/doctest.h>

#include <cmath>
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
