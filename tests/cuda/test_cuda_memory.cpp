// The cuda backend's memory API: allocation, fills, the three copies (small uploads through the
// pinned ring, large ones direct), stream order between copies and kernels, errors, and passes
// of more than 2^31 items.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/error.h"
#include "tests/cuda/compare.h"

using namespace rmt;
using namespace rmt::cuda_test;

TEST_CASE("cuda memory: allocate (aligned; 0 bytes is null), copies both ways, on the device") {
  Backend& be = gpu();
  CHECK(be.allocate(0) == nullptr);
  be.deallocate(nullptr, 0);
  for (size_t bytes : {size_t(1), size_t(4096), size_t(256) << 10, (size_t(256) << 10) + 4, size_t(3) << 20}) {
    CAPTURE(bytes);
    void* p = be.allocate(bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    std::vector<uint8_t> host(bytes), back(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) host[i] = uint8_t(i * 131 + 7);
    be.copy_host_to_device(p, host.data(), bytes);
    be.copy_device_to_host(back.data(), p, bytes);
    CHECK(back == host);
    void* q = be.allocate(bytes);
    be.copy_device_to_device(q, p, bytes);
    be.fill_bytes(p, 0xab, bytes);
    be.copy_device_to_host(back.data(), q, bytes);
    CHECK(back == host);
    be.copy_device_to_host(back.data(), p, bytes);
    CHECK(back == std::vector<uint8_t>(bytes, 0xab));
    be.deallocate(p, bytes);
    be.deallocate(q, bytes);
  }
}

TEST_CASE("cuda memory: uploads are in stream order and the host buffer is free on return") {
  // Many small uploads from one host buffer, rewritten right after each call, each followed by a
  // kernel that reads what was uploaded: more uploads than the ring has slots, with no
  // synchronization in between. Every kernel must see its own upload.
  Backend& be = gpu();
  const int64_t n = 1000;
  const int rounds = 50;
  DeviceArray<float> sum(be, n), x(be, n);
  be.fill(sum.data(), n, 0.f);
  std::vector<float> host(static_cast<size_t>(n));
  for (int k = 1; k <= rounds; ++k) {
    for (int64_t i = 0; i < n; ++i) host[size_t(i)] = float(k);
    be.copy_host_to_device(x.data(), host.data(), size_t(n) * sizeof(float));
    std::memset(host.data(), 0xff, host.size() * sizeof(float));  // NaN: must not be uploaded
    be.add_inplace(sum.data(), x.data(), n);
  }
  const std::vector<float> result = sum.download();
  const float expected = float(rounds * (rounds + 1) / 2);
  int wrong = 0;
  for (float v : result) wrong += v != expected;
  CHECK(wrong == 0);
  // A large upload (past the ring's slot size) after queued kernels, then a download.
  const int64_t big = int64_t(1) << 20;
  DeviceArray<float> y(be, big);
  be.fill(y.data(), big, 2.f);
  std::vector<float> ones(static_cast<size_t>(big), 1.f);
  DeviceArray<float> z(be, big);
  be.copy_host_to_device(z.data(), ones.data(), ones.size() * sizeof(float));
  be.add_inplace(y.data(), z.data(), big);
  CHECK(y.download() == std::vector<float>(static_cast<size_t>(big), 3.f));
}

TEST_CASE("cuda memory: an impossible allocation is a clear error, and the backend still works") {
  Backend& be = gpu();
  const std::string message = error_of_call([&] { be.allocate(size_t(1) << 50); });
  CHECK(message.find("cuda: cudaMalloc of 1125899906842624 bytes") != std::string::npos);
  DeviceArray<float> a(be, 10);
  be.fill(a.data(), 10, 4.f);
  CHECK(a.download() == std::vector<float>(10, 4.f));
}

TEST_CASE("cuda passes of more than 2^31 items (fill and relu on 8.6 GB)") {
  // Indices past 2^31 must neither overflow nor be skipped (grid-stride loop, int64 indices).
  Backend& be = gpu();
  const int64_t n = (int64_t(1) << 31) + 1000;
  DeviceArray<float> x(be, n);
  be.fill(x.data(), n, -2.f);
  const std::vector<float> three(8, 3.f);
  x.write(n - 8, three.data(), 8);
  be.relu_forward(x.data(), x.data(), n);
  std::vector<float> head(8), middle(8), tail(8);
  x.read(0, head.data(), 8);
  x.read((int64_t(1) << 31) - 4, middle.data(), 8);
  x.read(n - 8, tail.data(), 8);
  CHECK(head == std::vector<float>(8, 0.f));
  CHECK(middle == std::vector<float>(8, 0.f));
  CHECK(tail == three);
}
