// Kernel tests for the CPU backend, the relative attention: rel_shift against a literal
// Transformer-XL pad/reshape implementation, rel_attention forward against a naive
// double-precision reference under causal and RMT masks, its backward against central finite
// differences of a random projection loss L = sum(w * out) of the float kernel and (tighter) of
// the double reference (tests/kernel_checks.h); the same bits across runs, buffer alignments and
// thread counts, and a range of query rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/cpu_kernels.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;

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
