// Packed runs on any backend (packed_backend.h): every buffer K slices, every kernel over the
// active slices.
#include "lib/core/packed_backend.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/core/error.h"

namespace rmt {

namespace {
constexpr size_t kSliceAlign = 64;  // the alignment allocate() promises a lone run's buffer
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

void run_packs_on_threads(int n, const std::function<void(int)>& pack) {
  std::vector<std::exception_ptr> failures(static_cast<size_t>(std::max(n, 1)));
  auto guarded = [&](int p) {
    try {
      pack(p);
    } catch (...) {
      failures[size_t(p)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int p = 1; p < n; ++p) threads.emplace_back(guarded, p);
  if (n > 0) guarded(0);
  for (auto& t : threads) t.join();
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
}

PackedBackend::PackedBackend(Backend& inner, int runs)
    : inner_(inner), runs_(runs), threads_before_(num_threads()) {
  if (runs < 1) fail("packed runs: {} runs (at least 1)", runs);
  for (int k = 0; k < runs; ++k) all_.push_back(k);
  active_ = all_;
  set_num_threads(1);  // each run's kernels compute as a lone run's with train.threads 1
}

PackedBackend::~PackedBackend() {
  set_num_threads(threads_before_);
  // What is still allocated (a caller's leak) goes back with the right sizes.
  for (auto& [base, a] : allocations_) inner_.deallocate(reinterpret_cast<void*>(base), a.stride * size_t(runs_));
}

void PackedBackend::activate(int slot) { activate(std::vector<int>{slot}); }

void PackedBackend::activate(const std::vector<int>& slots) {
  if (slots.empty()) throw std::logic_error("packed runs: activate() with no run");
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] < 0 || slots[i] >= runs_ || (i > 0 && slots[i] <= slots[i - 1]))
      throw std::logic_error(fmt::format("packed runs: bad slot list (slot {} of {} runs, ascending)", slots[i], runs_));
  active_ = slots;
}

void PackedBackend::activate_all() { active_ = all_; }

// ---- allocation table

void* PackedBackend::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t stride = round_up(bytes, kSliceAlign);
  void* p = inner_.allocate(stride * size_t(runs_));
  allocations_[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, stride, false};
  return p;
}

void PackedBackend::deallocate(void* p, size_t bytes) {
  if (!p) return;
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations_.end() || it->second.bytes != bytes)
    throw std::logic_error(fmt::format("packed runs: freeing {} bytes at {} that are not one allocation", bytes, p));
  inner_.deallocate(p, it->second.stride * size_t(runs_));
  allocations_.erase(it);
}

PackedBackend::Allocation& PackedBackend::allocation_of(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  auto it = allocations_.upper_bound(address);
  if (it != allocations_.begin()) {
    --it;
    if (address < it->first + it->second.bytes) return it->second;
  }
  throw std::logic_error(fmt::format("packed runs: {} is not inside a buffer of this backend", p));
}

void PackedBackend::touch(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (p) allocation_of(p).written = true;
}

template <typename T>
T* PackedBackend::at(T* p, int k) const {
  if (!p || k == 0) return p;
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  auto it = --allocations_.upper_bound(address);  // touch() found it
  return reinterpret_cast<T*>(address + it->second.stride * size_t(k));
}

template <typename F>
void PackedBackend::each_slot(const std::vector<int>& slots, F&& f) {
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
void PackedBackend::each_active(F&& f) {
  each_slot(active_, f);
}

int PackedBackend::single_active(const char* what) const {
  if (active_.size() != 1)
    throw std::logic_error(fmt::format("packed runs: {} reads one run's values, but {} runs are active", what,
                                       active_.size()));
  return active_[0];
}

std::vector<int> PackedBackend::write_slots(Allocation& a) const {
  if (a.written) return active_;
  return all_;
}

// ---- copies and fills

void PackedBackend::fill(float* x, int64_t n, float value) {
  if (n <= 0) return;
  Allocation& a = allocation_of(x);
  each_slot(write_slots(a), [&](int k) { inner_.fill(at(x, k), n, value); });
  a.written = true;
}

void PackedBackend::fill_bytes(void* p, uint8_t value, size_t bytes) {
  if (bytes == 0) return;
  Allocation& a = allocation_of(p);
  each_slot(write_slots(a), [&](int k) { inner_.fill_bytes(at(static_cast<char*>(p), k), value, bytes); });
  a.written = true;
}

void PackedBackend::copy_host_to_device(void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  Allocation& a = allocation_of(dst);
  for (int k : write_slots(a)) inner_.copy_host_to_device(at(static_cast<char*>(dst), k), host, bytes);
  a.written = true;
}

void PackedBackend::copy_device_to_host(void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const int k = single_active("a copy to the host");
  touch({src});
  inner_.copy_device_to_host(host, at(static_cast<const char*>(src), k), bytes);
}

void PackedBackend::copy_device_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Allocation& a = allocation_of(dst);
  const std::vector<int> slots = write_slots(a);  // each slice from its own run's source
  touch({dst, src});
  each_slot(slots, [&](int k) {
    inner_.copy_device_to_device(at(static_cast<char*>(dst), k), at(static_cast<const char*>(src), k), bytes);
  });
}

// ---- kernels

void PackedBackend::matmul(float* C, const float* A, const float* B, int M, int N, int K, bool ta, bool tb,
                           float alpha, float beta) {
  touch({C, A, B});
  each_active([&](int k) { inner_.matmul(at(C, k), at(A, k), at(B, k), M, N, K, ta, tb, alpha, beta); });
}

void PackedBackend::matmul_strided(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
                                   int K, bool ta, bool tb, float alpha, float beta) {
  touch({C, A, B});
  each_active([&](int k) {
    inner_.matmul_strided(at(C, k), ldc, at(A, k), lda, at(B, k), ldb, M, N, K, ta, tb, alpha, beta);
  });
}

void PackedBackend::add_bias(float* x, const float* bias, int rows, int cols) {
  touch({x, bias});
  each_active([&](int k) { inner_.add_bias(at(x, k), at(bias, k), rows, cols); });
}

void PackedBackend::bias_backward(float* dbias, const float* dy, int rows, int cols) {
  touch({dbias, dy});
  each_active([&](int k) { inner_.bias_backward(at(dbias, k), at(dy, k), rows, cols); });
}

void PackedBackend::embedding_forward(float* out, const int32_t* ids, const float* table, int n, int d, float scale) {
  touch({out, ids, table});
  each_active([&](int k) { inner_.embedding_forward(at(out, k), at(ids, k), at(table, k), n, d, scale); });
}

void PackedBackend::embedding_backward(float* dtable, const float* dout, const int32_t* ids, int n, int d,
                                       float scale) {
  touch({dtable, dout, ids});
  each_active([&](int k) { inner_.embedding_backward(at(dtable, k), at(dout, k), at(ids, k), n, d, scale); });
}

void PackedBackend::add_bias_relu(float* x, const float* bias, int rows, int cols) {
  touch({x, bias});
  each_active([&](int k) { inner_.add_bias_relu(at(x, k), at(bias, k), rows, cols); });
}

void PackedBackend::add_layernorm_forward(float* out, float* mean, float* rstd, float* x, const float* bias_x,
                                          const float* residual, const float* weight, const float* bias, int n,
                                          int d) {
  touch({out, mean, rstd, x, bias_x, residual, weight, bias});
  each_active([&](int k) {
    inner_.add_layernorm_forward(at(out, k), at(mean, k), at(rstd, k), at(x, k), at(bias_x, k), at(residual, k),
                                 at(weight, k), at(bias, k), n, d);
  });
}

void PackedBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                      const float* bias, int n, int d) {
  touch({out, mean, rstd, x, weight, bias});
  each_active([&](int k) {
    inner_.layernorm_forward(at(out, k), at(mean, k), at(rstd, k), at(x, k), at(weight, k), at(bias, k), n, d);
  });
}

void PackedBackend::layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                                       const float* mean, const float* rstd, const float* weight, int n, int d) {
  touch({dx, dweight, dbias, dout, x, mean, rstd, weight});
  each_active([&](int k) {
    inner_.layernorm_backward(at(dx, k), at(dweight, k), at(dbias, k), at(dout, k), at(x, k), at(mean, k),
                              at(rstd, k), at(weight, k), n, d);
  });
}

void PackedBackend::relu_forward(float* out, const float* x, int64_t n) {
  touch({out, x});
  each_active([&](int k) { inner_.relu_forward(at(out, k), at(x, k), n); });
}

void PackedBackend::relu_backward(float* dx, const float* dout, const float* y, int64_t n) {
  touch({dx, dout, y});
  each_active([&](int k) { inner_.relu_backward(at(dx, k), at(dout, k), at(y, k), n); });
}

void PackedBackend::dropout_forward(float* out, const float* x, uint8_t* keep, int64_t n, float p, DropoutSeed seed) {
  touch({out, x, keep, seed.word});
  each_active([&](int k) {
    DropoutSeed own = seed;
    own.word = at(seed.word, k);  // each run draws its own masks from its own seed
    inner_.dropout_forward(at(out, k), at(x, k), at(keep, k), n, p, own);
  });
}

void PackedBackend::dropout_backward(float* dx, const float* dout, const uint8_t* keep, int64_t n, float p) {
  touch({dx, dout, keep});
  each_active([&](int k) { inner_.dropout_backward(at(dx, k), at(dout, k), at(keep, k), n, p); });
}

void PackedBackend::positional_embedding(float* out, int klen, int d) {
  touch({out});
  each_active([&](int k) { inner_.positional_embedding(at(out, k), klen, d); });
}

void PackedBackend::rel_attention_forward(float* out, float* prob, const float* qkv, const float* r, const float* u,
                                          const float* v, const uint8_t* mask, const AttentionShape& s,
                                          float scale) {
  touch({out, prob, qkv, r, u, v, mask});
  each_active([&](int k) {
    inner_.rel_attention_forward(at(out, k), at(prob, k), at(qkv, k), at(r, k), at(u, k), at(v, k), at(mask, k), s,
                                 scale);
  });
}

void PackedBackend::rel_attention_backward(float* dqkv, float* dr, float* du, float* dv, const float* dout,
                                           const float* prob, const float* qkv, const float* r, const float* u,
                                           const float* v, const AttentionShape& s, float scale) {
  touch({dqkv, dr, du, dv, dout, prob, qkv, r, u, v});
  each_active([&](int k) {
    inner_.rel_attention_backward(at(dqkv, k), at(dr, k), at(du, k), at(dv, k), at(dout, k), at(prob, k),
                                  at(qkv, k), at(r, k), at(u, k), at(v, k), s, scale);
  });
}

void PackedBackend::broadcast_batch(float* out, const float* x, int rows, int B, int width) {
  touch({out, x});
  each_active([&](int k) { inner_.broadcast_batch(at(out, k), at(x, k), rows, B, width); });
}

void PackedBackend::broadcast_batch_backward(float* dx, const float* dout, int rows, int B, int width) {
  touch({dx, dout});
  each_active([&](int k) { inner_.broadcast_batch_backward(at(dx, k), at(dout, k), rows, B, width); });
}

void PackedBackend::cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets, int n,
                                  int V, float grad_scale) {
  touch({loss, dlogits, logits, targets});
  each_active([&](int k) {
    inner_.cross_entropy(at(loss, k), at(dlogits, k), at(logits, k), at(targets, k), n, V, grad_scale);
  });
}

double PackedBackend::sum_squares(const float* x, int64_t n) {
  const int k = single_active("sum_squares");
  touch({x});
  return inner_.sum_squares(at(x, k), n);
}

void PackedBackend::sum_squares_to(double* out, const float* x, int64_t n) {
  touch({out, x});
  each_active([&](int k) { inner_.sum_squares_to(at(out, k), at(x, k), n); });
}

void PackedBackend::accumulate_sum(double* acc, const float* x, int64_t n) {
  touch({acc, x});
  each_active([&](int k) { inner_.accumulate_sum(at(acc, k), at(x, k), n); });
}

void PackedBackend::scale(float* x, int64_t n, float alpha) {
  touch({x});
  each_active([&](int k) { inner_.scale(at(x, k), n, alpha); });
}

void PackedBackend::dpfp_forward(float* out, const float* x, int64_t n, int dm) {
  touch({out, x});
  each_active([&](int k) { inner_.dpfp_forward(at(out, k), at(x, k), n, dm); });
}

void PackedBackend::dpfp_backward(float* dx, const float* dout, const float* x, int64_t n, int dm) {
  touch({dx, dout, x});
  each_active([&](int k) { inner_.dpfp_backward(at(dx, k), at(dout, k), at(x, k), n, dm); });
}

void PackedBackend::assoc_read_forward(float* out, float* den, const float* phi, const float* A, const float* z,
                                       int rows, int B, int Dk, int d, float eps) {
  touch({out, den, phi, A, z});
  each_active([&](int k) {
    inner_.assoc_read_forward(at(out, k), at(den, k), at(phi, k), at(A, k), at(z, k), rows, B, Dk, d, eps);
  });
}

void PackedBackend::assoc_read_backward(float* dphi, float* dA, float* dz, const float* dout, const float* out,
                                        const float* den, const float* phi, const float* A, const float* z,
                                        int rows, int B, int Dk, int d) {
  touch({dphi, dA, dz, dout, out, den, phi, A, z});
  each_active([&](int k) {
    inner_.assoc_read_backward(at(dphi, k), at(dA, k), at(dz, k), at(dout, k), at(out, k), at(den, k),
                               at(phi, k), at(A, k), at(z, k), rows, B, Dk, d);
  });
}

void PackedBackend::assoc_write_forward(float* A_out, float* z_out, const float* A_in, const float* z_in,
                                        const float* key, const float* v, const float* vbar, const float* den,
                                        const float* blogit, int m, int B, int Dk, int d, float eps) {
  touch({A_out, z_out, A_in, z_in, key, v, vbar, den, blogit});
  each_active([&](int k) {
    inner_.assoc_write_forward(at(A_out, k), at(z_out, k), at(A_in, k), at(z_in, k), at(key, k), at(v, k),
                               at(vbar, k), at(den, k), at(blogit, k), m, B, Dk, d, eps);
  });
}

void PackedBackend::assoc_write_backward(float* dkey, float* dv, float* dblogit, const float* dA_out,
                                         const float* dz_out, const float* key, const float* v,
                                         const float* vbar, const float* den, const float* blogit, int m,
                                         int B, int Dk, int d, float eps) {
  touch({dkey, dv, dblogit, dA_out, dz_out, key, v, vbar, den, blogit});
  each_active([&](int k) {
    inner_.assoc_write_backward(at(dkey, k), at(dv, k), at(dblogit, k), at(dA_out, k), at(dz_out, k),
                                at(key, k), at(v, k), at(vbar, k), at(den, k), at(blogit, k), m, B, Dk, d,
                                eps);
  });
}

void PackedBackend::add_inplace(float* y, const float* x, int64_t n) {
  touch({y, x});
  each_active([&](int k) { inner_.add_inplace(at(y, k), at(x, k), n); });
}

void PackedBackend::adam_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                                float beta2, float eps, int64_t t) {
  touch({param, grad, m, v});
  each_active([&](int k) { inner_.adam_update(at(param, k), at(grad, k), at(m, k), at(v, k), n, lr, beta1, beta2, eps, t); });
}

}  // namespace rmt
