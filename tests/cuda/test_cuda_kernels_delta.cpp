// GPU suite (tests/cuda/kernel_compare.h): the delta mixer's kernels on the cuda backend against
// the cpu backend: the delta rule (DeltaNet, and Gated DeltaNet's decay), the short convolution,
// the l2norm, the gated output norm and the gates, forward and backward, at a CPU-scale model's
// shapes (batch 32, 4 heads, keys of 32, values of 64, segments of 24) and odd ones. Not yet run on a GPU (docs/cuda.md).
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

TEST_CASE("cuda delta rule: forward and backward, both forms, with and without the gate, from a state") {
  for (const DeltaShape s : {DeltaShape{5, 2, 3, 3, 4, 2}, DeltaShape{kSeg, kB, kH, 32, 64, 8},
                             DeltaShape{5, 2, 3, 3, 4, 2, true}, DeltaShape{kSeg, kB, kH, 32, 64, 16, true}})
    for (bool gated : {false, true}) {
      const int64_t rows = int64_t(s.T) * s.heads(), nS = s.heads() * s.state();
      compare(fmt::format("delta rule T {} B {} H {} Dk {} Dv {} chunk {} {} gated {}", s.T, s.B, s.H, s.Dk, s.Dv,
                          s.chunk, s.wy ? "chunked" : "recurrent", gated),
              [&](Backend& be) {
                auto q = on(be, uniform(rows * s.Dk, 80)), k = on(be, uniform(rows * s.Dk, 81, -0.3f, 0.3f));
                auto v = on(be, uniform(rows * s.Dv, 82)), beta = on(be, uniform(rows, 83, 0.05f, 0.95f));
                auto g = on(be, uniform(rows, 84, -1.f, -0.05f)), S_in = on(be, uniform(nS, 85));
                auto dout = on(be, uniform(rows * s.Dv, 86)), dS_out = on(be, uniform(nS, 87));
                DeviceArray<float> o = nans(be, rows * s.Dv), S_out = nans(be, nS),
                                   S_chunks = nans(be, s.chunks() * nS), dq = nans(be, rows * s.Dk),
                                   dk = nans(be, rows * s.Dk), dv = nans(be, rows * s.Dv),
                                   dbeta = nans(be, rows), dg = nans(be, rows), dS_in = nans(be, nS),
                                   work = nans(be, s.heads() * s.work_per_head()),
                                   fwork = nans(be, s.heads() * s.forward_work_per_head() + 1);
                const float scale = 0.25f;
                be.delta_rule_forward(o.data(), S_out.data(), S_chunks.data(), s.wy ? fwork.data() : nullptr, q.data(), k.data(), v.data(),
                                      beta.data(), gated ? g.data() : nullptr, S_in.data(), s, scale);
                be.delta_rule_backward(dq.data(), dk.data(), dv.data(), dbeta.data(), gated ? dg.data() : nullptr,
                                       dS_in.data(), work.data(), dout.data(), dS_out.data(), q.data(), k.data(),
                                       v.data(), beta.data(), gated ? g.data() : nullptr, S_chunks.data(), s,
                                       scale);
                Outs outs = {{"o", o.download()},       {"S_T", S_out.download()},
                             {"dq", dq.download()},     {"dk", dk.download()},
                             {"dv", dv.download()},     {"dbeta", dbeta.download()},
                             {"dS_in", dS_in.download()}};
                if (gated) outs.push_back({"dg", dg.download()});
                return outs;
              });
    }
}

TEST_CASE("cuda short convolution: forward and backward, with and without SiLU and a state") {
  for (const ConvShape s : {ConvShape{2, 3, 5, 4}, ConvShape{kSeg, kB, 4 * 32, 4}})
    for (bool silu : {false, true}) {
      const int64_t n = int64_t(s.T) * s.row(), ns = int64_t(s.W - 1) * s.row(), nw = int64_t(s.C) * s.W;
      const std::vector<float> dw0 = uniform(nw, 95);
      compare(fmt::format("short conv T {} B {} C {} W {} silu {}", s.T, s.B, s.C, s.W, silu), [&](Backend& be) {
        auto x = on(be, uniform(n, 90)), w = on(be, uniform(nw, 91)), state = on(be, uniform(ns, 92));
        auto dy = on(be, uniform(n, 93)), dstate_out = on(be, uniform(ns, 94)), dw = on(be, dw0);
        DeviceArray<float> y = nans(be, n), state_out = nans(be, ns), dx = nans(be, n), dstate = nans(be, ns);
        be.short_conv_forward(y.data(), state_out.data(), x.data(), w.data(), state.data(), s, silu);
        be.short_conv_backward(dx.data(), dw.data(), dstate.data(), dy.data(), dstate_out.data(), x.data(),
                               w.data(), state.data(), s, silu);
        return Outs{{"y", y.download()},
                    {"state_out", state_out.download(), 0},
                    {"dx", dx.download()},
                    {"dw - before", increment(dw.download(), dw0)},
                    {"dstate_in", dstate.download()}};
      });
    }
}

TEST_CASE("cuda delta mixer pieces: l2norm, the gated output norm and the gates, forward and backward") {
  const int64_t rows = int64_t(kSeg) * kB * kH;  // a segment's heads
  const int D = 64;
  for (bool gated : {false, true})
    compare(fmt::format("delta pieces rows {} D {} gated {}", rows, D, gated), [&](Backend& be) {
      const std::vector<float> dw0 = uniform(D, 106), dA0 = uniform(kH, 107), ddt0 = uniform(kH, 108);
      auto x = on(be, uniform(rows * D, 100)), w = on(be, uniform(D, 101, 0.5f, 1.5f));
      auto gate = on(be, uniform(rows * D, 102)), dy = on(be, uniform(rows * D, 103));
      auto b = on(be, uniform(rows, 104, -3.f, 3.f)), a = on(be, uniform(rows, 105, -3.f, 3.f));
      auto A_log = on(be, uniform(kH, 109, 0.f, 2.7f)), dt_bias = on(be, uniform(kH, 110, -4.f, 0.f));
      auto dw = on(be, dw0), dA = on(be, dA0), ddt = on(be, ddt0);
      auto dbeta = on(be, uniform(rows, 111)), dg = on(be, uniform(rows, 112));
      DeviceArray<float> y = nans(be, rows * D), rstd = nans(be, rows), dx = nans(be, rows * D),
                         n = nans(be, rows * D), nrstd = nans(be, rows), ndx = nans(be, rows * D),
                         dgate = nans(be, rows * D), beta = nans(be, rows), g = nans(be, rows),
                         db = nans(be, rows), da = nans(be, rows);
      const float* gp = gated ? gate.data() : nullptr;
      be.l2norm_forward(y.data(), rstd.data(), x.data(), rows, D, 1e-6f);
      be.l2norm_backward(dx.data(), dy.data(), y.data(), rstd.data(), rows, D);
      be.rms_norm_gated_forward(n.data(), nrstd.data(), x.data(), w.data(), gp, rows, D, 1e-5f);
      be.rms_norm_gated_backward(ndx.data(), dw.data(), gated ? dgate.data() : nullptr, dy.data(), x.data(),
                                 nrstd.data(), w.data(), gp, rows, D);
      // The gates over rows of kH heads: rows / kH of them.
      const int64_t grows = rows / kH;
      be.delta_gates_forward(beta.data(), gated ? g.data() : nullptr, b.data(), gated ? a.data() : nullptr,
                             A_log.data(), dt_bias.data(), grows, kH);
      be.delta_gates_backward(db.data(), gated ? da.data() : nullptr, dA.data(), ddt.data(), dbeta.data(), dg.data(),
                              beta.data(), gated ? g.data() : nullptr, gated ? a.data() : nullptr, A_log.data(),
                              dt_bias.data(), grows, kH);
      Outs outs = {{"l2norm y", y.download()},
                   {"l2norm dx", dx.download()},
                   {"norm y", n.download()},
                   {"norm dx", ndx.download()},
                   {"norm dw - before", increment(dw.download(), dw0)},
                   {"beta", beta.download()},
                   {"db", db.download()}};
      if (gated) {
        outs.push_back({"norm dgate", dgate.download()});
        outs.push_back({"g", g.download()});
        outs.push_back({"da", da.download()});
        outs.push_back({"dA_log - before", increment(dA.download(), dA0)});
        outs.push_back({"ddt_bias - before", increment(ddt.download(), ddt0)});
      }
      return outs;
    });
}
