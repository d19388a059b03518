// GPU suite (tests/cuda/kernel_compare.h): the delta mixer's kernels on the cuda backend against
// the cpu backend: the delta rule (DeltaNet, and Gated DeltaNet's decay) and the short
// convolution, forward and backward, at a CPU-scale model's shapes (batch 32, 4 heads, keys of 32,
// values of 64, segments of 24) and odd ones. Not yet run on a GPU (docs/cuda.md).
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

TEST_CASE("cuda delta rule: forward and backward, with and without the gate, from a state") {
  for (const DeltaShape s : {DeltaShape{5, 2, 3, 3, 4, 2}, DeltaShape{kSeg, kB, kH, 32, 64, 8}})
    for (bool gated : {false, true}) {
      const int64_t rows = int64_t(s.T) * s.heads(), nS = s.heads() * s.state();
      compare(fmt::format("delta rule T {} B {} H {} Dk {} Dv {} gated {}", s.T, s.B, s.H, s.Dk, s.Dv, gated),
              [&](Backend& be) {
                auto q = on(be, uniform(rows * s.Dk, 80)), k = on(be, uniform(rows * s.Dk, 81, -0.3f, 0.3f));
                auto v = on(be, uniform(rows * s.Dv, 82)), beta = on(be, uniform(rows, 83, 0.05f, 0.95f));
                auto g = on(be, uniform(rows, 84, -1.f, -0.05f)), S_in = on(be, uniform(nS, 85));
                auto dout = on(be, uniform(rows * s.Dv, 86)), dS_out = on(be, uniform(nS, 87));
                DeviceArray<float> o = nans(be, rows * s.Dv), S_out = nans(be, nS),
                                   S_chunks = nans(be, s.chunks() * nS), dq = nans(be, rows * s.Dk),
                                   dk = nans(be, rows * s.Dk), dv = nans(be, rows * s.Dv),
                                   dbeta = nans(be, rows), dg = nans(be, rows), dS_in = nans(be, nS),
                                   work = nans(be, s.heads() * s.work_per_head());
                const float scale = 0.25f;
                be.delta_rule_forward(o.data(), S_out.data(), S_chunks.data(), q.data(), k.data(), v.data(),
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
