// GPU suite (tests/cuda/kernel_compare.h): rel_attention forward and backward on the cuda backend
// against the cpu backend at the copy model's and the language model's shapes (rmt, xl, xl_rmt,
// baseline, a range of query rows), causal and random masks; the probabilities compared per block
// of query rows and keys.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/random.h"
#include "tests/cuda/compare.h"
#include "tests/cuda/kernel_compare.h"
#include "tests/cuda/nan_filled.h"

using namespace rmt;
using namespace rmt::cuda_test;

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
