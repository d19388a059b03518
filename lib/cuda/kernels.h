#pragma once
// The CUDA backend's element-wise and gather/scatter drivers (lib/core/backend_kernels.h's
// kernels): fill, the GEMMs (one ex.sgemm, cuBLAS), add_bias, add_bias_relu, embedding, relu,
// dropout, positional_embedding, broadcast_batch, scale, add_inplace, adam_update. The
// reductions (LayerNorm, cross-entropy, sums of squares, column sums) are in reduction_kernels.h,
// the attention in attention_kernels.h, the associative memory in assoc_kernels.h. Each follows
// lib/cuda/exec.h: passes of ex.for_each(n, item), items write only what they own, no atomics,
// every sum a loop in a fixed order. Each driver is named as its Backend kernel and takes exactly
// its arguments after the Exec: DriverBackend (lib/cuda/driver_backend.h) calls it by that name.
//
// Semantics and arithmetic are the CPU backend's (lib/core/cpu_backend.cpp), expression by
// expression, so that on the host (HostExec, tests/test_cuda_kernels_host.cpp) every driver here
// is bit-identical to it. On a GPU, bit-identity also needs nvcc's --fmad=false and no fast-math
// (sinf, cosf, powf differ from glibc's by an ulp or so: the GPU suite compares with a tolerance).
//
// Parallelisation (items per pass):
//   elementwise kernels: one item per element.
//   embedding_backward: one item per position finds whether it is its id's first occurrence and
//     the next position with the same id (a scan of the ids); then one item per (first
//     occurrence, column) walks its id's chain in position order, so repeated ids add up in the
//     CPU's order without atomics.
//   broadcast_batch_backward: one item per output element, summing over b = 0..B-1.
//
// What a GPU session should optimise, measured on the device (none of it can run here):
//   * embedding_backward: its first pass scans the ids (O(n * distance to the neighbours with the
//     same id); quadratic only when ids are mostly distinct): a sort of (id, position) by a
//     deterministic radix sort would bound it;
//   * vectorised float4 loads in the elementwise kernels, and fusing more chains of them (the
//     backward's dropout, ReLU and bias gradients; the fused forward kernels, bias with ReLU and
//     residual with LayerNorm, fuse the forward's).
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/backend.h"
#include "lib/core/host_device.h"
#include "lib/core/positional.h"
#include "lib/core/random.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/reduction_kernels.h"

namespace rmt::cuda {

// x[0..n) = value
template <class Exec>
void fill(Exec& ex, float* x, int64_t n, float value) {
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { x[i] = value; });
}

// x[rows, cols] += bias[cols]
template <class Exec>
void add_bias(Exec& ex, float* x, const float* bias, int rows, int cols) {
  const int64_t total = (int64_t)rows * cols;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t i) { x[i] += bias[i % cols]; });
}

// x[rows, cols] = max(x + bias[cols], 0)
template <class Exec>
void add_bias_relu(Exec& ex, float* x, const float* bias, int rows, int cols) {
  const int64_t total = (int64_t)rows * cols;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t i) {
    const float v = x[i] + bias[i % cols];
    x[i] = v > 0.f ? v : 0.f;
  });
}

// out[n, d] = table[ids[n], :] * scale
template <class Exec>
void embedding_forward(Exec& ex, float* out, const int32_t* ids, const float* table, int n, int d,
                       float scale) {
  const int64_t total = (int64_t)n * d;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / d, k = idx % d;
    out[idx] = table[(int64_t)ids[i] * d + k] * scale;
  });
}

// dtable[ids[n], :] += dout[n, :] * scale, repeated ids added in position order (the CPU's).
// The vocabulary size is not an argument, so the rows are found from the ids: pass 1 marks each
// id's first position and links every position to the next one with the same id; pass 2 gives
// each (first position, column) the table element it owns and walks the chain.
template <class Exec>
void embedding_backward(Exec& ex, float* dtable, const float* dout, const int32_t* ids, int n,
                        int d, float scale) {
  if (n <= 0 || d <= 0) return;
  int32_t* next = (int32_t*)ex.scratch(0, sizeof(int32_t) * (size_t)n);
  uint8_t* first = (uint8_t*)ex.scratch(1, (size_t)n);
  const int64_t nn = n;
  ex.for_each(nn, [=] RMT_HOST_DEVICE(int64_t i) {
    const int32_t id = ids[i];
    bool is_first = true;
    for (int64_t j = i - 1; j >= 0; --j)
      if (ids[j] == id) {
        is_first = false;
        break;
      }
    int32_t nx = -1;
    for (int64_t j = i + 1; j < nn; ++j)
      if (ids[j] == id) {
        nx = (int32_t)j;
        break;
      }
    first[i] = is_first ? 1 : 0;
    next[i] = nx;
  });
  ex.for_each(nn * d, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / d, k = idx % d;
    if (!first[i]) return;
    float* t = dtable + (int64_t)ids[i] * d + k;
    float acc = *t;
    for (int64_t j = i; j >= 0; j = next[j]) acc += dout[j * d + k] * scale;
    *t = acc;
  });
}

// out = max(x, 0) (out may be x)
template <class Exec>
void relu_forward(Exec& ex, float* out, const float* x, int64_t n) {
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { out[i] = x[i] > 0.f ? x[i] : 0.f; });
}
// dx = dout * (y > 0), y the ReLU output (dx may be dout)
template <class Exec>
void relu_backward(Exec& ex, float* dx, const float* dout, const float* y, int64_t n) {
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { dx[i] = y[i] > 0.f ? dout[i] : 0.f; });
}

// Inverted dropout with the CPU's mask: keep[i] = dropout_uniform(key, i) >= p with
// key = dropout_key(*seed.word, seed.tag, seed.layer), out[i] = keep[i] ? x[i] / (1-p) : 0 (out may
// be x). p <= 0 keeps everything unscaled. Every item reads the seed word and derives the key when
// it runs (a few integer ops against a float's load and store), so a replayed graph reads the seed
// uploaded for its step.
template <class Exec>
void dropout_forward(Exec& ex, float* out, const float* x, uint8_t* keep, int64_t n, float p,
                     DropoutSeed seed) {
  if (n <= 0) return;
  if (p <= 0.f) {
    const bool copy = out != x;
    ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
      keep[i] = 1;
      if (copy) out[i] = x[i];
    });
    return;
  }
  const float s = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const uint64_t* word = seed.word;
  const uint64_t tag = seed.tag, layer = seed.layer;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const uint8_t k = dropout_uniform(dropout_key(*word, tag, layer), i) >= p;
    keep[i] = k;
    out[i] = k ? x[i] * s : 0.f;
  });
}
// dx[i] = keep[i] ? dout[i] / (1-p) : 0 (dx may be dout); p <= 0: dx = dout.
template <class Exec>
void dropout_backward(Exec& ex, float* dx, const float* dout, const uint8_t* keep, int64_t n,
                      float p) {
  if (n <= 0) return;
  if (p <= 0.f) {
    if (dx != dout) ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { dx[i] = dout[i]; });
    return;
  }
  const float s = p < 1.f ? 1.f / (1.f - p) : 0.f;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { dx[i] = keep[i] ? dout[i] * s : 0.f; });
}

// out[j, :] = [sin(p_j f_0..f_{d/2-1}), cos(p_j f_0..)], p_j = klen-1-j, f_i = 1 / 10000^(2i/d),
// in fp32 with the CPU's expressions (each item recomputes its f_i).
template <class Exec>
void positional_embedding(Exec& ex, float* out, int klen, int d) {
  const int half = d / 2;
  if (klen <= 0 || half <= 0) return;
  ex.for_each((int64_t)klen * d, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int j = int(idx / d), c = int(idx % d);
    if (c >= 2 * half) return;  // an odd d's last column: the CPU leaves it too
    const int i = c < half ? c : c - half;
    const float inv_freq = positional_inv_freq(i, d);  // the CPU's float (lib/core/positional.h)
    const float a = (float)(klen - 1 - j) * inv_freq;
    out[idx] = c < half ? ::sinf(a) : ::cosf(a);
  });
}

// out[i, b, :] = x[i, :] for b < B (time-major [rows, B, width])
template <class Exec>
void broadcast_batch(Exec& ex, float* out, const float* x, int rows, int B, int width) {
  const int64_t total = (int64_t)rows * B * width;
  if (total <= 0) return;
  const int64_t row = (int64_t)B * width;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t idx) {
    out[idx] = x[(idx / row) * width + idx % width];
  });
}
// dx[i, :] += dout[i, b, :] for b = 0, 1, .., B-1 in that order (accumulate)
template <class Exec>
void broadcast_batch_backward(Exec& ex, float* dx, const float* dout, int rows, int B,
                              int width) {
  const int64_t total = (int64_t)rows * width;
  if (total <= 0) return;
  ex.for_each(total, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / width, c = idx % width;
    float acc = dx[idx];
    for (int b = 0; b < B; ++b) acc += dout[(i * B + b) * width + c];
    dx[idx] = acc;
  });
}

// C[M, N] (row stride ldc) = beta * C, or 0 when beta is 0: an empty product (K = 0), what the
// CPU backend does, whatever cuBLAS would do with k = 0.
template <class Exec>
void scale_matrix_rows(Exec& ex, float* C, int ldc, int M, int N, float beta) {
  ex.for_each(int64_t(M) * N, [=] RMT_HOST_DEVICE(int64_t i) {
    float* c = C + (i / N) * ldc + i % N;
    *c = beta == 0.f ? 0.f : beta * *c;
  });
}

// C = alpha op(A) op(B) + beta C with row strides ldc, lda, ldb: one ex.sgemm (cuBLAS), or the
// CPU's C = beta C for an empty product.
template <class Exec>
void matmul_strided(Exec& ex, float* C, int ldc, const float* A, int lda, const float* B, int ldb,
                    int M, int N, int K, bool trans_a, bool trans_b, float alpha, float beta) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty product: C = beta C (0 when beta is 0), as the CPU backend does
    scale_matrix_rows(ex, C, ldc, M, N, beta);
    return;
  }
  Gemm g{C, ldc, 0, A, lda, 0, B, ldb, 0, M, N, K, trans_a, trans_b};
  g.alpha = alpha;
  g.beta = beta;
  ex.sgemm(g);
}
// The same on contiguous matrices.
template <class Exec>
void matmul(Exec& ex, float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
            bool trans_b, float alpha, float beta) {
  matmul_strided(ex, C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b,
                 alpha, beta);
}

// x *= alpha
template <class Exec>
void scale(Exec& ex, float* x, int64_t n, float alpha) {
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { x[i] *= alpha; });
}

// y += x
template <class Exec>
void add_inplace(Exec& ex, float* y, const float* x, int64_t n) {
  if (n <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) { y[i] += x[i]; });
}

// torch.optim.Adam (no weight decay), step t >= 1, the bias corrections in double on the host
// as the CPU's:  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//                p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
template <class Exec>
void adam_update(Exec& ex, float* param, const float* grad, float* m, float* v, int64_t n,
                 float lr, float beta1, float beta2, float eps, int64_t t) {
  if (n <= 0) return;
  const double bc1 = 1.0 - std::pow((double)beta1, (double)t);
  const double bc2 = 1.0 - std::pow((double)beta2, (double)t);
  const float step_size = (float)(lr / bc1);
  const float bc2_sqrt = (float)std::sqrt(bc2);
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const float g = grad[i];
    const float mi = beta1 * m[i] + (1.f - beta1) * g;
    const float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = ::sqrtf(vi) / bc2_sqrt + eps;
    param[i] -= step_size * (mi / denom);
  });
}

}  // namespace rmt::cuda
