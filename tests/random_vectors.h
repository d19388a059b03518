#pragma once
// Test inputs: n draws of N(0, sd) from a seeded std::mt19937, the same on every machine run
// by the same standard library (the kernel tests' inputs).
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

inline std::vector<float> randn(size_t n, float sd, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
