// Rate of the backend's relative attention (forward, backward) at the copy models' shapes, in
// GFLOP/s of the products it does (forward 3, backward 6 of 2*B*H*q*klen*Dh each). Build and run
// (after `make build`):
//   g++ -O2 -march=native -fopenmp -I. -Ibuild/generated -I/usr/include/eigen3 \
//       bench/attention_kernel.cpp build/librmtlib.a -ldnnl -lfmt -o build/attention_kernel &&
//   build/attention_kernel 1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "lib/core/backend.h"

int main(int argc, char** argv) {
  rmt::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 0);
  rmt::Backend& be = rmt::cpu_backend();
  struct Case { const char* what; int qlen, mlen; bool causal; };
  const Case cases[] = {{"rmt   q 72 klen 72 (memory rows see all)", 72, 0, false},
                        {"xl    q 24 klen 48 causal", 24, 24, true},
                        {"base  q 24 klen 24 causal", 24, 0, true}};
  const int B = 32, H = 4, Dh = 64, HD = H * Dh;
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Case& c : cases) {
    const int klen = c.qlen + c.mlen;
    rmt::AttentionShape s{B, H, Dh, c.qlen, klen};
    auto randv = [&](size_t n) {
      std::vector<float> x(n);
      for (float& e : x) e = nd(gen);
      return x;
    };
    std::vector<float> qkv = randv((size_t)B * klen * 3 * HD), r = randv((size_t)klen * HD),
                       u = randv(HD), v = randv(HD), dout = randv((size_t)c.qlen * B * HD);
    std::vector<float> out((size_t)c.qlen * B * HD), prob((size_t)B * H * c.qlen * klen),
        dqkv(qkv.size()), dr(r.size()), du(HD), dv(HD);
    std::vector<uint8_t> mask((size_t)c.qlen * klen, 0);
    if (c.causal)
      for (int i = 0; i < c.qlen; ++i)
        for (int j = i + c.mlen + 1; j < klen; ++j) mask[(size_t)i * klen + j] = 1;
    const double flop = 2.0 * B * H * c.qlen * klen * Dh;
    double best_f = 1e30, best_b = 1e30;
    for (int rep = 0; rep < 30; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      be.rel_attention_forward(out.data(), prob.data(), qkv.data(), r.data(), u.data(), v.data(),
                               mask.data(), s, 0.125f);
      auto t1 = std::chrono::steady_clock::now();
      be.rel_attention_backward(dqkv.data(), dr.data(), du.data(), dv.data(), dout.data(),
                                prob.data(), qkv.data(), r.data(), u.data(), v.data(), s, 0.125f);
      auto t2 = std::chrono::steady_clock::now();
      if (rep > 2) {
        best_f = std::min(best_f, std::chrono::duration<double>(t1 - t0).count());
        best_b = std::min(best_b, std::chrono::duration<double>(t2 - t1).count());
      }
    }
    std::printf("%-42s fwd %7.3f ms %6.1f GFLOP/s   bwd %7.3f ms %6.1f GFLOP/s\n", c.what,
                best_f * 1e3, 3 * flop / best_f * 1e-9, best_b * 1e3, 6 * flop / best_b * 1e-9);
  }
}
