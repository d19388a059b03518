#pragma once
// HostExec: the Exec of lib/cuda/exec.h as plain loops on the host, for the tests. It runs the
// CUDA backend's drivers without a GPU, in the GPU's summation order (a block's sums emulate its
// threads' partials and the fixed tree), and counts what the GPU's stream would carry.
// Not part of librmt_cuda.so: only the tests include it (its sgemm is the CPU backend's).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/core/backend.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/run_merge.h"

namespace rmt::cuda {

// The host's stand-in for the threads of one block: each call computes what all kBlockThreads
// threads would, in their order.
struct HostBlock {
  bool reverse = false;

  template <class Load>
  auto sum(int64_t len, Load load) const {
    using T = decltype(load(int64_t(0)));
    T part[kBlockThreads];
    for (int t = 0; t < kBlockThreads; ++t) {
      T acc = T(0);
      for (int64_t k = t; k < len; k += kBlockThreads) acc += load(k);
      part[t] = acc;
    }
    for (int s = kBlockThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; ++t) part[t] = part[t] + part[t + s];
    return part[0];
  }

  // len >= 1
  template <class Load>
  auto max(int64_t len, Load load) const {
    using T = decltype(load(int64_t(0)));
    T part[kBlockThreads];
    for (int t = 0; t < kBlockThreads; ++t) {
      T acc = load(t < len ? t : 0);  // a thread past the end starts from element 0
      for (int64_t k = t + kBlockThreads; k < len; k += kBlockThreads) acc = acc < load(k) ? load(k) : acc;
      part[t] = acc;
    }
    for (int s = kBlockThreads / 2; s > 0; s >>= 1)
      for (int t = 0; t < s; ++t) part[t] = part[t] < part[t + s] ? part[t + s] : part[t];
    return part[0];
  }

  template <class Load, class Store>
  void columns(int64_t rows, Load load, Store store) const {
    using T = decltype(load(int64_t(0), 0));
    constexpr int W = kColumnTile, G = kBlockThreads / kColumnTile;
    T part[G][W];
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < W; ++c) {
        T acc = T(0);
        for (int64_t i = g; i < rows; i += G) acc += load(i, c);
        part[g][c] = acc;
      }
    for (int s = G / 2; s > 0; s >>= 1)
      for (int g = 0; g < s; ++g)
        for (int c = 0; c < W; ++c) part[g][c] = part[g][c] + part[g + s][c];
    for (int c = 0; c < W; ++c) store(c, part[0][c]);
  }

  template <class F>
  void for_each(int64_t len, F f) const {
    for (int64_t k = 0; k < len; ++k) f(reverse ? len - 1 - k : k);
  }
  bool leader() const { return true; }
};

// Runs the passes as loops over the items on the host. The tests run every driver in both orders
// and demand the same bits: an item that reads what another item of its pass writes shows up.
struct HostExec {
  using Block = HostBlock;
  bool reverse = false;  // items (and blocks) n-1 .. 0 instead of 0 .. n-1
  StreamOps ops;

  template <class F>
  void for_each(int64_t n, F f) {
    if (n <= 0) return;
    if (merge.recording()) return merge.record_pass(n, f, &HostExec::launch_merged<F, false>);
    ++ops.kernels;
    issue([=, rev = reverse] {
      for (int64_t k = 0; k < n; ++k) f(rev ? n - 1 - k : k);
    });
  }
  template <class F>
  void for_each_block(int64_t n, F f) {
    if (n <= 0) return;
    if (merge.recording()) return merge.record_pass(n, f, &HostExec::launch_merged<F, true>);
    ++ops.kernels;
    issue([=, rev = reverse] {
      HostBlock blk{rev};
      for (int64_t k = 0; k < n; ++k) f(blk, rev ? n - 1 - k : k);
    });
  }

  // Packed runs' calls recorded, then issued as one launch per pass (lib/cuda/run_merge.h). The
  // launchers run every run's items, runs and items in reverse with `reverse`, and count the
  // launches the GPU makes.
  RunMerge<HostExec> merge;
  template <class F, bool Blocks>
  static void launch_merged(HostExec& ex, const std::vector<const unsigned char*>& closure,
                            const std::vector<int64_t>& n) {
    ex.ops.kernels += merged_launches(sizeof(F), int64_t(closure.size()));
    std::vector<F> fs;
    for (const unsigned char* c : closure) fs.push_back(*reinterpret_cast<const F*>(c));
    ex.issue([fs, n, rev = ex.reverse] {
      HostBlock blk{rev};
      const size_t runs = fs.size();
      for (size_t j = 0; j < runs; ++j) {
        const size_t r = rev ? runs - 1 - j : j;
        for (int64_t k = 0; k < n[r]; ++k) {
          const int64_t i = rev ? n[r] - 1 - k : k;
          if constexpr (Blocks)
            fs[r](blk, i);
          else
            fs[r](i);
        }
      }
    });
  }

  // The product through the column-major call cuBLAS would get (column_major), executed by the
  // CPU backend's row-major GEMM with the operands swapped back: so the host runs the CUDA
  // backend's mapping and its inverse, and a mistake in either shows as a wrong product.
  void sgemm(const Gemm& g) {
    if (merge.recording()) return merge.record_gemm(g);
    ++ops.gemms;
    const ColumnMajorGemm c = column_major(g);
    issue([c] {
      for (int q = 0; q < c.batch; ++q)
        cpu_backend().matmul_strided(c.C + q * c.stride_c, c.ldc, c.second + q * c.stride_second,
                                     c.ld_second, c.first + q * c.stride_first, c.ld_first, c.n,
                                     c.m, c.k, c.trans_second, c.trans_first, c.alpha, c.beta);
    });
  }

  // cuBLAS's SgemmBatched, each product as sgemm computes it; the pointer arrays are read when
  // the call runs (a pass of the same stream wrote them).
  void sgemm_arrays(const GemmArrays& g) {
    ++ops.gemms;
    issue([g] {
      for (int q = 0; q < g.count; ++q) {
        Gemm one{g.C[q], g.ldc, 0, g.A[q], g.lda, 0, g.B[q], g.ldb, 0, g.M, g.N, g.K, g.trans_a, g.trans_b};
        one.alpha = g.alpha;
        one.beta = g.beta;
        const ColumnMajorGemm c = column_major(one);
        cpu_backend().matmul_strided(c.C, c.ldc, c.second, c.ld_second, c.first, c.ld_first, c.n, c.m, c.k,
                                     c.trans_second, c.trans_first, c.alpha, c.beta);
      }
    });
  }

  // Memory on the host standing for the device's; counted as the CUDA backend issues them.
  void memset(void* p, uint8_t value, size_t bytes) {
    if (merge.recording()) return memset_pass(*this, p, value, bytes);
    ++ops.memsets;
    issue([=] { std::memset(p, value, bytes); });
  }
  void copy_to_device(void* dst, const void* host, size_t bytes) {
    no_capture("an upload");
    no_merge("an upload");
    ++ops.copies;
    if (bytes > kUploadSlotBytes) ++ops.syncs;
    std::memcpy(dst, host, bytes);
  }
  void copy_to_host(void* host, const void* src, size_t bytes) {
    no_capture("a download");
    no_merge("a download");
    ++ops.copies;
    ++ops.syncs;
    std::memcpy(host, src, bytes);
  }
  void copy_on_device(void* dst, const void* src, size_t bytes) {
    if (merge.recording()) return copy_pass(*this, dst, src, bytes);
    ++ops.copies;
    issue([=] { std::memcpy(dst, src, bytes); });
  }
  void synchronize() {
    no_capture("a wait for the stream");
    no_merge("a wait for the stream");
    ++ops.syncs;
  }

  // A driver's scratch: the slot itself, or while packed runs are merged, the run's region of it.
  void* scratch(int slot, size_t bytes) {
    if (slot < 0 || slot >= kScratchSlots) throw std::logic_error("scratch slot out of range");
    void* p = merge.recording()
                  ? merge.run_scratch(slot, bytes, [this](int s, size_t b) { return slot_buffer(s, b); })
                  : slot_buffer(slot, bytes);
    if (nan_scratch) fill_bytes_now(p, 0xff, bytes);
    return p;
  }
  // Slot `slot` (kExecSlots of them), grown to at least `bytes` as the CUDA backend's does, which
  // waits for its stream before freeing the old buffer.
  void* slot_buffer(int slot, size_t bytes) {
    std::vector<unsigned char>& b = scratch_[slot];
    if (b.size() < bytes) {
      no_capture("a scratch buffer grown");
      ++ops.syncs;
      ++scratch_growths;
      b.resize(bytes > b.size() + b.size() / 2 ? bytes : b.size() + b.size() / 2);
    }
    return b.data();
  }
  bool nan_scratch = nan_scratch_requested();  // exec.h: every request filled with 0xff first
  int64_t scratch_growths = 0;

  // Capture, as a CUDA graph does it: the passes issued are kept (with their arguments) instead
  // of run, and replay runs them again in order. What a graph cannot hold (a copy from or to the
  // host, a wait, a buffer that grows) fails while capturing.
  void begin_capture() {
    if (capturing_) throw std::logic_error("begin_capture: already capturing");
    capturing_ = true;
    recording_.clear();
  }
  void end_capture() {
    if (!capturing_) throw std::logic_error("end_capture: not capturing");
    capturing_ = false;
    captured_ = std::move(recording_);
    recording_.clear();
  }
  void abort_capture() {
    capturing_ = false;
    recording_.clear();
  }
  void replay() {
    ++ops.graphs;
    for (const std::function<void()>& work : captured_) work();
  }
  bool capturing() const { return capturing_; }

 private:
  template <class Work>
  void issue(Work work) {
    if (capturing_)
      recording_.emplace_back(std::move(work));
    else
      work();
  }
  void no_capture(const char* what) const {
    if (capturing_) throw std::logic_error(std::string(what) + " while capturing a step");
  }
  void no_merge(const char* what) const {
    if (merge.recording()) throw std::logic_error(std::string(what) + " inside merged packed runs");
  }
  // A memset issued now, also while merging (the NaN of a scratch request).
  void fill_bytes_now(void* p, uint8_t value, size_t bytes) {
    ++ops.memsets;
    issue([=] { std::memset(p, value, bytes); });
  }

  std::vector<unsigned char> scratch_[kExecSlots];
  bool capturing_ = false;
  std::vector<std::function<void()>> recording_, captured_;
};

}  // namespace rmt::cuda
