// The CUDA backend's relative attention drivers (lib/cuda/attention_kernels.h), run on the host
// through rmt::cuda::HostExec, against the CPU backend's kernels on the same inputs: every
// output tensor within max |diff| / max |ref| <= 1e-5, and the same bits whichever order the
// items of a pass run in (an item reading what another item of its pass writes would show).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/cuda/attention_kernels.h"
#include "lib/cuda/host_exec.h"
#include "tests/random_vectors.h"

using namespace rmt;
using Vec = std::vector<float>;
using Mask = std::vector<uint8_t>;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();


// The engine's attention mask (lib/core/engine.cpp, docs/paper.md §2), 1 = blocked, keys
// [cache | read | tokens | write]: causal, the read block sees itself, the write block sees
// itself (the keys after a row: the shift's wrap-around), both see the cache or not.
Mask rmt_mask(int q, int mlen, int m_read, int m_write, bool read_from_cache) {
  const int klen = q + mlen;
  Mask mask((size_t)q * klen);
  for (int i = 0; i < q; ++i)
    for (int j = 0; j < klen; ++j) mask[(size_t)i * klen + j] = j > i + mlen;
  for (int i = 0; i < m_read; ++i) {
    for (int j = 0; j < m_read; ++j) mask[(size_t)i * klen + mlen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[(size_t)i * klen + j] = !read_from_cache;
  }
  for (int i = q - m_write; i < q; ++i) {
    for (int j = klen - m_write; j < klen; ++j) mask[(size_t)i * klen + j] = 0;
    for (int j = 0; j < mlen; ++j) mask[(size_t)i * klen + j] = !read_from_cache;
  }
  return mask;
}

Mask causal_mask(int qlen, int mlen) { return rmt_mask(qlen, mlen, 0, 0, true); }

// Visible keys past the zero column (j > i+mlen+1): scores that read the next row's BD.
int wrapped_visible(const Mask& mask, int qlen, int klen) {
  const int mlen = klen - qlen;
  int n = 0;
  for (int i = 0; i < qlen; ++i)
    for (int j = i + mlen + 2; j < klen; ++j) n += !mask[(size_t)i * klen + j];
  return n;
}

// Outputs of one forward + backward.
struct Result {
  Vec out, prob, dqkv, dr, du, dv;
};

struct Inputs {
  Vec qkv, r, u, v, dout, dr0, du0, dv0;
};

Inputs make_inputs(const AttentionShape& s, uint32_t seed) {
  const int HD = s.H * s.Dh;
  Inputs in;
  in.qkv = randn((size_t)s.klen * s.B * 3 * HD, 0.7f, seed);
  in.r = randn((size_t)s.klen * HD, 0.7f, seed + 1);
  in.u = randn(HD, 0.5f, seed + 2);
  in.v = randn(HD, 0.5f, seed + 3);
  in.dout = randn((size_t)s.qlen * s.B * HD, 1.f, seed + 4);
  // Rows outside the range: neither backward may read them.
  for (int i = 0; i < s.qlen; ++i)
    if (i < s.q_begin || i >= s.q_stop())
      std::fill(in.dout.begin() + (size_t)i * s.B * HD, in.dout.begin() + (size_t)(i + 1) * s.B * HD,
                kNaN);
  // dr, du, dv accumulate onto these
  in.dr0 = randn(in.r.size(), 0.5f, seed + 5);
  in.du0 = randn(HD, 0.5f, seed + 6);
  in.dv0 = randn(HD, 0.5f, seed + 7);
  return in;
}

// prob as the backward reads it: rows outside the range NaN (never read).
Vec prob_for_backward(const Vec& prob, const AttentionShape& s) {
  Vec p = prob;
  for (int bh = 0; bh < s.B * s.H; ++bh)
    for (int i = 0; i < s.qlen; ++i)
      if (i < s.q_begin || i >= s.q_stop())
        std::fill(p.begin() + ((size_t)bh * s.qlen + i) * s.klen,
                  p.begin() + ((size_t)bh * s.qlen + i + 1) * s.klen, kNaN);
  return p;
}

// Forward, then backward from `bwd_prob` (null: this run's own prob). out and prob start as 7
// everywhere (rows outside the range must keep it), dqkv as NaN (overwritten everywhere).
template <class Forward, class Backward>
Result run(const AttentionShape& s, const Mask& mask, const Inputs& in, float scale,
           const Vec* bwd_prob, Forward forward, Backward backward) {
  const int HD = s.H * s.Dh;
  Result res;
  res.out.assign((size_t)s.qlen * s.B * HD, 7.f);
  res.prob.assign((size_t)s.B * s.H * s.qlen * s.klen, 7.f);
  forward(res.out.data(), res.prob.data(), in.qkv.data(), in.r.data(), in.u.data(), in.v.data(),
          mask.data(), s, scale);
  const Vec p = prob_for_backward(bwd_prob ? *bwd_prob : res.prob, s);
  res.dqkv.assign(in.qkv.size(), kNaN);
  res.dr = in.dr0, res.du = in.du0, res.dv = in.dv0;
  backward(res.dqkv.data(), res.dr.data(), res.du.data(), res.dv.data(), in.dout.data(), p.data(),
           in.qkv.data(), in.r.data(), in.u.data(), in.v.data(), s, scale);
  return res;
}

Result run_cpu(const AttentionShape& s, const Mask& mask, const Inputs& in, float scale) {
  Backend& be = cpu_backend();
  return run(
      s, mask, in, scale, nullptr,
      [&](auto... a) { be.rel_attention_forward(a...); },
      [&](auto... a) { be.rel_attention_backward(a...); });
}

Result run_host(const AttentionShape& s, const Mask& mask, const Inputs& in, float scale,
                const Vec& cpu_prob, bool reverse) {
  cuda::HostExec ex;
  ex.reverse = reverse;
  return run(
      s, mask, in, scale, &cpu_prob,
      [&](auto... a) { cuda::rel_attention_forward(ex, a...); },
      [&](auto... a) { cuda::rel_attention_backward(ex, a...); });
}

// max |got - ref| / max |ref - base| (base: what an accumulated output started from; empty for
// none). Any NaN where the reference has none fails.
double relative_error(const Vec& got, const Vec& ref, const Vec& base) {
  REQUIRE(got.size() == ref.size());
  double err = 0, mx = 0;
  for (size_t k = 0; k < ref.size(); ++k) {
    if (std::isnan(got[k]) != std::isnan(ref[k])) return std::numeric_limits<double>::infinity();
    if (std::isnan(ref[k])) continue;
    err = std::max(err, std::fabs((double)got[k] - ref[k]));
    mx = std::max(mx, std::fabs((double)ref[k] - (base.empty() ? 0.0 : base[k])));
  }
  return mx > 0 ? err / mx : err;
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

void check_attention(AttentionShape s, const Mask& mask, uint32_t seed, bool check_reverse = true) {
  INFO("B " << s.B << " H " << s.H << " Dh " << s.Dh << " qlen " << s.qlen << " klen " << s.klen
            << " rows [" << s.q_begin << ", " << s.q_stop() << ")");
  REQUIRE(mask.size() == (size_t)s.qlen * s.klen);
  const float scale = 1.f / std::sqrt((float)s.Dh);
  const Inputs in = make_inputs(s, seed);
  const Result ref = run_cpu(s, mask, in, scale);
  // The backward of both from the CPU's prob, so that each kernel is measured on its own.
  const Result got = run_host(s, mask, in, scale, ref.prob, false);
  const double tol = 1e-5;
  CHECK(relative_error(got.out, ref.out, {}) <= tol);
  CHECK(relative_error(got.prob, ref.prob, {}) <= tol);
  CHECK(relative_error(got.dqkv, ref.dqkv, {}) <= tol);
  CHECK(relative_error(got.dr, ref.dr, in.dr0) <= tol);
  CHECK(relative_error(got.du, ref.du, in.du0) <= tol);
  CHECK(relative_error(got.dv, ref.dv, in.dv0) <= tol);
  // Rows outside the range: no output, no probabilities (the 7s are still there).
  const int HD = s.H * s.Dh;
  for (int i = 0; i < s.qlen; ++i)
    if (i < s.q_begin || i >= s.q_stop()) {
      CHECK(got.out[((size_t)i * s.B) * HD] == 7.f);
      CHECK(got.prob[(size_t)i * s.klen] == 7.f);
    }
  if (check_reverse) {
    const Result back = run_host(s, mask, in, scale, ref.prob, true);
    CHECK(same_bits(back.out, got.out));
    CHECK(same_bits(back.prob, got.prob));
    CHECK(same_bits(back.dqkv, got.dqkv));
    CHECK(same_bits(back.dr, got.dr));
    CHECK(same_bits(back.du, got.du));
    CHECK(same_bits(back.dv, got.dv));
  }
}

AttentionShape rows(AttentionShape s, int q_begin, int q_end) {
  s.q_begin = q_begin, s.q_end = q_end;
  return s;
}

}  // namespace

TEST_CASE("cuda attention (host): causal, mlen = 0") {
  check_attention({2, 2, 4, 7, 7}, causal_mask(7, 0), 100);
  check_attention({1, 1, 8, 1, 1}, causal_mask(1, 0), 110);  // one row, one key
}

TEST_CASE("cuda attention (host): causal with a cache (Transformer-XL)") {
  check_attention({2, 2, 4, 7, 10}, causal_mask(7, 3), 200);
  check_attention({3, 2, 8, 5, 16}, causal_mask(5, 11), 210);  // cache longer than the segment
}

TEST_CASE("cuda attention (host): RMT masks, memory rows read the shift's wrap-around") {
  SUBCASE("read and write blocks, no cache") {
    const Mask m = rmt_mask(10, 0, 3, 3, true);
    REQUIRE(wrapped_visible(m, 10, 10) > 0);
    check_attention({2, 2, 4, 10, 10}, m, 300);
  }
  SUBCASE("read and write blocks with a cache, memory reads the cache") {
    const Mask m = rmt_mask(9, 4, 3, 3, true);
    REQUIRE(wrapped_visible(m, 9, 13) > 0);
    check_attention({2, 3, 4, 9, 13}, m, 310);
  }
  SUBCASE("memory does not read the cache") {
    const Mask m = rmt_mask(9, 4, 2, 3, false);
    REQUIRE(wrapped_visible(m, 9, 13) > 0);
    check_attention({2, 2, 5, 9, 13}, m, 320);
  }
  SUBCASE("no mask at all") {
    const Mask m(7 * 9, 0);
    check_attention({1, 3, 4, 7, 9}, m, 330);
  }
  SUBCASE("random mask, one key kept per row") {
    std::mt19937 g(7);
    Mask m(6 * 10);
    for (auto& x : m) x = g() % 2;
    for (int i = 0; i < 6; ++i) m[i * 10 + (i * 3) % 10] = 0;
    REQUIRE(wrapped_visible(m, 6, 10) > 0);
    check_attention({2, 2, 3, 6, 10}, m, 340);
  }
}

TEST_CASE("cuda attention (host): a range of query rows") {
  const AttentionShape s{3, 2, 8, 14, 17};
  const Mask m = rmt_mask(14, 3, 4, 4, true);
  check_attention(rows(s, 5, 11), m, 400);   // the last row's wrap-around reads row 11
  check_attention(rows(s, 9, 0), m, 410);    // q_end 0: up to the last row (no row past it)
  check_attention(rows(s, 13, 14), m, 420);  // the last row alone
  check_attention(rows(s, 0, 1), m, 430);    // the first row alone
}

TEST_CASE("cuda attention (host): odd sizes") {
  check_attention({3, 5, 7, 11, 16}, rmt_mask(11, 5, 2, 3, true), 500);
  check_attention({5, 3, 1, 3, 4}, rmt_mask(3, 1, 1, 1, true), 510);
}

TEST_CASE("cuda attention (host): the copy model's shape (B 32, H 4, Dh 64, 72 rows)") {
  // RMT on copy: 12 read + 48 tokens + 12 write rows; without and with a 24-row cache; the last
  // layer's range (the token rows).
  check_attention({32, 4, 64, 72, 72}, rmt_mask(72, 0, 12, 12, true), 600, false);
  check_attention(rows({32, 4, 64, 72, 96}, 12, 60), rmt_mask(72, 24, 12, 12, true), 610);
}
