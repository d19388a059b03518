#pragma once
// Checks shared by the tests that run the CUDA drivers on the host (HostExec) against the CPU
// backend: bit-identity with the first difference named, and a driver run in both item orders.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "lib/cuda/host_exec.h"

namespace rmt::test {

using Vec = std::vector<float>;
using Bytes = std::vector<uint8_t>;

// Bit-identical, with the first difference in the message.
template <class T>
void check_bits(const std::string& what, const std::vector<T>& got, const std::vector<T>& ref) {
  REQUIRE(got.size() == ref.size());
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0) {
      first = i;
      break;
    }
  INFO(what << ": first difference at " << first << " of " << got.size()
            << (first < got.size() ? " (" + std::to_string((double)got[first]) + " vs " +
                                         std::to_string((double)ref[first]) + ")"
                                   : std::string()));
  CHECK(first == got.size());
}

// Runs a driver call on fresh copies of its buffers with HostExec, items forward and reversed;
// checks that both orders give the same bits and returns the forward result. `run(ex, bufs)`
// calls the driver on the buffers (a tuple-free vector of float vectors, plus byte vectors).
struct Buffers {
  std::vector<Vec> f;
  std::vector<Bytes> b;
};
template <class Run>
Buffers host_run(const Buffers& init, Run run) {
  Buffers fwd = init, rev = init;
  cuda::HostExec ef;
  run(ef, fwd);
  cuda::HostExec er;
  er.reverse = true;
  run(er, rev);
  for (size_t i = 0; i < fwd.f.size(); ++i)
    check_bits("reverse order, float buffer " + std::to_string(i), rev.f[i], fwd.f[i]);
  for (size_t i = 0; i < fwd.b.size(); ++i)
    check_bits("reverse order, byte buffer " + std::to_string(i), rev.b[i], fwd.b[i]);
  return fwd;
}

}  // namespace rmt::test
