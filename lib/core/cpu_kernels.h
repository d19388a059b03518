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

// The attention's host scratch, grown on use and kept (no allocation in the steady state):
// rt, R^T per head; mask_blocked, mask_keep, the mask as floats; qv, Q+v of every sample
// [H, B*qlen, Dh] and bd, the position scores' gradient [H, B*qlen, klen], for one dR GEMM per
// head; du_part, dv_part, per-sample partials of the deterministic reduction over samples.
struct AttentionBuffers {
  std::vector<float> rt, mask_blocked, mask_keep, qv, bd, du_part, dv_part;
};
// Backend::rel_attention_forward / rel_attention_backward (cpu_attention.cpp).
void rel_attention_forward(AttentionBuffers& buf, float* out, float* prob, const float* qkv,
                           const float* r, const float* u, const float* v, const uint8_t* mask,
                           const AttentionShape& s, float scale);
void rel_attention_backward(AttentionBuffers& buf, float* dqkv, float* dr, float* du, float* dv,
                            const float* dout, const float* prob, const float* qkv,
                            const float* r, const float* u, const float* v,
                            const AttentionShape& s, float scale);

// Backend::dpfp_forward .. assoc_write_backward, ARMT's associative memory (cpu_assoc.cpp).
void dpfp_forward(float* out, const float* x, int64_t n, int dm);
void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm);
void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                        int rows, int B, int Dk, int d, float eps);
void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                         const float* den, const float* phi, const float* A, const float* z,
                         int rows, int B, int Dk, int d);
void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                         const float* key, const float* v, const float* vbar, const float* den,
                         const float* blogit, int m, int B, int Dk, int d, float eps);
void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                          const float* dz_out, const float* key, const float* v, const float* vbar,
                          const float* den, const float* blogit, int m, int B, int Dk, int d,
                          float eps);

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
