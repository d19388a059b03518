#pragma once
// The relative positional embedding's frequencies, shared by the CPU backend and the CUDA
// kernels: f_i = 1 / 10000^(2i/d) in fp32. The power is taken in double and rounded to float
// once, so that host and device give the same float (a device's powf can be an ulp off, which
// moves a far position's angle by 3e-5). For every d that is a multiple of 8 up to 448, and for
// 512 and 1024, this is also glibc's float powf bit for bit (tests/test_cuda_kernels_host.cpp),
// so those models' numbers did not change when it replaced powf.
#include <cmath>

#include "lib/core/host_device.h"

namespace rmt {

inline RMT_HOST_DEVICE float positional_inv_freq(int i, int d) {
  const float exponent = (float)(2 * i) / (float)d;
  return 1.f / (float)::pow(10000.0, (double)exponent);
}

}  // namespace rmt
