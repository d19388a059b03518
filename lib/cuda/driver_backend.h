#pragma once
// The Backend kernel set (lib/core/backend.h) on an Exec (lib/cuda/exec.h): every kernel is its
// driver of lib/cuda/kernels.h or lib/cuda/attention_kernels.h, every GEMM one ex.sgemm, every
// fill, copy and wait one call of the Exec. The CUDA backend is DriverBackend<CudaExec>
// (lib/cuda/cuda_backend.cu, which adds device memory); the tests' host stand-in is
// DriverBackend<HostExec> (lib/cuda/host_backend.h), so that whole training steps run on the
// host through exactly the calls the GPU gets, and their stream operations can be counted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/core/backend.h"
#include "lib/cuda/assoc_kernels.h"
#include "lib/cuda/attention_kernels.h"
#include "lib/cuda/exec.h"
#include "lib/cuda/kernels.h"

namespace rmt::cuda {

// Unless RMT_CUDA_MERGE_RUNS is "0" (read when a backend is made).
inline bool merge_runs_requested() {
  const char* v = std::getenv("RMT_CUDA_MERGE_RUNS");
  return !(v && std::strcmp(v, "0") == 0);
}

template <class Exec>
class DriverBackend : public Backend {
 public:
  // ---- memory, besides allocate and deallocate (the derived backend's)
  void fill(float* x, int64_t n, float value) override { rmt::cuda::fill(ex(), x, n, value); }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override {
    if (bytes > 0) ex().memset(p, value, bytes);
  }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) ex().copy_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) ex().copy_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) ex().copy_on_device(dst, src, bytes);
  }

  // ---- GEMMs
  void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
              bool trans_b, float alpha, float beta) override {
    gemm(C, N, A, trans_a ? M : K, B, trans_b ? K : N, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M,
                      int N, int K, bool trans_a, bool trans_b, float alpha, float beta) override {
    gemm(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
  }

  // ---- every other kernel: its driver
  void add_bias(float* x, const float* bias, int rows, int cols) override {
    rmt::cuda::add_bias(ex(), x, bias, rows, cols);
  }
  void bias_backward(float* dbias, const float* dy, int rows, int cols) override {
    rmt::cuda::bias_backward(ex(), dbias, dy, rows, cols);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d,
                         float scale) override {
    rmt::cuda::embedding_forward(ex(), out, ids, table, n, d, scale);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d,
                          float scale) override {
    rmt::cuda::embedding_backward(ex(), dtable, dout, ids, n, d, scale);
  }
  void add_bias_relu(float* x, const float* bias, int rows, int cols) override {
    rmt::cuda::add_bias_relu(ex(), x, bias, rows, cols);
  }
  void add_layernorm_forward(float* out, float* mean, float* rstd, float* x, const float* bias_x,
                             const float* residual, const float* weight, const float* bias, int n,
                             int d) override {
    rmt::cuda::add_layernorm_forward(ex(), out, mean, rstd, x, bias_x, residual, weight, bias, n, d);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                         const float* weight, const float* bias, int n, int d) override {
    rmt::cuda::layernorm_forward(ex(), out, mean, rstd, x, weight, bias, n, d);
  }
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                          const float* x, const float* mean, const float* rstd,
                          const float* weight, int n, int d) override {
    rmt::cuda::layernorm_backward(ex(), dx, dweight, dbias, dout, x, mean, rstd, weight, n, d);
  }
  void relu_forward(float* out, const float* x, int64_t n) override {
    rmt::cuda::relu_forward(ex(), out, x, n);
  }
  void relu_backward(float* dx, const float* dout, const float* y, int64_t n) override {
    rmt::cuda::relu_backward(ex(), dx, dout, y, n);
  }
  void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                       DropoutSeed seed) override {
    rmt::cuda::dropout_forward(ex(), out, x, keep, n, p, seed);
  }
  void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                        float p) override {
    rmt::cuda::dropout_backward(ex(), dx, dout, keep, n, p);
  }
  void positional_embedding(float* out, int klen, int d) override {
    rmt::cuda::positional_embedding(ex(), out, klen, d);
  }
  void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                             const float* u, const float* v, const uint8_t* mask,
                             const AttentionShape& s, float scale) override {
    rmt::cuda::rel_attention_forward(ex(), out, prob, qkv, r, u, v, mask, s, scale);
  }
  void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout,
                              const float* prob, const float* qkv, const float* r,
                              const float* u, const float* v, const AttentionShape& s,
                              float scale) override {
    rmt::cuda::rel_attention_backward(ex(), dqkv, dr, du, dv, dout, prob, qkv, r, u, v, s, scale);
  }
  void broadcast_batch(float* out, const float* x, int rows, int B, int width) override {
    rmt::cuda::broadcast_batch(ex(), out, x, rows, B, width);
  }
  void broadcast_batch_backward(float* dx, const float* dout, int rows, int B,
                                int width) override {
    rmt::cuda::broadcast_batch_backward(ex(), dx, dout, rows, B, width);
  }
  void dpfp_forward(float* out, const float* x, int64_t n, int dm) override {
    rmt::cuda::dpfp_forward(ex(), out, x, n, dm);
  }
  void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) override {
    rmt::cuda::dpfp_backward(ex(), dx, dout, x, n, dm);
  }
  void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                          int rows, int B, int Dk, int d, float eps) override {
    rmt::cuda::assoc_read_forward(ex(), out, den, phi, A, z, rows, B, Dk, d, eps);
  }
  void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                           const float* den, const float* phi, const float* A, const float* z,
                           int rows, int B, int Dk, int d) override {
    rmt::cuda::assoc_read_backward(ex(), dphi, dA, dz, dout, out, den, phi, A, z, rows, B, Dk, d);
  }
  void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                           const float* key, const float* v, const float* vbar, const float* den,
                           const float* blogit, int m, int B, int Dk, int d, float eps) override {
    rmt::cuda::assoc_write_forward(ex(), A_out, z_out, A_in, z_in, key, v, vbar, den, blogit, m, B, Dk,
                                   d, eps);
  }
  void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                            const float* dz_out, const float* key, const float* v, const float* vbar,
                            const float* den, const float* blogit, int m, int B, int Dk, int d,
                            float eps) override {
    rmt::cuda::assoc_write_backward(ex(), dkey, dv, dblogit, dA_out, dz_out, key, v, vbar, den, blogit,
                                    m, B, Dk, d, eps);
  }
  void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                     int n, int V, float grad_scale) override {
    rmt::cuda::cross_entropy(ex(), loss, dlogits, logits, targets, n, V, grad_scale);
  }
  // The sum in the Exec's memory, then one download (the host waits for the stream here).
  double sum_squares(const float* x, int64_t n) override {
    Exec& e = ex();
    double* word = result_word();
    rmt::cuda::sum_squares(e, word, x, n);
    double result = 0;
    e.copy_to_host(&result, word, sizeof result);
    return result;
  }
  void sum_squares_to(double* out, const float* x, int64_t n) override {
    rmt::cuda::sum_squares(ex(), out, x, n);
  }
  void accumulate_sum(double* acc, const float* x, int64_t n) override {
    rmt::cuda::accumulate_sum(ex(), acc, x, n);
  }
  void scale(float* x, int64_t n, float alpha) override { rmt::cuda::scale(ex(), x, n, alpha); }
  void add_inplace(float* y, const float* x, int64_t n) override {
    rmt::cuda::add_inplace(ex(), y, x, n);
  }
  void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    rmt::cuda::adam_update(ex(), param, grad, m, v, n, lr, beta1, beta2, eps, t);
  }

  // ---- capture: the Exec records (a CUDA graph; the host's list of passes) and replays
  bool can_capture() const override { return true; }
  void begin_capture() override { ex().begin_capture(); }
  int64_t end_capture() override {
    ex().end_capture();
    return ++captures_;
  }
  void abort_capture() override { ex().abort_capture(); }
  void replay(int64_t id) override {
    if (id <= 0 || id != captures_)
      throw std::logic_error(fmt::format("replay: capture {} is not the one kept ({})", id, captures_));
    ex().replay();
  }
  int64_t memory_epoch() const override { return allocations_ + scratch_growths(); }

  // ---- packed runs merged: the Exec records each run's calls, then issues them once for all
  // (lib/cuda/run_merge.h). RMT_CUDA_MERGE_RUNS=0 in the environment (or set_merge_runs(false))
  // runs each run's calls in turn instead, to measure what merging gains.
  bool can_merge_runs() const override { return merge_runs_; }
  void begin_run_merge(int runs) override { ex().merge.begin(runs); }
  void merge_run(int r) override { ex().merge.set_run(r); }
  void end_run_merge() override { ex().merge.issue(ex()); }
  void abort_run_merge() override { ex().merge.abort(); }
  void set_merge_runs(bool on) { merge_runs_ = on; }

 protected:
  // The Exec every call goes through (a device backend makes its stream on first use here).
  virtual Exec& ex() = 0;
  // One double of the Exec's memory: sum_squares's result before its download.
  virtual double* result_word() = 0;
  // Allocations and frees so far (the derived backend counts them), and the Exec's scratch
  // growths: memory_epoch.
  int64_t allocations_ = 0;
  virtual int64_t scratch_growths() const = 0;

 private:
  void gemm(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
            int K, bool trans_a, bool trans_b, float alpha, float beta) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {  // an empty product: C = beta C (0 when beta is 0), as the CPU backend does
      scale_matrix_rows(ex(), C, ldc, M, N, beta);
      return;
    }
    Gemm g{C, ldc, 0, A, lda, 0, B, ldb, 0, M, N, K, trans_a, trans_b};
    g.alpha = alpha;
    g.beta = beta;
    ex().sgemm(g);
  }

  int64_t captures_ = 0;  // the number of the capture kept
  bool merge_runs_ = merge_runs_requested();
};

}  // namespace rmt::cuda
