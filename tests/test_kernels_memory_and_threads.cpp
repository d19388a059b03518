// The CPU backends' memory API (allocate, fill, copies) and DeviceArray on cpu and cpu-guarded,
// and the thread count (set_num_threads / num_threads).
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/kernel_checks.h"
#include "tests/random_vectors.h"

using namespace rmt;

TEST_CASE("memory API: allocate, fill, copies both ways and on the device, on every backend") {
  for (const char* device : {"cpu", "cpu-guarded"}) {
    CAPTURE(device);
    Backend& b = backend_by_name(device);
    CHECK(b.allocate(0) == nullptr);
    b.deallocate(nullptr, 0);
    const int64_t n = 1000;
    float* x = static_cast<float*>(b.allocate(n * sizeof(float)));
    float* y = static_cast<float*>(b.allocate(n * sizeof(float)));
    CHECK(reinterpret_cast<uintptr_t>(x) % 64 == 0);
    CHECK(reinterpret_cast<uintptr_t>(y) % 64 == 0);
    Vec host = randn(n, 1.f, 90), back(n, 0.f);
    b.copy_host_to_device(x, host.data(), n * sizeof(float));
    b.copy_device_to_device(y, x, n * sizeof(float));
    b.copy_device_to_host(back.data(), y, n * sizeof(float));
    CHECK(back == host);
    b.fill(y + 10, 20, 2.5f);
    b.fill_bytes(y + 40, 0, 8 * sizeof(float));
    b.copy_device_to_host(back.data(), y, n * sizeof(float));
    for (int64_t i = 0; i < n; ++i) {
      const float expect = i >= 10 && i < 30 ? 2.5f : i >= 40 && i < 48 ? 0.f : host[size_t(i)];
      REQUIRE(back[size_t(i)] == expect);
    }
    b.deallocate(x, n * sizeof(float));
    b.deallocate(y, n * sizeof(float));
  }
}

TEST_CASE("DeviceArray: grows keeping its capacity, uploads, downloads, copies on the device") {
  for (const char* device : {"cpu", "cpu-guarded"}) {
    CAPTURE(device);
    Backend& b = backend_by_name(device);
    DeviceArray<float> a;
    CHECK(a.empty());
    float* p = a.sized(b, 100);
    CHECK(a.size() == 100);
    CHECK(a.sized(b, 40) == p);  // shrinking and regrowing within the capacity reuses it
    CHECK(a.sized(b, 100) == p);
    Vec host = randn(100, 1.f, 91);
    a.upload(b, host);
    CHECK(a.data() == p);
    CHECK(a.download() == host);
    DeviceArray<float> c = a;  // a device copy, not the same buffer
    CHECK(c.data() != a.data());
    CHECK(c.download() == host);
    const float v = 7.f;
    c.write(3, &v, 1);
    float got = 0;
    c.read(3, &got, 1);
    CHECK(got == 7.f);
    CHECK(a.download() == host);
    CHECK_THROWS_AS(c.write(99, host.data(), 2), std::logic_error);
    DeviceArray<int32_t> z;
    z.zeroed(b, 5);
    CHECK(z.download() == std::vector<int32_t>(5, 0));
    DeviceArray<float> moved = std::move(c);
    CHECK(moved.download()[3] == 7.f);
    CHECK(c.empty());
  }
}

TEST_CASE("threads: set_num_threads / num_threads") {
  const int t = num_threads();
  set_num_threads(1);
  CHECK(num_threads() == 1);
  set_num_threads(0);
  CHECK(num_threads() >= 1);
  set_num_threads(t);
}
