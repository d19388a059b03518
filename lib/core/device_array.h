#pragma once
// A typed buffer in a backend's memory: the backend, a pointer and a size. The host never
// dereferences data(); it hands it to kernels and reads or writes the contents through
// upload / download (the backend's copies). Growing with sized() keeps the capacity, so a buffer
// sized again for the same or a smaller shape allocates nothing (a training step allocates
// nothing once warm).
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/core/backend.h"

namespace rmt {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Backend& be, int64_t n) : be_(&be) { sized(be, n); }
  ~DeviceArray() { release(); }
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  // Copies are device-to-device copies on the source's backend (reusing this one's capacity).
  DeviceArray(const DeviceArray& o) { assign(o); }
  DeviceArray& operator=(const DeviceArray& o) {
    if (this != &o) assign(o);
    return *this;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Backend* backend() const { return be_; }

  // Resizes to n elements on `be` without shrinking the capacity; returns data(). Contents are
  // unspecified after growing past the capacity (callers overwrite what they read).
  T* sized(Backend& be, int64_t n) {
    if (be_ != &be) {
      if (be_ && ptr_) throw std::logic_error("a buffer of one backend reused on another");
      be_ = &be;
    }
    if (n > capacity_) {
      release();
      ptr_ = static_cast<T*>(be.allocate(size_t(n) * sizeof(T)));
      capacity_ = n;
    }
    size_ = n;
    return ptr_;
  }
  // Like sized(), then every element 0.
  T* zeroed(Backend& be, int64_t n) {
    sized(be, n);
    if (n > 0) be.fill_bytes(ptr_, 0, size_t(n) * sizeof(T));
    return ptr_;
  }
  // Becomes a copy of o (its backend, size and contents).
  void assign(const DeviceArray& o) {
    if (!o.be_) {
      size_ = 0;
      return;
    }
    sized(*o.be_, o.size_);
    if (size_ > 0) be_->copy_device_to_device(ptr_, o.ptr_, size_t(size_) * sizeof(T));
  }
  // Host -> this buffer (resized to host.size()).
  void upload(Backend& be, const std::vector<T>& host) {
    sized(be, int64_t(host.size()));
    if (!host.empty()) be.copy_host_to_device(ptr_, host.data(), host.size() * sizeof(T));
  }
  // n elements from host into [offset, offset + n).
  void write(int64_t offset, const T* host, int64_t n) {
    check_range(offset, n);
    if (n > 0) be_->copy_host_to_device(ptr_ + offset, host, size_t(n) * sizeof(T));
  }
  // [offset, offset + n) into host.
  void read(int64_t offset, T* host, int64_t n) const {
    check_range(offset, n);
    if (n > 0) be_->copy_device_to_host(host, ptr_ + offset, size_t(n) * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> host(static_cast<size_t>(size_));
    read(0, host.data(), size_);
    return host;
  }
  void download(std::vector<T>& host) const {  // into host's capacity
    host.resize(size_t(size_));
    read(0, host.data(), size_);
  }

 private:
  void check_range(int64_t offset, int64_t n) const {
    if (offset < 0 || n < 0 || offset + n > size_)
      throw std::logic_error(fmt::format("elements [{}, {}) of a device buffer of {}", offset,
                                         offset + n, size_));
  }
  void release() {
    if (ptr_) be_->deallocate(ptr_, size_t(capacity_) * sizeof(T));
    ptr_ = nullptr;
    size_ = capacity_ = 0;
  }
  void swap(DeviceArray& o) noexcept {
    std::swap(be_, o.be_);
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

  Backend* be_ = nullptr;
  T* ptr_ = nullptr;
  int64_t size_ = 0, capacity_ = 0;
};

}  // namespace rmt
