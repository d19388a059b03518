// The CUDA backend as every build sees it, GPU or not (the GPU itself: tests/cuda, make
// test-cuda). The unit suite hides GPUs (tests/test_main.cpp), so these hold on any machine.
#include <doctest/doctest.h>

#include <string>

#include "lib/core/backend.h"
#include "tests/cli.h"

namespace {
bool built_with_cuda() { return rmt::known_devices().find("cuda") != std::string::npos; }
}  // namespace

TEST_CASE("rmt --version names the CUDA runtime and why there is no device, or says the build has none") {
  Run v = rmt_run("--version", true);
  CAPTURE(v.output);
  CHECK(v.status == 0);
  if (built_with_cuda()) {
    CHECK(v.output.find("\ncuda: CUDA runtime ") != std::string::npos);
    CHECK(v.output.find("; no CUDA device (") != std::string::npos);
    CHECK(rmt::cuda_description().find("CUDA runtime ") == 0);
  } else {
    CHECK(v.output.find("\ncuda: no (CPU backend only)\n") != std::string::npos);
  }
}

#ifdef RMT_CUDA_TESTS
// Never a skip that looks like a pass: without a GPU the suite fails, at once, with one line.
TEST_CASE("the GPU suite fails with one clear line where no GPU is visible") {
  const std::string cmd = std::string(RMT_CUDA_TESTS) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  CAPTURE(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("rmt_cuda_tests: FAIL: no usable GPU, nothing was tested: device 'cuda': no CUDA "
                 "device found (") != std::string::npos);
  CHECK(out.find("cuda-vs-cpu") == std::string::npos);
}
#endif
