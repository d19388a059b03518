// Register-tiled GEMM for the attention's per-(sample, head) products. At the paper's sizes
// (72x72x64 and smaller) a library sgemm spends as long packing its inputs and dispatching as
// it does multiplying; here every operand already sits in L1, so a plain register tile that
// streams B's rows and broadcasts A's elements runs near the FMA peak with no setup.
//
// The tile keeps MR x NP packets of C in registers: per k it loads NP packets of B's row k and
// broadcasts MR elements of A's column k. NP packets wide, MR rows tall, at most 24 accumulators
// with AVX-512's 32 vector registers, 12 with the 16 of AVX2 or SSE.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on Eigen's AVX-512 packets
#pragma GCC diagnostic ignored "-Wignored-attributes"   // __m512 as a template argument
#include <Eigen/Core>
#include <algorithm>
#include <cstring>

#include "lib/core/cpu_kernels.h"

namespace rmt::cpu {
namespace {

namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int P = ei::packet_traits<float>::size;

// Rows per tile for a tile NP packets wide (AVX-512: 5 -> 4, 4 -> 6, 3 and less -> 8).
constexpr int kAccumulators = P >= 16 ? 24 : 12;
constexpr int tile_rows(int np) { return std::min(8, std::max(1, kAccumulators / np)); }

template <int MR, int NP>
inline void tile(float* C, int ldc, const float* A, int a_row, int a_col, const float* B, int ldb,
                 int K, bool accumulate) {
  Packet acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = ei::pset1<Packet>(0.f);
  for (int k = 0; k < K; ++k) {
    const float* b = B + (int64_t)k * ldb;
    const float* a = A + (int64_t)k * a_col;
    Packet bk[NP];
    for (int p = 0; p < NP; ++p) {
      bk[p] = ei::ploadu<Packet>(b + p * P);
      // Keep B's packets in registers: GCC would otherwise fold the load into every FMA that
      // uses it (MR loads per packet instead of one), and the tile becomes load-bound.
      asm("" : "+v"(bk[p]));
    }
    for (int r = 0; r < MR; ++r) {
      const Packet ar = ei::pset1<Packet>(a[(int64_t)r * a_row]);
      for (int p = 0; p < NP; ++p) acc[r][p] = ei::pmadd(ar, bk[p], acc[r][p]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) {
      float* c = C + (int64_t)r * ldc + p * P;
      ei::pstoreu(c, accumulate ? ei::padd(ei::ploadu<Packet>(c), acc[r][p]) : acc[r][p]);
    }
}

// The last M % MR rows: a tile of exactly that many rows (R counts down to find it).
template <int NP, int R>
inline void tile_rest(int rows, float* C, int ldc, const float* A, int a_row, int a_col,
                      const float* B, int ldb, int K, bool accumulate) {
  if constexpr (R > 0) {
    if (rows == R) tile<R, NP>(C, ldc, A, a_row, a_col, B, ldb, K, accumulate);
    else tile_rest<NP, R - 1>(rows, C, ldc, A, a_row, a_col, B, ldb, K, accumulate);
  }
}

// All M rows of one column block NP packets wide.
template <int NP>
void column_block(float* C, int ldc, const float* A, int a_row, int a_col, const float* B, int ldb,
                  int M, int K, bool accumulate) {
  constexpr int MR = tile_rows(NP);
  int i = 0;
  for (; i + MR <= M; i += MR)
    tile<MR, NP>(C + (int64_t)i * ldc, ldc, A + (int64_t)i * a_row, a_row, a_col, B, ldb, K,
                 accumulate);
  tile_rest<NP, MR - 1>(M - i, C + (int64_t)i * ldc, ldc, A + (int64_t)i * a_row, a_row, a_col,
                        B, ldb, K, accumulate);
}

}  // namespace

int packet_round_up(int n) { return (n + P - 1) / P * P; }

void small_gemm(float* C, int ldc, const float* A, int a_row, int a_col, const float* B, int ldb,
                int M, int N, int K, bool accumulate) {
  // Whole packets in blocks of up to 5 (6 -> 4+2, 7 -> 4+3, 8 -> 4+4, 10 -> 5+5).
  int j = 0;
  for (int left = N / P; left > 0;) {
    const int np = left <= 5 ? left : left % 4 == 0 || left % 5 != 0 ? 4 : 5;
    switch (np) {
      case 1: column_block<1>(C + j, ldc, A, a_row, a_col, B + j, ldb, M, K, accumulate); break;
      case 2: column_block<2>(C + j, ldc, A, a_row, a_col, B + j, ldb, M, K, accumulate); break;
      case 3: column_block<3>(C + j, ldc, A, a_row, a_col, B + j, ldb, M, K, accumulate); break;
      case 4: column_block<4>(C + j, ldc, A, a_row, a_col, B + j, ldb, M, K, accumulate); break;
      default: column_block<5>(C + j, ldc, A, a_row, a_col, B + j, ldb, M, K, accumulate); break;
    }
    j += np * P;
    left -= np;
  }
  // Columns past the last whole packet (only when N is not a multiple of the packet size, as in
  // the tests' tiny models): plain loops, summing over k in the same order.
  for (int i = 0; i < M; ++i)
    for (int c = j; c < N; ++c) {
      float s = 0.f;
      for (int k = 0; k < K; ++k)
        s += A[(int64_t)i * a_row + (int64_t)k * a_col] * B[(int64_t)k * ldb + c];
      float& out = C[(int64_t)i * ldc + c];
      out = accumulate ? out + s : s;
    }
}

void transpose_padded(float* dst, int ldd, const float* src, int lds, int rows, int cols) {
  // P x P blocks through registers (Eigen's packet transpose). A last, partial block of rows is
  // completed with zero rows, so it writes whole packets: the first padding columns of dst.
  const int cb = cols / P * P;
  for (int r = 0; r < rows; r += P) {
    const int nr = std::min(P, rows - r);
    for (int c = 0; c < cb; c += P) {
      ei::PacketBlock<Packet, P> blk;
      for (int k = 0; k < P; ++k)
        blk.packet[k] = k < nr ? ei::ploadu<Packet>(src + (int64_t)(r + k) * lds + c)
                               : ei::pset1<Packet>(0.f);
      ei::ptranspose(blk);
      for (int k = 0; k < P; ++k) ei::pstoreu(dst + (int64_t)(c + k) * ldd + r, blk.packet[k]);
    }
    for (int c = cb; c < cols; ++c)  // columns past the last whole packet
      for (int k = 0; k < P; ++k)
        dst[(int64_t)c * ldd + r + k] = k < nr ? src[(int64_t)(r + k) * lds + c] : 0.f;
  }
  for (int c = 0; c < cols; ++c)
    std::fill(dst + (int64_t)c * ldd + packet_round_up(rows), dst + (int64_t)(c + 1) * ldd, 0.f);
}

}  // namespace rmt::cpu
