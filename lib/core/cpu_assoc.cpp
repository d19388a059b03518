// ARMT's associative-memory kernels on the CPU (Backend::dpfp_forward .. assoc_write_backward):
// each output element is computed by the same operations, in the same order, as its item of
// lib/core/assoc_math.h (what the CUDA backend's passes compute, lib/cuda/assoc_kernels.h), so the
// two are bit-identical (the build has -ffp-contract=off; tests/test_cuda_kernels_host.cpp checks
// it). Where an item walks a matrix column (stride d) or recomputes a row scalar (a sigmoid, a
// denominator's gradient, gamma), the loops here are turned around instead: a row of outputs is
// accumulated over k together (contiguous, vectorised), and the row scalars are computed once
// into host scratch. Outputs are owned by one iteration and sum in a fixed order, so results do
// not depend on the thread count.
#include <cstdint>
#include <vector>

#include "lib/core/assoc_math.h"
#include "lib/core/cpu_backend.h"
#include "lib/core/cpu_kernels.h"

namespace rmt::cpu {

namespace {
// Below this much work a loop runs on one thread (a fork costs more than it saves).
constexpr int64_t kAssocGrain = 1 << 12;

// The calling thread's scratch: n floats (grown, kept).
float* scratch(int slot, int64_t n) {
  thread_local std::vector<float> buf[3];
  if (int64_t(buf[slot].size()) < n) buf[slot].resize(size_t(n));
  return buf[slot].data();
}
}  // namespace

void CpuBackend::dpfp_forward(float* out, const float* x, int64_t n, int dm) {
  const int64_t total = n * assoc::kNu * 2 * dm;
#pragma omp parallel for schedule(static) if (total > kAssocGrain)
  for (int64_t i = 0; i < total; ++i) out[i] = assoc::dpfp_item(x, i, dm);
}

void CpuBackend::dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) {
  const int64_t total = n * dm;
#pragma omp parallel for schedule(static) if (total > kAssocGrain)
  for (int64_t i = 0; i < total; ++i) dx[i] = assoc::dpfp_backward_item(dout, x, i, dm);
}

void CpuBackend::assoc_read_forward(float* out, float* den, const float* phi, const float* A,
                                    const float* z, int rows, int B, int Dk, int d, float eps) {
  const int64_t n = int64_t(rows) * B;
  // out[rb, t] = (sum_k phi[rb, k] A_b[k, t]) / den[rb]: read_item, the row at once
#pragma omp parallel for schedule(static) if (n * Dk * d > kAssocGrain)
  for (int64_t rb = 0; rb < n; ++rb) {
    den[rb] = assoc::read_den_item(phi, z, rb, B, Dk, eps);
    const float* p = phi + rb * Dk;
    const float* Ab = A + (rb % B) * Dk * d;
    float* o = out + rb * d;
    for (int t = 0; t < d; ++t) o[t] = 0.f;
    for (int k = 0; k < Dk; ++k) {
      const float pk = p[k];
      const float* Ak = Ab + int64_t(k) * d;
      for (int t = 0; t < d; ++t) o[t] += pk * Ak[t];
    }
    const float dr = den[rb];
    for (int t = 0; t < d; ++t) o[t] = o[t] / dr;
  }
}

void CpuBackend::assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout,
                                     const float* out, const float* den, const float* phi,
                                     const float* A, const float* z, int rows, int B, int Dk,
                                     int d) {
  const int64_t n = int64_t(rows) * B;
  float* s = scratch(0, n);  // read_s of every row
#pragma omp parallel for schedule(static) if (n * d > kAssocGrain)
  for (int64_t rb = 0; rb < n; ++rb) s[rb] = assoc::read_s(dout, out, den, rb, d);
  // dphi[rb, k] += (A_b[k] . dout[rb]) / den[rb] - s[rb] z_b[k]   (read_dphi_item)
#pragma omp parallel for schedule(static) if (n * Dk * d > kAssocGrain)
  for (int64_t rb = 0; rb < n; ++rb) {
    const int64_t b = rb % B;
    const float* g = dout + rb * d;
    for (int k = 0; k < Dk; ++k) {
      const float* Ak = A + (b * Dk + k) * d;
      float acc = 0.f;
      for (int t = 0; t < d; ++t) acc += Ak[t] * g[t];
      dphi[rb * Dk + k] += acc / den[rb] - s[rb] * z[b * Dk + k];
    }
  }
  // dA_b[k, t] += sum_r phi[rb, k] (dout[rb, t] / den[rb]); dz_b[k] -= sum_r s[rb] phi[rb, k]
  // (read_dA_item, read_dz_item), a row of dA_b at once
#pragma omp parallel for schedule(static) if (int64_t(B) * Dk * rows * d > kAssocGrain)
  for (int64_t bk = 0; bk < int64_t(B) * Dk; ++bk) {
    const int64_t b = bk / Dk;
    const int k = int(bk % Dk);
    float* acc = scratch(1, d);
    for (int t = 0; t < d; ++t) acc[t] = 0.f;
    float zacc = 0.f;
    for (int r = 0; r < rows; ++r) {
      const int64_t rb = int64_t(r) * B + b;
      const float pk = phi[rb * Dk + k];
      const float* g = dout + rb * d;
      const float dr = den[rb];
      for (int t = 0; t < d; ++t) acc[t] += pk * (g[t] / dr);
      zacc += s[rb] * pk;
    }
    float* dArow = dA + bk * d;
    for (int t = 0; t < d; ++t) dArow[t] += acc[t];
    dz[bk] += -zacc;
  }
}

void CpuBackend::assoc_write_forward(float* A_out, float* z_out, const float* A_in,
                                     const float* z_in, const float* key, const float* v,
                                     const float* vbar, const float* den, const float* blogit,
                                     int m, int B, int Dk, int d, float eps) {
  const int64_t nj = int64_t(m) * B;
  float* beta = scratch(0, nj);
  float* gamma = scratch(1, nj);
  for (int64_t jb = 0; jb < nj; ++jb) {
    beta[jb] = assoc::sigmoid(blogit[jb]);
    gamma[jb] = assoc::write_gamma(key, den, jb, Dk, eps);
  }
  // A_out[b, k, :] = A_in[b, k, :] + sum_j (key[jb, k] (v - vbar)[jb, :]) beta_j   (write_A_item);
  // z_out[b, k] = z_in[b, k] + sum_j gamma_j key[jb, k]                           (write_z_item)
#pragma omp parallel for schedule(static) if (int64_t(B) * Dk * d * m > kAssocGrain)
  for (int64_t bk = 0; bk < int64_t(B) * Dk; ++bk) {
    const int64_t b = bk / Dk;
    const int k = int(bk % Dk);
    float* o = A_out + bk * d;
    for (int t = 0; t < d; ++t) o[t] = 0.f;
    float zacc = 0.f;
    for (int j = 0; j < m; ++j) {
      const int64_t jb = int64_t(j) * B + b;
      const float kk = key[jb * Dk + k], bj = beta[jb];
      const float* vj = v + jb * d;
      if (vbar) {
        const float* vbj = vbar + jb * d;
        for (int t = 0; t < d; ++t) o[t] += kk * (vj[t] - vbj[t]) * bj;
      } else {
        for (int t = 0; t < d; ++t) o[t] += kk * vj[t] * bj;
      }
      zacc += gamma[jb] * kk;
    }
    if (A_in) {
      const float* a = A_in + bk * d;
      for (int t = 0; t < d; ++t) o[t] = a[t] + o[t];
    }
    z_out[bk] = z_in ? z_in[bk] + zacc : zacc;
  }
}

void CpuBackend::assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                                      const float* dz_out, const float* key, const float* v,
                                      const float* vbar, const float* den, const float* blogit,
                                      int m, int B, int Dk, int d, float eps) {
  const int64_t nj = int64_t(m) * B;
  // per memory row: dv (write_dv_item, a row at once), dkey (write_dkey_item), dblogit
  // (write_dblogit_item, from the same sums over t)
#pragma omp parallel for schedule(static) if (nj * Dk * d > kAssocGrain)
  for (int64_t jb = 0; jb < nj; ++jb) {
    const float* dAb = dA_out + (jb % B) * Dk * d;
    const float* kj = key + jb * Dk;
    const float beta = assoc::sigmoid(blogit[jb]);
    const float gamma = assoc::write_gamma(key, den, jb, Dk, eps);
    float* o = dv + jb * d;
    for (int t = 0; t < d; ++t) o[t] = 0.f;
    float bl = 0.f;
    for (int k = 0; k < Dk; ++k) {
      const float c = kj[k];
      const float* dAk = dAb + int64_t(k) * d;
      for (int t = 0; t < d; ++t) o[t] += c * dAk[t];
      const float dot = assoc::write_dA_dot_diff(dA_out, v, vbar, jb, k, B, Dk, d);
      dkey[jb * Dk + k] = beta * dot + gamma * dz_out[(jb % B) * Dk + k];
      bl += c * dot;
    }
    for (int t = 0; t < d; ++t) o[t] = beta * o[t];
    dblogit[jb] = beta * (1.f - beta) * bl;
  }
}

}  // namespace rmt::cpu
