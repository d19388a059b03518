#pragma once
// The CUDA backend's drivers for every Backend kernel (lib/core/backend.h) except the GEMMs
// (cuBLAS, in cuda_backend.cu) and the relative attention (attention_kernels.h). Each follows
// lib/cuda/exec.h: passes of ex.for_each(n, item), items write only what they own, no atomics,
// every sum a loop in a fixed order, scratch through ex.scratch(slot, bytes). Each driver takes
// exactly the arguments of its Backend kernel after the Exec, except sum_squares, which writes
// its double to *result (one double of the Exec's memory) for the backend to copy to the host.
//
// Semantics and arithmetic are the CPU backend's (lib/core/cpu_backend.cpp), expression by
// expression, so that on the host (HostExec, tests/test_cuda_kernels_host.cpp) results are
// bit-identical to it except where the CPU sums in SIMD lanes or a sum is split into chunks:
//   * bit-identical: fill, add_bias, embedding_forward/backward, relu, dropout (the same mask:
//     dropout_uniform(splitmix64(seed), i)), positional_embedding, broadcast_batch and its
//     backward, cross_entropy, scale, add_inplace, adam_update, sum_squares (the CPU's 8192-float
//     chunks and 8 lanes, reproduced), and bias_backward and LayerNorm's dweight/dbias while the
//     rows fit in one chunk of kRowChunk rows;
//   * not bit-identical: LayerNorm's per-row mean, variance and the two sums of its backward (the
//     CPU sums float terms in SIMD lanes combined by Eigen's tree; here the same float terms in
//     order in a double, as accurate as the lanes or more), and bias_backward and
//     LayerNorm's dweight/dbias over more than kRowChunk rows (partial sums per chunk of rows,
//     then the chunks in order).
// On a GPU, bit-identity also needs nvcc's --fmad=false and no fast-math (sinf, cosf, powf, exp,
// log then differ from glibc's by an ulp or so: the GPU suite compares with a tolerance anyway).
//
// Parallelisation (items per pass), chosen for correctness and determinism first:
//   elementwise kernels: one item per element.
//   bias_backward, LayerNorm's dweight/dbias: one item per (chunk of kRowChunk rows, column)
//     into scratch, then one item per column summing the chunks in order.
//   embedding_backward: one item per position finds whether it is its id's first occurrence and
//     the next position with the same id (a scan of the ids); then one item per (first
//     occurrence, column) walks its id's chain in position order, so repeated ids add up in the
//     CPU's order without atomics.
//   layernorm_forward/backward: one item per row for its sums, then one per element.
//   cross_entropy: one item per row (max, sum of exp, loss), then one per element for dlogits.
//   broadcast_batch_backward: one item per output element, summing over b = 0..B-1.
//   sum_squares: one item per (8192-float chunk, lane), then one item summing lanes and chunks.
//
// What a GPU session should optimise, measured on the device (none of it can run here):
//   * row-wise kernels (LayerNorm, cross_entropy with a large V): a warp or block per row with a
//     shared-memory / shuffle reduction in a fixed tree, and fusing the per-row and per-element
//     passes into one launch;
//   * bias_backward and LayerNorm's parameter gradients: block-level column reductions (a tile of
//     rows per block in shared memory), fused with the dx pass of layernorm_backward;
//   * sum_squares: a block-level tree per chunk instead of 8 lanes per chunk (then no longer
//     bit-identical to the CPU, fine for clipping), and its single-item final pass;
//   * embedding_backward: its first pass scans the ids (O(n * distance to the neighbours with the
//     same id); quadratic only when ids are mostly distinct): a sort of (id, position) by a
//     deterministic radix sort would bound it;
//   * vectorised float4 loads in the elementwise kernels, and fusing chains of them (dropout +
//     add_inplace + LayerNorm of the engine) once the CUDA graph of a step is in place.
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/host_device.h"
#include "lib/core/random.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

// Rows per partial sum of the column reductions (bias_backward, LayerNorm's dweight/dbias).
inline constexpr int kRowChunk = 64;
// sum_squares: the CPU backend's chunk and lane count, so that the result is bit-identical.
inline constexpr int64_t kSumSquaresChunk = 1 << 13;
inline constexpr int kSumSquaresLanes = 8;

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

// dbias[cols] += sum over rows of dy[rows, cols], rows in order within chunks of kRowChunk rows,
// chunks in order (one chunk: exactly the CPU's sum).
template <class Exec>
void bias_backward(Exec& ex, float* dbias, const float* dy, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const int chunk = kRowChunk;
  const int nchunk = (rows + chunk - 1) / chunk;
  if (nchunk == 1) {
    ex.for_each(cols, [=] RMT_HOST_DEVICE(int64_t c) {
      float acc = 0.f;
      for (int i = 0; i < rows; ++i) acc += dy[(int64_t)i * cols + c];
      dbias[c] += acc;
    });
    return;
  }
  float* part = (float*)ex.scratch(0, sizeof(float) * (size_t)nchunk * (size_t)cols);
  ex.for_each((int64_t)nchunk * cols, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t q = idx / cols, c = idx % cols;
    const int64_t i0 = q * chunk, i1 = min_i64(rows, i0 + chunk);
    float acc = 0.f;
    for (int64_t i = i0; i < i1; ++i) acc += dy[i * cols + c];
    part[idx] = acc;
  });
  ex.for_each(cols, [=] RMT_HOST_DEVICE(int64_t c) {
    float acc = 0.f;
    for (int q = 0; q < nchunk; ++q) acc += part[(int64_t)q * cols + c];
    dbias[c] += acc;
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

// out = (x - mean) * rstd * weight + bias per row of d; mean[n], rstd[n] saved (eps 1e-5, biased
// variance, two-pass mean and variance as the CPU's, each sum's float terms added in a double).
// out may be x.
template <class Exec>
void layernorm_forward(Exec& ex, float* out, float* mean, float* rstd, const float* x,
                       const float* weight, const float* bias, int n, int d) {
  if (n <= 0 || d <= 0) return;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const float* xi = x + i * d;
    double s = 0;
    for (int k = 0; k < d; ++k) s += xi[k];
    const float mf = (float)(s / d);
    double sv = 0;
    for (int k = 0; k < d; ++k) sv += (xi[k] - mf) * (xi[k] - mf);
    const float var = (float)(sv / d);
    mean[i] = mf;
    rstd[i] = 1.f / ::sqrtf(var + 1e-5f);
  });
  ex.for_each((int64_t)n * d, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / d, k = idx % d;
    out[idx] = (x[idx] - mean[i]) * rstd[i] * weight[k] + bias[k];
  });
}

// xhat = (x - mean) * rstd, g = dout * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))  (overwrite)
//   dweight += sum over rows of dout * xhat;  dbias += sum over rows of dout  (accumulate)
// The passes that read dout all run before the one that writes dx, so dx may even be dout.
template <class Exec>
void layernorm_backward(Exec& ex, float* dx, float* dweight, float* dbias, const float* dout,
                        const float* x, const float* mean, const float* rstd, const float* weight,
                        int n, int d) {
  if (n <= 0 || d <= 0) return;
  // Per row: mean(g) and mean(g * xhat), the CPU's float terms added in a double.
  float* stats = (float*)ex.scratch(0, sizeof(float) * 2 * (size_t)n);
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const float* xi = x + i * d;
    const float* gi = dout + i * d;
    const float m = mean[i], rs = rstd[i];
    double sg = 0, sgx = 0;
    for (int k = 0; k < d; ++k) {
      sg += gi[k] * weight[k];
      sgx += gi[k] * weight[k] * ((xi[k] - m) * rs);
    }
    stats[2 * i] = (float)(sg / d);
    stats[2 * i + 1] = (float)(sgx / d);
  });
  // Parameter gradients: rows in order within chunks of kRowChunk, chunks in order.
  const int chunk = kRowChunk;
  const int nchunk = (n + chunk - 1) / chunk;
  if (nchunk == 1) {
    ex.for_each(d, [=] RMT_HOST_DEVICE(int64_t k) {
      float aw = 0.f, ab = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const float g = dout[i * d + k];
        aw += g * (x[i * d + k] - mean[i]) * rstd[i];
        ab += g;
      }
      dweight[k] += aw;
      dbias[k] += ab;
    });
  } else {
    // part[q, 0, k]: dweight's partial of chunk q; part[q, 1, k]: dbias's.
    float* part = (float*)ex.scratch(1, sizeof(float) * 2 * (size_t)nchunk * (size_t)d);
    ex.for_each((int64_t)nchunk * d, [=] RMT_HOST_DEVICE(int64_t idx) {
      const int64_t q = idx / d, k = idx % d;
      const int64_t i0 = q * chunk, i1 = min_i64(n, i0 + chunk);
      float aw = 0.f, ab = 0.f;
      for (int64_t i = i0; i < i1; ++i) {
        const float g = dout[i * d + k];
        aw += g * (x[i * d + k] - mean[i]) * rstd[i];
        ab += g;
      }
      part[(2 * q) * d + k] = aw;
      part[(2 * q + 1) * d + k] = ab;
    });
    ex.for_each(d, [=] RMT_HOST_DEVICE(int64_t k) {
      float aw = 0.f, ab = 0.f;
      for (int64_t q = 0; q < nchunk; ++q) {
        aw += part[(2 * q) * d + k];
        ab += part[(2 * q + 1) * d + k];
      }
      dweight[k] += aw;
      dbias[k] += ab;
    });
  }
  ex.for_each((int64_t)n * d, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / d, k = idx % d;
    const float m = mean[i], rs = rstd[i];
    const float xh = (x[idx] - m) * rs;
    dx[idx] = rs * (dout[idx] * weight[k] - stats[2 * i] - xh * stats[2 * i + 1]);
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

// Inverted dropout with the CPU's mask: keep[i] = dropout_uniform(splitmix64(seed), i) >= p,
// out[i] = keep[i] ? x[i] / (1-p) : 0 (out may be x). p <= 0 keeps everything unscaled.
template <class Exec>
void dropout_forward(Exec& ex, float* out, const float* x, uint8_t* keep, int64_t n, float p,
                     uint64_t seed) {
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
  const uint64_t key = splitmix64(seed);
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const uint8_t k = dropout_uniform(key, i) >= p;
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
    const float inv_freq = 1.f / ::powf(10000.f, (float)(2 * i) / (float)d);
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

// loss[i] = -log softmax(logits_i)[t_i]; dlogits[i] = (softmax(logits_i) - onehot(t_i)) *
// grad_scale (dlogits may be null); rows with t_i < 0: loss 0, zero gradient. The sum of exp and
// the log in double, as the CPU's.
template <class Exec>
void cross_entropy(Exec& ex, float* loss, float* dlogits, const float* logits,
                   const int32_t* targets, int n, int V, float grad_scale) {
  if (n <= 0) return;
  double* sums = dlogits ? (double*)ex.scratch(0, sizeof(double) * (size_t)n) : nullptr;
  float* maxes = dlogits ? (float*)ex.scratch(1, sizeof(float) * (size_t)n) : nullptr;
  ex.for_each(n, [=] RMT_HOST_DEVICE(int64_t i) {
    const float* x = logits + i * V;
    const int t = targets[i];
    if (t < 0) {
      loss[i] = 0.f;
      return;
    }
    float mx = x[0];
    for (int k = 1; k < V; ++k) mx = mx < x[k] ? x[k] : mx;  // std::max(mx, x[k])
    double sum = 0;
    for (int k = 0; k < V; ++k) sum += ::exp((double)(x[k] - mx));
    loss[i] = (float)(::log(sum) - (double)(x[t] - mx));
    if (sums) {
      sums[i] = sum;
      maxes[i] = mx;
    }
  });
  if (!dlogits || V <= 0) return;
  ex.for_each((int64_t)n * V, [=] RMT_HOST_DEVICE(int64_t idx) {
    const int64_t i = idx / V, k = idx % V;
    const int t = targets[i];
    if (t < 0) {
      dlogits[idx] = 0.f;
      return;
    }
    const double inv = 1.0 / sums[i];
    float g = (float)(::exp((double)(logits[idx] - maxes[i])) * inv) * grad_scale;
    if (k == t) g -= grad_scale;
    dlogits[idx] = g;
  });
}

// *result = sum of x[i]^2 in double: chunks of 8192 floats, each in 8 lanes (lane l: elements
// l, l+8, .. of the chunk, in order), lanes added in order, chunks in order: the CPU's sum.
template <class Exec>
void sum_squares(Exec& ex, double* result, const float* x, int64_t n) {
  const int64_t chunk = kSumSquaresChunk;
  const int lanes = kSumSquaresLanes;
  const int64_t nchunk = n > 0 ? (n + chunk - 1) / chunk : 0;
  double* part = nullptr;
  if (nchunk > 0) {
    part = (double*)ex.scratch(0, sizeof(double) * (size_t)(nchunk * lanes));
    ex.for_each(nchunk * lanes, [=] RMT_HOST_DEVICE(int64_t idx) {
      const int64_t c = idx / lanes, l = idx % lanes;
      const int64_t i1 = min_i64(n, (c + 1) * chunk);
      double acc = 0;
      for (int64_t i = c * chunk + l; i < i1; i += lanes) acc += (double)x[i] * x[i];
      part[idx] = acc;
    });
  }
  ex.for_each(1, [=] RMT_HOST_DEVICE(int64_t) {
    double total = 0;
    for (int64_t c = 0; c < nchunk; ++c) {
      double acc = 0;
      for (int l = 0; l < lanes; ++l) acc += part[c * lanes + l];
      total += acc;
    }
    *result = total;
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
