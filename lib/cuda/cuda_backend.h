#pragma once
// The CUDA backend (built with RMT_CUDA, docs/cuda.md): the Backend kernel set on one GPU.
// GEMMs go through cuBLAS (fp32, no TF32); every other kernel is a driver of lib/cuda/kernels.h,
// lib/cuda/reduction_kernels.h or lib/cuda/attention_kernels.h (whose products are cuBLAS
// strided-batched calls) run by a CudaExec (lib/cuda/exec.h, lib/cuda/cuda_exec.cuh): one launch
// per pass on the backend's stream. Everything is issued on that one stream in call order, so results are
// deterministic for a fixed input on the same GPU (no atomics in any kernel; cuBLAS is
// bit-reproducible on one stream).
//
// It is built into its own library, librmt_cuda.so (with cuBLAS and the CUDA runtime), which
// the rest of rmt loads only when the cuda device is first asked for: backend_by_name("cuda") and
// cuda_description() of lib/core/backend.h call the library's two C entry points below. A program
// that never uses the GPU never loads cuBLAS (lib/core/backends.cpp says why).
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/core/backend.h"

namespace rmt::cuda {

class CudaBackend;  // lib/cuda/cuda_backend.cu

// The CUDA backend on device 0 (CUDA_VISIBLE_DEVICES picks which GPU that is). Fails
// (rmt::Error) with one line when there is none: "device 'cuda': no CUDA device found (why)".
// Building it creates no CUDA context: the context, the stream and the cuBLAS handle are made
// at the first memory or kernel call, so naming the device (a sweep checking its runs' devices)
// costs no GPU memory.
Backend& cuda_backend();

// One line for `rmt --version`: the runtime and driver versions, the device (name, compute
// capability, SMs, memory), the architectures this build has kernels for; or why there is no
// device. Never fails.
std::string cuda_description();

// The architectures the kernels were compiled for (CMAKE_CUDA_ARCHITECTURES), e.g. "90".
std::string cuda_architectures();

}  // namespace rmt::cuda

// The library's entry points, looked up by name (dlsym) in lib/core/backends.cpp:
//   the backend, or null with the one-line reason in *error;
extern "C" rmt::Backend* rmt_cuda_backend_v3(std::string* error);
//   cuda_description() into *out.
extern "C" void rmt_cuda_description_v3(std::string* out);
