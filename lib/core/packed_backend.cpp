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

double PackedBackend::sum_squares(const float* x, int64_t n) {
  const int k = single_active("sum_squares");
  touch({x});
  return inner_.sum_squares(at(x, k), n);
}

}  // namespace rmt
