#pragma once
// ARMT's associative-memory kernels (Backend::dpfp_forward .. assoc_write_backward, docs/armt.md)
// as drivers on an Exec (lib/cuda/exec.h): one ex.for_each pass per output, each item the
// expression of lib/core/assoc_math.h that the CPU backend's loops compute, so HostExec is
// bit-identical to the CPU backend (tests/test_cuda_kernels_host.cpp).
//
// Parallelisation: one item per output element; an item's sums (over Dk, d, the rows or the
// memory tokens) are loops in a fixed order. What a GPU session should optimise, measured: the
// read's products are GEMM-shaped per sample (strided-batched cuBLAS would serve them), and the
// items that recompute a row scalar (read_s, gamma, the sigmoid) could read it from scratch.
#include <cstdint>

#include "lib/core/assoc_math.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

template <class Exec>
void dpfp_forward(Exec& ex, float* out, const float* x, int64_t n, int dm) {
  const int64_t total = n * assoc::kNu * 2 * dm;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t i) { out[i] = assoc::dpfp_item(x, i, dm); });
}

template <class Exec>
void dpfp_backward(Exec& ex, float* dx, const float* dout, const float* x, int64_t n, int dm) {
  const int64_t total = n * dm;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t i) {
    dx[i] = assoc::dpfp_backward_item(dout, x, i, dm);
  });
}

template <class Exec>
void assoc_read_forward(Exec& ex, float* out, float* den, const float* phi, const float* A,
                        const float* z, int rows, int B, int Dk, int d, float eps) {
  const int64_t n = int64_t(rows) * B;
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t rb) {
    den[rb] = assoc::read_den_item(phi, z, rb, B, Dk, eps);
  });
  ex.for_each(n * d, [=] RMT_HOST_DEVICE(int64_t i) {
    out[i] = assoc::read_item(phi, A, den, i, B, Dk, d);
  });
}

template <class Exec>
void assoc_read_backward(Exec& ex, float* dphi, float* dA, float* dz, const float* dout,
                         const float* out, const float* den, const float* phi, const float* A,
                         const float* z, int rows, int B, int Dk, int d) {
  if (B <= 0 || Dk <= 0 || d <= 0) return;
  const int64_t nphi = int64_t(rows) * B * Dk, nA = int64_t(B) * Dk * d, nz = int64_t(B) * Dk;
  if (nphi > 0)
    ex.for_each(nphi, [=] RMT_HOST_DEVICE(int64_t i) {
      dphi[i] += assoc::read_dphi_item(dout, out, den, A, z, i, B, Dk, d);
    });
  ex.for_each(nA, [=] RMT_HOST_DEVICE(int64_t i) {
    dA[i] += assoc::read_dA_item(dout, den, phi, i, rows, B, Dk, d);
  });
  ex.for_each(nz, [=] RMT_HOST_DEVICE(int64_t i) {
    dz[i] += assoc::read_dz_item(dout, out, den, phi, i, rows, B, Dk, d);
  });
}

template <class Exec>
void assoc_write_forward(Exec& ex, float* A_out, float* z_out, const float* A_in,
                         const float* z_in, const float* key, const float* v, const float* vbar,
                         const float* den, const float* blogit, int m, int B, int Dk, int d,
                         float eps) {
  if (B <= 0 || Dk <= 0 || d <= 0) return;
  ex.for_each(int64_t(B) * Dk * d, [=] RMT_HOST_DEVICE(int64_t i) {
    A_out[i] = assoc::write_A_item(A_in, key, v, vbar, blogit, i, m, B, Dk, d);
  });
  ex.for_each(int64_t(B) * Dk, [=] RMT_HOST_DEVICE(int64_t i) {
    z_out[i] = assoc::write_z_item(z_in, key, den, i, m, B, Dk, eps);
  });
}

template <class Exec>
void assoc_write_backward(Exec& ex, float* dkey, float* dv, float* dblogit, const float* dA_out,
                          const float* dz_out, const float* key, const float* v, const float* vbar,
                          const float* den, const float* blogit, int m, int B, int Dk, int d,
                          float eps) {
  const int64_t nj = int64_t(m) * B;
  if (nj <= 0) return;
  ex.for_each(nj * d, [=] RMT_HOST_DEVICE(int64_t i) {
    dv[i] = assoc::write_dv_item(dA_out, key, blogit, i, B, Dk, d);
  });
  ex.for_each(nj * Dk, [=] RMT_HOST_DEVICE(int64_t i) {
    dkey[i] = assoc::write_dkey_item(dA_out, dz_out, key, v, vbar, den, blogit, i, B, Dk, d, eps);
  });
  ex.for_each(nj, [=] RMT_HOST_DEVICE(int64_t jb) {
    dblogit[jb] = assoc::write_dblogit_item(dA_out, key, v, vbar, blogit, jb, B, Dk, d);
  });
}

}  // namespace rmt::cuda
