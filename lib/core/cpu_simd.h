#pragma once
// Eigen's matrix views and SIMD packets as the CPU backend's files use them (cpu_backend.cpp,
// cpu_attention.cpp): row-major fp32, strided.
// GCC 12 emits false -Wmaybe-uninitialized warnings from Eigen's AVX-512 paths.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

namespace rmt::cpu {

using MatRM = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using MapM = Eigen::Map<MatRM, 0, Stride>;  // strided row-major view
using CMapM = Eigen::Map<const MatRM, 0, Stride>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using CMapRow = Eigen::Map<const RowVec>;
using MapRow = Eigen::Map<RowVec>;

// Row reductions through SIMD packets (Eigen's), each lane summed in order and the lanes
// combined by a fixed tree: the same bits wherever the row sits in memory.
namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int kPacket = ei::packet_traits<float>::size;

}  // namespace rmt::cpu
