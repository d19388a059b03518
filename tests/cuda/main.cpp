// rmt_cuda_tests: the GPU suite (docs/cuda.md; `make test-cuda`, ctest -L cuda). Every test
// compares the cuda backend with the cpu backend on the same inputs. Without a usable GPU it
// fails at once with one line: it never passes where it did not run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "lib/core/backend.h"

int main(int argc, char** argv) {
  // Every scratch request of the backend holds NaN until a kernel writes it (lib/cuda/exec.h);
  // read when the backend is made, below.
  setenv("RMT_CUDA_NAN_SCRATCH", "1", 1);
  std::printf("rmt_cuda_tests: %s\n", rmt::cuda_description().c_str());
  try {
    rmt::Backend& be = rmt::backend_by_name("cuda");
    // The first use makes the context, the stream and the cuBLAS handle: fail here, clearly,
    // rather than in the first test.
    void* p = be.allocate(64);
    be.fill_bytes(p, 0, 64);
    be.synchronize();
    be.deallocate(p, 64);
  } catch (const std::exception& e) {
    std::printf("rmt_cuda_tests: FAIL: no usable GPU, nothing was tested: %s\n", e.what());
    return 1;
  }
  std::printf("rmt_cuda_tests: cpu threads %d; every line 'cuda-vs-cpu' is one tensor compared\n",
              rmt::num_threads());
  std::printf("rmt_cuda_tests: device buffers and every scratch request hold NaN until written "
              "(tests/cuda/nan_filled.h, RMT_CUDA_NAN_SCRATCH=1)\n");
  doctest::Context context(argc, argv);
  return context.run();
}
