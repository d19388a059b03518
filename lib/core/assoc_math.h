#pragma once
// The associative memory of ARMT (docs/armt.md) as per-item bodies: what one output element of
// each of its kernels (the dpfp_ and assoc_ rows of lib/core/backend_kernels.h) is.
// The CPU backend runs them in OpenMP loops (cpu_assoc.cpp), the CUDA backend as passes of
// ex.for_each (lib/cuda/assoc_kernels.h): the same expressions in the same order on both, so the
// host stand-in of the CUDA backend is bit-identical to the CPU backend.
//
// Layouts (time-major as every activation, docs: engine.h): item row r of sample b is buffer
// row r*B + b ("rb"). Per sample b the memory is A_b [Dk, d] (A [B, Dk, d]) and z_b [Dk]
// (z [B, Dk]); Dk = 6 dm (DPFP with nu = 3).
//
// Every sum runs over its index in increasing order, in float (deterministic; no atomics).
// Each item recomputes the few row scalars it needs (a denominator, a sigmoid) instead of
// reading another pass's scratch: the kernels stay single-pass per output and need no scratch.
#include <math.h>

#include <cstdint>

#include "lib/core/host_device.h"

namespace rmt::assoc {

// DPFP's nu: out = [x'*roll(x',1), x'*roll(x',2), x'*roll(x',3)] (authors' language_modeling.py:36)
inline constexpr int kNu = 3;

// x' = [relu(x); relu(-x)] of one row x [dm], element i < 2 dm.
RMT_HOST_DEVICE inline float dpfp_prime(const float* x, int dm, int i) {
  const float v = i < dm ? x[i] : -x[i - dm];
  return v > 0.f ? v : 0.f;
}

// out[row, j*2dm + i] = x'[i] * x'[(i - j - 1) mod 2dm]  (torch.roll shifts toward higher index)
RMT_HOST_DEVICE inline float dpfp_item(const float* x, int64_t idx, int dm) {
  const int n2 = 2 * dm, width = kNu * n2;
  const int64_t row = idx / width;
  const int c = int(idx % width), j = c / n2 + 1, i = c % n2;
  const float* xr = x + row * dm;
  return dpfp_prime(xr, dm, i) * dpfp_prime(xr, dm, ((i - j) % n2 + n2) % n2);
}

// dx[row, i] for i < dm: the gradient of x'[i] (through relu(x)) minus that of x'[dm+i]
// (through relu(-x)); x' at 0 passes no gradient (torch's relu).
RMT_HOST_DEVICE inline float dpfp_backward_item(const float* dout, const float* x, int64_t idx,
                                                int dm) {
  const int n2 = 2 * dm, width = kNu * n2;
  const int64_t row = idx / dm;
  const int i = int(idx % dm);
  const float* xr = x + row * dm;
  const float* g = dout + row * width;
  // d x'[p] = sum_j g[j, p] x'[p - j] + g[j, p + j] x'[p + j]
  auto dprime = [&](int p) {
    float acc = 0.f;
    for (int j = 1; j <= kNu; ++j) {
      const int lo = ((p - j) % n2 + n2) % n2, hi = (p + j) % n2;
      acc += g[(j - 1) * n2 + p] * dpfp_prime(xr, dm, lo);
      acc += g[(j - 1) * n2 + hi] * dpfp_prime(xr, dm, hi);
    }
    return acc;
  };
  float dx = 0.f;
  if (xr[i] > 0.f) dx += dprime(i);
  if (xr[i] < 0.f) dx -= dprime(dm + i);
  return dx;
}

// den[rb] = phi[rb] . z_b + eps  (the read's normaliser, authors' line 75)
RMT_HOST_DEVICE inline float read_den_item(const float* phi, const float* z, int64_t rb, int B,
                                           int Dk, float eps) {
  const float* p = phi + rb * Dk;
  const float* zb = z + (rb % B) * Dk;
  float acc = 0.f;
  for (int k = 0; k < Dk; ++k) acc += zb[k] * p[k];
  return acc + eps;
}

// out[rb, t] = (phi[rb] A_b)[t] / den[rb]  (authors' lines 74-76)
RMT_HOST_DEVICE inline float read_item(const float* phi, const float* A, const float* den,
                                       int64_t idx, int B, int Dk, int d) {
  const int64_t rb = idx / d;
  const int t = int(idx % d);
  const float* p = phi + rb * Dk;
  const float* Ab = A + (rb % B) * Dk * d + t;
  float acc = 0.f;
  for (int k = 0; k < Dk; ++k) acc += p[k] * Ab[int64_t(k) * d];
  return acc / den[rb];
}

// s[rb] = (dout[rb] . out[rb]) / den[rb]: minus the gradient of the denominator.
RMT_HOST_DEVICE inline float read_s(const float* dout, const float* out, const float* den,
                                    int64_t rb, int d) {
  const float* g = dout + rb * d;
  const float* o = out + rb * d;
  float acc = 0.f;
  for (int t = 0; t < d; ++t) acc += g[t] * o[t];
  return acc / den[rb];
}

// d phi[rb, k] = (A_b dout[rb])[k] / den[rb] - s[rb] z_b[k]
RMT_HOST_DEVICE inline float read_dphi_item(const float* dout, const float* out, const float* den,
                                            const float* A, const float* z, int64_t idx, int B,
                                            int Dk, int d) {
  const int64_t rb = idx / Dk;
  const int k = int(idx % Dk);
  const int64_t b = rb % B;
  const float* g = dout + rb * d;
  const float* Ak = A + (b * Dk + k) * d;
  float acc = 0.f;
  for (int t = 0; t < d; ++t) acc += Ak[t] * g[t];
  return acc / den[rb] - read_s(dout, out, den, rb, d) * z[b * Dk + k];
}

// d A_b[k, t] = sum_r phi[rb, k] dout[rb, t] / den[rb]
RMT_HOST_DEVICE inline float read_dA_item(const float* dout, const float* den, const float* phi,
                                          int64_t idx, int rows, int B, int Dk, int d) {
  const int64_t b = idx / (int64_t(Dk) * d);
  const int k = int(idx / d % Dk), t = int(idx % d);
  float acc = 0.f;
  for (int r = 0; r < rows; ++r) {
    const int64_t rb = int64_t(r) * B + b;
    acc += phi[rb * Dk + k] * (dout[rb * d + t] / den[rb]);
  }
  return acc;
}

// d z_b[k] = -sum_r s[rb] phi[rb, k]
RMT_HOST_DEVICE inline float read_dz_item(const float* dout, const float* out, const float* den,
                                          const float* phi, int64_t idx, int rows, int B, int Dk,
                                          int d) {
  const int64_t b = idx / Dk;
  const int k = int(idx % Dk);
  float acc = 0.f;
  for (int r = 0; r < rows; ++r) {
    const int64_t rb = int64_t(r) * B + b;
    acc += read_s(dout, out, den, rb, d) * phi[rb * Dk + k];
  }
  return -acc;
}

// beta = sigmoid(W_b m + b_b), as torch.sigmoid
RMT_HOST_DEVICE inline float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// The write's correction gamma of memory row jb (authors' lines 105-107): without a previous
// memory (den null) 1, else clip(1 - den / (|k|^2 + eps), 0, 1); it carries no gradient.
RMT_HOST_DEVICE inline float write_gamma(const float* key, const float* den, int64_t jb, int Dk,
                                         float eps) {
  if (!den) return 1.f;
  const float* kj = key + jb * Dk;
  float sq = 0.f;
  for (int k = 0; k < Dk; ++k) sq += kj[k] * kj[k];
  const float norm = sqrtf(sq);  // torch.linalg.norm(mk) ** 2
  const float g = 1.f - den[jb] / (norm * norm + eps);
  return g < 0.f ? 0.f : (g > 1.f ? 1.f : g);
}

// A_out[b, k, t] = A_in[b, k, t] + sum_j beta_j key[jb, k] (v[jb, t] - vbar[jb, t])
// (authors' lines 115-125; A_in null: 0, vbar null: 0)
RMT_HOST_DEVICE inline float write_A_item(const float* A_in, const float* key, const float* v,
                                          const float* vbar, const float* blogit, int64_t idx,
                                          int m, int B, int Dk, int d) {
  const int64_t b = idx / (int64_t(Dk) * d);
  const int k = int(idx / d % Dk), t = int(idx % d);
  float acc = 0.f;
  for (int j = 0; j < m; ++j) {
    const int64_t jb = int64_t(j) * B + b;
    const float diff = vbar ? v[jb * d + t] - vbar[jb * d + t] : v[jb * d + t];
    acc += key[jb * Dk + k] * diff * sigmoid(blogit[jb]);
  }
  return A_in ? A_in[idx] + acc : acc;
}

// z_out[b, k] = z_in[b, k] + sum_j gamma_j key[jb, k]  (authors' line 127)
RMT_HOST_DEVICE inline float write_z_item(const float* z_in, const float* key, const float* den,
                                          int64_t idx, int m, int B, int Dk, float eps) {
  const int64_t b = idx / Dk;
  const int k = int(idx % Dk);
  float acc = 0.f;
  for (int j = 0; j < m; ++j) {
    const int64_t jb = int64_t(j) * B + b;
    acc += write_gamma(key, den, jb, Dk, eps) * key[jb * Dk + k];
  }
  return z_in ? z_in[idx] + acc : acc;
}

// d v[jb, t] = beta_j sum_k key[jb, k] dA_b[k, t]  (d vbar = -d v)
RMT_HOST_DEVICE inline float write_dv_item(const float* dA, const float* key, const float* blogit,
                                           int64_t idx, int B, int Dk, int d) {
  const int64_t jb = idx / d;
  const int t = int(idx % d);
  const float* dAb = dA + (jb % B) * Dk * d + t;
  const float* kj = key + jb * Dk;
  float acc = 0.f;
  for (int k = 0; k < Dk; ++k) acc += kj[k] * dAb[int64_t(k) * d];
  return sigmoid(blogit[jb]) * acc;
}

// sum_t dA_b[k, t] (v - vbar)[jb, t]: the gradient of beta_j key[jb, k]
RMT_HOST_DEVICE inline float write_dA_dot_diff(const float* dA, const float* v, const float* vbar,
                                               int64_t jb, int k, int B, int Dk, int d) {
  const float* dAk = dA + ((jb % B) * Dk + k) * d;
  const float* vj = v + jb * d;
  const float* vbj = vbar ? vbar + jb * d : nullptr;
  float acc = 0.f;
  for (int t = 0; t < d; ++t) acc += dAk[t] * (vbj ? vj[t] - vbj[t] : vj[t]);
  return acc;
}

// d key[jb, k] = beta_j sum_t dA_b[k, t] (v - vbar)[jb, t] + gamma_j dz_b[k]
RMT_HOST_DEVICE inline float write_dkey_item(const float* dA, const float* dz, const float* key,
                                             const float* v, const float* vbar, const float* den,
                                             const float* blogit, int64_t idx, int B, int Dk,
                                             int d, float eps) {
  const int64_t jb = idx / Dk;
  const int k = int(idx % Dk);
  return sigmoid(blogit[jb]) * write_dA_dot_diff(dA, v, vbar, jb, k, B, Dk, d) +
         write_gamma(key, den, jb, Dk, eps) * dz[(jb % B) * Dk + k];
}

// d blogit[jb] = beta (1 - beta) sum_k key[jb, k] sum_t dA_b[k, t] (v - vbar)[jb, t]
RMT_HOST_DEVICE inline float write_dblogit_item(const float* dA, const float* key, const float* v,
                                                const float* vbar, const float* blogit,
                                                int64_t jb, int B, int Dk, int d) {
  float acc = 0.f;
  for (int k = 0; k < Dk; ++k)
    acc += key[jb * Dk + k] * write_dA_dot_diff(dA, v, vbar, jb, k, B, Dk, d);
  const float beta = sigmoid(blogit[jb]);
  return beta * (1.f - beta) * acc;
}

}  // namespace rmt::assoc
