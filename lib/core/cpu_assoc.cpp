// ARMT's associative-memory kernels on the CPU (Backend::dpfp_forward .. assoc_write_backward):
// each output element is its item of lib/core/assoc_math.h, the same expression the CUDA
// backend's passes compute (lib/cuda/assoc_kernels.h). Items own their outputs and sum in a fixed
// order, so results do not depend on the thread count.
#include <cstdint>

#include "lib/core/assoc_math.h"
#include "lib/core/cpu_kernels.h"

namespace rmt::cpu {

namespace {
// Below this many items a loop runs on one thread (a fork costs more than it saves).
constexpr int64_t kAssocGrain = 1 << 12;
}  // namespace

void dpfp_forward(float* out, const float* x, int64_t n, int dm) {
  const int64_t total = n * assoc::kNu * 2 * dm;
#pragma omp parallel for schedule(static) if (total > kAssocGrain)
  for (int64_t i = 0; i < total; ++i) out[i] = assoc::dpfp_item(x, i, dm);
}

void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) {
  const int64_t total = n * dm;
#pragma omp parallel for schedule(static) if (total > kAssocGrain)
  for (int64_t i = 0; i < total; ++i) dx[i] = assoc::dpfp_backward_item(dout, x, i, dm);
}

void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                        int rows, int B, int Dk, int d, float eps) {
  const int64_t n = int64_t(rows) * B;
#pragma omp parallel for schedule(static) if (n * Dk > kAssocGrain)
  for (int64_t rb = 0; rb < n; ++rb) den[rb] = assoc::read_den_item(phi, z, rb, B, Dk, eps);
  const int64_t total = n * d;
#pragma omp parallel for schedule(static) if (total * Dk > kAssocGrain)
  for (int64_t i = 0; i < total; ++i) out[i] = assoc::read_item(phi, A, den, i, B, Dk, d);
}

void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                         const float* den, const float* phi, const float* A, const float* z,
                         int rows, int B, int Dk, int d) {
  const int64_t nphi = int64_t(rows) * B * Dk, nA = int64_t(B) * Dk * d, nz = int64_t(B) * Dk;
#pragma omp parallel for schedule(static) if (nphi * d > kAssocGrain)
  for (int64_t i = 0; i < nphi; ++i)
    dphi[i] += assoc::read_dphi_item(dout, out, den, A, z, i, B, Dk, d);
#pragma omp parallel for schedule(static) if (nA * rows > kAssocGrain)
  for (int64_t i = 0; i < nA; ++i) dA[i] += assoc::read_dA_item(dout, den, phi, i, rows, B, Dk, d);
#pragma omp parallel for schedule(static) if (nz * rows * d > kAssocGrain)
  for (int64_t i = 0; i < nz; ++i)
    dz[i] += assoc::read_dz_item(dout, out, den, phi, i, rows, B, Dk, d);
}

void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                         const float* key, const float* v, const float* vbar, const float* den,
                         const float* blogit, int m, int B, int Dk, int d, float eps) {
  const int64_t nA = int64_t(B) * Dk * d, nz = int64_t(B) * Dk;
#pragma omp parallel for schedule(static) if (nA * m > kAssocGrain)
  for (int64_t i = 0; i < nA; ++i)
    A_out[i] = assoc::write_A_item(A_in, key, v, vbar, blogit, i, m, B, Dk, d);
#pragma omp parallel for schedule(static) if (nz * m * Dk > kAssocGrain)
  for (int64_t i = 0; i < nz; ++i) z_out[i] = assoc::write_z_item(z_in, key, den, i, m, B, Dk, eps);
}

void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                          const float* dz_out, const float* key, const float* v, const float* vbar,
                          const float* den, const float* blogit, int m, int B, int Dk, int d,
                          float eps) {
  const int64_t nj = int64_t(m) * B;
#pragma omp parallel for schedule(static) if (nj * d * Dk > kAssocGrain)
  for (int64_t i = 0; i < nj * d; ++i) dv[i] = assoc::write_dv_item(dA_out, key, blogit, i, B, Dk, d);
#pragma omp parallel for schedule(static) if (nj * Dk * d > kAssocGrain)
  for (int64_t i = 0; i < nj * Dk; ++i)
    dkey[i] = assoc::write_dkey_item(dA_out, dz_out, key, v, vbar, den, blogit, i, B, Dk, d, eps);
#pragma omp parallel for schedule(static) if (nj * Dk * d > kAssocGrain)
  for (int64_t jb = 0; jb < nj; ++jb)
    dblogit[jb] = assoc::write_dblogit_item(dA_out, key, v, vbar, blogit, jb, B, Dk, d);
}

}  // namespace rmt::cpu
