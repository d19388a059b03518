// The guarded test backend ("cpu-guarded") is not vacuous: a host read or write of one of its
// buffers outside a backend call is a segmentation fault at that address (checked in a forked
// child), the same access through the CPU backend is not, kernels and copies on its buffers
// work, and buffer arguments that are not its own are refused. The engine tests
// (tests/test_engine.cpp) and the golden suite (golden_*_guarded) then run through it.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "tests/cli.h"

using namespace rmt;

namespace {

volatile void* g_expected_fault = nullptr;
constexpr int kFaultAtExpected = 42, kFaultElsewhere = 43, kNoFault = 0;

void on_segv(int, siginfo_t* info, void*) {
  _exit(info->si_addr == g_expected_fault ? kFaultAtExpected : kFaultElsewhere);
}

// Runs `access` in a forked child with a SIGSEGV handler; returns kFaultAtExpected when it faults
// at `address`, kFaultElsewhere at another address, kNoFault when it returns normally.
int child_status(const void* address, const std::function<void()>& access) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit no_core {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    g_expected_fault = const_cast<void*>(address);
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    access();
    _exit(kNoFault);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("cpu-guarded: host reads and writes of its buffers fault; the CPU backend's do not") {
  for (const char* device : {"cpu-guarded", "cpu"}) {
    CAPTURE(device);
    Backend& be = backend_by_name(device);
    DeviceArray<float> x;
    x.upload(be, std::vector<float>(1000, 1.5f));
    be.scale(x.data(), x.size(), 2.f);  // kernels work on it
    CHECK(x.download() == std::vector<float>(1000, 3.f));
    float* p = x.data() + 123;
    const int expect = std::string(device) == "cpu-guarded" ? kFaultAtExpected : kNoFault;
    CHECK(child_status(p, [p] { *static_cast<volatile float*>(p) = 4.f; }) == expect);
    CHECK(child_status(p, [p] {
            volatile float v = *static_cast<volatile float*>(p);
            (void)v;
          }) == expect);
    // A loop the engine had before the backend owned memory (zeroing the gradients by hand).
    Model model([] {
      ModelConfig c;
      c.kind = "rmt", c.n_token = 5, c.n_layer = 1, c.n_head = 1, c.d_head = 4, c.d_model = 4;
      c.d_inner = 8, c.num_mem_tokens = 2;
      return c;
    }(), be);
    float* grads = model.grads.data();
    const int64_t n = model.num_params();
    CHECK(child_status(grads, [grads, n] { std::fill(grads, grads + n, 0.f); }) == expect);
  }
}

TEST_CASE("cpu-guarded: buffers that are not its own are refused; fresh buffers hold NaN") {
  Backend& be = guarded_cpu_backend();
  DeviceArray<float> x(be, 16), y(be, 16);
  std::vector<float> host(16, 1.f);
  CHECK(std::isnan(x.download()[0]));  // new allocations are 0xff bytes, never silently zero
  CHECK_THROWS_WITH_AS(be.add_inplace(x.data(), host.data(), 16),
                       doctest::Contains("add_inplace x: not a buffer of this backend"),
                       std::logic_error);
  CHECK_THROWS_WITH_AS(be.add_inplace(x.data(), y.data() + 8, 16),
                       doctest::Contains("overrun a buffer"), std::logic_error);
  CHECK_THROWS_WITH_AS(be.copy_host_to_device(x.data(), y.data(), 64),
                       doctest::Contains("not host memory"), std::logic_error);
  CHECK_THROWS_WITH_AS(be.copy_device_to_host(host.data(), host.data(), 64),
                       doctest::Contains("not a buffer of this backend"), std::logic_error);
  // After a refused call the arena is closed again: still a fault from the host.
  float* p = x.data();
  CHECK(child_status(p, [p] { *static_cast<volatile float*>(p) = 4.f; }) == kFaultAtExpected);
}

TEST_CASE("devices by name: cpu, cpu-guarded; cuda and unknown names are clear errors") {
  CHECK(&backend_by_name("cpu") == &cpu_backend());
  CHECK(&backend_by_name("cpu-guarded") == &guarded_cpu_backend());
  CHECK(known_devices().find("cpu-guarded") != std::string::npos);
  // GPUs are hidden from the unit suite (tests/test_main.cpp): cuda is unavailable in every build.
  CHECK_THROWS_WITH_AS(backend_by_name("cuda"), doctest::Contains(kCudaUnavailable.c_str()), Error);
  CHECK_THROWS_WITH_AS(backend_by_name("tpu"), doctest::Contains("unknown device 'tpu'"), Error);
}

TEST_CASE("a warm training step allocates nothing on the backend (every kind, truncated BPTT, recompute)") {
  Backend& be = guarded_cpu_backend();
  struct Variant { const char* kind; int bptt; bool recompute; };
  for (Variant v : {Variant{"baseline", -1, false}, Variant{"xl", -1, false}, Variant{"rmt", -1, false},
                    Variant{"rmt", 1, false}, Variant{"xl_rmt", 2, true}, Variant{"mt", 0, true}}) {
    CAPTURE(v.kind);
    CAPTURE(v.bptt);
    CAPTURE(v.recompute);
    ModelConfig c;
    c.kind = v.kind, c.n_token = 7, c.n_layer = 2, c.n_head = 2, c.d_head = 4, c.d_model = 8;
    c.d_inner = 12, c.dropout = 0.1;
    c.mem_len = c.kind == "xl" || c.kind == "xl_rmt" ? 3 : 0;
    c.num_mem_tokens = c.kind == "baseline" || c.kind == "xl" ? 0 : 2;
    Model model(c, be);
    model.init_weights(1);
    Engine engine(model);
    engine.set_recompute(v.recompute);
    Adam adam(be, model.num_params());
    const int B = 3, T = 12;
    std::vector<int32_t> input(B * T), target(B * T);
    SplitMixRng rng(2);
    auto step = [&](int i) {
      for (auto& x : input) x = int32_t(rng.below(7));
      for (auto& x : target) x = int32_t(rng.below(7));
      forward_loss(engine, input.data(), target.data(), B, T, {5, 4, 3}, 6, true, uint64_t(i));
      engine.backward(v.bptt);
      clip_grad_norm(be, model.grads, 1.0);
      adam.step(be, model.params, model.grads, 1e-3f);
    };
    step(0);
    step(1);
    const int64_t warm = guarded_cpu_allocations();
    step(2);
    step(3);
    CHECK(guarded_cpu_allocations() == warm);
  }
}
