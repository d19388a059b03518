// The delta rule's kernels (Backend::delta_rule_forward / delta_rule_backward, DeltaNet and Gated
// DeltaNet, docs/deltanet.md): the forward against a literal double-precision recurrence, the
// backward against central finite differences of that reference's loss L = sum(wo * o) +
// sum(wS * S_T), with and without the gate and the initial state, T not a multiple of the chunk,
// for both forms (the recurrence, and the chunked WY form of lib/core/delta_wy.h). The
// recurrence's chunk size and the thread count change no bit; the chunked form equals the
// recurrence within rounding for any chunk; the CUDA drivers run on the host (HostExec) give the
// CPU backend's bits in either item order.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/cuda/delta_kernels.h"
#include "tests/cuda_host_checks.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;
using test::Buffers, test::check_bits, test::host_run;

namespace {

// The kernels' inputs for one shape (g, S_in empty when absent).
struct DeltaInputs {
  DeltaShape s;
  Vec q, k, v, beta, g, S_in;
  float scale;
};

DeltaInputs make_inputs(DeltaShape s, bool gated, bool with_state, uint32_t seed) {
  const size_t rows = size_t(s.T) * size_t(s.heads());
  DeltaInputs in{s, randn(rows * s.Dk, 1.f, seed), randn(rows * s.Dk, 0.5f, seed + 1),
                 randn(rows * s.Dv, 1.f, seed + 2), randn(rows, 1.f, seed + 3), {}, {},
                 1.f / std::sqrt(float(s.Dk))};
  for (auto& b : in.beta) b = 1.f / (1.f + std::exp(-b));  // beta in (0, 1), as sigmoid gives it
  if (gated) {
    in.g = randn(rows, 0.5f, seed + 4);
    for (auto& x : in.g) x = -std::fabs(x) - 0.05f;  // log decays < 0
  }
  if (with_state) in.S_in = randn(size_t(s.heads()) * s.state(), 0.5f, seed + 5);
  return in;
}

const float* or_null(const Vec& x) { return x.empty() ? nullptr : x.data(); }

// The recurrence in double, literally (lib/core/delta_math.h's equations): o [T, B, H, Dv] and
// S_T [B, H, Dk, Dv] concatenated.
DVec reference(const DeltaInputs& in) {
  const DeltaShape& s = in.s;
  const int64_t heads = s.heads(), n = s.state();
  DVec o(size_t(s.T * heads * s.Dv)), S(size_t(heads * n), 0.0);
  if (!in.S_in.empty()) std::copy(in.S_in.begin(), in.S_in.end(), S.begin());
  for (int64_t bh = 0; bh < heads; ++bh) {
    double* Sh = S.data() + bh * n;
    for (int t = 0; t < s.T; ++t) {
      const int64_t r = t * heads + bh;
      const float* q = in.q.data() + r * s.Dk;
      const float* k = in.k.data() + r * s.Dk;
      const float* v = in.v.data() + r * s.Dv;
      const double a = in.g.empty() ? 1.0 : std::exp(double(in.g[size_t(r)])), b = in.beta[size_t(r)];
      for (int j = 0; j < s.Dv; ++j) {
        double p = 0;
        for (int i = 0; i < s.Dk; ++i) p += Sh[i * s.Dv + j] * k[i];
        const double u = b * (v[j] - a * p);
        for (int i = 0; i < s.Dk; ++i) Sh[i * s.Dv + j] = a * Sh[i * s.Dv + j] + k[i] * u;
        double oj = 0;
        for (int i = 0; i < s.Dk; ++i) oj += Sh[i * s.Dv + j] * q[i];
        o[size_t(r * s.Dv + j)] = in.scale * oj;
      }
    }
  }
  o.insert(o.end(), S.begin(), S.end());
  return o;
}

struct DeltaOutputs {
  Vec o, S_out, S_chunks;
};
DeltaOutputs forward(const DeltaInputs& in, Backend& backend = be()) {
  const DeltaShape& s = in.s;
  DeltaOutputs out{Vec(size_t(s.T * s.heads() * s.Dv), NAN), Vec(size_t(s.heads() * s.state()), NAN),
                   Vec(size_t(s.chunks() * s.heads() * s.state()), NAN)};
  Vec work(size_t(s.heads() * s.forward_work_per_head()), NAN);
  backend.delta_rule_forward(out.o.data(), out.S_out.data(), out.S_chunks.data(),
                             s.wy ? work.data() : nullptr, in.q.data(),
                             in.k.data(), in.v.data(), in.beta.data(), or_null(in.g),
                             or_null(in.S_in), s, in.scale);
  return out;
}

struct DeltaGrads {
  Vec dq, dk, dv, dbeta, dg, dS_in;
};
DeltaGrads backward(const DeltaInputs& in, const DeltaOutputs& out, const Vec& dout,
                    const Vec& dS_out) {
  const DeltaShape& s = in.s;
  const size_t rows = size_t(s.T * s.heads());
  DeltaGrads g{Vec(rows * s.Dk, NAN), Vec(rows * s.Dk, NAN), Vec(rows * s.Dv, NAN),
               Vec(rows, NAN), in.g.empty() ? Vec() : Vec(rows, NAN),
               Vec(size_t(s.heads() * s.state()), NAN)};
  Vec work(size_t(s.heads() * s.work_per_head()), NAN);
  be().delta_rule_backward(g.dq.data(), g.dk.data(), g.dv.data(), g.dbeta.data(),
                           g.dg.empty() ? nullptr : g.dg.data(), g.dS_in.data(), work.data(),
                           dout.data(), or_null(dS_out), in.q.data(), in.k.data(), in.v.data(),
                           in.beta.data(), or_null(in.g), out.S_chunks.data(), s, in.scale);
  return g;
}

}  // namespace

TEST_CASE("delta rule: forward vs the double recurrence, backward vs finite differences, both forms") {
  for (bool wy : {false, true})
  for (bool gated : {false, true})
    for (bool with_state : {false, true}) {
      CAPTURE(wy);
      CAPTURE(gated);
      CAPTURE(with_state);
      // 7 rows in chunks of 3: the chunked form's last chunk is short
      DeltaInputs in = make_inputs({7, 2, 2, 3, 4, 3, wy}, gated, with_state, 10);
      const DeltaOutputs out = forward(in);
      DVec ref = reference(in);
      const size_t no = out.o.size();
      check_close("o", out.o, DVec(ref.begin(), ref.begin() + long(no)), 1e-5);
      check_close("S_T", out.S_out, DVec(ref.begin() + long(no), ref.end()), 1e-5);
      // L = sum(wo * o) + sum(wS * S_T): dout = wo, dS_out = wS.
      const Vec wo = randn(no, 1.f, 20), wS = randn(out.S_out.size(), 1.f, 21);
      auto loss = [&] {
        const DVec r = reference(in);
        double l = 0;
        for (size_t i = 0; i < r.size(); ++i) l += r[i] * (i < no ? wo[i] : wS[i - no]);
        return l;
      };
      const DeltaGrads g = backward(in, out, wo, wS);
      const double h = 1e-3, tol = 1e-3;
      check_close("dq", g.dq, fd(in.q, loss, h), tol);
      check_close("dk", g.dk, fd(in.k, loss, h), tol);
      check_close("dv", g.dv, fd(in.v, loss, h), tol);
      check_close("dbeta", g.dbeta, fd(in.beta, loss, h), tol);
      if (gated) check_close("dg", g.dg, fd(in.g, loss, h), tol);
      if (with_state) check_close("dS_in", g.dS_in, fd(in.S_in, loss, h), tol);
    }
}

TEST_CASE("delta rule: S_in null is a zero state, dS_out null a zero gradient, both forms") {
  for (bool wy : {false, true}) {
  CAPTURE(wy);
  DeltaInputs in = make_inputs({5, 1, 2, 4, 3, 2, wy}, true, false, 30);
  DeltaInputs zero = in;
  zero.S_in.assign(size_t(in.s.heads() * in.s.state()), 0.f);
  const DeltaOutputs a = forward(in), b = forward(zero);
  check_bits("o", a.o, b.o);
  check_bits("S_T", a.S_out, b.S_out);
  const Vec dout = randn(a.o.size(), 1.f, 31);
  const DeltaGrads ga = backward(in, a, dout, {}),
                   gb = backward(in, a, dout, Vec(a.S_out.size(), 0.f));
  check_bits("dk", ga.dk, gb.dk);
  check_bits("dS_in", ga.dS_in, gb.dS_in);
  }
}

TEST_CASE("delta rule: the recurrence's chunk size and the thread count change no bit") {
  const int saved = num_threads();
  for (bool gated : {false, true}) {
    CAPTURE(gated);
    const DeltaShape base{13, 3, 2, 8, 16, 1};
    const DeltaInputs in1 = make_inputs(base, gated, true, 40);
    const DeltaOutputs out1 = forward(in1);
    const Vec dout = randn(out1.o.size(), 1.f, 41), dS = randn(out1.S_out.size(), 1.f, 42);
    const DeltaGrads g1 = backward(in1, out1, dout, dS);
    for (int chunk : {2, 5, 13, 64})
      for (int threads : {1, 2}) {
        CAPTURE(chunk);
        CAPTURE(threads);
        set_num_threads(threads);
        DeltaInputs in = in1;
        in.s.chunk = chunk;
        const DeltaOutputs out = forward(in);
        check_bits("o", out.o, out1.o);
        check_bits("S_T", out.S_out, out1.S_out);
        const DeltaGrads g = backward(in, out, dout, dS);
        check_bits("dq", g.dq, g1.dq);
        check_bits("dk", g.dk, g1.dk);
        check_bits("dv", g.dv, g1.dv);
        check_bits("dbeta", g.dbeta, g1.dbeta);
        check_bits("dg", g.dg, g1.dg);
        check_bits("dS_in", g.dS_in, g1.dS_in);
      }
  }
  set_num_threads(saved);
}

TEST_CASE("delta rule: two segments carrying S compute what one does, both forms") {
  // The recurrent state is all a segment hands on: S_T of rows 0..5 as S_in of rows 6..12 (the
  // chunked form's chunks of 3 fall on the same rows either way).
  for (bool wy : {false, true}) {
  CAPTURE(wy);
  const DeltaInputs all = make_inputs({13, 2, 2, 4, 4, wy ? 3 : 4, wy}, true, true, 50);
  const DeltaOutputs whole = forward(all);
  auto rows = [&](const Vec& x, int t0, int t1, int width) {
    const int64_t w = all.s.heads() * width;
    return Vec(x.begin() + t0 * w, x.begin() + t1 * w);
  };
  DeltaInputs first = all, second = all;
  first.s.T = 6, second.s.T = 7;
  for (auto* part : {&first, &second}) {
    const int t0 = part == &first ? 0 : 6, t1 = t0 + part->s.T;
    part->q = rows(all.q, t0, t1, all.s.Dk), part->k = rows(all.k, t0, t1, all.s.Dk);
    part->v = rows(all.v, t0, t1, all.s.Dv);
    part->beta = rows(all.beta, t0, t1, 1), part->g = rows(all.g, t0, t1, 1);
  }
  const DeltaOutputs a = forward(first);
  second.S_in = a.S_out;
  const DeltaOutputs b = forward(second);
  Vec o = a.o;
  o.insert(o.end(), b.o.begin(), b.o.end());
  check_bits("o", o, whole.o);
  check_bits("S_T", b.S_out, whole.S_out);
  }
}

TEST_CASE("delta rule: the chunked form computes the recurrence's map for any chunk; threads change no bit") {
  const int saved = num_threads();
  for (bool gated : {false, true}) {
    CAPTURE(gated);
    const DeltaInputs rec = make_inputs({37, 3, 2, 8, 16, 64}, gated, true, 70);
    const DeltaOutputs out_r = forward(rec);
    const Vec dout = randn(out_r.o.size(), 1.f, 71), dS = randn(out_r.S_out.size(), 1.f, 72);
    const DeltaGrads g_r = backward(rec, out_r, dout, dS);
    for (int chunk : {1, 4, 16, 37, 64}) {
      CAPTURE(chunk);
      DeltaInputs in = rec;
      in.s.chunk = chunk, in.s.wy = true;
      set_num_threads(1);
      const DeltaOutputs out1 = forward(in);
      const DeltaGrads g1 = backward(in, out1, dout, dS);
      // the same map: equal to the recurrence up to float rounding
      const double tol = 2e-5;
      check_close("o", out1.o, DVec(out_r.o.begin(), out_r.o.end()), tol);
      check_close("S_T", out1.S_out, DVec(out_r.S_out.begin(), out_r.S_out.end()), tol);
      check_close("dq", g1.dq, DVec(g_r.dq.begin(), g_r.dq.end()), tol);
      check_close("dk", g1.dk, DVec(g_r.dk.begin(), g_r.dk.end()), tol);
      check_close("dv", g1.dv, DVec(g_r.dv.begin(), g_r.dv.end()), tol);
      check_close("dbeta", g1.dbeta, DVec(g_r.dbeta.begin(), g_r.dbeta.end()), tol);
      if (gated) check_close("dg", g1.dg, DVec(g_r.dg.begin(), g_r.dg.end()), tol);
      check_close("dS_in", g1.dS_in, DVec(g_r.dS_in.begin(), g_r.dS_in.end()), tol);
      set_num_threads(2);
      const DeltaOutputs out2 = forward(in);
      const DeltaGrads g2 = backward(in, out2, dout, dS);
      check_bits("o", out2.o, out1.o);
      check_bits("S_T", out2.S_out, out1.S_out);
      check_bits("dq", g2.dq, g1.dq);
      check_bits("dk", g2.dk, g1.dk);
      check_bits("dv", g2.dv, g1.dv);
      check_bits("dbeta", g2.dbeta, g1.dbeta);
      check_bits("dg", g2.dg, g1.dg);
      check_bits("dS_in", g2.dS_in, g1.dS_in);
    }
  }
  set_num_threads(saved);
}

TEST_CASE("cuda kernels (host): the delta rule's drivers give the CPU's bits, both forms") {
  for (bool wy : {false, true})
  for (bool gated : {false, true}) {
    CAPTURE(wy);
    CAPTURE(gated);
    const DeltaInputs in = make_inputs({9, 2, 3, 4, 6, 4, wy}, gated, true, 60);
    const DeltaOutputs out = forward(in);
    const Vec dout = randn(out.o.size(), 1.f, 61), dS = randn(out.S_out.size(), 1.f, 62);
    const DeltaGrads g = backward(in, out, dout, dS);
    const DeltaShape s = in.s;
    const size_t rows = size_t(s.T * s.heads());
    Buffers r = host_run(
        {{Vec(out.o.size(), 4.f), Vec(out.S_out.size(), 4.f), Vec(out.S_chunks.size(), 4.f),
          Vec(rows * s.Dk, 4.f), Vec(rows * s.Dk, 4.f), Vec(rows * s.Dv, 4.f), Vec(rows, 4.f),
          Vec(rows, 4.f), Vec(out.S_out.size(), 4.f), Vec(size_t(s.heads() * s.work_per_head()), 4.f),
          Vec(size_t(s.heads() * s.forward_work_per_head()), 4.f)},
         {}},
        [&](auto& ex, Buffers& b) {
          cuda::delta_rule_forward(ex, b.f[0].data(), b.f[1].data(), b.f[2].data(),
                                   wy ? b.f[10].data() : nullptr, in.q.data(),
                                   in.k.data(), in.v.data(), in.beta.data(), or_null(in.g),
                                   in.S_in.data(), s, in.scale);
          cuda::delta_rule_backward(ex, b.f[3].data(), b.f[4].data(), b.f[5].data(), b.f[6].data(),
                                    gated ? b.f[7].data() : nullptr, b.f[8].data(), b.f[9].data(),
                                    dout.data(), dS.data(), in.q.data(), in.k.data(), in.v.data(),
                                    in.beta.data(), or_null(in.g), b.f[2].data(), s, in.scale);
        });
    check_bits("o", r.f[0], out.o);
    check_bits("S_T", r.f[1], out.S_out);
    check_bits("S_chunks", r.f[2], out.S_chunks);
    check_bits("dq", r.f[3], g.dq);
    check_bits("dk", r.f[4], g.dk);
    check_bits("dv", r.f[5], g.dv);
    check_bits("dbeta", r.f[6], g.dbeta);
    if (gated) check_bits("dg", r.f[7], g.dg);
    check_bits("dS_in", r.f[8], g.dS_in);
  }
}

namespace {

// The short convolution in double, literally: y [T, B, C] then state_out [W-1, B, C].
DVec conv_reference(const ConvShape& s, const Vec& x, const Vec& w, const Vec& state, bool silu) {
  const int64_t row = s.row();
  std::vector<double> xin(size_t((s.W - 1 + s.T) * row), 0.0);
  for (int64_t i = 0; i < int64_t(state.size()); ++i) xin[size_t(i)] = state[size_t(i)];
  for (int64_t i = 0; i < int64_t(x.size()); ++i) xin[size_t((s.W - 1) * row + i)] = x[size_t(i)];
  DVec out;
  for (int t = 0; t < s.T; ++t)
    for (int64_t bc = 0; bc < row; ++bc) {
      double pre = 0;
      for (int j = 0; j < s.W; ++j) pre += double(w[size_t((bc % s.C) * s.W + j)]) * xin[size_t((t + j) * row + bc)];
      out.push_back(silu ? pre / (1 + std::exp(-pre)) : pre);
    }
  for (int r = 0; r < s.W - 1; ++r)
    for (int64_t bc = 0; bc < row; ++bc) out.push_back(xin[size_t((s.T + r) * row + bc)]);
  return out;
}

}  // namespace

TEST_CASE("short convolution: forward vs the double reference, backward vs finite differences, host drivers") {
  struct Case { ConvShape s; bool silu, with_state; };
  for (Case c : {Case{{6, 2, 3, 4}, true, true}, Case{{6, 2, 3, 4}, false, false},
                 Case{{2, 2, 3, 4}, true, true}, Case{{5, 1, 2, 1}, true, false}}) {
    const ConvShape s = c.s;
    CAPTURE(s.T);
    CAPTURE(s.W);
    CAPTURE(c.silu);
    const int64_t n = int64_t(s.T) * s.row(), ns = int64_t(s.W - 1) * s.row();
    Vec x = randn(size_t(n), 1.f, 70), w = randn(size_t(s.C * s.W), 0.7f, 71),
        state = c.with_state ? randn(size_t(ns), 1.f, 72) : Vec();
    Vec y(size_t(n), NAN), state_out(size_t(ns), NAN);
    be().short_conv_forward(y.data(), state_out.data(), x.data(), w.data(), or_null(state), s, c.silu);
    const DVec ref = conv_reference(s, x, w, state, c.silu);
    check_close("y", y, DVec(ref.begin(), ref.begin() + n), 1e-5);
    check_close("state_out", state_out, DVec(ref.begin() + n, ref.end()), 0.0);
    // L = sum(wy * y) + sum(ws * state_out)
    const Vec wy = randn(size_t(n), 1.f, 73), ws = randn(size_t(ns), 1.f, 74);
    auto loss = [&] {
      const DVec r = conv_reference(s, x, w, state, c.silu);
      double l = 0;
      for (size_t i = 0; i < r.size(); ++i) l += r[i] * (int64_t(i) < n ? wy[i] : ws[i - size_t(n)]);
      return l;
    };
    const Vec dw0 = randn(w.size(), 1.f, 75);
    Vec dx(size_t(n), NAN), dw = dw0, dstate(size_t(ns), NAN);
    be().short_conv_backward(dx.data(), dw.data(), dstate.data(), wy.data(), ws.data(), x.data(), w.data(),
                             or_null(state), s, c.silu);
    Vec dw_added(dw.size());
    for (size_t i = 0; i < dw.size(); ++i) dw_added[i] = dw[i] - dw0[i];  // accumulates
    check_close("dx", dx, fd(x, loss, 1e-3), 1e-3);
    check_close("dw", dw_added, fd(w, loss, 1e-3), 1e-3);
    if (c.with_state) check_close("dstate_in", dstate, fd(state, loss, 1e-3), 1e-3);
    // the CUDA drivers on the host: the CPU's bits in either item order
    Buffers r = host_run({{Vec(y.size(), 4.f), Vec(state_out.size(), 4.f), Vec(dx.size(), 4.f), dw0,
                           Vec(dstate.size(), 4.f)}, {}},
                         [&](auto& ex, Buffers& b) {
                           cuda::short_conv_forward(ex, b.f[0].data(), b.f[1].data(), x.data(), w.data(),
                                                    or_null(state), s, c.silu);
                           cuda::short_conv_backward(ex, b.f[2].data(), b.f[3].data(), b.f[4].data(), wy.data(),
                                                     ws.data(), x.data(), w.data(), or_null(state), s, c.silu);
                         });
    check_bits("y", r.f[0], y);
    check_bits("state_out", r.f[1], state_out);
    check_bits("dx", r.f[2], dx);
    check_bits("dw", r.f[3], dw);
    check_bits("dstate_in", r.f[4], dstate);
  }
}

TEST_CASE("short convolution: the CPU's bits are the per-item drivers' at widths past one block, any thread count") {
  // C 70 spans two of the CPU loop's channel blocks; T*B*C above its threading threshold.
  const int saved = num_threads();
  for (ConvShape s : {ConvShape{40, 9, 70, 4}, ConvShape{33, 8, 130, 2}}) {
    for (bool with_state : {true, false}) {
      CAPTURE(s.C);
      CAPTURE(with_state);
      const int64_t n = int64_t(s.T) * s.row(), ns = int64_t(s.W - 1) * s.row();
      const Vec x = randn(size_t(n), 1.f, 80), w = randn(size_t(s.C * s.W), 0.7f, 81),
                state = with_state ? randn(size_t(ns), 1.f, 82) : Vec(), wy = randn(size_t(n), 1.f, 83),
                ws = randn(size_t(ns), 1.f, 84), dw0 = randn(w.size(), 1.f, 85);
      Buffers r = host_run({{Vec(size_t(n), 4.f), Vec(size_t(ns), 4.f), Vec(size_t(n), 4.f), dw0, Vec(size_t(ns), 4.f)}, {}},
                           [&](auto& ex, Buffers& b) {
                             cuda::short_conv_forward(ex, b.f[0].data(), b.f[1].data(), x.data(), w.data(),
                                                      or_null(state), s, true);
                             cuda::short_conv_backward(ex, b.f[2].data(), b.f[3].data(), b.f[4].data(), wy.data(),
                                                       ws.data(), x.data(), w.data(), or_null(state), s, true);
                           });
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        set_num_threads(threads);
        Vec y(size_t(n), NAN), state_out(size_t(ns), NAN), dx(size_t(n), NAN), dw = dw0, dstate(size_t(ns), NAN);
        be().short_conv_forward(y.data(), state_out.data(), x.data(), w.data(), or_null(state), s, true);
        be().short_conv_backward(dx.data(), dw.data(), dstate.data(), wy.data(), ws.data(), x.data(), w.data(),
                                 or_null(state), s, true);
        check_bits("y", r.f[0], y);
        check_bits("state_out", r.f[1], state_out);
        check_bits("dx", r.f[2], dx);
        check_bits("dw", r.f[3], dw);
        check_bits("dstate_in", r.f[4], dstate);
      }
    }
  }
  set_num_threads(saved);
}

namespace {

double sigmoid_d(double z) { return 1 / (1 + std::exp(-z)); }

// L = sum(w * out) for a kernel's outputs in double, and the finite-difference check of one input.
double weighted(const DVec& out, const Vec& w) {
  double l = 0;
  for (size_t i = 0; i < out.size(); ++i) l += out[i] * w[i];
  return l;
}

}  // namespace

TEST_CASE("delta mixer pieces: l2norm, the gated output norm and the gates vs double references and FD") {
  const int64_t rows = 6;
  const int D = 5, H = 3;
  SUBCASE("l2norm") {
    Vec x = randn(size_t(rows * D), 1.f, 100), y(x.size(), NAN), rstd(size_t(rows), NAN);
    auto ref = [&] {
      DVec out(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int j = 0; j < D; ++j) ss += double(x[size_t(r * D + j)]) * x[size_t(r * D + j)];
        for (int j = 0; j < D; ++j) out[size_t(r * D + j)] = x[size_t(r * D + j)] / std::sqrt(ss + 1e-6);
      }
      return out;
    };
    be().l2norm_forward(y.data(), rstd.data(), x.data(), rows, D, 1e-6f);
    check_close("y", y, ref(), 1e-6);
    const Vec w = randn(x.size(), 1.f, 101);
    Vec dx(x.size(), NAN);
    be().l2norm_backward(dx.data(), w.data(), y.data(), rstd.data(), rows, D);
    check_close("dx", dx, fd(x, [&] { return weighted(ref(), w); }, 1e-3), 1e-3);
    Buffers r = host_run({{Vec(y.size(), 4.f), Vec(rstd.size(), 4.f), Vec(dx.size(), 4.f)}, {}},
                         [&](auto& ex, Buffers& b) {
                           cuda::l2norm_forward(ex, b.f[0].data(), b.f[1].data(), x.data(), rows, D, 1e-6f);
                           cuda::l2norm_backward(ex, b.f[2].data(), w.data(), b.f[0].data(), b.f[1].data(), rows, D);
                         });
    check_bits("y", r.f[0], y);
    check_bits("dx", r.f[2], dx);
  }
  for (bool gated : {false, true}) {
    CAPTURE(gated);
    SUBCASE("the output norm") {
      Vec x = randn(size_t(rows * D), 1.f, 110), wt = randn(size_t(D), 0.5f, 111),
          gate = gated ? randn(x.size(), 1.f, 112) : Vec();
      for (auto& v : wt) v += 1.f;
      auto ref = [&] {
        DVec out(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int j = 0; j < D; ++j) ss += double(x[size_t(r * D + j)]) * x[size_t(r * D + j)];
          const double rs = 1 / std::sqrt(ss / D + 1e-5);
          for (int j = 0; j < D; ++j) {
            const size_t i = size_t(r * D + j);
            const double n = x[i] * rs * wt[size_t(j)];
            out[i] = gated ? n * gate[i] * sigmoid_d(gate[i]) : n;
          }
        }
        return out;
      };
      Vec y(x.size(), NAN), rstd(size_t(rows), NAN);
      be().rms_norm_gated_forward(y.data(), rstd.data(), x.data(), wt.data(), or_null(gate), rows, D, 1e-5f);
      check_close("y", y, ref(), 1e-6);
      const Vec w = randn(x.size(), 1.f, 113), dw0 = randn(size_t(D), 1.f, 114);
      Vec dx(x.size(), NAN), dw = dw0, dgate(gate.size(), NAN);
      be().rms_norm_gated_backward(dx.data(), dw.data(), gated ? dgate.data() : nullptr, w.data(), x.data(),
                                   rstd.data(), wt.data(), or_null(gate), rows, D);
      auto loss = [&] { return weighted(ref(), w); };
      check_close("dx", dx, fd(x, loss, 1e-3), 1e-3);
      Vec dw_added(dw.size());
      for (size_t i = 0; i < dw.size(); ++i) dw_added[i] = dw[i] - dw0[i];
      check_close("dw", dw_added, fd(wt, loss, 1e-3), 1e-3);
      if (gated) check_close("dgate", dgate, fd(gate, loss, 1e-3), 1e-3);
      Buffers r = host_run({{Vec(y.size(), 4.f), Vec(rstd.size(), 4.f), Vec(dx.size(), 4.f), dw0,
                             Vec(dgate.size(), 4.f)}, {}},
                           [&](auto& ex, Buffers& b) {
                             cuda::rms_norm_gated_forward(ex, b.f[0].data(), b.f[1].data(), x.data(), wt.data(),
                                                          or_null(gate), rows, D, 1e-5f);
                             cuda::rms_norm_gated_backward(ex, b.f[2].data(), b.f[3].data(),
                                                           gated ? b.f[4].data() : nullptr, w.data(), x.data(),
                                                           b.f[1].data(), wt.data(), or_null(gate), rows, D);
                           });
      check_bits("y", r.f[0], y);
      check_bits("dx", r.f[2], dx);
      check_bits("dw", r.f[3], dw);
      check_bits("dgate", r.f[4], dgate);
    }
    SUBCASE("the gates") {
      const size_t n = size_t(rows * H);
      Vec b = randn(n, 2.f, 120), a = gated ? randn(n, 2.f, 121) : Vec(),
          A_log = gated ? randn(size_t(H), 1.f, 122) : Vec(), dt_bias = gated ? randn(size_t(H), 1.f, 123) : Vec();
      auto ref = [&] {
        DVec out(2 * n, 0.0);
        for (size_t i = 0; i < n; ++i) {
          out[i] = sigmoid_d(b[i]);
          if (gated) {
            const size_t h = i % size_t(H);
            out[n + i] = -std::exp(double(A_log[h])) * std::log1p(std::exp(double(a[i]) + dt_bias[h]));
          }
        }
        return out;
      };
      Vec beta(n, NAN), g(gated ? n : 0, NAN);
      be().delta_gates_forward(beta.data(), gated ? g.data() : nullptr, b.data(), or_null(a), or_null(A_log),
                               or_null(dt_bias), rows, H);
      const DVec r0 = ref();
      check_close("beta", beta, DVec(r0.begin(), r0.begin() + long(n)), 1e-6);
      if (gated) check_close("g", g, DVec(r0.begin() + long(n), r0.end()), 1e-6);
      Vec w = randn(2 * n, 1.f, 124);
      if (!gated) std::fill(w.begin() + long(n), w.end(), 0.f);
      const Vec wb(w.begin(), w.begin() + long(n)), wg(w.begin() + long(n), w.end());
      const Vec dA0 = randn(size_t(H), 1.f, 125), ddt0 = randn(size_t(H), 1.f, 126);
      Vec db(n, NAN), da(gated ? n : 0, NAN), dA = gated ? dA0 : Vec(), ddt = gated ? ddt0 : Vec();
      be().delta_gates_backward(db.data(), gated ? da.data() : nullptr, gated ? dA.data() : nullptr,
                                gated ? ddt.data() : nullptr, wb.data(), gated ? wg.data() : nullptr, beta.data(),
                                gated ? g.data() : nullptr, or_null(a), or_null(A_log), or_null(dt_bias), rows, H);
      auto loss = [&] { return weighted(ref(), w); };
      check_close("db", db, fd(b, loss, 1e-3), 1e-3);
      if (gated) {
        check_close("da", da, fd(a, loss, 1e-3), 1e-3);
        Vec dA_added(static_cast<size_t>(H)), ddt_added(static_cast<size_t>(H));
        for (int h = 0; h < H; ++h) dA_added[size_t(h)] = dA[size_t(h)] - dA0[size_t(h)];
        for (int h = 0; h < H; ++h) ddt_added[size_t(h)] = ddt[size_t(h)] - ddt0[size_t(h)];
        check_close("dA_log", dA_added, fd(A_log, loss, 1e-3), 1e-3);
        check_close("ddt_bias", ddt_added, fd(dt_bias, loss, 1e-3), 1e-3);
      }
      Buffers r = host_run({{Vec(n, 4.f), Vec(g.size(), 4.f), Vec(n, 4.f), Vec(da.size(), 4.f),
                             gated ? dA0 : Vec(), gated ? ddt0 : Vec()}, {}},
                           [&](auto& ex, Buffers& bf) {
                             float* gp = gated ? bf.f[1].data() : nullptr;
                             cuda::delta_gates_forward(ex, bf.f[0].data(), gp, b.data(), or_null(a), or_null(A_log),
                                                       or_null(dt_bias), rows, H);
                             cuda::delta_gates_backward(ex, bf.f[2].data(), gated ? bf.f[3].data() : nullptr,
                                                        gated ? bf.f[4].data() : nullptr,
                                                        gated ? bf.f[5].data() : nullptr, wb.data(),
                                                        gated ? wg.data() : nullptr, bf.f[0].data(), gp, or_null(a),
                                                        or_null(A_log), or_null(dt_bias), rows, H);
                           });
      check_bits("beta", r.f[0], beta);
      check_bits("g", r.f[1], g);
      check_bits("db", r.f[2], db);
      check_bits("da", r.f[3], da);
      check_bits("dA_log", r.f[4], dA);
      check_bits("ddt_bias", r.f[5], ddt);
    }
  }
}
