#pragma once
// The kernel set the model is written against. Every kernel works on raw contiguous fp32
// buffers with explicit sizes; all matrices are row-major. The CPU backend (cpu_backend.cpp,
// oneDNN's sgemm, Eigen and OpenMP) is the reference implementation; a CUDA backend implements
// the same set.
//
// Conventions:
//   * "accumulate" kernels add into their outputs (gradients of shared parameters);
//     everything else overwrites.
//   * Results are bit-identical for a fixed thread count (no atomics, fixed reduction order).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace rmt {

// Shape of one relative-position attention call (Transformer-XL "attn_type 0").
//   B batch, H heads, Dh head size, qlen query rows, klen = mlen + qlen key rows
//   (mlen cached rows first, then the qlen current rows).
// Activations are time-major, as in the authors' code: row t of sample b is row t*B + b of a
// [rows, B, width] buffer, so a block of positions is one contiguous range for every sample.
struct AttentionShape {
  int B, H, Dh, qlen, klen;
  // Query rows computed: [q_begin, q_end) (q_end 0 means qlen). Rows outside get no output and
  // no probabilities, and backward takes their output gradient as zero: the last layer asks only
  // for the rows whose output something reads.
  int q_begin = 0, q_end = 0;
  int mlen() const { return klen - qlen; }
  int q_stop() const { return q_end > 0 ? q_end : qlen; }
};

// Where a dropout call's mask comes from: the key dropout_key(*word, tag, layer) (random.h), with
// *word read from the backend's memory when the call runs, not when it is issued, so that a
// captured step (begin_capture) replayed after a new seed was uploaded draws new masks. word may
// be null when p <= 0.
struct DropoutSeed {
  const uint64_t* word = nullptr;
  uint64_t tag = 0, layer = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Memory. Every buffer a kernel reads or writes (parameters, gradients, optimizer state,
  // activations, caches, memory states, token ids, masks) is this backend's, allocated here; the
  // host reads and writes it only through the copies below (lib/core/device_array.h wraps them).
  // Host pointers are only ever the `host` arguments of the copies.

  // At least `bytes` bytes aligned to 64 (bytes 0: null). Contents are unspecified.
  virtual void* allocate(size_t bytes) = 0;
  // Frees what allocate returned (null: nothing), `bytes` as asked for then.
  virtual void deallocate(void* p, size_t bytes) = 0;
  // x[0..n) = value
  virtual void fill(float* x, int64_t n, float value) = 0;
  // bytes [p, p + bytes) = value (integer buffers: ids, masks)
  virtual void fill_bytes(void* p, uint8_t value, size_t bytes) = 0;
  virtual void copy_host_to_device(void* dst, const void* host, size_t bytes) = 0;
  virtual void copy_device_to_host(void* host, const void* src, size_t bytes) = 0;
  // dst and src of this backend; the ranges must not overlap.
  virtual void copy_device_to_device(void* dst, const void* src, size_t bytes) = 0;
  // Returns when every kernel and copy issued so far has finished (timing a step). The CPU
  // backends run everything synchronously; a device backend waits for its stream.
  virtual void synchronize() {}

  // ---- Kernels

  // C[M,N] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T. A is [M,K] (or [K,M] when
  // trans_a), B is [K,N] (or [N,K] when trans_b). beta = 0 ignores C's old contents.
  virtual void matmul(float* C, const float* A, const float* B, int M, int N, int K,
                      bool trans_a, bool trans_b, float alpha = 1.f, float beta = 0.f) = 0;
  // The same with explicit row strides ldc, lda, ldb (each at least its matrix's row length):
  // products of column blocks, e.g. the key/value columns of the qkv projection.
  virtual void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B,
                              int ldb, int M, int N, int K, bool trans_a, bool trans_b,
                              float alpha = 1.f, float beta = 0.f) = 0;

  // x[rows, cols] += bias[cols] broadcast over rows.
  virtual void add_bias(float* x, const float* bias, int rows, int cols) = 0;
  // dbias[cols] += sum over rows of dy[rows, cols]   (accumulate)
  virtual void bias_backward(float* dbias, const float* dy, int rows, int cols) = 0;

  // out[n, d] = table[ids[n], :] * scale
  virtual void embedding_forward(float* out, const int32_t* ids, const float* table, int n,
                                 int d, float scale) = 0;
  // dtable[ids[n], :] += dout[n, :] * scale   (accumulate; rows with repeated ids add up)
  virtual void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n,
                                  int d, float scale) = 0;

  // x[rows, cols] = max(x + bias[cols], 0): add_bias, then relu_forward in place, in one pass
  // (the feed-forward's first layer; fewer launches on a device).
  virtual void add_bias_relu(float* x, const float* bias, int rows, int cols) = 0;

  // The residual connection and the LayerNorm after it in one pass: x[n, d] = (x + bias_x) +
  // residual, in that order (bias_x [d] broadcast over rows; null: x + residual), kept in x (the
  // LayerNorm's backward reads it); then layernorm_forward(out, mean, rstd, x, weight, bias, n,
  // d). The same bits as add_bias, add_inplace and layernorm_forward called in turn. out may be
  // residual (each row is summed before it is written).
  virtual void add_layernorm_forward(float* out, float* mean, float* rstd, float* x,
                                     const float* bias_x, const float* residual,
                                     const float* weight, const float* bias, int n, int d) = 0;

  // Post-LN LayerNorm over the last dim (eps 1e-5, biased variance, as torch.nn.LayerNorm).
  // Saves mean[n] and rstd[n] for backward.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                                 const float* weight, const float* bias, int n, int d) = 0;
  // dx = overwrite; dweight, dbias accumulate.
  virtual void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                                  const float* x, const float* mean, const float* rstd,
                                  const float* weight, int n, int d) = 0;

  // out = max(x, 0) (out may alias x); dx = dout * (y > 0) where y is the ReLU output
  // (dx may alias dout).
  virtual void relu_forward(float* out, const float* x, int64_t n) = 0;
  virtual void relu_backward(float* dx, const float* dout, const float* y, int64_t n) = 0;

  // Inverted dropout: keep[i] = 1 with probability 1-p, out[i] = x[i] * keep[i] / (1-p) (out may
  // be x). The mask is a pure function of (dropout_key(*seed.word, seed.tag, seed.layer), i), so
  // results do not depend on the thread count; *seed.word is read when the call runs (DropoutSeed).
  virtual void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                               DropoutSeed seed) = 0;
  // dx[i] = dout[i] * keep[i] / (1-p) (dx may be dout).
  virtual void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                                float p) = 0;

  // Sinusoid relative position embedding, pos_seq = klen-1 .. 0:
  // out[j, :] = [sin(p_j f_0..f_{d/2-1}), cos(p_j f_0..)] with p_j = klen-1-j,
  // f_i = 1 / 10000^(2i/d). d is even.
  virtual void positional_embedding(float* out, int klen, int d) = 0;

  // Relative multi-head attention core (after the q/k/v and r projections).
  //   qkv  [klen, B, 3*H*Dh]  q|k|v column blocks; the query of row t is taken from row
  //                           mlen + t (cached rows give only keys and values). Only its first
  //                           klen rows are read: incremental decoding attends over a prefix.
  //   r    [klen, H*Dh]       r_net(pos_emb), row j = relative distance klen-1-j
  //   u, v [H, Dh]            r_w_bias and r_r_bias
  //   mask [qlen, klen]       1 = blocked; every row must keep at least one key
  //   prob [B, H, qlen, klen] saved softmax probabilities
  //   out  [qlen, B, H*Dh]
  // score[i,j] = scale * ((q_i + u).k_j + rel_shift((q + v) r^T)[i,j]), with rel_shift exactly
  // as Transformer-XL's _rel_shift (pad a zero column, reshape, drop a row): for j <= i+mlen
  // it is row i, column j+qlen-1-i of the unshifted matrix; for j == i+mlen+1 it is 0; for
  // j > i+mlen+1 it is row i+1, column j-i-mlen-2 (masked in plain causal use, seen by RMT's
  // memory rows).
  virtual void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                                     const float* u, const float* v, const uint8_t* mask,
                                     const AttentionShape& s, float scale) = 0;
  // dqkv [klen, B, 3*H*Dh] overwrite (all klen rows: cached rows get key/value gradients too);
  // dr, du, dv accumulate.
  virtual void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv,
                                      const float* dout, const float* prob, const float* qkv,
                                      const float* r, const float* u, const float* v,
                                      const AttentionShape& s, float scale) = 0;

  // out[i, b, :] = x[i, :] for b < B: rows [rows, width] broadcast over the batch into a
  // time-major [rows, B, width] buffer (the learned memory entering the first segment).
  virtual void broadcast_batch(float* out, const float* x, int rows, int B, int width) = 0;
  // dx[i, :] += dout[i, b, :] for b = 0, 1, .., B-1 in that order   (accumulate)
  virtual void broadcast_batch_backward(float* dx, const float* dout, int rows, int B,
                                        int width) = 0;

  // Softmax cross-entropy over rows of logits [n, V]. loss[i] = -log softmax(logits_i)[t_i];
  // dlogits[i] = (softmax(logits_i) - onehot(t_i)) * grad_scale. dlogits may be null
  // (evaluation). Rows with target < 0 are ignored: loss 0, zero gradient.
  virtual void cross_entropy(float* loss, float* dlogits, const float* logits,
                             const int32_t* targets, int n, int V, float grad_scale) = 0;

  // Sum of squares of x[0..n) (fixed order: same result for a fixed thread count).
  virtual double sum_squares(const float* x, int64_t n) = 0;
  // *out = sum_squares(x, n), left in this backend's memory (out: one double of it), so that a
  // training step reads it with its loss in one download (lib/run/train_step.cpp).
  virtual void sum_squares_to(double* out, const float* x, int64_t n) = 0;
  // *acc += x[0] + .. + x[n-1] in double (acc: one double of this backend's memory; the loss sum).
  // The CPU adds in index order; a device backend adds the block's fixed tree to *acc.
  virtual void accumulate_sum(double* acc, const float* x, int64_t n) = 0;
  // x *= alpha
  virtual void scale(float* x, int64_t n, float alpha) = 0;
  // y += x (residual connections)
  virtual void add_inplace(float* y, const float* x, int64_t n) = 0;
  // Adam (torch.optim.Adam, no weight decay), step t >= 1:
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
  virtual void adam_update(float* param, const float* grad, float* m, float* v, int64_t n,
                           float lr, float beta1, float beta2, float eps, int64_t t) = 0;

  // ---- ARMT's associative memory (docs/armt.md; per-item arithmetic: lib/core/assoc_math.h).
  // Per sample b a matrix A_b [Dk, d] and a normaliser z_b [Dk]: A is [B, Dk, d], z [B, Dk],
  // Dk = 6 dm. Row buffers are time-major: row r of sample b is buffer row r*B + b ("rb").

  // DPFP with nu = 3 over the rows of x [n, dm] (the authors' feature map, unnormalised):
  // x' = [relu(x); relu(-x)] (2dm), out[n, 6dm] with out[j*2dm + i] = x'[i] x'[(i-j-1) mod 2dm].
  virtual void dpfp_forward(float* out, const float* x, int64_t n, int dm) = 0;
  // dx [n, dm] overwrite (x' at 0 passes no gradient, as torch's relu).
  virtual void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) = 0;
  // The read of rows phi [rows, B, Dk] (features of queries or keys):
  //   den[rb] = phi[rb] . z_b + eps;  out[rb, :] = phi[rb] A_b / den[rb]   (overwrite both)
  virtual void assoc_read_forward(float* out, float* den, const float* phi, const float* A,
                                  const float* z, int rows, int B, int Dk, int d, float eps) = 0;
  // Its backward from dout [rows, B, d] and the forward's out and den:
  // dphi [rows, B, Dk], dA [B, Dk, d] and dz [B, Dk] all accumulate.
  virtual void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout,
                                   const float* out, const float* den, const float* phi,
                                   const float* A, const float* z, int rows, int B, int Dk,
                                   int d) = 0;
  // The delta-rule write of m memory rows per sample: key [m, B, Dk], v and vbar [m, B, d],
  // den [m*B] (vbar's denominators), blogit [m*B] (beta = sigmoid(blogit)):
  //   A_out[b] = A_in[b] + sum_j beta_j key_j^T (v_j - vbar_j)
  //   z_out[b] = z_in[b] + sum_j gamma_j key_j,  gamma_j = clip(1 - den_j / (|key_j|^2 + eps), 0, 1)
  // A_in, z_in, vbar and den null: the first write (A = 0, z = 0, vbar = 0, gamma = 1).
  // A_out, z_out overwrite (they must not alias A_in, z_in).
  virtual void assoc_write_forward(float* A_out, float* z_out, const float* A_in,
                                   const float* z_in, const float* key, const float* v,
                                   const float* vbar, const float* den, const float* blogit,
                                   int m, int B, int Dk, int d, float eps) = 0;
  // Its backward from dA_out, dz_out (gamma has no gradient): dkey [m, B, Dk], dv [m, B, d] and
  // dblogit [m*B] overwrite. The gradient of vbar is -dv; those of A_in and z_in are dA_out and
  // dz_out unchanged (the caller adds them).
  virtual void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                                    const float* dz_out, const float* key, const float* v,
                                    const float* vbar, const float* den, const float* blogit,
                                    int m, int B, int Dk, int d, float eps) = 0;

  // ---- Capture (a CUDA graph). A backend that can records the work issued between
  // begin_capture and end_capture instead of running it, and replay runs that work again, on the
  // same buffers with the same arguments, at the cost of one launch: a whole training step
  // (lib/run/train_step.cpp). While capturing, nothing may copy between host and device or wait
  // for the device, and no buffer may be allocated or grown: a step is captured after one
  // uncaptured (warm) step of the same shapes. The CPU backends cannot capture.
  // (Defined here, not out of line: librmt_cuda.so derives from Backend without lib/core.)
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() { throw std::logic_error("begin_capture: this backend cannot capture"); }
  // Ends the capture and keeps it (replacing the one kept before); returns its number (>= 1).
  // Nothing has run yet: replay it for the captured step's own work.
  virtual int64_t end_capture() { throw std::logic_error("end_capture: this backend cannot capture"); }
  // Ends a capture that failed part-way and drops what it recorded (never throws).
  virtual void abort_capture() {}
  // Runs capture `id`, which must be the one kept.
  virtual void replay(int64_t) { throw std::logic_error("replay: this backend cannot capture"); }
  // Changes whenever this backend allocates or frees memory, its scratch included: buffers a
  // capture uses may have moved, so it must be captured again.
  virtual int64_t memory_epoch() const { return 0; }

  // ---- Merging packed runs (lib/core/packed_backend.h, issue 40). A backend that can records
  // the work of `runs` calls of one kernel made between begin_run_merge and end_run_merge, each
  // for one run on that run's buffers (merge_run(r) before run r's), and at end_run_merge issues
  // each of their passes once for all of them (the CUDA backend: one launch over the runs,
  // batched GEMMs; lib/cuda/run_merge.h). The results are those of the calls made in turn.
  // Between begin and end nothing may be copied to or from the host or waited for.
  virtual bool can_merge_runs() const { return false; }
  virtual void begin_run_merge(int) { throw std::logic_error("begin_run_merge: this backend cannot merge runs"); }
  virtual void merge_run(int) { throw std::logic_error("merge_run: this backend cannot merge runs"); }
  virtual void end_run_merge() { throw std::logic_error("end_run_merge: this backend cannot merge runs"); }
  // Drops what was recorded (never throws: called while an error unwinds).
  virtual void abort_run_merge() {}
};

// The backend a run asks for by name (`device:` in the config, `--device` on the CLI):
// "cpu" (the reference), "cpu-guarded" (for tests: the CPU kernels on memory the host cannot
// touch outside a backend call, see guarded_cpu_backend), "cuda" (built with RMT_CUDA: the GPU,
// lib/cuda/cuda_backend.h, loaded from librmt_cuda.so next to the program when first asked for).
// "cuda" fails with one clear line in a build without the CUDA backend or on a machine without a
// usable GPU; any other name fails listing the known ones.
Backend& backend_by_name(const std::string& device);
// The names backend_by_name accepts in this build, for --help and errors.
std::string known_devices();
// The CUDA backend in one line, for `rmt --version`: its runtime and driver versions and the
// device, or why there is no device, or why the backend cannot be loaded; "no (CPU backend
// only)" in a build without it. Never fails.
std::string cuda_description();

// The CPU reference backend; `threads` <= 0 means all cores.
Backend& cpu_backend();
// The CPU kernels on guarded memory, for tests (lib/core/guarded_backend.cpp): its buffers are
// pages kept inaccessible (PROT_NONE) except while one of its calls runs, so a host access to
// them anywhere else (a loop left in the engine) crashes instead of passing on the CPU and
// failing on a device. Each call also checks that its buffer arguments are this backend's
// (and that host arguments of the copies are not), and new allocations hold NaN bytes, not
// zeros. Results equal cpu_backend()'s bit for bit; it is slower (two mprotect calls per call).
Backend& guarded_cpu_backend();
// How many buffers it has allocated so far (tests: a warm training step allocates none).
int64_t guarded_cpu_allocations();
// The CPU kernels' thread count; 0 = default_num_threads().
void set_num_threads(int threads);
int num_threads();
// Runs task(0), .., task(n - 1), up to num_threads() of them at once, each task's kernels on its
// host thread alone (nested OpenMP regions, oneDNN's sgemm: one thread); the first exception a
// task threw is rethrown once all have run. With one thread or one task they run in turn, their
// kernels on every thread. For the CPU backend's calls only (it is reentrant: packed runs rely on
// it too); the tasks must write disjoint buffers.
void run_cpu_tasks_concurrently(int n, const std::function<void(int)>& task);
// What "all cores" (train.threads 0) means: OMP_NUM_THREADS where it is set, else every core.
int default_num_threads();
// The CPU backend's GEMM, with its version: "oneDNN 2.6.3" or "Eigen 3.4.0".
std::string cpu_gemm_library();

}  // namespace rmt
