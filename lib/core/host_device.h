#pragma once
// RMT_HOST_DEVICE marks a function that both the host and a CUDA device run: the per-item bodies
// of the CUDA kernels (lib/cuda/) and what they share with the CPU backend (the dropout mask).
// Outside nvcc it is empty, so a plain C++ compiler sees ordinary inline functions and the tests
// can run the CUDA kernels' bodies on the host (lib/cuda/exec.h).
#if defined(__CUDACC__)
#define RMT_HOST_DEVICE __host__ __device__
#else
#define RMT_HOST_DEVICE
#endif
