#pragma once
// Helpers of the CPU backend that tests (and other CPU code) may use directly.
#include <cstdint>
#include <vector>

#include "lib/core/backend.h"

namespace rmt::cpu {

// C[M,N] = alpha op(A) op(B) + beta C with explicit row strides (ldc, lda, ldb): the library
// GEMM (oneDNN's sgemm, Eigen's in a build without oneDNN) behind Backend::matmul.
void gemm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
          int K, bool ta, bool tb, float alpha, float beta);

// Transformer-XL's _rel_shift of x[qlen, klen] into out[qlen, klen] (out must not alias x):
// pad a zero column on the left, view as [klen+1, qlen], drop the first row, view back.
//   j <= i+mlen      : out[i,j] = x[i, j+qlen-1-i]
//   j == i+mlen+1    : out[i,j] = 0
//   j >  i+mlen+1    : out[i,j] = x[i+1, j-i-mlen-2]   (wrap-around from the next row)
void rel_shift_forward(float* out, const float* x, int qlen, int klen);
// Adjoint of rel_shift_forward: dx = shift^T(dout) (overwrites dx[qlen, klen]; entries of x
// that the shift never reads get 0).
void rel_shift_backward(float* dx, const float* dout, int qlen, int klen);
// The same for rows [i0, i1) of dout only (dout points at row i0, rows ld_dout apart; the other
// rows count as zero). Writes only the rows of dx those can reach, [i0, min(i1 + 1, qlen)), with
// dx pointing at row i0.
void rel_shift_backward_rows(float* dx, const float* dout, int ld_dout, int i0, int i1, int qlen,
                             int klen);

// C[M,N] = A[M,K] B[K,N], or C += A B with accumulate: the attention's per-head products, too
// small for a library GEMM (cpu_small_gemm.cpp). A's element (i, k) is A[i*a_row + k*a_col]
// (a_row = lda, a_col = 1 for a row-major A; a_row = 1, a_col = lda for the transpose of a
// row-major [K, M]); B's rows are contiguous with stride ldb; C's stride is ldc. Each element
// sums over k in order: deterministic, and independent of where the buffers sit in memory.
void small_gemm(float* C, int ldc, const float* A, int a_row, int a_col, const float* B, int ldb,
                int M, int N, int K, bool accumulate);
// dst[c, r] = src[r, c] for src [rows, cols] (row stride lds), dst [cols, ldd] with
// ldd >= packet_round_up(rows); dst's columns rows..ldd-1 are zeroed (padding to whole SIMD
// packets for small_gemm).
void transpose_padded(float* dst, int ldd, const float* src, int lds, int rows, int cols);
// n rounded up to a whole number of SIMD packets (16 floats with AVX-512, 8 with AVX2).
int packet_round_up(int n);

}  // namespace rmt::cpu
