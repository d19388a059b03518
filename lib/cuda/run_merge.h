#pragma once
// Packed runs merged (issue 40): the same pass of every run of a pack in one launch.
//
// PackedBackend (lib/core/packed_backend.h) calls each kernel once per active run, on that run's
// slices. On a driver backend (lib/cuda/driver_backend.h) those calls are merged: between
// begin() and issue() the Exec records what each run's driver issues (its passes with their
// closures and its GEMMs; a memset or a device copy becomes a pass, memset_pass and copy_pass)
// instead of issuing it. The runs' records must then match op by op (one driver on one shape
// issues the same ops; a mismatch is a logic_error), and op p is issued once for all the runs:
//   * a pass: one launch over (run, item), run r's items calling run r's closure (the Exec's
//     launcher for the closure's type; runs beyond one launch's parameter space take more
//     launches, exec.h merged_capacity);
//   * a GEMM: one strided-batched call over the runs where every run's product is a single one
//     and the runs' operands lie at one distance from each other (a packed buffer's slices do);
//     else one call over arrays of pointers that a pass writes first (the attention's products,
//     already batched over (b, h)): two operations for all the runs.
// Every item computes what it computes when its run runs alone, so merging changes no bit on the
// host (tests/test_cuda_stream_ops.cpp); on the GPU a batched cuBLAS call may sum in another order.
//
// Scratch: all the runs' passes are in flight together, so run r's request of a slot gets its own
// region (at r * stride of the slot, the stride fixed by the slot's first request in the merge).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "lib/core/host_device.h"
#include "lib/cuda/exec.h"

namespace rmt::cuda {

// Runs whose pointers one pass of write_gemm_pointers writes (its closure carries 3 per run).
inline constexpr int kPointerPassRuns = 32;

// The pointer arrays of a merged GEMM: for runs [r0, r0 + count) and q < batch, entry
// (r0 + r) * batch + q of each array is run r's operand plus q of its batch strides.
struct RunOperands {
  float* C[kPointerPassRuns];
  const float* A[kPointerPassRuns];
  const float* B[kPointerPassRuns];
};
template <class Exec>
void write_gemm_pointers(Exec& ex, float** Cs, const float** As, const float** Bs, const RunOperands& o,
                         int r0, int count, const Gemm& g) {
  const int64_t batch = g.batch, sc = g.stride_c, sa = g.stride_a, sb = g.stride_b;
  ex.for_each(int64_t(count) * batch, [=] RMT_HOST_DEVICE(int64_t i) {
    const int64_t r = i / batch, q = i % batch, at = (r0 + r) * batch + q;
    Cs[at] = o.C[r] + q * sc;
    As[at] = o.A[r] + q * sa;
    Bs[at] = o.B[r] + q * sb;
  });
}

// A memset and a device copy as passes (what they are while runs are merged): by 4-byte words
// where pointers and size allow (a packed buffer's slices are alike in this), else by bytes.
template <class Exec>
void memset_pass(Exec& ex, void* p, uint8_t value, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % 4 == 0 && bytes % 4 == 0) {
    uint32_t* w = static_cast<uint32_t*>(p);
    const uint32_t word = uint32_t(value) * 0x01010101u;
    ex.for_each(int64_t(bytes / 4), [=] RMT_HOST_DEVICE(int64_t i) { w[i] = word; });
  } else {
    uint8_t* b = static_cast<uint8_t*>(p);
    ex.for_each(int64_t(bytes), [=] RMT_HOST_DEVICE(int64_t i) { b[i] = value; });
  }
}
template <class Exec>
void copy_pass(Exec& ex, void* dst, const void* src, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(dst) % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0 && bytes % 4 == 0) {
    uint32_t* d = static_cast<uint32_t*>(dst);
    const uint32_t* s = static_cast<const uint32_t*>(src);
    ex.for_each(int64_t(bytes / 4), [=] RMT_HOST_DEVICE(int64_t i) { d[i] = s[i]; });
  } else {
    uint8_t* d = static_cast<uint8_t*>(dst);
    const uint8_t* s = static_cast<const uint8_t*>(src);
    ex.for_each(int64_t(bytes), [=] RMT_HOST_DEVICE(int64_t i) { d[i] = s[i]; });
  }
}

template <class Exec>
class RunMerge {
 public:
  // Issues one recorded pass for all the runs: closure[r] is run r's closure (of the type the
  // launcher was made for), n[r] its items.
  using Launcher = void (*)(Exec&, const std::vector<const unsigned char*>& closure, const std::vector<int64_t>& n);

 private:
  enum class Kind { pass, gemm };
  struct Op {
    Kind kind = Kind::pass;
    Launcher launch = nullptr;
    int64_t n = 0;
    size_t closure_at = 0, closure_bytes = 0;  // offset and size of a pass's closure in its run's bytes
    Gemm gemm{};
  };
  struct Slot {
    unsigned char* base = nullptr;
    size_t stride = 0;
  };

 public:
  bool recording() const { return recording_; }
  int run() const { return run_; }

  void begin(int runs) {
    if (recording_) throw std::logic_error("merged runs: begin while recording");
    if (runs < 1) throw std::logic_error("merged runs: no run");
    clear();
    recording_ = true;
    runs_ = runs;
    if (ops_.size() < size_t(runs)) {
      ops_.resize(size_t(runs));
      bytes_.resize(size_t(runs));
    }
  }
  // The calls that follow are run r's.
  void set_run(int r) {
    if (!recording_ || r < 0 || r >= runs_) throw std::logic_error("merged runs: no such run");
    run_ = r;
  }
  void abort() { clear(); }

  template <class F>
  void record_pass(int64_t n, const F& f, Launcher launch) {
#ifndef __CUDACC__
    static_assert(std::is_trivially_copyable_v<F>, "a pass's closure is kept as bytes");
#endif
    std::vector<unsigned char>& b = bytes_[size_t(run_)];
    const size_t at = (b.size() + alignof(F) - 1) / alignof(F) * alignof(F);
    b.resize(at + sizeof(F));
    std::memcpy(b.data() + at, static_cast<const void*>(&f), sizeof(F));  // the closure's captures
    Op op;
    op.kind = Kind::pass;
    op.launch = launch;
    op.n = n;
    op.closure_at = at;
    op.closure_bytes = sizeof(F);
    ops_[size_t(run_)].push_back(op);
  }
  void record_gemm(const Gemm& g) {
    Op op;
    op.kind = Kind::gemm;
    op.gemm = g;
    ops_[size_t(run_)].push_back(op);
  }
  // Run run()'s region of scratch `slot` (at least `bytes`); `buffer(slot, bytes)` is the Exec's
  // slot itself, grown to at least `bytes`.
  template <class Buffer>
  void* run_scratch(int slot, size_t bytes, Buffer buffer) {
    Slot& s = slots_[slot];
    const size_t need = (bytes + 255) / 256 * 256;
    if (!s.base) {  // the slot's first request in this merge: nothing recorded reads it yet
      s.stride = need;
      s.base = static_cast<unsigned char*>(buffer(slot, need * size_t(runs_)));
    } else if (need > s.stride) {
      throw std::logic_error("merged runs: scratch slot " + std::to_string(slot) + " asked for " +
                             std::to_string(bytes) + " bytes after " + std::to_string(s.stride) +
                             " (runs of one merge must ask for the same)");
    }
    return s.base + size_t(run_) * s.stride;
  }

  // Ends the recording and issues every op once for all the runs, in order.
  void issue(Exec& ex) {
    if (!recording_) throw std::logic_error("merged runs: issue without begin");
    recording_ = false;
    try {
      issue_recorded(ex);
    } catch (...) {
      clear();
      throw;
    }
    clear();
  }

 private:
  void issue_recorded(Exec& ex) {
    const std::vector<Op>& first = ops_[0];
    for (int r = 1; r < runs_; ++r)
      if (ops_[size_t(r)].size() != first.size())
        throw std::logic_error("merged runs: run " + std::to_string(r) + " issued " +
                               std::to_string(ops_[size_t(r)].size()) + " operations, run 0 " +
                               std::to_string(first.size()) + " (packed runs must run one shape)");
    std::vector<const unsigned char*> closures(static_cast<size_t>(runs_));
    std::vector<int64_t> n(static_cast<size_t>(runs_));
    std::vector<Gemm> gemms(static_cast<size_t>(runs_));
    for (size_t p = 0; p < first.size(); ++p) {
      for (int r = 1; r < runs_; ++r) {
        const Op& o = ops_[size_t(r)][p];
        if (o.kind != first[p].kind || o.launch != first[p].launch || o.closure_bytes != first[p].closure_bytes)
          throw std::logic_error(mismatch(r, p, "another kind of operation"));
      }
      const Kind kind = first[p].kind;
      if (kind == Kind::pass) {
        for (int r = 0; r < runs_; ++r) {
          closures[size_t(r)] = closure_of(r, p);
          n[size_t(r)] = ops_[size_t(r)][p].n;
        }
        first[p].launch(ex, closures, n);
      } else {
        for (int r = 0; r < runs_; ++r) gemms[size_t(r)] = ops_[size_t(r)][p].gemm;
        issue_gemm(ex, gemms, p);
      }
    }
  }

  // The runs' products p: one strided batch over the runs, or one call over pointer arrays.
  void issue_gemm(Exec& ex, const std::vector<Gemm>& g, size_t p) const {
    const Gemm& a = g[0];
    for (const Gemm& b : g)
      if (b.M != a.M || b.N != a.N || b.K != a.K || b.trans_a != a.trans_a || b.trans_b != a.trans_b ||
          b.lda != a.lda || b.ldb != a.ldb || b.ldc != a.ldc || b.alpha != a.alpha || b.beta != a.beta ||
          b.batch != a.batch || b.stride_a != a.stride_a || b.stride_b != a.stride_b || b.stride_c != a.stride_c)
        throw std::logic_error(mismatch(int(&b - g.data()), p, "a product of another shape"));
    if (runs_ == 1) {
      ex.sgemm(a);
      return;
    }
    // Strided: batch 1 in every run, each operand the same distance (in floats) from the run before.
    const int64_t dc = g[1].C - a.C, da = g[1].A - a.A, db = g[1].B - a.B;
    bool strided = a.batch == 1 && dc > 0;
    for (int r = 1; strided && r < runs_; ++r)
      strided = g[size_t(r)].C - g[size_t(r) - 1].C == dc && g[size_t(r)].A - g[size_t(r) - 1].A == da &&
                g[size_t(r)].B - g[size_t(r) - 1].B == db;
    if (strided) {
      Gemm s = a;
      s.stride_c = dc, s.stride_a = da, s.stride_b = db;
      s.batch = runs_;
      ex.sgemm(s);
      return;
    }
    const int64_t count = int64_t(runs_) * a.batch;
    void** arrays = static_cast<void**>(ex.slot_buffer(kPointerSlot, size_t(3 * count) * sizeof(void*)));
    float** Cs = reinterpret_cast<float**>(arrays);
    const float** As = const_cast<const float**>(reinterpret_cast<float**>(arrays + count));
    const float** Bs = const_cast<const float**>(reinterpret_cast<float**>(arrays + 2 * count));
    for (int r0 = 0; r0 < runs_; r0 += kPointerPassRuns) {
      const int chunk = std::min(kPointerPassRuns, runs_ - r0);
      RunOperands o{};
      for (int r = 0; r < chunk; ++r) {
        o.C[r] = g[size_t(r0 + r)].C;
        o.A[r] = g[size_t(r0 + r)].A;
        o.B[r] = g[size_t(r0 + r)].B;
      }
      write_gemm_pointers(ex, Cs, As, Bs, o, r0, chunk, a);
    }
    GemmArrays ga{Cs, a.ldc, As, a.lda, Bs, a.ldb, a.M, a.N, a.K, a.trans_a, a.trans_b, a.alpha, a.beta, int(count)};
    ex.sgemm_arrays(ga);
  }

  // Where run r keeps the closure of its pass p.
  const unsigned char* closure_of(int r, size_t p) const {
    return bytes_[size_t(r)].data() + ops_[size_t(r)][p].closure_at;
  }

  std::string mismatch(int r, size_t p, const char* what) const {
    return "merged runs: run " + std::to_string(r) + " issued " + what + " at operation " + std::to_string(p) +
           " than run 0 (packed runs must run one shape)";
  }

  void clear() {
    recording_ = false;
    runs_ = 0;
    run_ = 0;
    for (std::vector<Op>& o : ops_) o.clear();  // capacities kept: a step merges every kernel call
    for (std::vector<unsigned char>& b : bytes_) b.clear();
    for (Slot& s : slots_) s = Slot{};
  }

  bool recording_ = false;
  int runs_ = 0, run_ = 0;
  std::vector<std::vector<Op>> ops_;               // per run
  std::vector<std::vector<unsigned char>> bytes_;  // per run: its passes' closures
  Slot slots_[kScratchSlots];
};

}  // namespace rmt::cuda
