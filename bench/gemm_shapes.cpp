// GEMM rate of rmt's backend matmul at the copy model's shapes vs a large square GEMM: how much
// of the gap to peak the small shapes explain. Build and run (after `make build`):
//   g++ -O2 -march=native -fopenmp -I. -Ibuild/generated -I/usr/include/eigen3 \
//       bench/gemm_shapes.cpp build/librmtlib.a -lfmt -o build/gemm_shapes && build/gemm_shapes 1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lib/core/backend.h"

int main(int argc, char** argv) {
  rmt::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  rmt::Backend& be = rmt::cpu_backend();
  struct Shape { const char* what; int M, N, K; bool ta, tb; };
  // B*q rows: baseline/xl q = 24 (768 rows), rmt q = 72 (2304 rows).
  const Shape shapes[] = {
      {"square 2048^3", 2048, 2048, 2048, false, false},
      {"rmt qkv fwd  [2304x128]x[128x768]", 2304, 768, 128, false, true},
      {"rmt qkv dW   [768x2304]x[2304x128]", 768, 128, 2304, true, false},
      {"rmt ff1 fwd  [2304x128]x[128x256]", 2304, 256, 128, false, true},
      {"rmt ff2 fwd  [2304x256]x[256x128]", 2304, 128, 256, false, true},
      {"base qkv fwd [768x128]x[128x768]", 768, 768, 128, false, true},
      {"attn (q+u)k^T per head [72x64]x[64x72]", 72, 72, 64, false, true},
      {"attn prob*v per head [72x72]x[72x64]", 72, 64, 72, false, false},
  };
  for (const Shape& s : shapes) {
    std::vector<float> A(size_t(s.M) * s.K, 0.5f), B(size_t(s.K) * s.N, 0.25f), C(size_t(s.M) * s.N);
    const double flop = 2.0 * s.M * s.N * s.K;
    const int reps = int(std::max(3.0, 2e9 / flop));
    double best = 1e30;
    for (int r = 0; r < reps + 1; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      be.matmul(C.data(), A.data(), B.data(), s.M, s.N, s.K, s.ta, s.tb);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0 && dt < best) best = dt;
    }
    std::printf("%-42s %8.1f GFLOP/s\n", s.what, flop / best * 1e-9);
  }
}
