// The CPU reference backend: oneDNN's sgemm (Eigen's GEMM in a build without oneDNN) + OpenMP
// loops over contiguous fp32 buffers.
// One forward/backward pair per kernel, in the order of lib/core/backend.h. Every reduction runs in
// a fixed order (no atomics), so results are bit-identical for a fixed thread count.
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/core/cpu_backend.h"
#include "lib/core/cpu_kernels.h"
#include "lib/core/cpu_simd.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/positional.h"
#include "lib/core/random.h"

#ifdef RMT_ONEDNN
#include <dnnl.h>
#endif

namespace rmt {
namespace cpu {
namespace {

// ---------------------------------------------------------------------------------------
// matmul: C = alpha op(A) op(B) + beta C

template <typename TA, typename TB>
void gemm_into(MapM& C, const TA& A, const TB& B, float alpha, float beta) {
  if (beta == 0.f) {
    C.noalias() = alpha * (A * B);  // overwrites: garbage/NaN in C never read
  } else {
    if (beta != 1.f) C *= beta;
    C.noalias() += alpha * (A * B);
  }
}

// Eigen's GEMM (the build without oneDNN).
void gemm_eigen(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
                int K, bool ta, bool tb, float alpha, float beta) {
  if (M == 0 || N == 0) return;
  MapM c(C, M, N, Stride(ldc));
  if (K == 0) {  // empty product: C = beta C
    if (beta == 0.f) c.setZero(); else c *= beta;
    return;
  }
  // Stored shapes: A is [M,K] or [K,M] (trans_a); B is [K,N] or [N,K] (trans_b).
  CMapM a(A, ta ? K : M, ta ? M : K, Stride(lda));
  CMapM b(B, tb ? N : K, tb ? K : N, Stride(ldb));
  if (!ta && !tb) gemm_into(c, a, b, alpha, beta);
  else if (!ta && tb) gemm_into(c, a, b.transpose(), alpha, beta);
  else if (ta && !tb) gemm_into(c, a.transpose(), b, alpha, beta);
  else gemm_into(c, a.transpose(), b.transpose(), alpha, beta);
}

}  // namespace

// C[M,N] = alpha op(A) op(B) + beta C with explicit row strides (ldc, lda, ldb), so that the
// attention can multiply per-head column blocks of the qkv buffer in place.
void gemm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
          int K, bool ta, bool tb, float alpha, float beta) {
  if (M == 0 || N == 0) return;
#ifdef RMT_ONEDNN
  // oneDNN's JIT sgemm: about 1.3x Eigen's rate on one core and 1.7x on two at the model's
  // shapes (bench/README.md). Deterministic for a fixed thread count and independent of buffer
  // alignment (tests/test_kernels_matmul.cpp checks both). Inside an OpenMP region it runs on the
  // calling thread only.
  if (K > 0) {
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda,
                                        B, ldb, beta, C, ldc);
    if (st != dnnl_success)
      fail("oneDNN sgemm failed (status {}) for [{}x{}]x[{}x{}]", int(st), M, K, K, N);
    return;
  }
#endif
  gemm_eigen(C, ldc, A, lda, B, ldb, M, N, K, ta, tb, alpha, beta);
}

namespace {

// Per-call grain for elementwise loops: below this, threads cost more than they save (and on
// a loaded machine a parallel region over tiny work can stall for a whole scheduler slice).
constexpr int64_t kGrain = 1 << 14;

// ---------------------------------------------------------------------------------------
// Column-parallel reduction helper: parallelise over column blocks so that each output column
// is summed over rows by one thread in row order (deterministic, independent of threads).
constexpr int kColBlock = 64;

// ---------------------------------------------------------------------------------------
// Sum over j < n of a term: whole packets through packet_term(j) into lanes combined by a fixed
// tree, the last n % kPacket through scalar_term(j) in order.
template <class PacketTerm, class ScalarTerm>
inline float packet_sum(int n, PacketTerm packet_term, ScalarTerm scalar_term) {
  Packet acc = ei::pset1<Packet>(0.f);
  int j = 0;
  for (; j + kPacket <= n; j += kPacket) acc = ei::padd(acc, packet_term(j));
  float sum = ei::predux(acc);
  for (; j < n; ++j) sum += scalar_term(j);
  return sum;
}

// One row of layernorm_forward: out[d], *mean, *rstd from x[d].
void layernorm_row(float* oi, float* mean, float* rstd, const float* xi, const float* weight,
                   const float* bias, int d) {
  // Two-pass mean and variance (robust for large-offset inputs), summed in SIMD lanes.
  const float mf = packet_sum(
      d, [&](int k) { return ei::ploadu<Packet>(xi + k); }, [&](int k) { return xi[k]; }) / d;
  const Packet mp = ei::pset1<Packet>(mf);
  const float var = packet_sum(
      d,
      [&](int k) {
        const Packet c = ei::psub(ei::ploadu<Packet>(xi + k), mp);
        return ei::pmul(c, c);
      },
      [&](int k) { return (xi[k] - mf) * (xi[k] - mf); }) / d;
  const float rs = 1.f / std::sqrt(var + 1e-5f);
  for (int k = 0; k < d; ++k) oi[k] = (xi[k] - mf) * rs * weight[k] + bias[k];
  *mean = mf;
  *rstd = rs;
}

}  // namespace

CpuBackend::CpuBackend() {
  // oneDNN allocates and frees its GEMM packing buffers on every call. With glibc's default
  // thresholds these large blocks come from mmap and go back to the kernel on free, so every
  // GEMM page-faults them in again (about 10% of an rmt step). Keep freed memory instead.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

// Memory: host memory, aligned to a cache line; copies are memcpy.
void* CpuBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  return p;
}

void CpuBackend::deallocate(void* p, size_t) { std::free(p); }

void CpuBackend::fill(float* x, int64_t n, float value) { std::fill(x, x + n, value); }

void CpuBackend::fill_bytes(void* p, uint8_t value, size_t bytes) {
  if (bytes) std::memset(p, value, bytes);
}

void CpuBackend::copy_host_to_device(void* dst, const void* host, size_t bytes) {
  if (bytes) std::memcpy(dst, host, bytes);
}

void CpuBackend::copy_device_to_host(void* host, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host, src, bytes);
}

void CpuBackend::copy_device_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
                        bool trans_b, float alpha, float beta) {
  gemm(C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b, alpha, beta);
}

void CpuBackend::matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb,
                                int M, int N, int K, bool trans_a, bool trans_b, float alpha,
                                float beta) {
  gemm(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
}

// x[rows, cols] += bias[cols]
void CpuBackend::add_bias(float* x, const float* bias, int rows, int cols) {
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols > kGrain)
  for (int i = 0; i < rows; ++i) {
    float* xi = x + (int64_t)i * cols;
    for (int j = 0; j < cols; ++j) xi[j] += bias[j];
  }
}

// dbias[cols] += sum_rows dy[rows, cols]
void CpuBackend::bias_backward(float* dbias, const float* dy, int rows, int cols) {
  const int nblk = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols > kGrain)
  for (int blk = 0; blk < nblk; ++blk) {
    const int j0 = blk * kColBlock, j1 = std::min(cols, j0 + kColBlock);
    float acc[kColBlock] = {};
    for (int i = 0; i < rows; ++i) {
      const float* d = dy + (int64_t)i * cols;
      for (int j = j0; j < j1; ++j) acc[j - j0] += d[j];
    }
    for (int j = j0; j < j1; ++j) dbias[j] += acc[j - j0];
  }
}

// out[n, d] = table[ids[n]] * scale
void CpuBackend::embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d,
                                   float scale) {
#pragma omp parallel for schedule(static) if ((int64_t)n * d > kGrain)
  for (int i = 0; i < n; ++i) {
    const float* t = table + (int64_t)ids[i] * d;
    float* o = out + (int64_t)i * d;
    for (int k = 0; k < d; ++k) o[k] = t[k] * scale;
  }
}

// dtable[ids[n]] += dout[n] * scale. Parallel over column blocks, rows in order, so repeated
// ids add up without races and in a fixed order.
void CpuBackend::embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n,
                                    int d, float scale) {
  const int nblk = (d + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if ((int64_t)n * d > kGrain)
  for (int blk = 0; blk < nblk; ++blk) {
    const int k0 = blk * kColBlock, k1 = std::min(d, k0 + kColBlock);
    for (int i = 0; i < n; ++i) {
      float* t = dtable + (int64_t)ids[i] * d;
      const float* g = dout + (int64_t)i * d;
      for (int k = k0; k < k1; ++k) t[k] += g[k] * scale;
    }
  }
}

// out = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5), var biased.
void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                                   const float* weight, const float* bias, int n, int d) {
#pragma omp parallel for schedule(static) if ((int64_t)n * d > kGrain)
  for (int i = 0; i < n; ++i)
    layernorm_row(out + (int64_t)i * d, mean + i, rstd + i, x + (int64_t)i * d, weight, bias, d);
}

void CpuBackend::add_layernorm_forward(float* out, float* mean, float* rstd, float* x,
                                       const float* bias_x, const float* residual,
                                       const float* weight, const float* bias, int n, int d) {
#pragma omp parallel for schedule(static) if ((int64_t)n * d > kGrain)
  for (int i = 0; i < n; ++i) {
    float* xi = x + (int64_t)i * d;
    const float* ri = residual + (int64_t)i * d;
    if (bias_x)
      for (int k = 0; k < d; ++k) xi[k] += bias_x[k];
    for (int k = 0; k < d; ++k) xi[k] += ri[k];
    layernorm_row(out + (int64_t)i * d, mean + i, rstd + i, xi, weight, bias, d);
  }
}

// xhat = (x-mean)*rstd, g = dout*w:
//   dx = rstd * (g - mean(g) - xhat * mean(g*xhat));  dw += sum dout*xhat;  db += sum dout
void CpuBackend::layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                                    const float* x, const float* mean, const float* rstd,
                                    const float* weight, int n, int d) {
  const bool par = (int64_t)n * d > kGrain;
#pragma omp parallel for schedule(static) if (par)
  for (int i = 0; i < n; ++i) {
    const float* xi = x + (int64_t)i * d;
    const float* gi = dout + (int64_t)i * d;
    float* dxi = dx + (int64_t)i * d;
    const float m = mean[i], rs = rstd[i];
    const Packet mp = ei::pset1<Packet>(m), rsp = ei::pset1<Packet>(rs);
    auto g = [&](int k) {
      return ei::pmul(ei::ploadu<Packet>(gi + k), ei::ploadu<Packet>(weight + k));
    };
    const float sg = packet_sum(d, g, [&](int k) { return gi[k] * weight[k]; }) / d;
    const float sgx = packet_sum(
        d,
        [&](int k) {
          return ei::pmul(g(k), ei::pmul(ei::psub(ei::ploadu<Packet>(xi + k), mp), rsp));
        },
        [&](int k) { return gi[k] * weight[k] * ((xi[k] - m) * rs); }) / d;
    for (int k = 0; k < d; ++k) {
      const float xh = (xi[k] - m) * rs;
      dxi[k] = rs * (gi[k] * weight[k] - sg - xh * sgx);
    }
  }
  // Parameter gradients: column blocks, rows in order (deterministic).
  const int nblk = (d + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (par)
  for (int blk = 0; blk < nblk; ++blk) {
    const int k0 = blk * kColBlock, k1 = std::min(d, k0 + kColBlock);
    float aw[kColBlock] = {}, ab[kColBlock] = {};
    for (int i = 0; i < n; ++i) {
      const float* xi = x + (int64_t)i * d;
      const float* gi = dout + (int64_t)i * d;
      const float m = mean[i], rs = rstd[i];
      for (int k = k0; k < k1; ++k) {
        aw[k - k0] += gi[k] * (xi[k] - m) * rs;
        ab[k - k0] += gi[k];
      }
    }
    for (int k = k0; k < k1; ++k) {
      dweight[k] += aw[k - k0];
      dbias[k] += ab[k - k0];
    }
  }
}

void CpuBackend::add_bias_relu(float* x, const float* bias, int rows, int cols) {
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols > kGrain)
  for (int i = 0; i < rows; ++i) {
    float* xi = x + (int64_t)i * cols;
    for (int j = 0; j < cols; ++j) {
      const float v = xi[j] + bias[j];
      xi[j] = v > 0.f ? v : 0.f;
    }
  }
}

void CpuBackend::relu_forward(float* out, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.f ? x[i] : 0.f;
}

void CpuBackend::relu_backward(float* dx, const float* dout, const float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.f ? dout[i] : 0.f;
}

// keep[i] = (uniform(key, i) >= p): a pure function of (key, i), thread-count independent.
void CpuBackend::dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                                 DropoutSeed seed) {
  if (p <= 0.f) {
    std::memset(keep, 1, (size_t)n);
    if (out != x) std::memcpy(out, x, sizeof(float) * (size_t)n);
    return;
  }
  const float s = p < 1.f ? 1.f / (1.f - p) : 0.f;
  // Counter-based: element i's draw depends only on (key, i), so any thread split gives the same
  // mask.
  const uint64_t key = dropout_key(*seed.word, seed.tag, seed.layer);
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t k = dropout_uniform(key, i) >= p;
    keep[i] = k;
    out[i] = k ? x[i] * s : 0.f;
  }
}

void CpuBackend::dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                                  float p) {
  if (p <= 0.f) {  // everything was kept with scale 1
    if (dx != dout) std::memcpy(dx, dout, sizeof(float) * (size_t)n);
    return;
  }
  const float s = p < 1.f ? 1.f / (1.f - p) : 0.f;
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) dx[i] = keep[i] ? dout[i] * s : 0.f;
}

// out[j] = [sin(p_j f), cos(p_j f)], p_j = klen-1-j, f_i = 1/10000^(2i/d); fp32 like torch.
void CpuBackend::positional_embedding(float* out, int klen, int d) {
  const int half = d / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i)
    inv_freq[i] = positional_inv_freq(i, d);
  for (int j = 0; j < klen; ++j) {
    const float p = (float)(klen - 1 - j);
    float* o = out + (int64_t)j * d;
    for (int i = 0; i < half; ++i) {
      const float a = p * inv_freq[i];
      o[i] = std::sin(a);
      o[half + i] = std::cos(a);
    }
  }
}

// rel_attention_*: cpu_attention.cpp; dpfp_* and assoc_*: cpu_assoc.cpp.

// Row-wise stable log-softmax cross-entropy; targets < 0 ignored.
void CpuBackend::cross_entropy(float* loss, float* dlogits, const float* logits,
                               const int32_t* targets, int n, int V, float grad_scale) {
#pragma omp parallel for schedule(static) if ((int64_t)n * V * 8 > kGrain)  // exp-heavy rows
  for (int i = 0; i < n; ++i) {
    const float* x = logits + (int64_t)i * V;
    float* dx = dlogits ? dlogits + (int64_t)i * V : nullptr;
    const int t = targets[i];
    if (t < 0) {
      loss[i] = 0.f;
      if (dx) std::fill(dx, dx + V, 0.f);
      continue;
    }
    float mx = x[0];
    for (int k = 1; k < V; ++k) mx = std::max(mx, x[k]);
    double sum = 0;  // sum of exp in double: V can be large
    for (int k = 0; k < V; ++k) sum += std::exp((double)(x[k] - mx));
    const double lse = std::log(sum);
    loss[i] = (float)(lse - (double)(x[t] - mx));
    if (dx) {
      const double inv = 1.0 / sum;
      for (int k = 0; k < V; ++k)
        dx[k] = (float)(std::exp((double)(x[k] - mx)) * inv) * grad_scale;
      dx[t] -= grad_scale;
    }
  }
}

void CpuBackend::broadcast_batch(float* out, const float* x, int rows, int B, int width) {
  for (int i = 0; i < rows; ++i)
    for (int b = 0; b < B; ++b)
      std::memcpy(out + ((int64_t)i * B + b) * width, x + (int64_t)i * width,
                  sizeof(float) * width);
}

// Each element sums over b in order: parallel over rows and column blocks only.
void CpuBackend::broadcast_batch_backward(float* dx, const float* dout, int rows, int B,
                                          int width) {
  const int nblock = (width + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if ((int64_t)rows * B * width > kGrain)
  for (int64_t ib = 0; ib < (int64_t)rows * nblock; ++ib) {
    const int i = int(ib / nblock), c0 = int(ib % nblock) * kColBlock;
    const int c1 = std::min(width, c0 + kColBlock);
    float* o = dx + (int64_t)i * width;
    for (int b = 0; b < B; ++b) {
      const float* g = dout + ((int64_t)i * B + b) * width;
      for (int c = c0; c < c1; ++c) o[c] += g[c];
    }
  }
}

// Fixed chunks (independent of the thread count), each summed in double, then summed in
// chunk order: bit-identical for any thread count.
double CpuBackend::sum_squares(const float* x, int64_t n) {
  constexpr int64_t kChunk = 1 << 13;
  const int64_t nchunk = (n + kChunk - 1) / kChunk;
  std::vector<double> part((size_t)nchunk);
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t c = 0; c < nchunk; ++c) {
    const int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
    // 8 independent lanes (vectorised; one sequential sum would wait on every add)
    double lane[8] = {};
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
      for (int l = 0; l < 8; ++l) lane[l] += (double)x[i + l] * x[i + l];
    for (int l = 0; i < i1; ++i, ++l) lane[l] += (double)x[i] * x[i];
    double acc = 0;
    for (double e : lane) acc += e;
    part[c] = acc;
  }
  double total = 0;
  for (double p : part) total += p;
  return total;
}

void CpuBackend::sum_squares_to(double* out, const float* x, int64_t n) {
  *out = sum_squares(x, n);
}

// In index order, one add at a time: the bits of a loss summed row by row on the host.
void CpuBackend::accumulate_sum(double* acc, const float* x, int64_t n) {
  double sum = *acc;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  *acc = sum;
}

void CpuBackend::scale(float* x, int64_t n, float alpha) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void CpuBackend::add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// torch.optim.Adam (foreach=False path): bias corrections in double like Python floats.
void CpuBackend::adam_update(float* param, const float* grad, float* m, float* v, int64_t n,
                             float lr, float beta1, float beta2, float eps, int64_t t) {
  const double bc1 = 1.0 - std::pow((double)beta1, (double)t);
  const double bc2 = 1.0 - std::pow((double)beta2, (double)t);
  const float step_size = (float)(lr / bc1);
  const float bc2_sqrt = (float)std::sqrt(bc2);
  // Distinct buffers: restrict lets the compiler vectorise (sqrt and division stay exact).
  float* __restrict pp = param;
  const float* __restrict gp = grad;
  float* __restrict mp = m;
  float* __restrict vp = v;
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gp[i];
    mp[i] = beta1 * mp[i] + (1.f - beta1) * g;
    vp[i] = beta2 * vp[i] + (1.f - beta2) * g * g;
    const float denom = std::sqrt(vp[i]) / bc2_sqrt + eps;
    pp[i] -= step_size * (mp[i] / denom);
  }
}

// The attention's scratch, one per host thread: packed runs (packed_backend.h) call the
// backend from several threads at once, one run each.
AttentionBuffers& CpuBackend::attention_buffers() {
  thread_local cpu::AttentionBuffers buffers;
  return buffers;
}

}  // namespace cpu

// ---------------------------------------------------------------------------------------

Backend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

int default_num_threads() {
  // OMP_NUM_THREADS, where set to a positive count (main refuses any other value), else every core.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= kMaxThreads) return int(n);
  }
  return omp_get_num_procs();
}

void set_num_threads(int threads) {
  if (threads <= 0) threads = default_num_threads();
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
}

int num_threads() { return omp_get_max_threads(); }

void run_cpu_tasks_concurrently(int n, const std::function<void(int)>& task) {
  const int threads = std::min(n, num_threads());
  if (threads <= 1) {
    for (int i = 0; i < n; ++i) task(i);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    // This thread's nested regions (every kernel's loops; oneDNN asks omp_get_max_threads) run
    // on it alone: a kernel computes as it does on one thread.
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      try {
        task(i);
      } catch (...) {
#pragma omp critical(rmt_concurrent_task_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

std::string cpu_gemm_library() {
#ifdef RMT_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
#else
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION);
#endif
}

}  // namespace rmt