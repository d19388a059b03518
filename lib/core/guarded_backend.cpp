// "cpu-guarded": the CPU kernels on memory the host cannot touch outside a backend call, the
// test that the engine reaches its buffers only through the backend (as a CUDA backend needs).
//
// Every allocation comes from one reserved region (an arena of pages, mmap'd PROT_NONE). Each
// call of this backend makes the used part of the arena readable and writable, runs the CPU
// backend's kernel (or copy), and makes it inaccessible again, so any host read or write of a
// buffer elsewhere is a segmentation fault at the offending line. Each call also checks that
// every buffer argument lies inside one live allocation of this backend (a host vector passed as
// a device buffer, or a device buffer passed as the host side of a copy, is an internal error),
// and new allocations are filled with 0xff bytes (NaN as floats) so that nothing relies on fresh
// memory being zero. Calls are serialised by a mutex; kernels still use OpenMP inside.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/core/backend.h"

namespace rmt {
namespace {

// Address space reserved (not memory: pages are committed when first written).
constexpr size_t kArenaBytes = size_t(16) << 30;
// Allocations are packed at this alignment: the fewer pages the arena spans, the cheaper the
// two mprotect calls around every kernel (a tiny model's hundreds of buffers fit in a few).
constexpr size_t kAlign = 64;

class GuardedBackend final : public Backend {
 public:
  GuardedBackend() : inner_(cpu_backend()), page_(size_t(sysconf(_SC_PAGESIZE))) {}

  int64_t allocations() {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocations_;
  }

  // ---- memory
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    reserve();
    const size_t len = round_up(bytes, kAlign);
    size_t offset = top_;
    for (auto it = free_.begin(); it != free_.end(); ++it)  // first fit
      if (it->second >= len) {
        offset = it->first;
        if (it->second > len) free_[offset + len] = it->second - len;
        free_.erase(it);
        break;
      }
    if (offset == top_) {
      if (top_ + len > kArenaBytes) throw std::bad_alloc();
      top_ += len;
    }
    used_[offset] = bytes;
    allocations_ += 1;
    Open open(*this);
    std::memset(base_ + offset, 0xff, bytes);  // NaN floats, -1 ids: never silently zero
    return base_ + offset;
  }
  void deallocate(void* p, size_t bytes) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = used_.find(size_t(static_cast<char*>(p) - base_));
    if (!base_ || it == used_.end() || it->second != bytes)
      throw std::logic_error(fmt::format("cpu-guarded: freeing {} bytes at {} that are not one "
                                         "allocation of this backend", bytes, p));
    size_t offset = it->first, len = round_up(it->second, kAlign);
    used_.erase(it);
    // Coalesce with the free neighbours; give the end of the arena back to the bump pointer.
    auto next = free_.find(offset + len);
    if (next != free_.end()) {
      len += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(offset);
    if (prev != free_.begin() && std::prev(prev)->first + std::prev(prev)->second == offset) {
      --prev;
      offset = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
    if (offset + len == top_) {
      top_ = offset;
      const size_t first_free_page = round_up(top_, page_);  // give whole pages back
      if (first_free_page < offset + len)
        madvise(base_ + first_free_page, round_up(offset + len, page_) - first_free_page,
                MADV_DONTNEED);
    } else {
      free_[offset] = len;
    }
  }
  void fill(float* x, int64_t n, float value) override {
    Call c(*this);
    c.dev(x, n * 4, "fill");
    inner_.fill(x, n, value);
  }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override {
    Call c(*this);
    c.dev(p, bytes, "fill_bytes");
    inner_.fill_bytes(p, value, bytes);
  }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    Call c(*this);
    c.dev(dst, bytes, "copy_host_to_device: destination");
    c.host(host, bytes, "copy_host_to_device: source");
    inner_.copy_host_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    Call c(*this);
    c.dev(src, bytes, "copy_device_to_host: source");
    c.host(host, bytes, "copy_device_to_host: destination");
    inner_.copy_device_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    Call c(*this);
    c.dev(dst, bytes, "copy_device_to_device: destination");
    c.dev(src, bytes, "copy_device_to_device: source");
    inner_.copy_device_to_device(dst, src, bytes);
  }

  // ---- kernels: check the extent of every buffer argument, then run the CPU kernel
  void matmul(float* C, const float* A, const float* B, int M, int N, int K, bool trans_a,
              bool trans_b, float alpha, float beta) override {
    Call c(*this);
    c.dev(C, f(int64_t(M) * N), "matmul C");
    c.dev(A, f(int64_t(M) * K), "matmul A");
    c.dev(B, f(int64_t(K) * N), "matmul B");
    inner_.matmul(C, A, B, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M,
                      int N, int K, bool trans_a, bool trans_b, float alpha, float beta) override {
    Call c(*this);
    c.dev(C, matrix(M, N, ldc), "matmul_strided C");
    c.dev(A, trans_a ? matrix(K, M, lda) : matrix(M, K, lda), "matmul_strided A");
    c.dev(B, trans_b ? matrix(N, K, ldb) : matrix(K, N, ldb), "matmul_strided B");
    inner_.matmul_strided(C, ldc, A, lda, B, ldb, M, N, K, trans_a, trans_b, alpha, beta);
  }
  void add_bias(float* x, const float* bias, int rows, int cols) override {
    Call c(*this);
    c.dev(x, f(int64_t(rows) * cols), "add_bias x");
    c.dev(bias, f(cols), "add_bias bias");
    inner_.add_bias(x, bias, rows, cols);
  }
  void bias_backward(float* dbias, const float* dy, int rows, int cols) override {
    Call c(*this);
    c.dev(dbias, f(cols), "bias_backward dbias");
    c.dev(dy, f(int64_t(rows) * cols), "bias_backward dy");
    inner_.bias_backward(dbias, dy, rows, cols);
  }
  void embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d,
                         float scale) override {
    Call c(*this);
    c.dev(out, f(int64_t(n) * d), "embedding_forward out");
    c.dev(ids, size_t(n) * 4, "embedding_forward ids");
    c.dev(table, f(d), "embedding_forward table");
    inner_.embedding_forward(out, ids, table, n, d, scale);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d,
                          float scale) override {
    Call c(*this);
    c.dev(dtable, f(d), "embedding_backward dtable");
    c.dev(dout, f(int64_t(n) * d), "embedding_backward dout");
    c.dev(ids, size_t(n) * 4, "embedding_backward ids");
    inner_.embedding_backward(dtable, dout, ids, n, d, scale);
  }
  void add_bias_relu(float* x, const float* bias, int rows, int cols) override {
    Call c(*this);
    c.dev(x, f(int64_t(rows) * cols), "add_bias_relu x");
    c.dev(bias, f(cols), "add_bias_relu bias");
    inner_.add_bias_relu(x, bias, rows, cols);
  }
  void add_layernorm_forward(float* out, float* mean, float* rstd, float* x, const float* bias_x,
                             const float* residual, const float* weight, const float* bias, int n,
                             int d) override {
    Call c(*this);
    c.dev(out, f(int64_t(n) * d), "add_layernorm_forward out");
    c.dev(mean, f(n), "add_layernorm_forward mean");
    c.dev(rstd, f(n), "add_layernorm_forward rstd");
    c.dev(x, f(int64_t(n) * d), "add_layernorm_forward x");
    if (bias_x) c.dev(bias_x, f(d), "add_layernorm_forward bias_x");
    c.dev(residual, f(int64_t(n) * d), "add_layernorm_forward residual");
    c.dev(weight, f(d), "add_layernorm_forward weight");
    c.dev(bias, f(d), "add_layernorm_forward bias");
    inner_.add_layernorm_forward(out, mean, rstd, x, bias_x, residual, weight, bias, n, d);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x,
                         const float* weight, const float* bias, int n, int d) override {
    Call c(*this);
    c.dev(out, f(int64_t(n) * d), "layernorm_forward out");
    c.dev(mean, f(n), "layernorm_forward mean");
    c.dev(rstd, f(n), "layernorm_forward rstd");
    c.dev(x, f(int64_t(n) * d), "layernorm_forward x");
    c.dev(weight, f(d), "layernorm_forward weight");
    c.dev(bias, f(d), "layernorm_forward bias");
    inner_.layernorm_forward(out, mean, rstd, x, weight, bias, n, d);
  }
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout,
                          const float* x, const float* mean, const float* rstd,
                          const float* weight, int n, int d) override {
    Call c(*this);
    c.dev(dx, f(int64_t(n) * d), "layernorm_backward dx");
    c.dev(dweight, f(d), "layernorm_backward dweight");
    c.dev(dbias, f(d), "layernorm_backward dbias");
    c.dev(dout, f(int64_t(n) * d), "layernorm_backward dout");
    c.dev(x, f(int64_t(n) * d), "layernorm_backward x");
    c.dev(mean, f(n), "layernorm_backward mean");
    c.dev(rstd, f(n), "layernorm_backward rstd");
    c.dev(weight, f(d), "layernorm_backward weight");
    inner_.layernorm_backward(dx, dweight, dbias, dout, x, mean, rstd, weight, n, d);
  }
  void relu_forward(float* out, const float* x, int64_t n) override {
    Call c(*this);
    c.dev(out, f(n), "relu_forward out");
    c.dev(x, f(n), "relu_forward x");
    inner_.relu_forward(out, x, n);
  }
  void relu_backward(float* dx, const float* dout, const float* y, int64_t n) override {
    Call c(*this);
    c.dev(dx, f(n), "relu_backward dx");
    c.dev(dout, f(n), "relu_backward dout");
    c.dev(y, f(n), "relu_backward y");
    inner_.relu_backward(dx, dout, y, n);
  }
  void dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p,
                       DropoutSeed seed) override {
    Call c(*this);
    c.dev(out, f(n), "dropout_forward out");
    c.dev(x, f(n), "dropout_forward x");
    c.dev(keep, size_t(n), "dropout_forward keep");
    if (p > 0) c.dev(seed.word, sizeof(uint64_t), "dropout_forward seed");
    inner_.dropout_forward(out, x, keep, n, p, seed);
  }
  void dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n,
                        float p) override {
    Call c(*this);
    c.dev(dx, f(n), "dropout_backward dx");
    c.dev(dout, f(n), "dropout_backward dout");
    c.dev(keep, size_t(n), "dropout_backward keep");
    inner_.dropout_backward(dx, dout, keep, n, p);
  }
  void positional_embedding(float* out, int klen, int d) override {
    Call c(*this);
    c.dev(out, f(int64_t(klen) * d), "positional_embedding out");
    inner_.positional_embedding(out, klen, d);
  }
  void rel_attention_forward(float* out, float* prob, const float* qkv, const float* r,
                             const float* u, const float* v, const uint8_t* mask,
                             const AttentionShape& s, float scale) override {
    Call c(*this);
    const int64_t HD = int64_t(s.H) * s.Dh;
    c.dev(out, f(int64_t(s.qlen) * s.B * HD), "rel_attention_forward out");
    c.dev(prob, f(int64_t(s.B) * s.H * s.qlen * s.klen), "rel_attention_forward prob");
    c.dev(qkv, f(int64_t(s.klen) * s.B * 3 * HD), "rel_attention_forward qkv");
    c.dev(r, f(s.klen * HD), "rel_attention_forward r");
    c.dev(u, f(HD), "rel_attention_forward u");
    c.dev(v, f(HD), "rel_attention_forward v");
    c.dev(mask, size_t(s.qlen) * size_t(s.klen), "rel_attention_forward mask");
    inner_.rel_attention_forward(out, prob, qkv, r, u, v, mask, s, scale);
  }
  void rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout,
                              const float* prob, const float* qkv, const float* r,
                              const float* u, const float* v, const AttentionShape& s,
                              float scale) override {
    Call c(*this);
    const int64_t HD = int64_t(s.H) * s.Dh;
    c.dev(dqkv, f(int64_t(s.klen) * s.B * 3 * HD), "rel_attention_backward dqkv");
    c.dev(dr, f(s.klen * HD), "rel_attention_backward dr");
    c.dev(du, f(HD), "rel_attention_backward du");
    c.dev(dv, f(HD), "rel_attention_backward dv");
    c.dev(dout, f(int64_t(s.qlen) * s.B * HD), "rel_attention_backward dout");
    c.dev(prob, f(int64_t(s.B) * s.H * s.qlen * s.klen), "rel_attention_backward prob");
    c.dev(qkv, f(int64_t(s.klen) * s.B * 3 * HD), "rel_attention_backward qkv");
    c.dev(r, f(s.klen * HD), "rel_attention_backward r");
    c.dev(u, f(HD), "rel_attention_backward u");
    c.dev(v, f(HD), "rel_attention_backward v");
    inner_.rel_attention_backward(dqkv, dr, du, dv, dout, prob, qkv, r, u, v, s, scale);
  }
  void broadcast_batch(float* out, const float* x, int rows, int B, int width) override {
    Call c(*this);
    c.dev(out, f(int64_t(rows) * B * width), "broadcast_batch out");
    c.dev(x, f(int64_t(rows) * width), "broadcast_batch x");
    inner_.broadcast_batch(out, x, rows, B, width);
  }
  void broadcast_batch_backward(float* dx, const float* dout, int rows, int B,
                                int width) override {
    Call c(*this);
    c.dev(dx, f(int64_t(rows) * width), "broadcast_batch_backward dx");
    c.dev(dout, f(int64_t(rows) * B * width), "broadcast_batch_backward dout");
    inner_.broadcast_batch_backward(dx, dout, rows, B, width);
  }
  void dpfp_forward(float* out, const float* x, int64_t n, int dm) override {
    Call c(*this);
    c.dev(out, f(n * 6 * dm), "dpfp_forward out");
    c.dev(x, f(n * dm), "dpfp_forward x");
    inner_.dpfp_forward(out, x, n, dm);
  }
  void dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) override {
    Call c(*this);
    c.dev(dx, f(n * dm), "dpfp_backward dx");
    c.dev(dout, f(n * 6 * dm), "dpfp_backward dout");
    c.dev(x, f(n * dm), "dpfp_backward x");
    inner_.dpfp_backward(dx, dout, x, n, dm);
  }
  void assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                          int rows, int B, int Dk, int d, float eps) override {
    Call c(*this);
    const int64_t rb = int64_t(rows) * B;
    c.dev(out, f(rb * d), "assoc_read_forward out");
    c.dev(den, f(rb), "assoc_read_forward den");
    c.dev(phi, f(rb * Dk), "assoc_read_forward phi");
    c.dev(A, f(int64_t(B) * Dk * d), "assoc_read_forward A");
    c.dev(z, f(int64_t(B) * Dk), "assoc_read_forward z");
    inner_.assoc_read_forward(out, den, phi, A, z, rows, B, Dk, d, eps);
  }
  void assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                           const float* den, const float* phi, const float* A, const float* z,
                           int rows, int B, int Dk, int d) override {
    Call c(*this);
    const int64_t rb = int64_t(rows) * B;
    c.dev(dphi, f(rb * Dk), "assoc_read_backward dphi");
    c.dev(dA, f(int64_t(B) * Dk * d), "assoc_read_backward dA");
    c.dev(dz, f(int64_t(B) * Dk), "assoc_read_backward dz");
    c.dev(dout, f(rb * d), "assoc_read_backward dout");
    c.dev(out, f(rb * d), "assoc_read_backward out");
    c.dev(den, f(rb), "assoc_read_backward den");
    c.dev(phi, f(rb * Dk), "assoc_read_backward phi");
    c.dev(A, f(int64_t(B) * Dk * d), "assoc_read_backward A");
    c.dev(z, f(int64_t(B) * Dk), "assoc_read_backward z");
    inner_.assoc_read_backward(dphi, dA, dz, dout, out, den, phi, A, z, rows, B, Dk, d);
  }
  void assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                           const float* key, const float* v, const float* vbar, const float* den,
                           const float* blogit, int m, int B, int Dk, int d, float eps) override {
    Call c(*this);
    const int64_t jb = int64_t(m) * B, nA = int64_t(B) * Dk * d, nz = int64_t(B) * Dk;
    c.dev(A_out, f(nA), "assoc_write_forward A_out");
    c.dev(z_out, f(nz), "assoc_write_forward z_out");
    if (A_in) c.dev(A_in, f(nA), "assoc_write_forward A_in");
    if (z_in) c.dev(z_in, f(nz), "assoc_write_forward z_in");
    c.dev(key, f(jb * Dk), "assoc_write_forward key");
    c.dev(v, f(jb * d), "assoc_write_forward v");
    if (vbar) c.dev(vbar, f(jb * d), "assoc_write_forward vbar");
    if (den) c.dev(den, f(jb), "assoc_write_forward den");
    c.dev(blogit, f(jb), "assoc_write_forward blogit");
    inner_.assoc_write_forward(A_out, z_out, A_in, z_in, key, v, vbar, den, blogit, m, B, Dk, d, eps);
  }
  void assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                            const float* dz_out, const float* key, const float* v, const float* vbar,
                            const float* den, const float* blogit, int m, int B, int Dk, int d,
                            float eps) override {
    Call c(*this);
    const int64_t jb = int64_t(m) * B, nA = int64_t(B) * Dk * d, nz = int64_t(B) * Dk;
    c.dev(dkey, f(jb * Dk), "assoc_write_backward dkey");
    c.dev(dv, f(jb * d), "assoc_write_backward dv");
    c.dev(dblogit, f(jb), "assoc_write_backward dblogit");
    c.dev(dA_out, f(nA), "assoc_write_backward dA_out");
    c.dev(dz_out, f(nz), "assoc_write_backward dz_out");
    c.dev(key, f(jb * Dk), "assoc_write_backward key");
    c.dev(v, f(jb * d), "assoc_write_backward v");
    if (vbar) c.dev(vbar, f(jb * d), "assoc_write_backward vbar");
    if (den) c.dev(den, f(jb), "assoc_write_backward den");
    c.dev(blogit, f(jb), "assoc_write_backward blogit");
    inner_.assoc_write_backward(dkey, dv, dblogit, dA_out, dz_out, key, v, vbar, den, blogit, m, B, Dk,
                                d, eps);
  }
  void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                     int n, int V, float grad_scale) override {
    Call c(*this);
    c.dev(loss, f(n), "cross_entropy loss");
    if (dlogits) c.dev(dlogits, f(int64_t(n) * V), "cross_entropy dlogits");
    c.dev(logits, f(int64_t(n) * V), "cross_entropy logits");
    c.dev(targets, size_t(n) * 4, "cross_entropy targets");
    inner_.cross_entropy(loss, dlogits, logits, targets, n, V, grad_scale);
  }
  double sum_squares(const float* x, int64_t n) override {
    Call c(*this);
    c.dev(x, f(n), "sum_squares x");
    return inner_.sum_squares(x, n);
  }
  void sum_squares_to(double* out, const float* x, int64_t n) override {
    Call c(*this);
    c.dev(out, sizeof(double), "sum_squares_to out");
    c.dev(x, f(n), "sum_squares_to x");
    inner_.sum_squares_to(out, x, n);
  }
  void accumulate_sum(double* acc, const float* x, int64_t n) override {
    Call c(*this);
    c.dev(acc, sizeof(double), "accumulate_sum acc");
    c.dev(x, f(n), "accumulate_sum x");
    inner_.accumulate_sum(acc, x, n);
  }
  void scale(float* x, int64_t n, float alpha) override {
    Call c(*this);
    c.dev(x, f(n), "scale x");
    inner_.scale(x, n, alpha);
  }
  void add_inplace(float* y, const float* x, int64_t n) override {
    Call c(*this);
    c.dev(y, f(n), "add_inplace y");
    c.dev(x, f(n), "add_inplace x");
    inner_.add_inplace(y, x, n);
  }
  void adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, int64_t t) override {
    Call c(*this);
    c.dev(param, f(n), "adam_update param");
    c.dev(grad, f(n), "adam_update grad");
    c.dev(m, f(n), "adam_update m");
    c.dev(v, f(n), "adam_update v");
    inner_.adam_update(param, grad, m, v, n, lr, beta1, beta2, eps, t);
  }

 private:
  static size_t f(int64_t n) { return size_t(n < 0 ? 0 : n) * sizeof(float); }
  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
  // Bytes a row-major [rows, cols] matrix with row stride ld spans.
  static size_t matrix(int rows, int cols, int ld) {
    return rows <= 0 || cols <= 0 ? 0 : f((int64_t(rows) - 1) * ld + cols);
  }

  void reserve() {
    if (base_) return;
    void* p = mmap(nullptr, kArenaBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
  }
  void protect(int prot) {
    if (top_ > 0 && mprotect(base_, round_up(top_, page_), prot) != 0)
      throw std::runtime_error(fmt::format("cpu-guarded: mprotect failed: {}", std::strerror(errno)));
  }
  // The used arena readable and writable for the lifetime of this object (mutex held).
  struct Open {
    GuardedBackend& g;
    explicit Open(GuardedBackend& g) : g(g) { g.protect(PROT_READ | PROT_WRITE); }
    ~Open() { g.protect(PROT_NONE); }
  };
  // One backend call: the mutex, the argument checks, the arena open while the kernel runs.
  struct Call {
    std::lock_guard<std::mutex> lock;
    GuardedBackend& g;
    Open open;
    explicit Call(GuardedBackend& g) : lock(g.mutex_), g(g), open(g) {}
    // [p, p + bytes) must lie inside one live allocation.
    void dev(const void* p, size_t bytes, const char* what) const {
      if (bytes == 0) return;
      const char* c = static_cast<const char*>(p);
      if (g.base_ && c >= g.base_ && c < g.base_ + g.top_) {
        auto it = g.used_.upper_bound(size_t(c - g.base_));
        if (it != g.used_.begin()) {
          --it;
          const char* begin = g.base_ + it->first;
          if (c + bytes <= begin + it->second) return;
          throw std::logic_error(fmt::format(
              "cpu-guarded: {}: {} bytes at offset {} overrun a buffer of {} bytes", what, bytes,
              c - begin, it->second));
        }
      }
      throw std::logic_error(fmt::format(
          "cpu-guarded: {}: not a buffer of this backend ({}: host memory passed to a kernel?)",
          what, p));
    }
    // A host buffer must not be the backend's.
    void host(const void* p, size_t bytes, const char* what) const {
      const char* c = static_cast<const char*>(p);
      if (bytes > 0 && g.base_ && c + bytes > g.base_ && c < g.base_ + kArenaBytes)
        throw std::logic_error(
            fmt::format("cpu-guarded: {}: {} is a buffer of this backend, not host memory", what, p));
    }
  };

  Backend& inner_;
  const size_t page_;
  int64_t allocations_ = 0;  // allocate() calls that returned memory
  std::mutex mutex_;
  char* base_ = nullptr;
  size_t top_ = 0;                  // arena bytes in use or in the free list (kAlign multiple)
  std::map<size_t, size_t> used_;   // offset -> bytes asked for
  std::map<size_t, size_t> free_;   // offset -> length (kAlign multiple)
};

GuardedBackend& guarded() {
  static GuardedBackend backend;
  return backend;
}

}  // namespace

Backend& guarded_cpu_backend() { return guarded(); }

int64_t guarded_cpu_allocations() { return guarded().allocations(); }

}  // namespace rmt
