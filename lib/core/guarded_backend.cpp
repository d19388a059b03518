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
    Call c(*this, "fill");
    c.dev(x, floats(n), "x");
    inner_.fill(x, n, value);
  }
  void fill_bytes(void* p, uint8_t value, size_t bytes) override {
    Call c(*this, "fill_bytes");
    c.dev(p, bytes, "p");
    inner_.fill_bytes(p, value, bytes);
  }
  void copy_host_to_device(void* dst, const void* host, size_t bytes) override {
    Call c(*this, "copy_host_to_device:");
    c.dev(dst, bytes, "destination");
    c.host(host, bytes, "source");
    inner_.copy_host_to_device(dst, host, bytes);
  }
  void copy_device_to_host(void* host, const void* src, size_t bytes) override {
    Call c(*this, "copy_device_to_host:");
    c.dev(src, bytes, "source");
    c.host(host, bytes, "destination");
    inner_.copy_device_to_host(host, src, bytes);
  }
  void copy_device_to_device(void* dst, const void* src, size_t bytes) override {
    Call c(*this, "copy_device_to_device:");
    c.dev(dst, bytes, "destination");
    c.dev(src, bytes, "source");
    inner_.copy_device_to_device(dst, src, bytes);
  }

  double sum_squares(const float* x, int64_t n) override {
    Call c(*this, "sum_squares");
    c.dev(x, floats(n), "x");
    return inner_.sum_squares(x, n);
  }

  // ---- kernels (lib/core/backend_kernels.h): check every buffer argument against its row's
  // extents, then run the CPU kernel.
#define RMT_BUF(ptr, extent) c.dev(ptr, extent, #ptr);
#define RMT_OPTIONAL_BUF(ptr, extent) \
  if (ptr) c.dev(ptr, extent, #ptr);
#define RMT_KERNEL(name, params, args, extents) \
  void name params override {                    \
    Call c(*this, #name);                        \
    extents                                      \
    inner_.name args;                            \
  }
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL
#undef RMT_OPTIONAL_BUF
#undef RMT_BUF

 private:
  // The extents of backend_kernels.h's rows, in bytes (n <= 0: none).
  static size_t bytes(int64_t n) { return size_t(n < 0 ? 0 : n); }
  static size_t floats(int64_t n) { return bytes(n) * sizeof(float); }
  static size_t int32s(int64_t n) { return bytes(n) * sizeof(int32_t); }
  static size_t doubles(int64_t n) { return bytes(n) * sizeof(double); }
  // A row-major [rows, cols] matrix with row stride ld.
  static size_t strided(int rows, int cols, int ld) {
    return rows <= 0 || cols <= 0 ? 0 : floats((int64_t(rows) - 1) * ld + cols);
  }
  static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

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
  // Errors name the call and the argument ("<kernel> <argument>: ...").
  struct Call {
    std::lock_guard<std::mutex> lock;
    GuardedBackend& g;
    Open open;
    const char* call;
    Call(GuardedBackend& g, const char* call) : lock(g.mutex_), g(g), open(g), call(call) {}
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
              "cpu-guarded: {} {}: {} bytes at offset {} overrun a buffer of {} bytes", call, what,
              bytes, c - begin, it->second));
        }
      }
      throw std::logic_error(fmt::format(
          "cpu-guarded: {} {}: not a buffer of this backend ({}: host memory passed to a kernel?)",
          call, what, p));
    }
    // A host buffer must not be the backend's.
    void host(const void* p, size_t bytes, const char* what) const {
      const char* c = static_cast<const char*>(p);
      if (bytes > 0 && g.base_ && c + bytes > g.base_ && c < g.base_ + kArenaBytes)
        throw std::logic_error(fmt::format(
            "cpu-guarded: {} {}: {} is a buffer of this backend, not host memory", call, what, p));
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
