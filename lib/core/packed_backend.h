#pragma once
// Packed runs (issue 40): K training runs of one model shape in one process and one computation.
//
// A PackedBackend wraps a backend and gives every buffer a leading run dimension: an allocation
// of `bytes` is K slices of `stride` bytes (bytes rounded up to 64, the alignment a lone run's
// buffer has), run k's copy at base + k * stride. The model, the engine and the optimizer are
// written once, for one run, and run unchanged on it: a kernel called once runs over the slices
// of the *active* runs, each slot's pointers moved to its own slice. So parameters, gradients
// and Adam's moments are each still one allocation ([K, num_params]), and a run is one more
// leading index, not a second code path.
//
// The host side of a run (its batch, its learning rate, its clipping, reading its loss) happens
// with that run alone active (activate(k)); the forward and backward of a packed step with all
// the group active (packed_train_step, lib/run/train_step.h). Two rules keep each slice a whole run:
//   * a copy from the host, or a fill, into a buffer that no call has written yet goes to every
//     slice: what the engine uploads once and keeps (attention masks, zeroed scratch) is then
//     there for every run, whichever was active when it was made. Later ones go to the active
//     slices only (a run's tokens, its parameters).
//   * what is read back to the host (a copy to the host, sum_squares) needs exactly one active run.
//
// Every run's kernels are the inner backend's, called in turn as for a run alone with one thread:
// on the CPU a packed run is bit-identical to the same run trained alone with train.threads 1
// (tests/test_packed.cpp). Several cores train several packs, one per host thread (lib/run/train.h
// train_packed; the CPU backend is reentrant): a pack never waits on another core inside a step,
// which a fork and join per kernel did, badly so beside other processes. On a backend that merges
// runs (Backend::can_merge_runs: the CUDA backend) a kernel called for a group is one call of the
// inner backend per run, recorded, then issued once for all the runs: one launch per pass over
// the runs, one batched cuBLAS call per product (lib/cuda/run_merge.h).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <type_traits>
#include <vector>

#include "lib/core/backend.h"

namespace rmt {

// Runs pack(0), .., pack(n - 1) each on its own host thread (pack(0) on the caller's) and waits
// for all; the first exception one threw is rethrown then. On the CPU several packs train side by
// side this way, each computing its runs' kernels on its thread.
void run_packs_on_threads(int n, const std::function<void(int)>& pack);

class PackedBackend final : public Backend {
 public:
  // `runs` slots on `inner`. Sets this host thread's kernel thread count to 1 while it lives (a
  // packed run computes as a lone run of one thread).
  PackedBackend(Backend& inner, int runs);
  ~PackedBackend() override;

  int runs() const { return runs_; }
  Backend& inner() { return inner_; }
  // The runs the following calls apply to: one, a group (ascending slots, each < runs()), or all.
  void activate(int slot);
  void activate(const std::vector<int>& slots);
  void activate_all();
  const std::vector<int>& active() const { return active_; }

  // ---- Memory
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  void fill(float* x, int64_t n, float value) override;
  void fill_bytes(void* p, uint8_t value, size_t bytes) override;
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override;
  void copy_device_to_host(void* host, const void* src, size_t bytes) override;
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override { inner_.synchronize(); }

  // Read back to the host: needs exactly one active run.
  double sum_squares(const float* x, int64_t n) override;

  // ---- Kernels (lib/core/backend_kernels.h): the inner backend's, once per active run on its
  // slices (each_run).
#define RMT_KERNEL(name, params, args, extents) \
  void name params override { each_run(&Backend::name, RMT_ARGS args); }
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL

  int64_t memory_epoch() const override { return inner_.memory_epoch(); }
  // Capture (a CUDA graph) is the inner backend's: what the runs' calls issue is recorded.
  bool can_capture() const override { return inner_.can_capture(); }
  void begin_capture() override { inner_.begin_capture(); }
  int64_t end_capture() override { return inner_.end_capture(); }
  void abort_capture() override { inner_.abort_capture(); }
  void replay(int64_t id) override { inner_.replay(id); }

 private:
  struct Allocation {
    size_t bytes = 0, stride = 0;
    bool written = false;  // some call has written (or read) it: later host writes are per run
  };
  // The allocation holding p (a kernel may be handed a pointer inside one); fails loudly for a
  // pointer that is not this backend's.
  Allocation& allocation_of(const void* p);
  // Checks that each pointer is this backend's (null allowed) and marks its allocation written;
  // called once per kernel, before the runs' calls.
  void touch(std::initializer_list<const void*> pointers);
  // p moved to run slot k's slice (null stays null). Only reads the allocation table.
  template <typename T>
  T* at(T* p, int k) const {
    if (!p || k == 0) return p;
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    auto it = --allocations_.upper_bound(address);  // touch() found it
    return reinterpret_cast<T*>(address + it->second.stride * size_t(k));
  }
  // Runs f(slot) for each of `slots` in turn, the inner backend's calls merged where it can
  // (Backend::can_merge_runs); each_active for the active slots.
  template <typename F>
  void each_slot(const std::vector<int>& slots, F&& f) {
    if (slots.size() < 2 || !inner_.can_merge_runs()) {
      for (int k : slots) f(k);
      return;
    }
    // A backend that merges runs (the CUDA backend) records the runs' calls, then issues each of
    // their passes once for all of them.
    inner_.begin_run_merge(int(slots.size()));
    try {
      for (size_t r = 0; r < slots.size(); ++r) {
        inner_.merge_run(int(r));
        f(slots[r]);
      }
      inner_.end_run_merge();
    } catch (...) {
      inner_.abort_run_merge();
      throw;
    }
  }
  template <typename F>
  void each_active(F&& f) {
    each_slot(active_, f);
  }

  // One kernel over the active runs, whatever the kernel: its buffers (every pointer argument,
  // and a dropout seed's word: each run draws its masks from its own seed) checked and marked
  // written once, then the inner backend's kernel per run with them moved to that run's slices,
  // every other argument (sizes, scalars, shapes) as it is.
  template <typename... P, typename... A>
  void each_run(void (Backend::*kernel)(P...), A... args) {
    (touch({buffer_of(args)}), ...);
    each_active([&](int k) { (inner_.*kernel)(slice(args, k)...); });
  }
  template <typename A>
  static const void* buffer_of(const A& a) {
    if constexpr (std::is_pointer_v<A>) return a;
    else if constexpr (std::is_same_v<A, DropoutSeed>) return a.word;
    else return nullptr;
  }
  template <typename A>
  A slice(A a, int k) const {
    if constexpr (std::is_pointer_v<A>) {
      return at(a, k);
    } else if constexpr (std::is_same_v<A, DropoutSeed>) {
      a.word = at(a.word, k);
      return a;
    } else {
      return a;
    }
  }
  // The one active slot (reading back to the host needs one run); fails otherwise.
  int single_active(const char* what) const;
  // The slots a host write into allocation `a` goes to: all of them the first time, else the active.
  std::vector<int> write_slots(Allocation& a) const;

  Backend& inner_;
  int runs_, threads_before_;
  std::vector<int> active_, all_;
  std::map<uintptr_t, Allocation> allocations_;  // by base address
};

}  // namespace rmt
