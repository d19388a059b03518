#pragma once
// The CUDA backend's kernels that reduce: LayerNorm, cross-entropy, sum_squares and the column
// sums of the backward (bias gradients, LayerNorm's dweight and dbias). Drivers of
// lib/cuda/exec.h: a block per row for the row-wise kernels, a block per tile of columns and
// chunk of rows for the column sums, every sum a fixed tree (no atomics: bit-identical run to
// run). The CPU backend (lib/core/cpu_backend.cpp) sums in another order, so these match it to
// rounding, not in bits (tests/test_cuda_kernels_host.cpp states each tolerance).
//
// Launches: layernorm_forward 1; layernorm_backward 2 (3 over more than kRowChunk rows);
// cross_entropy 1; bias_backward 1 (2); sum_squares 2; accumulate_sum 1.
#include <math.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "lib/core/host_device.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

// Rows per block of the column sums; more rows are summed per chunk, then the chunks in order.
inline constexpr int kRowChunk = 64;
// Floats per block of sum_squares's first pass.
inline constexpr int64_t kSumSquaresChunk = 1 << 13;

// Column sums: for c < ncols, store(c, sum over i < rows of load(i, c)) (store adds the sum to its
// output). Blocks of kRowChunk rows by kColumnTile columns (blk.columns: a warp reads 32 adjacent
// columns); with more than one chunk of rows the partial sums go to scratch `slot` and a second
// pass adds each column's chunks in order. load(i, c) must be a valid read for c < ncols only.
template <class Exec, class Load, class Store>
void column_sums(Exec& ex, int64_t rows, int64_t ncols, int slot, Load load, Store store) {
  if (rows <= 0 || ncols <= 0) return;
  const int64_t tiles = (ncols + kColumnTile - 1) / kColumnTile;
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  using T = decltype(load(int64_t(0), int64_t(0)));
  if (chunks == 1) {
    ex.for_each_block(tiles, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t tile) {
      const int64_t c0 = tile * kColumnTile;
      blk.columns(
          rows, [=](int64_t i, int c) { return c0 + c < ncols ? load(i, c0 + c) : T(0); },
          [=](int c, T total) {
            if (c0 + c < ncols) store(c0 + c, total);
          });
    });
    return;
  }
  // part[q, c]: the sum of chunk q's rows of column c.
  T* part = (T*)ex.scratch(slot, sizeof(T) * (size_t)(chunks * ncols));
  ex.for_each_block(tiles * chunks, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t it) {
    const int64_t q = it / tiles, c0 = (it % tiles) * kColumnTile;
    const int64_t i0 = q * kRowChunk, n = min_i64(rows, i0 + kRowChunk) - i0;
    blk.columns(
        n, [=](int64_t i, int c) { return c0 + c < ncols ? load(i0 + i, c0 + c) : T(0); },
        [=](int c, T total) {
          if (c0 + c < ncols) part[q * ncols + c0 + c] = total;
        });
  });
  ex.for_each(ncols, [=] RMT_HOST_DEVICE(int64_t c) {
    T acc = T(0);
    for (int64_t q = 0; q < chunks; ++q) acc += part[q * ncols + c];
    store(c, acc);
  });
}

// dbias[cols] += sum over rows of dy[rows, cols]
template <class Exec>
void bias_backward(Exec& ex, float* dbias, const float* dy, int rows, int cols) {
  const int64_t nc = cols;
  column_sums(
      ex, rows, cols, 0, [=] RMT_HOST_DEVICE(int64_t i, int64_t c) { return dy[i * nc + c]; },
      [=] RMT_HOST_DEVICE(int64_t c, float total) { dbias[c] += total; });
}

// One row of layernorm_forward by a block: mean and variance (two passes, float terms summed in a
// double), then the normalised row. oi may be xi (the sums read the whole row before any element
// is written). *mean, *rstd saved (eps 1e-5, biased variance).
template <class Block>
RMT_HOST_DEVICE void layernorm_row(Block& blk, float* oi, float* mean, float* rstd, const float* xi,
                                   const float* weight, const float* bias, int d) {
  const double s = blk.sum(d, [=](int64_t k) { return (double)xi[k]; });
  const float mf = (float)(s / d);
  const double sv = blk.sum(d, [=](int64_t k) { return (double)((xi[k] - mf) * (xi[k] - mf)); });
  const float rs = 1.f / ::sqrtf((float)(sv / d) + 1e-5f);
  if (blk.leader()) {
    *mean = mf;
    *rstd = rs;
  }
  blk.for_each(d, [=](int64_t k) { oi[k] = (xi[k] - mf) * rs * weight[k] + bias[k]; });
}

// A block per row: layernorm_row. mean[n], rstd[n] saved.
template <class Exec>
void layernorm_forward(Exec& ex, float* out, float* mean, float* rstd, const float* x,
                       const float* weight, const float* bias, int n, int d) {
  if (n <= 0 || d <= 0) return;
  ex.for_each_block(n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t i) {
    layernorm_row(blk, out + i * d, mean + i, rstd + i, x + i * d, weight, bias, d);
  });
}

// x = (x + bias_x) + residual (bias_x may be null), kept in x, then layernorm_forward, a block
// per row: the row is summed (and the block waits) before out, which may be residual, is written.
template <class Exec>
void add_layernorm_forward(Exec& ex, float* out, float* mean, float* rstd, float* x, const float* bias_x,
                           const float* residual, const float* weight, const float* bias, int n, int d) {
  if (n <= 0 || d <= 0) return;
  ex.for_each_block(n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t i) {
    float* xi = x + i * d;
    const float* ri = residual + i * d;
    blk.for_each(d, [=](int64_t k) { xi[k] = (bias_x ? xi[k] + bias_x[k] : xi[k]) + ri[k]; });
    layernorm_row(blk, out + i * d, mean + i, rstd + i, xi, weight, bias, d);
  });
}

// xhat = (x - mean) * rstd, g = dout * weight:
//   dweight += sum over rows of dout * xhat;  dbias += sum over rows of dout  (accumulate)
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))  (overwrite)
// The column sums run first and each row's block reads its dout row before writing dx, so dx may
// be dout.
template <class Exec>
void layernorm_backward(Exec& ex, float* dx, float* dweight, float* dbias, const float* dout,
                        const float* x, const float* mean, const float* rstd, const float* weight,
                        int n, int d) {
  if (n <= 0 || d <= 0) return;
  // Columns [0, d): dweight's sums; [d, 2d): dbias's.
  const int64_t nd = d;
  column_sums(
      ex, n, 2 * nd, 1,
      [=] RMT_HOST_DEVICE(int64_t i, int64_t c) {
        const int64_t k = c < nd ? c : c - nd;
        const float g = dout[i * nd + k];
        return c < nd ? g * (x[i * nd + k] - mean[i]) * rstd[i] : g;
      },
      [=] RMT_HOST_DEVICE(int64_t c, float total) {
        if (c < nd) dweight[c] += total;
        else dbias[c - nd] += total;
      });
  ex.for_each_block(n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t i) {
    const float* xi = x + i * d;
    const float* gi = dout + i * d;
    const float m = mean[i], rs = rstd[i];
    const double sg = blk.sum(d, [=](int64_t k) { return (double)(gi[k] * weight[k]); });
    const double sgx = blk.sum(
        d, [=](int64_t k) { return (double)(gi[k] * weight[k] * ((xi[k] - m) * rs)); });
    const float mg = (float)(sg / d), mgx = (float)(sgx / d);
    float* dxi = dx + i * d;
    blk.for_each(d, [=](int64_t k) {
      const float xh = (xi[k] - m) * rs;
      dxi[k] = rs * (gi[k] * weight[k] - mg - xh * mgx);
    });
  });
}

// A block per row: loss[i] = -log softmax(logits_i)[t_i] from the row's max and its sum of exp
// (in double, as the CPU's); dlogits[i] = (softmax(logits_i) - onehot(t_i)) * grad_scale
// (dlogits may be null). Rows with t_i < 0: loss 0, zero gradient.
template <class Exec>
void cross_entropy(Exec& ex, float* loss, float* dlogits, const float* logits,
                   const int32_t* targets, int n, int V, float grad_scale) {
  if (n <= 0) return;
  ex.for_each_block(n, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t i) {
    const float* x = logits + i * V;
    float* dl = dlogits ? dlogits + i * V : nullptr;
    const int t = targets[i];
    if (t < 0 || V <= 0) {  // the same branch in every thread of the block
      if (blk.leader()) loss[i] = 0.f;
      if (dl) blk.for_each(V, [=](int64_t k) { dl[k] = 0.f; });
      return;
    }
    const float mx = blk.max(V, [=](int64_t k) { return x[k]; });
    const double sum = blk.sum(V, [=](int64_t k) { return ::exp((double)(x[k] - mx)); });
    if (blk.leader()) loss[i] = (float)(::log(sum) - (double)(x[t] - mx));
    if (dl) {
      const double inv = 1.0 / sum;
      blk.for_each(V, [=](int64_t k) {
        float g = (float)(::exp((double)(x[k] - mx)) * inv) * grad_scale;
        if (k == t) g -= grad_scale;
        dl[k] = g;
      });
    }
  });
}

// *result = sum of x[i]^2 in double: a block per chunk of kSumSquaresChunk floats (scratch 0),
// then one block over the chunks' sums, each a fixed tree.
template <class Exec>
void sum_squares(Exec& ex, double* result, const float* x, int64_t n) {
  const int64_t chunks = n > 0 ? (n + kSumSquaresChunk - 1) / kSumSquaresChunk : 0;
  double* part = (double*)ex.scratch(0, sizeof(double) * (size_t)(chunks > 0 ? chunks : 1));
  ex.for_each_block(chunks, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t q) {
    const float* xq = x + q * kSumSquaresChunk;
    const int64_t len = min_i64(n - q * kSumSquaresChunk, kSumSquaresChunk);
    const double s = blk.sum(len, [=](int64_t k) { return (double)xq[k] * xq[k]; });
    if (blk.leader()) part[q] = s;
  });
  ex.for_each_block(1, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t) {
    const double s = blk.sum(chunks, [=](int64_t k) { return part[k]; });
    if (blk.leader()) *result = s;
  });
}
// The Backend kernel of that name: sum_squares into a word of the Exec's memory.
template <class Exec>
void sum_squares_to(Exec& ex, double* out, const float* x, int64_t n) {
  sum_squares(ex, out, x, n);
}

// *acc += sum of x[i] in double, one block's fixed tree (a loss's rows: a few thousand at most).
template <class Exec>
void accumulate_sum(Exec& ex, double* acc, const float* x, int64_t n) {
  ex.for_each_block(1, [=] RMT_HOST_DEVICE(typename Exec::Block & blk, int64_t) {
    const double s = blk.sum(n, [=](int64_t k) { return (double)x[k]; });
    if (blk.leader()) *acc += s;
  });
}

}  // namespace rmt::cuda
