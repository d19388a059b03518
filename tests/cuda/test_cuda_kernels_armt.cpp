// GPU suite (tests/cuda/kernel_compare.h): ARMT's associative-memory kernels on the cuda backend
// against the cpu backend: dpfp, the associative read and the delta-rule write, forward and
// backward.
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
