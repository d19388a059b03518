#pragma once
// NaN where nothing was written (tests/cuda/, docs/cuda.md). cudaMalloc returns leftovers: often
// zeros, often the previous test's correct values. A kernel that reads memory it never wrote, or
// leaves part of its output unwritten, can then pass. So the GPU suite's device memory holds NaN
// before it is written:
//   * nan_filled_gpu(): the cuda backend with every new buffer filled with 0xff bytes (a NaN as
//     float, -1 as int32, 255 as a mask byte) at allocation; the kernel tests' buffers and the
//     models (parameters, gradients, activations, caches, Adam's state) are allocated through it;
//   * the backend's own scratch: every request is filled with 0xff by the backend itself, as
//     RMT_CUDA_NAN_SCRATCH=1 asks (lib/cuda/exec.h), which the suite's main() sets.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "lib/core/backend.h"
#include "lib/core/device_array.h"
#include "tests/cuda/compare.h"

namespace rmt::cuda_test {

// Every call forwards to the cuda backend; allocate also fills the new buffer with 0xff bytes.
class NanFilledBackend final : public Backend {
 public:
  explicit NanFilledBackend(Backend& inner) : be_(inner) {}

  void* allocate(size_t bytes) override {
    void* p = be_.allocate(bytes);
    if (p) be_.fill_bytes(p, 0xff, bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes) override { be_.deallocate(p, bytes); }
  void fill(float* x, int64_t n, float value) override { be_.fill(x, n, value); }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override { be_.fill_bytes(p, value, bytes); }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    be_.copy_host_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    be_.copy_device_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    be_.copy_device_to_device(dst, src, bytes);
  }
  void synchronize() override { be_.synchronize(); }

  void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
              bool trans_b, float alpha, float beta) override {
    be_.matmul(C, A, B, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M,
                      int N, int K, bool trans_a, bool trans_b, float alpha, float beta) override {
    be_.matmul_strided(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void add_bias(float* x, const float* bias, int rows, int cols) override {
    be_.add_bias(x, bias, rows, cols);
  }
  void bias_backward(float* dbias, const float* dy, int rows, int cols) override {
    be_.bias_backward(dbias, dy, rows, cols);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d,
                         float scale) override {
    be_.embedding_forward(out, ids, table, n, d, scale);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d,
                          float scale) override {
    be_.embedding_backward(dtable, dout, ids, n, d, scale);
  }
  void add_bias_relu(float* x, const float* bias, int rows, int cols) override {
    be_.add_bias_relu(x, bias, rows, cols);
  }
  void add_layernorm_forward(float* out, float* mean, float* rstd, float* x, const float* bias_x,
                             const float* residual, const float* weight, const float* bias, int n,
                             int d) override {
    be_.add_layernorm_forward(out, mean, rstd, x, bias_x, residual, weight, bias, n, d);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                         const float* weight, const float* bias, int n, int d) override {
    be_.layernorm_forward(out, mean, rstd, x, weight, bias, n, d);
  }
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                          const float* x, const float* mean, const float* rstd,
                          const float* weight, int n, int d) override {
    be_.layernorm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, n, d);
  }
  void relu_forward(float* out, const float* x, int64_t n) override { be_.relu_forward(out, x, n); }
  void relu_backward(float* dx, const float* dout, const float* y, int64_t n) override {
    be_.relu_backward(dx, dout, y, n);
  }
  void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                       DropoutSeed seed) override {
    be_.dropout_forward(out, x, keep, n, p, seed);
  }
  void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                        float p) override {
    be_.dropout_backward(dx, dout, keep, n, p);
  }
  void positional_embedding(float* out, int klen, int d) override {
    be_.positional_embedding(out, klen, d);
  }
  void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                             const float* u, const float* v, const uint8_t* mask,
                             const AttentionShape& s, float scale) override {
    be_.rel_attention_forward(out, prob, qkv, r, u, v, mask, s, scale);
  }
  void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout,
                              const float* prob, const float* qkv, const float* r, const float* u,
                              const float* v, const AttentionShape& s, float scale) override {
    be_.rel_attention_backward(dqkv, dr, du, dv, dout, prob, qkv, r, u, v, s, scale);
  }
  void broadcast_batch(float* out, const float* x, int rows, int B, int width) override {
    be_.broadcast_batch(out, x, rows, B, width);
  }
  void broadcast_batch_backward(float* dx, const float* dout, int rows, int B, int width) override {
    be_.broadcast_batch_backward(dx, dout, rows, B, width);
  }
  void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                     int n, int V, float grad_scale) override {
    be_.cross_entropy(loss, dlogits, logits, targets, n, V, grad_scale);
  }
  double sum_squares(const float* x, int64_t n) override { return be_.sum_squares(x, n); }
  void sum_squares_to(double* out, const float* x, int64_t n) override { be_.sum_squares_to(out, x, n); }
  void accumulate_sum(double* acc, const float* x, int64_t n) override { be_.accumulate_sum(acc, x, n); }
  void scale(float* x, int64_t n, float alpha) override { be_.scale(x, n, alpha); }
  void add_inplace(float* y, const float* x, int64_t n) override { be_.add_inplace(y, x, n); }
  void dpfp_forward(float* out, const float* x, int64_t n, int dm) override { be_.dpfp_forward(out, x, n, dm); }
  void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) override {
    be_.dpfp_backward(dx, dout, x, n, dm);
  }
  void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                          int rows, int B, int Dk, int d, float eps) override {
    be_.assoc_read_forward(out, den, phi, A, z, rows, B, Dk, d, eps);
  }
  void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                           const float* den, const float* phi, const float* A, const float* z,
                           int rows, int B, int Dk, int d) override {
    be_.assoc_read_backward(dphi, dA, dz, dout, out, den, phi, A, z, rows, B, Dk, d);
  }
  void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                           const float* key, const float* v, const float* vbar, const float* den,
                           const float* blogit, int m, int B, int Dk, int d, float eps) override {
    be_.assoc_write_forward(A_out, z_out, A_in, z_in, key, v, vbar, den, blogit, m, B, Dk, d, eps);
  }
  void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                            const float* dz_out, const float* key, const float* v, const float* vbar,
                            const float* den, const float* blogit, int m, int B, int Dk, int d,
                            float eps) override {
    be_.assoc_write_backward(dkey, dv, dblogit, dA_out, dz_out, key, v, vbar, den, blogit, m, B, Dk, d, eps);
  }

  void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    be_.adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, t);
  }
  bool can_capture() const override { return be_.can_capture(); }
  void begin_capture() override { be_.begin_capture(); }
  int64_t end_capture() override { return be_.end_capture(); }
  void abort_capture() override { be_.abort_capture(); }
  void replay(int64_t id) override { be_.replay(id); }
  int64_t memory_epoch() const override { return be_.memory_epoch(); }
  // Packed runs merged as on the cuda backend itself (lib/cuda/run_merge.h).
  bool can_merge_runs() const override { return be_.can_merge_runs(); }
  void begin_run_merge(int runs) override { be_.begin_run_merge(runs); }
  void merge_run(int r) override { be_.merge_run(r); }
  void end_run_merge() override { be_.end_run_merge(); }
  void abort_run_merge() override { be_.abort_run_merge(); }

 private:
  Backend& be_;
};

// The cuda backend whose new buffers hold NaN (one for the whole suite: models and engines check
// that they share one backend object).
inline Backend& nan_filled_gpu() {
  static NanFilledBackend be(gpu());
  return be;
}

}  // namespace rmt::cuda_test
