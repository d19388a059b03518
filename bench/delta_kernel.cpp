// Time of the backend's delta rule (forward, backward), the recurrent form against the chunked
// (WY) form, at the delta bench models' rule shapes (rmt bench --model delta: B 32, 4 heads of
// d_k 64; d_v 64 for deltanet, 128 for gated_deltanet; segments of 24 + 48 copy rows, 64, 256).
// Build and run (after `make build`):
//   g++ -O2 -march=native -fopenmp -I. -Ibuild/generated -I/usr/include/eigen3 \
//       bench/delta_kernel.cpp build/librmtlib.a -ldnnl -lfmt -o build/delta_kernel &&
//   build/delta_kernel 2 [chunk ...]
// Prints, per shape and form, the minimum over 5 runs of the forward and of the backward in ms,
// and the chunked form's speed-up over the recurrence (forward + backward).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "lib/core/backend.h"

namespace {

double min_ms(int reps, const auto& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  rmt::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  std::vector<int> chunks;
  for (int i = 2; i < argc; ++i) chunks.push_back(std::atoi(argv[i]));
  if (chunks.empty()) chunks = {16, 32, 64};
  rmt::Backend& be = rmt::cpu_backend();
  struct Case { const char* what; int T, Dv; bool gated; };
  const Case cases[] = {{"deltanet       copy (T 72)", 72, 64, false},
                        {"gated_deltanet copy (T 72)", 72, 128, true},
                        {"deltanet       seg 64", 64, 64, false},
                        {"gated_deltanet seg 64", 64, 128, true},
                        {"deltanet       seg 256", 256, 64, false},
                        {"gated_deltanet seg 256", 256, 128, true}};
  const int B = 32, H = 4, Dk = 64;
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randv = [&](size_t n, float scale) {
    std::vector<float> x(n);
    for (float& e : x) e = scale * nd(gen);
    return x;
  };
  for (const Case& c : cases) {
    const size_t rows = size_t(c.T) * B * H;
    std::vector<float> q = randv(rows * Dk, 0.125f), k = randv(rows * Dk, 0.125f), v = randv(rows * c.Dv, 1.f);
    std::vector<float> beta(rows, 0.5f), g(rows, -0.05f), dout = randv(rows * c.Dv, 1.f);
    std::vector<float> o(rows * c.Dv), dq(rows * Dk), dk(rows * Dk), dv(rows * c.Dv), db(rows), dg(rows);
    auto run = [&](rmt::DeltaShape s, double& fwd, double& bwd) {
      std::vector<float> S_out(size_t(s.heads() * s.state())), dS(S_out.size());
      std::vector<float> S_chunks(size_t(s.chunks() * s.heads() * s.state()));
      std::vector<float> fwork(size_t(s.heads() * s.forward_work_per_head()) + 1);
      std::vector<float> work(size_t(s.heads() * s.work_per_head()));
      const float* gp = c.gated ? g.data() : nullptr;
      const float scale = 0.125f;
      fwd = min_ms(5, [&] {
        be.delta_rule_forward(o.data(), S_out.data(), S_chunks.data(), s.wy ? fwork.data() : nullptr, q.data(),
                              k.data(), v.data(), beta.data(), gp, nullptr, s, scale);
      });
      bwd = min_ms(5, [&] {
        be.delta_rule_backward(dq.data(), dk.data(), dv.data(), db.data(), c.gated ? dg.data() : nullptr,
                               dS.data(), work.data(), dout.data(), nullptr, q.data(), k.data(), v.data(),
                               beta.data(), gp, S_chunks.data(), s, scale);
      });
    };
    double rf, rb;
    run(rmt::DeltaShape{c.T, B, H, Dk, c.Dv, 64}, rf, rb);
    std::printf("%-28s recurrent        fwd %8.2f ms  bwd %8.2f ms\n", c.what, rf, rb);
    for (int chunk : chunks) {
      double cf, cb;
      run(rmt::DeltaShape{c.T, B, H, Dk, c.Dv, chunk, true}, cf, cb);
      std::printf("%-28s chunked (C %3d)  fwd %8.2f ms  bwd %8.2f ms  speed-up %.2fx\n", c.what, chunk, cf, cb,
                  (rf + rb) / (cf + cb));
    }
  }
  return 0;
}
