#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // The unit suite tests what a machine without a GPU sees: with GPUs hidden from this process
  // and the rmt commands it runs, `--device cuda` is the same clear error everywhere (built
  // without CUDA, or "no CUDA device found"), also on a machine that has one. The GPU itself is
  // tested by rmt_cuda_tests (tests/cuda/, make test-cuda).
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  doctest::Context context(argc, argv);
  return context.run();
}
