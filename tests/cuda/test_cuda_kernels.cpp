// Every Backend kernel on the cuda backend against the cpu backend, at random inputs and the
// shapes of the paper's copy model (4 layers, 4 heads x 64, d_model 128, d_inner 256, batch 32,
// 3 segments of 24 with 24 memory tokens): this proves the launches, the drivers and the cuBLAS
// mappings on the device. max |diff| / max |ref| <= 1e-5 per output (masks and ids: exact).
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

struct Out {
  std::string name;
  std::vector<float> values;
  double limit = kKernelLimit;  // 0: exact
};
using Outs = std::vector<Out>;

template <typename T>
std::vector<float> as_float(const std::vector<T>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// Runs `kernel` on each backend (it builds its inputs from fixed seeds, so both get the same) and
// compares every output it returns.
void compare(const std::string& what, const std::function<Outs(Backend&)>& kernel) {
  CAPTURE(what);
  const Outs ref = kernel(cpu());
  const Outs got = kernel(gpu());
  REQUIRE(ref.size() == got.size());
  for (size_t i = 0; i < ref.size(); ++i)
    CHECK(close(what + ": " + ref[i].name, ref[i].values, got[i].values, ref[i].limit));
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
};

// The model's products at the copy shapes (forward, and both backward products), and odd sizes.
const std::vector<Gemm> kGemms = {
    {37, 53, 29, "odd sizes"},
    {1, 1, 1, "1x1x1"},
    {1, 300, 7, "one row"},
    {kRows, 3 * kHD, kD, "qkv projection"},
    {kRows, kD, kInner, "feed-forward out"},
    {kInner, kD, kRows, "weight gradient over the rows"},
    {kQ, kHD, kD, "r projection of the positions"},
    {kSeg * kB, kV, kD, "tied output layer"},
};

void check_matmul(bool ta, bool tb, const Gemm& g, float alpha, float beta) {
  const std::string what = fmt::format("matmul {}{} {}x{}x{} ({}) alpha {} beta {}", ta ? 'T' : 'N',
                                       tb ? 'T' : 'N', g.M, g.N, g.K, g.where, alpha, beta);
  compare(what, [&](Backend& be) {
    auto A = on(be, uniform(int64_t(g.M) * g.K, 1));
    auto B = on(be, uniform(int64_t(g.K) * g.N, 2));
    // beta 0: C holds NaN, which must not reach the result; else C holds values to scale.
    DeviceArray<float> C = beta == 0.f ? nans(be, int64_t(g.M) * g.N)
                                       : on(be, uniform(int64_t(g.M) * g.N, 3));
    be.matmul(C.data(), A.data(), B.data(), g.M, g.N, g.K, ta, tb, alpha, beta);
    return Outs{{"C", C.download()}};
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
  // key/value columns of the qkv projection); what lies outside the blocks must stay as it was.
  struct Case {
    int M, N, K, pad_c, pad_a, pad_b, col_c, col_a, col_b;
  };
  for (const Case& c : {Case{37, 29, 23, 5, 7, 3, 2, 4, 1},
                        Case{kQ * kB, kHD, kDh, kHD, 2 * kHD, 2 * kHD, 0, kHD, 2 * kHD},
                        Case{kSeg, kQ + kSeg, kDh, 0, 3 * kHD - kDh, 3 * kHD - kDh, 0, 0, kHD}})
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
          compare(what, [&](Backend& be) {
            auto A = on(be, uniform(int64_t(rows_a) * lda, 5));
            auto B = on(be, uniform(int64_t(rows_b) * ldb, 6));
            auto C = on(be, uniform(int64_t(c.M) * ldc, 7));
            be.matmul_strided(C.data() + c.col_c, ldc, A.data() + c.col_a, lda, B.data() + c.col_b,
                              ldb, c.M, c.N, c.K, ta, tb, 0.75f, beta);
            return Outs{{"C (whole buffer)", C.download()}};
          });
        }
}

// ---- element-wise and row kernels ------------------------------------------------------------

TEST_CASE("cuda fill, fill_bytes, scale, add_inplace, relu") {
  for (int64_t n : {int64_t(1), int64_t(1000003), int64_t(kRows) * kInner}) {
    compare(fmt::format("fill and fill_bytes n={}", n), [&](Backend& be) {
      DeviceArray<float> x(be, n);
      be.fill(x.data(), n, 0.375f);
      DeviceArray<uint8_t> m(be, n);
      be.fill_bytes(m.data(), 7, size_t(n));
      return Outs{{"fill", x.download()}, {"fill_bytes", as_float(m.download()), 0}};
    });
    compare(fmt::format("scale and add_inplace n={}", n), [&](Backend& be) {
      auto x = on(be, uniform(n, 10)), y = on(be, uniform(n, 11));
      be.scale(x.data(), n, -0.3f);
      be.add_inplace(y.data(), x.data(), n);
      return Outs{{"scale", x.download()}, {"add_inplace", y.download()}};
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
  for (int64_t n : {int64_t(7), int64_t(kRows) * kInner + 3})
    for (float p : {0.1f, 0.5f})
      compare(fmt::format("dropout n={} p={}", n, p), [&](Backend& be) {
        auto x = on(be, uniform(n, 14)), dout = on(be, uniform(n, 15));
        DeviceArray<float> y = nans(be, n), dx = nans(be, n);
        DeviceArray<uint8_t> keep(be, n);
        be.dropout_forward(y.data(), x.data(), keep.data(), n, p, 0x5eed + uint64_t(n));
        be.dropout_backward(dx.data(), dout.data(), keep.data(), n, p);
        be.dropout_forward(x.data(), x.data(), keep.data(), n, p, 99);  // in place, another seed
        return Outs{{"out", y.download()},
                    {"keep", as_float(keep.download()), 0},
                    {"dx", dx.download()},
                    {"out in place", x.download()}};
      });
}

TEST_CASE("cuda add_bias, bias_backward, broadcast_batch and its backward") {
  struct Shape { int rows, cols; };
  for (Shape s : {Shape{kRows, 3 * kHD}, Shape{kRows, kInner}, Shape{3, 5}, Shape{kSeg * kB, kV}})
    compare(fmt::format("add_bias/bias_backward {}x{}", s.rows, s.cols), [&](Backend& be) {
      auto x = on(be, uniform(int64_t(s.rows) * s.cols, 16));
      auto bias = on(be, uniform(s.cols, 17));
      auto dbias = on(be, uniform(s.cols, 18));  // accumulates
      be.add_bias(x.data(), bias.data(), s.rows, s.cols);
      be.bias_backward(dbias.data(), x.data(), s.rows, s.cols);
      return Outs{{"x + bias", x.download()}, {"dbias", dbias.download()}};
    });
  for (int B : {1, kB})
    compare(fmt::format("broadcast_batch rows {} B {} width {}", kMem, B, kD), [&](Backend& be) {
      auto x = on(be, uniform(int64_t(kMem) * kD, 19));
      DeviceArray<float> out = nans(be, int64_t(kMem) * B * kD);
      be.broadcast_batch(out.data(), x.data(), kMem, B, kD);
      auto dout = on(be, uniform(int64_t(kMem) * B * kD, 20));
      auto dx = on(be, uniform(int64_t(kMem) * kD, 21));  // accumulates
      be.broadcast_batch_backward(dx.data(), dout.data(), kMem, B, kD);
      return Outs{{"out", out.download()}, {"dx", dx.download()}};
    });
}

TEST_CASE("cuda embedding forward and backward (repeated ids add up)") {
  for (int V : {kV, 256})
    for (int n : {kSeg * kB, 5})
      compare(fmt::format("embedding V={} n={} d={}", V, n, kD), [&](Backend& be) {
        auto id = on(be, ids(n, V, 22));
        auto table = on(be, uniform(int64_t(V) * kD, 23));
        DeviceArray<float> out = nans(be, int64_t(n) * kD);
        const float scale = std::sqrt(float(kD));
        be.embedding_forward(out.data(), id.data(), table.data(), n, kD, scale);
        auto dout = on(be, uniform(int64_t(n) * kD, 24));
        auto dtable = on(be, uniform(int64_t(V) * kD, 25));  // accumulates
        be.embedding_backward(dtable.data(), dout.data(), id.data(), n, kD, scale);
        return Outs{{"out", out.download()}, {"dtable", dtable.download()}};
      });
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
  struct Shape { int n, d; };
  for (Shape s : {Shape{kRows, kD}, Shape{7, 37}, Shape{1, 1024}})
    compare(fmt::format("layernorm n={} d={}", s.n, s.d), [&](Backend& be) {
      const int64_t nd = int64_t(s.n) * s.d;
      auto x = on(be, uniform(nd, 26, -2.f, 3.f));
      auto w = on(be, uniform(s.d, 27, 0.5f, 1.5f)), b = on(be, uniform(s.d, 28));
      DeviceArray<float> out = nans(be, nd), mean = nans(be, s.n), rstd = nans(be, s.n);
      be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s.n, s.d);
      // Backward from the cpu's saved statistics, so that it is compared on its own.
      auto ref_mean = on(be, cpu_stats(s.n, s.d, true)), ref_rstd = on(be, cpu_stats(s.n, s.d, false));
      auto dout = on(be, uniform(nd, 29));
      DeviceArray<float> dx = nans(be, nd);
      auto dw = on(be, uniform(s.d, 30)), db = on(be, uniform(s.d, 31));  // accumulate
      be.layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), ref_mean.data(),
                            ref_rstd.data(), w.data(), s.n, s.d);
      return Outs{{"out", out.download()}, {"mean", mean.download()}, {"rstd", rstd.download()},
                  {"dx", dx.download()}, {"dweight", dw.download()}, {"dbias", db.download()}};
    });
}

TEST_CASE("cuda positional_embedding") {
  for (int klen : {1, kQ, kSeg + kQ, kQ + 2 * kSeg + kMem})
    compare(fmt::format("positional_embedding klen={} d={}", klen, kD), [&](Backend& be) {
      DeviceArray<float> out = nans(be, int64_t(klen) * kD);
      be.positional_embedding(out.data(), klen, kD);
      return Outs{{"out", out.download()}};
    });
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
};

std::string describe(const AttentionCase& c) {
  return fmt::format("rel_attention B={} H={} Dh={} qlen={} klen={} rows [{}, {}) {} ({})", c.s.B, c.s.H,
                     c.s.Dh, c.s.qlen, c.s.klen, c.s.q_begin, c.s.q_stop(),
                     c.random_mask ? "random mask" : "causal", c.where);
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

TEST_CASE("cuda rel_attention forward and backward at the model's shapes") {
  auto shape = [](int qlen, int klen, int q_begin = 0, int q_end = 0) {
    AttentionShape s{kB, kH, kDh, qlen, klen};
    s.q_begin = q_begin, s.q_end = q_end;
    return s;
  };
  const std::vector<AttentionCase> cases = {
      {shape(kQ, kQ), true, "rmt segment: read, tokens, write"},
      {shape(kSeg, 2 * kSeg), false, "xl: a cached segment"},
      {shape(kQ, kQ + kSeg), true, "xl_rmt"},
      {shape(kQ, kQ, kMem, kMem + kSeg), true, "last layer: token rows only"},
      {shape(kSeg, kSeg), false, "baseline"},
      {AttentionShape{3, 2, 5, 7, 11}, true, "odd sizes"},
  };
  for (const AttentionCase& c : cases) {
    const AttentionShape& s = c.s;
    const int64_t HD = int64_t(s.H) * s.Dh;
    const float scale = 1.f / std::sqrt(float(s.Dh));
    compare(describe(c) + " forward", [&](Backend& be) {
      AttentionInputs in(be, c);
      DeviceArray<float> out = nans(be, int64_t(s.qlen) * s.B * HD);
      DeviceArray<float> prob = nans(be, int64_t(s.B) * s.H * s.qlen * s.klen);
      be.rel_attention_forward(out.data(), prob.data(), in.qkv.data(), in.r.data(), in.u.data(),
                               in.v.data(), in.mask.data(), s, scale);
      return Outs{{"out", computed_out(out.download(), s)}, {"prob", computed_prob(prob.download(), s)}};
    });
    const std::vector<float> prob_host = cpu_prob(c);
    compare(describe(c) + " backward", [&](Backend& be) {
      AttentionInputs in(be, c);
      auto prob = on(be, prob_host);
      auto dout = on(be, uniform(int64_t(s.qlen) * s.B * HD, 37));
      DeviceArray<float> dqkv = nans(be, int64_t(s.klen) * s.B * 3 * HD);
      auto dr = on(be, uniform(s.klen * HD, 38));  // dr, du, dv accumulate
      auto du = on(be, uniform(HD, 39)), dv = on(be, uniform(HD, 40));
      be.rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), dout.data(), prob.data(),
                                in.qkv.data(), in.r.data(), in.u.data(), in.v.data(), s, scale);
      return Outs{{"dqkv", dqkv.download()}, {"dr", dr.download()}, {"du", du.download()},
                  {"dv", dv.download()}};
    });
  }
}

TEST_CASE("cuda cross_entropy (ignored targets, with and without dlogits)") {
  for (int V : {kV, 256})
    for (int n : {kSeg * kB, 3})
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

TEST_CASE("cuda sum_squares (one double read back) and adam_update") {
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000003), int64_t(kRows) * kInner}) {
    const std::vector<float> x = uniform(n, 43);
    const double ref = cpu().sum_squares(on(cpu(), x).data(), n);
    const double got = gpu().sum_squares(on(gpu(), x).data(), n);
    CHECK(close_scalar(fmt::format("sum_squares n={}", n), ref, got, kKernelLimit));
    if (n == 0) CHECK(got == 0.0);
  }
  for (int64_t t : {int64_t(1), int64_t(7)})
    compare(fmt::format("adam_update n=1000003 t={}", t), [&](Backend& be) {
      const int64_t n = 1000003;
      auto p = on(be, uniform(n, 44)), g = on(be, uniform(n, 45, -1e-3f, 1e-3f));
      auto m = on(be, uniform(n, 46, -1e-3f, 1e-3f)), v = on(be, uniform(n, 47, 0.f, 1e-6f));
      be.adam_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, t);
      return Outs{{"param", p.download()}, {"m", m.download()}, {"v", v.download()}};
    });
}
