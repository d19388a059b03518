// The CUDA backend's kernel drivers (lib/cuda/kernels.h) run on the host through HostExec and
// compared with the CPU backend on the same inputs: bit-identical where the driver sums in the
// CPU's order, else max |diff| / max |ref| within a stated tolerance. Every driver also runs
// with its items in reverse order and must give the same bits: an item that depended on another
// item of its pass (something a GPU would race on) shows up there.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/random.h"
#include "lib/core/positional.h"
#include "lib/cuda/assoc_kernels.h"
#include "lib/cuda/host_exec.h"
#include "lib/cuda/kernels.h"
#include "tests/cuda_host_checks.h"

using namespace rmt;
namespace cu = rmt::cuda;
using test::Buffers, test::check_bits, test::host_run;

namespace {

using Vec = std::vector<float>;
using Bytes = std::vector<uint8_t>;
using Ids = std::vector<int32_t>;

Backend& cpu() { return cpu_backend(); }

Vec randn(size_t n, float sd, uint32_t seed, float offset = 0.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, sd);
  Vec v(n);
  for (auto& x : v) x = offset + d(g);
  return v;
}

// Multiples of 1/256 in [-1, 1]: sums of a few thousand of them are exact in float, in any
// order, so chunked sums must equal the CPU's sequential ones bit for bit.
Vec dyadic(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(-256, 256);
  Vec v(n);
  for (auto& x : v) x = (float)d(g) / 256.f;
  return v;
}

Ids random_ids(size_t n, int V, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(0, V - 1);
  Ids v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// max |got - ref| <= tol * max |ref|
void check_rel(const std::string& what, const Vec& got, const Vec& ref, double tol) {
  REQUIRE(got.size() == ref.size());
  double err = 0, mag = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs((double)got[i] - (double)ref[i]));
    mag = std::max(mag, std::fabs((double)ref[i]));
  }
  INFO(what << ": max |diff| " << err << ", max |ref| " << mag);
  CHECK(std::isfinite(err));
  CHECK(err <= tol * mag);
}

}  // namespace

TEST_CASE("cuda kernels (host): fill, scale, add_inplace, relu forward/backward") {
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(72 * 32 * 128)}) {
    CAPTURE(n);
    const Vec x = randn(n, 1.f, 1), y = randn(n, 1.f, 2), g = randn(n, 1.f, 3);

    Vec ref(n, 5.f);
    cpu().fill(ref.data(), n, -0.75f);
    Buffers r = host_run({{Vec(n, 5.f)}, {}}, [&](auto& ex, Buffers& b) {
      cu::fill(ex, b.f[0].data(), n, -0.75f);
    });
    check_bits("fill", r.f[0], ref);

    ref = x;
    cpu().scale(ref.data(), n, -0.3f);
    r = host_run({{x}, {}}, [&](auto& ex, Buffers& b) { cu::scale(ex, b.f[0].data(), n, -0.3f); });
    check_bits("scale", r.f[0], ref);

    ref = y;
    cpu().add_inplace(ref.data(), x.data(), n);
    r = host_run({{y, x}, {}},
                 [&](auto& ex, Buffers& b) { cu::add_inplace(ex, b.f[0].data(), b.f[1].data(), n); });
    check_bits("add_inplace", r.f[0], ref);

    // relu: out separate and in place (out = x); backward separate and in place (dx = dout).
    Vec yref(n, 9.f);
    cpu().relu_forward(yref.data(), x.data(), n);
    r = host_run({{Vec(n, 9.f), x}, {}}, [&](auto& ex, Buffers& b) {
      cu::relu_forward(ex, b.f[0].data(), b.f[1].data(), n);
    });
    check_bits("relu_forward", r.f[0], yref);
    r = host_run({{x}, {}}, [&](auto& ex, Buffers& b) {
      cu::relu_forward(ex, b.f[0].data(), b.f[0].data(), n);
    });
    check_bits("relu_forward in place", r.f[0], yref);

    ref = Vec(n, 9.f);
    cpu().relu_backward(ref.data(), g.data(), yref.data(), n);
    r = host_run({{Vec(n, 9.f), g, yref}, {}}, [&](auto& ex, Buffers& b) {
      cu::relu_backward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), n);
    });
    check_bits("relu_backward", r.f[0], ref);
    r = host_run({{g, yref}, {}}, [&](auto& ex, Buffers& b) {
      cu::relu_backward(ex, b.f[0].data(), b.f[0].data(), b.f[1].data(), n);
    });
    check_bits("relu_backward in place", r.f[0], ref);
  }
}

TEST_CASE("cuda kernels (host): add_bias and bias_backward (one chunk, many chunks)") {
  struct Shape { int rows, cols; };
  for (Shape s : {Shape{1, 1}, Shape{3, 5}, Shape{64, 128}, Shape{65, 7}, Shape{72 * 32, 12},
                  Shape{72 * 32, 128}, Shape{1000, 512}}) {
    CAPTURE(s.rows);
    CAPTURE(s.cols);
    const size_t rc = (size_t)s.rows * s.cols;
    const Vec x = randn(rc, 1.f, 10), bias = randn(s.cols, 1.f, 11);
    Vec ref = x;
    cpu().add_bias(ref.data(), bias.data(), s.rows, s.cols);
    Buffers r = host_run({{x, bias}, {}}, [&](auto& ex, Buffers& b) {
      cu::add_bias(ex, b.f[0].data(), b.f[1].data(), s.rows, s.cols);
    });
    check_bits("add_bias", r.f[0], ref);

    // Accumulates into nonzero dbias. Random floats: within 1e-5 (the driver sums each column
    // in a fixed tree, the CPU in order; the CPU's own sequential float sum of 2304 terms is off
    // from the exact one by ~1e-6 of the largest sum, observed up to 1.6e-6 here). Dyadic values
    // (every sum exact in float): bit-identical, so terms and accumulation match.
    for (bool exact : {false, true}) {
      CAPTURE(exact);
      const Vec dy = exact ? dyadic(rc, 12) : randn(rc, 1.f, 12);
      const Vec db0 = exact ? dyadic(s.cols, 13) : randn(s.cols, 1.f, 13);
      Vec dref = db0;
      cpu().bias_backward(dref.data(), dy.data(), s.rows, s.cols);
      r = host_run({{db0, dy}, {}}, [&](auto& ex, Buffers& b) {
        cu::bias_backward(ex, b.f[0].data(), b.f[1].data(), s.rows, s.cols);
      });
      if (exact) check_bits("bias_backward", r.f[0], dref);
      else check_rel("bias_backward", r.f[0], dref, 1e-5);
    }
  }
}

TEST_CASE("cuda kernels (host): the fused add_bias_relu and add_layernorm_forward") {
  // add_bias_relu: the CPU's bits. add_layernorm_forward: the sum kept in x with the CPU's bits,
  // the LayerNorm as the driver's layernorm_forward of that sum (the same bits), also with out
  // the residual itself.
  for (int n : {1, 65, 300}) {
    CAPTURE(n);
    const int d = 96;
    const size_t nd = size_t(n) * d;
    const Vec x = randn(nd, 2.f, 80, 1.f), bias = randn(d, 1.f, 81), res = randn(nd, 1.f, 82);
    const Vec w = randn(d, 1.f, 83, 1.f), b = randn(d, 1.f, 84);
    Vec cpu_relu = x;
    cpu().add_bias_relu(cpu_relu.data(), bias.data(), n, d);
    Buffers r = host_run({{x}, {}}, [&](auto& ex, Buffers& bufs) {
      cu::add_bias_relu(ex, bufs.f[0].data(), bias.data(), n, d);
    });
    check_bits("add_bias_relu", r.f[0], cpu_relu);
    for (const bool with_bias : {false, true}) {
      CAPTURE(with_bias);
      Vec sum = x, out(nd), mean(n), rstd(n);
      cpu().add_layernorm_forward(out.data(), mean.data(), rstd.data(), sum.data(), with_bias ? bias.data() : nullptr,
                                  res.data(), w.data(), b.data(), n, d);
      Buffers fused = host_run({{x, Vec(nd, 7.f), Vec(n, 7.f), Vec(n, 7.f)}, {}}, [&](auto& ex, Buffers& bufs) {
        cu::add_layernorm_forward(ex, bufs.f[1].data(), bufs.f[2].data(), bufs.f[3].data(), bufs.f[0].data(),
                                  with_bias ? bias.data() : nullptr, res.data(), w.data(), b.data(), n, d);
      });
      check_bits("add_layernorm_forward: the sum", fused.f[0], sum);
      Buffers ln = host_run({{Vec(nd, 7.f), Vec(n, 7.f), Vec(n, 7.f)}, {}}, [&](auto& ex, Buffers& bufs) {
        cu::layernorm_forward(ex, bufs.f[0].data(), bufs.f[1].data(), bufs.f[2].data(), sum.data(), w.data(),
                              b.data(), n, d);
      });
      check_bits("add_layernorm_forward: out", fused.f[1], ln.f[0]);
      check_bits("add_layernorm_forward: mean", fused.f[2], ln.f[1]);
      check_bits("add_layernorm_forward: rstd", fused.f[3], ln.f[2]);
      check_rel("add_layernorm_forward against the cpu", fused.f[1], out, 1e-6);
      Buffers inplace = host_run({{x, res, Vec(n), Vec(n)}, {}}, [&](auto& ex, Buffers& bufs) {
        cu::add_layernorm_forward(ex, bufs.f[1].data(), bufs.f[2].data(), bufs.f[3].data(), bufs.f[0].data(),
                                  with_bias ? bias.data() : nullptr, bufs.f[1].data(), w.data(), b.data(), n, d);
      });
      check_bits("add_layernorm_forward, out the residual", inplace.f[1], fused.f[1]);
    }
  }
}

TEST_CASE("cuda kernels (host): embedding forward/backward, repeated and distinct ids") {
  struct Shape { int n, d, V; };
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 128, 12}, Shape{9, 5, 3}, Shape{50, 7, 100},
                  Shape{72 * 32, 128, 12}, Shape{300, 33, 256}}) {
    CAPTURE(s.n);
    CAPTURE(s.d);
    const float scale = std::sqrt((float)s.d);
    const Ids ids = s.V >= 50 && s.n <= s.V ? [&] {  // all distinct
      Ids v(s.n);
      for (int i = 0; i < s.n; ++i) v[i] = (i * 37) % s.V;
      return v;
    }() : random_ids(s.n, s.V, 20);
    const Vec table = randn((size_t)s.V * s.d, 1.f, 21), dout = randn((size_t)s.n * s.d, 1.f, 22);
    Vec ref((size_t)s.n * s.d);
    cpu().embedding_forward(ref.data(), ids.data(), table.data(), s.n, s.d, scale);
    Buffers r = host_run({{Vec((size_t)s.n * s.d, 3.f), table}, {}}, [&](auto& ex, Buffers& b) {
      cu::embedding_forward(ex, b.f[0].data(), ids.data(), b.f[1].data(), s.n, s.d, scale);
    });
    check_bits("embedding_forward", r.f[0], ref);

    const Vec dt0 = randn((size_t)s.V * s.d, 1.f, 23);  // accumulates
    Vec dref = dt0;
    cpu().embedding_backward(dref.data(), dout.data(), ids.data(), s.n, s.d, scale);
    r = host_run({{dt0, dout}, {}}, [&](auto& ex, Buffers& b) {
      cu::embedding_backward(ex, b.f[0].data(), b.f[1].data(), ids.data(), s.n, s.d, scale);
    });
    check_bits("embedding_backward", r.f[0], dref);
  }
}

TEST_CASE("cuda kernels (host): layernorm forward/backward") {
  struct Shape { int n, d; };
  for (Shape s : {Shape{1, 1}, Shape{1, 128}, Shape{7, 33}, Shape{64, 128}, Shape{65, 128},
                  Shape{72 * 32, 128}, Shape{100, 512}}) {
    CAPTURE(s.n);
    CAPTURE(s.d);
    const size_t nd = (size_t)s.n * s.d;
    const Vec x = randn(nd, 2.f, 30, 3.f), w = randn(s.d, 1.f, 31, 1.f), bias = randn(s.d, 1.f, 32);
    Vec out(nd), mean(s.n), rstd(s.n);
    cpu().layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(),
                            s.n, s.d);
    // Row sums in a double here, in float SIMD lanes on the CPU: within 1e-6.
    Buffers r = host_run({{Vec(nd, 7.f), Vec(s.n, 7.f), Vec(s.n, 7.f), x}, {}},
                         [&](auto& ex, Buffers& b) {
      cu::layernorm_forward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[3].data(),
                            w.data(), bias.data(), s.n, s.d);
    });
    check_rel("layernorm out", r.f[0], out, 1e-6);
    check_rel("layernorm mean", r.f[1], mean, 1e-6);
    check_rel("layernorm rstd", r.f[2], rstd, 1e-6);
    // In place (out = x) gives the same bits as out apart.
    Buffers inplace = host_run({{x, Vec(s.n), Vec(s.n)}, {}}, [&](auto& ex, Buffers& b) {
      cu::layernorm_forward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[0].data(),
                            w.data(), bias.data(), s.n, s.d);
    });
    check_bits("layernorm in place", inplace.f[0], r.f[0]);

    // Backward from the CPU's saved mean and rstd (the same inputs on both sides).
    // dweight/dbias accumulate: within 1e-5 (as bias_backward); dbias with dyadic dout:
    // bit-identical. dx: within 1e-6.
    for (bool exact : {false, true}) {
      CAPTURE(exact);
      const Vec dout = exact ? dyadic(nd, 33) : randn(nd, 1.f, 33);
      const Vec dw0 = exact ? dyadic(s.d, 34) : randn(s.d, 1.f, 34);
      const Vec db0 = exact ? dyadic(s.d, 35) : randn(s.d, 1.f, 35);
      Vec dx(nd), dw = dw0, db = db0;
      cpu().layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(),
                               mean.data(), rstd.data(), w.data(), s.n, s.d);
      auto run = [&](auto& ex, Buffers& b) {
        cu::layernorm_backward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[3].data(),
                               x.data(), mean.data(), rstd.data(), w.data(), s.n, s.d);
      };
      r = host_run({{Vec(nd, 7.f), dw0, db0, dout}, {}}, run);
      check_rel("layernorm dx", r.f[0], dx, 1e-6);
      check_rel("layernorm dweight", r.f[1], dw, 1e-5);
      if (exact) check_bits("layernorm dbias", r.f[2], db);
      else check_rel("layernorm dbias", r.f[2], db, 1e-5);
      // dx = dout (the driver reads dout in full before writing dx): the same bits.
      Buffers alias = host_run({{dout, dw0, db0}, {}}, [&](auto& ex, Buffers& b) {
        cu::layernorm_backward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[0].data(),
                               x.data(), mean.data(), rstd.data(), w.data(), s.n, s.d);
      });
      check_bits("layernorm dx = dout", alias.f[0], r.f[0]);
      check_bits("layernorm dweight, dx = dout", alias.f[1], r.f[1]);
    }
  }
}

TEST_CASE("cuda kernels (host): dropout masks and values equal the CPU's") {
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(72 * 32 * 128)}) {
    for (float p : {-0.5f, 0.f, 0.1f, 0.5f, 1.f}) {
      for (uint64_t value : {uint64_t(0), uint64_t(12345678901ull)}) {
        CAPTURE(n);
        CAPTURE(p);
        CAPTURE(value);
        const DropoutSeed seed{&value, value % 7, value % 5};  // a word in host memory, and a site
        const Vec x = randn(n, 1.f, 40), dout = randn(n, 1.f, 41);
        Vec out(n, 9.f);
        Bytes keep(n, 7);
        cpu().dropout_forward(out.data(), x.data(), keep.data(), n, p, seed);
        Buffers r = host_run({{Vec(n, 9.f), x}, {Bytes(n, 7)}}, [&](auto& ex, Buffers& b) {
          cu::dropout_forward(ex, b.f[0].data(), b.f[1].data(), b.b[0].data(), n, p, seed);
        });
        check_bits("dropout out", r.f[0], out);
        check_bits("dropout keep", r.b[0], keep);
        r = host_run({{x}, {Bytes(n, 7)}}, [&](auto& ex, Buffers& b) {  // out = x
          cu::dropout_forward(ex, b.f[0].data(), b.f[0].data(), b.b[0].data(), n, p, seed);
        });
        check_bits("dropout out = x", r.f[0], out);
        check_bits("dropout keep, out = x", r.b[0], keep);

        Vec dx(n, 9.f);
        cpu().dropout_backward(dx.data(), dout.data(), keep.data(), n, p);
        r = host_run({{Vec(n, 9.f), dout}, {}}, [&](auto& ex, Buffers& b) {
          cu::dropout_backward(ex, b.f[0].data(), b.f[1].data(), keep.data(), n, p);
        });
        check_bits("dropout dx", r.f[0], dx);
        r = host_run({{dout}, {}}, [&](auto& ex, Buffers& b) {  // dx = dout
          cu::dropout_backward(ex, b.f[0].data(), b.f[0].data(), keep.data(), n, p);
        });
        check_bits("dropout dx = dout", r.f[0], dx);
      }
    }
  }
  // The mask is not trivial: about p of a large call dropped.
  const int64_t n = 100000;
  Vec x(n, 1.f);
  Bytes keep(n);
  cu::HostExec ex;
  const uint64_t seven = 7;
  cu::dropout_forward(ex, x.data(), x.data(), keep.data(), n, 0.3f, {&seven});
  int64_t dropped = 0;
  for (uint8_t k : keep) dropped += k == 0;
  CHECK(std::fabs((double)dropped / n - 0.3) < 0.01);
}

TEST_CASE("cuda kernels (host): positional_embedding") {
  struct Shape { int klen, d; };
  for (Shape s : {Shape{1, 2}, Shape{5, 6}, Shape{72, 128}, Shape{144, 128}, Shape{3, 7},
                  Shape{1000, 64}}) {
    CAPTURE(s.klen);
    CAPTURE(s.d);
    const size_t nd = (size_t)s.klen * s.d;
    Vec ref(nd, 0.5f);  // an odd d's last column is left as it was, on both
    cpu().positional_embedding(ref.data(), s.klen, s.d);
    Buffers r = host_run({{Vec(nd, 0.5f)}, {}}, [&](auto& ex, Buffers& b) {
      cu::positional_embedding(ex, b.f[0].data(), s.klen, s.d);
    });
    check_bits("positional_embedding", r.f[0], ref);
  }
}

TEST_CASE("cuda kernels (host): the positional frequencies are powf's for the models' widths") {
  // positional_inv_freq rounds a double power once (host and device agree); for these d it is
  // also the float powf the CPU backend used before, so their runs kept their bits.
  std::vector<int> widths = {512, 1024};
  for (int d = 8; d <= 448; d += 8) widths.push_back(d);
  for (int d : widths)
    for (int i = 0; i < d / 2; ++i) {
      const float powf_value = 1.f / std::pow(10000.f, (float)(2 * i) / (float)d);
      if (rmt::positional_inv_freq(i, d) != powf_value) {
        CAPTURE(d);
        CAPTURE(i);
        CHECK(rmt::positional_inv_freq(i, d) == powf_value);
      }
    }
  CHECK(rmt::positional_inv_freq(0, 64) == 1.f);
}

TEST_CASE("cuda kernels (host): broadcast_batch and its backward") {
  struct Shape { int rows, B, width; };
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{10, 32, 128}, Shape{24, 256, 128}}) {
    CAPTURE(s.rows);
    CAPTURE(s.B);
    const size_t nx = (size_t)s.rows * s.width, nout = nx * s.B;
    const Vec x = randn(nx, 1.f, 50), dout = randn(nout, 1.f, 51), dx0 = randn(nx, 1.f, 52);
    Vec out(nout, 4.f);
    cpu().broadcast_batch(out.data(), x.data(), s.rows, s.B, s.width);
    Buffers r = host_run({{Vec(nout, 4.f), x}, {}}, [&](auto& ex, Buffers& b) {
      cu::broadcast_batch(ex, b.f[0].data(), b.f[1].data(), s.rows, s.B, s.width);
    });
    check_bits("broadcast_batch", r.f[0], out);

    Vec dx = dx0;  // accumulates
    cpu().broadcast_batch_backward(dx.data(), dout.data(), s.rows, s.B, s.width);
    r = host_run({{dx0, dout}, {}}, [&](auto& ex, Buffers& b) {
      cu::broadcast_batch_backward(ex, b.f[0].data(), b.f[1].data(), s.rows, s.B, s.width);
    });
    check_bits("broadcast_batch_backward", r.f[0], dx);
  }
}

TEST_CASE("cuda kernels (host): cross_entropy with ignored targets, with and without dlogits") {
  struct Shape { int n, V; };
  for (Shape s : {Shape{1, 1}, Shape{1, 12}, Shape{7, 3}, Shape{72 * 32, 12}, Shape{37, 256},
                  Shape{5, 1000}}) {
    CAPTURE(s.n);
    CAPTURE(s.V);
    const size_t nv = (size_t)s.n * s.V;
    Vec logits = randn(nv, 3.f, 60);
    for (int k = 0; k < s.V; ++k) logits[k] += 1000.f;  // a naive exp would overflow
    Ids t = random_ids(s.n, s.V, 61);
    for (int i = 1; i < s.n; i += 3) t[i] = i % 2 ? -1 : -100;  // ignored rows
    const float gs = 1.f / 37.f;
    Vec loss(s.n, 9.f), dl(nv, 9.f);
    cpu().cross_entropy(loss.data(), dl.data(), logits.data(), t.data(), s.n, s.V, gs);
    Buffers r = host_run({{Vec(s.n, 9.f), Vec(nv, 9.f)}, {}}, [&](auto& ex, Buffers& b) {
      cu::cross_entropy(ex, b.f[0].data(), b.f[1].data(), logits.data(), t.data(), s.n, s.V, gs);
    });
    // The row's sum of exp in a fixed tree of doubles (the CPU's: in order): within 1e-6.
    check_rel("cross_entropy loss", r.f[0], loss, 1e-6);
    check_rel("cross_entropy dlogits", r.f[1], dl, 1e-6);

    Vec eval(s.n, 9.f);  // evaluation: no dlogits
    cpu().cross_entropy(eval.data(), nullptr, logits.data(), t.data(), s.n, s.V, gs);
    r = host_run({{Vec(s.n, 9.f)}, {}}, [&](auto& ex, Buffers& b) {
      cu::cross_entropy(ex, b.f[0].data(), nullptr, logits.data(), t.data(), s.n, s.V, gs);
    });
    check_rel("cross_entropy loss without dlogits", r.f[0], eval, 1e-6);
    Buffers both = host_run({{Vec(s.n, 9.f), Vec(nv, 9.f)}, {}}, [&](auto& ex, Buffers& b) {
      cu::cross_entropy(ex, b.f[0].data(), b.f[1].data(), logits.data(), t.data(), s.n, s.V, gs);
    });
    check_bits("cross_entropy loss with and without dlogits", r.f[0], both.f[0]);
  }
}

TEST_CASE("cuda kernels (host): sum_squares within 1e-12 of the CPU's double, the same bits in any order") {
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(8191), int64_t(8192),
                    int64_t(8193), int64_t(100003), int64_t((1 << 20) + 3)}) {
    CAPTURE(n);
    const Vec x = randn(n, 1.f, 70);
    const double ref = cpu().sum_squares(x.data(), n);
    double got[2] = {-1, -1};
    for (int rev = 0; rev < 2; ++rev) {
      cu::HostExec ex;
      ex.reverse = rev;
      cu::sum_squares(ex, &got[rev], x.data(), n);
    }
    // Both sum the same double terms, the driver in a tree of blocks, the CPU in lanes.
    CHECK(std::fabs(got[0] - ref) <= 1e-12 * ref);
    CHECK(std::memcmp(&got[1], &got[0], sizeof(double)) == 0);
    if (n == 0) CHECK(got[0] == 0.0);
  }
}

TEST_CASE("cuda kernels (host): adam_update over several steps") {
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(300001)}) {
    CAPTURE(n);
    Vec p = randn(n, 1.f, 80), m(n, 0.f), v(n, 0.f);
    Buffers state{{p, m, v}, {}};
    for (int64_t t = 1; t <= 5; ++t) {
      CAPTURE(t);
      const Vec g = randn(n, t == 3 ? 1e-3f : 1.f, 81 + (uint32_t)t);
      cpu().adam_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.98f, 1e-9f, t);
      state = host_run(state, [&](auto& ex, Buffers& b) {
        cu::adam_update(ex, b.f[0].data(), g.data(), b.f[1].data(), b.f[2].data(), n, 1e-3f, 0.9f,
                        0.98f, 1e-9f, t);
      });
      check_bits("adam param", state.f[0], p);
      check_bits("adam m", state.f[1], m);
      check_bits("adam v", state.f[2], v);
    }
  }
}

// ARMT's associative memory (lib/cuda/assoc_kernels.h): every item is the CPU's expression
// (lib/core/assoc_math.h), so the results are the CPU backend's bits, in either item order.
TEST_CASE("cuda kernels (host): armt's dpfp, associative read and delta-rule write") {
  struct Shape { int rows, B, dm, d, m; };
  for (Shape s : {Shape{1, 1, 1, 1, 1}, Shape{5, 3, 4, 8, 2}, Shape{48, 8, 16, 128, 16}}) {
    CAPTURE(s.rows);
    CAPTURE(s.B);
    const int Dk = 6 * s.dm;
    const int64_t n = int64_t(s.rows) * s.B;
    const Vec x = randn(size_t(n) * s.dm, 1.f, 60), A = randn(size_t(s.B) * Dk * s.d, 1.f, 61),
              dout = randn(size_t(n) * s.d, 1.f, 63), dphi0 = randn(size_t(n) * Dk, 1.f, 64),
              dA0 = randn(A.size(), 1.f, 65), v = randn(size_t(s.m) * s.B * s.d, 1.f, 67),
              bl = randn(size_t(s.m) * s.B, 1.f, 68);
    Vec z = randn(size_t(s.B) * Dk, 1.f, 62);
    for (auto& e : z) e = std::fabs(e) + 0.1f;
    const Vec dz0 = randn(z.size(), 1.f, 66);
    // CPU reference
    Vec phi(size_t(n) * Dk), out(size_t(n) * s.d), den(static_cast<size_t>(n)), dx(x.size());
    cpu().dpfp_forward(phi.data(), x.data(), n, s.dm);
    cpu().dpfp_backward(dx.data(), dphi0.data(), x.data(), n, s.dm);
    cpu().assoc_read_forward(out.data(), den.data(), phi.data(), A.data(), z.data(), s.rows, s.B, Dk, s.d, 1e-5f);
    Vec dphi = dphi0, dA = dA0, dz = dz0;
    cpu().assoc_read_backward(dphi.data(), dA.data(), dz.data(), dout.data(), out.data(), den.data(), phi.data(),
                              A.data(), z.data(), s.rows, s.B, Dk, s.d);
    const int m = std::min(s.m, s.rows);
    Vec Ao(A.size()), zo(z.size()), A1(A.size()), z1(z.size()), dk(size_t(m) * s.B * Dk), dv(size_t(m) * s.B * s.d),
        db(size_t(m) * s.B);
    cpu().assoc_write_forward(Ao.data(), zo.data(), A.data(), z.data(), phi.data(), v.data(), out.data(), den.data(),
                              bl.data(), m, s.B, Dk, s.d, 1e-5f);
    cpu().assoc_write_forward(A1.data(), z1.data(), nullptr, nullptr, phi.data(), v.data(), nullptr, nullptr,
                              bl.data(), m, s.B, Dk, s.d, 1e-5f);
    cpu().assoc_write_backward(dk.data(), dv.data(), db.data(), dA0.data(), dz0.data(), phi.data(), v.data(),
                               out.data(), den.data(), bl.data(), m, s.B, Dk, s.d, 1e-5f);
    // the drivers on the host
    Buffers r = host_run({{Vec(phi.size(), 4.f), x, Vec(dx.size(), 4.f), dphi0}, {}}, [&](auto& ex, Buffers& b) {
      cu::dpfp_forward(ex, b.f[0].data(), b.f[1].data(), n, s.dm);
      cu::dpfp_backward(ex, b.f[2].data(), b.f[3].data(), b.f[1].data(), n, s.dm);
    });
    check_bits("dpfp_forward", r.f[0], phi);
    check_bits("dpfp_backward", r.f[2], dx);
    r = host_run({{Vec(out.size(), 4.f), Vec(den.size(), 4.f), phi, A, z, dphi0, dA0, dz0, dout}, {}},
                 [&](auto& ex, Buffers& b) {
                   cu::assoc_read_forward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[3].data(),
                                          b.f[4].data(), s.rows, s.B, Dk, s.d, 1e-5f);
                   cu::assoc_read_backward(ex, b.f[5].data(), b.f[6].data(), b.f[7].data(), b.f[8].data(),
                                           b.f[0].data(), b.f[1].data(), b.f[2].data(), b.f[3].data(),
                                           b.f[4].data(), s.rows, s.B, Dk, s.d);
                 });
    check_bits("assoc_read_forward out", r.f[0], out);
    check_bits("assoc_read_forward den", r.f[1], den);
    check_bits("assoc_read_backward dphi", r.f[5], dphi);
    check_bits("assoc_read_backward dA", r.f[6], dA);
    check_bits("assoc_read_backward dz", r.f[7], dz);
    r = host_run({{Vec(A.size(), 4.f), Vec(z.size(), 4.f), Vec(A.size(), 4.f), Vec(z.size(), 4.f),
                   Vec(dk.size(), 4.f), Vec(dv.size(), 4.f), Vec(db.size(), 4.f)}, {}},
                 [&](auto& ex, Buffers& b) {
                   cu::assoc_write_forward(ex, b.f[0].data(), b.f[1].data(), A.data(), z.data(), phi.data(), v.data(),
                                           out.data(), den.data(), bl.data(), m, s.B, Dk, s.d, 1e-5f);
                   cu::assoc_write_forward(ex, b.f[2].data(), b.f[3].data(), nullptr, nullptr, phi.data(), v.data(),
                                           nullptr, nullptr, bl.data(), m, s.B, Dk, s.d, 1e-5f);
                   cu::assoc_write_backward(ex, b.f[4].data(), b.f[5].data(), b.f[6].data(), dA0.data(), dz0.data(),
                                            phi.data(), v.data(), out.data(), den.data(), bl.data(), m, s.B, Dk,
                                            s.d, 1e-5f);
                 });
    check_bits("assoc_write_forward A", r.f[0], Ao);
    check_bits("assoc_write_forward z", r.f[1], zo);
    check_bits("assoc_write_forward A (first)", r.f[2], A1);
    check_bits("assoc_write_forward z (first)", r.f[3], z1);
    check_bits("assoc_write_backward dkey", r.f[4], dk);
    check_bits("assoc_write_backward dv", r.f[5], dv);
    check_bits("assoc_write_backward dblogit", r.f[6], db);
  }
}
