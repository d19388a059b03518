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

  // ---- Kernels: the inner backend's, once per active run on its slices.
  void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a, bool trans_b,
              float alpha, float beta) override;
  void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N, int K,
                      bool trans_a, bool trans_b, float alpha, float beta) override;
  void add_bias(float* x, const float* bias, int rows, int cols) override;
  void bias_backward(float* dbias, const float* dy, int rows, int cols) override;
  void embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d, float scale) override;
  void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d, float scale) override;
  void add_bias_relu(float* x, const float* bias, int rows, int cols) override;
  void add_layernorm_forward(float* out, float* mean, float* rstd, float* x, const float* bias_x,
                             const float* residual, const float* weight, const float* bias, int n, int d) override;
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                         const float* bias, int n, int d) override;
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                          const float* mean, const float* rstd, const float* weight, int n, int d) override;
  void relu_forward(float* out, const float* x, int64_t n) override;
  void relu_backward(float* dx, const float* dout, const float* y, int64_t n) override;
  void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p, DropoutSeed seed) override;
  void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n, float p) override;
  void positional_embedding(float* out, int klen, int d) override;
  void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r, const float* u,
                             const float* v, const uint8_t* mask, const AttentionShape& s, float scale) override;
  void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout, const float* prob,
                              const float* qkv, const float* r, const float* u, const float* v,
                              const AttentionShape& s, float scale) override;
  void broadcast_batch(float* out, const float* x, int rows, int B, int width) override;
  void broadcast_batch_backward(float* dx, const float* dout, int rows, int B, int width) override;
  void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets, int n, int V,
                     float grad_scale) override;
  double sum_squares(const float* x, int64_t n) override;
  void sum_squares_to(double* out, const float* x, int64_t n) override;
  void accumulate_sum(double* acc, const float* x, int64_t n) override;
  void scale(float* x, int64_t n, float alpha) override;
  void add_inplace(float* y, const float* x, int64_t n) override;
  void dpfp_forward(float* out, const float* x, int64_t n, int dm) override;
  void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) override;
  void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                          int rows, int B, int Dk, int d, float eps) override;
  void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                           const float* den, const float* phi, const float* A, const float* z,
                           int rows, int B, int Dk, int d) override;
  void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                           const float* key, const float* v, const float* vbar, const float* den,
                           const float* blogit, int m, int B, int Dk, int d, float eps) override;
  void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                            const float* dz_out, const float* key, const float* v, const float* vbar,
                            const float* den, const float* blogit, int m, int B, int Dk, int d,
                            float eps) override;

  void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                   float beta2, float eps, int64_t t) override;
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
  T* at(T* p, int k) const;
  // Runs f(slot) for each of `slots` in turn, the inner backend's calls merged where it can
  // (Backend::can_merge_runs); each_active for the active slots.
  template <typename F>
  void each_slot(const std::vector<int>& slots, F&& f);
  template <typename F>
  void each_active(F&& f);
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
