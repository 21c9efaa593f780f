// RAII owners of CUDA memory, streams and events, shared by the library, its
// tools (CLI, benchmarks) and tests: every runtime call checked through
// GBF_CUDA_TRY, and no other code pairs cudaMalloc with cudaFree by hand. The
// allocation and release functions live in the library (host/gpu/runtime.cpp),
// so a refused allocation is a gbf::allocation_error naming the request and
// the memory left.
//
// All owners are move-only. Their destructors never throw: a release that fails
// (cudaFree after a sticky device error, say) cannot be reported from a
// destructor, and the error it returns is the one the next checked call reports.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gbf/detail/cuda_check.hpp"

namespace gbf::detail {

/// cudaMalloc of `bytes`; throws allocation_error (naming the request and the free and
/// total device memory) when the device is out of memory, cuda_error on any other failure.
void* device_allocate(std::size_t bytes);
/// cudaFree; errors are dropped (see the file comment).
void device_release(void* p) noexcept;
/// cudaMallocHost of `bytes` (page-locked host memory); throws allocation_error when refused.
void* pinned_allocate(std::size_t bytes);
/// cudaFreeHost; errors are dropped.
void pinned_release(void* p) noexcept;

/// Multiplies `count` by `size`, throwing allocation_error if the product overflows size_t.
std::size_t checked_bytes(std::size_t count, std::size_t size);

/// An owning, uninitialized array of `T` in memory that `Allocate` hands out and
/// `Release` takes back; move-only. The two kinds below are the only users.
template <class T, void* (*Allocate)(std::size_t), void (*Release)(void*) noexcept>
class owning_array {
 public:
  owning_array() noexcept = default;
  explicit owning_array(std::size_t count)
      : data_(count == 0 ? nullptr : static_cast<T*>(Allocate(checked_bytes(count, sizeof(T))))),
        size_(count) {}
  owning_array(owning_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  owning_array& operator=(owning_array&& other) noexcept {
    if (this != &other) {
      Release(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  owning_array(const owning_array&) = delete;
  owning_array& operator=(const owning_array&) = delete;
  ~owning_array() { Release(data_); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// An array of `T` in device memory (cudaMalloc: 256-byte aligned).
template <class T>
using device_buffer = owning_array<T, device_allocate, device_release>;

/// An array of `T` in page-locked host memory (cudaMallocHost), the only host
/// memory cudaMemcpyAsync copies without staging it first.
template <class T>
using pinned_buffer = owning_array<T, pinned_allocate, pinned_release>;

/// An owning CUDA stream created with cudaStreamNonBlocking: it never
/// synchronizes implicitly with the legacy default stream.
class stream {
 public:
  stream();
  stream(stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  stream& operator=(stream&& other) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream();

  cudaStream_t get() const noexcept { return handle_; }
  /// Blocks the host until all work queued on the stream has finished.
  void synchronize() const;

 private:
  cudaStream_t handle_ = nullptr;
};

/// An owning CUDA event created with cudaEventDisableTiming (ordering only, the
/// cheapest kind to record and wait on).
class event {
 public:
  event();
  event(event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  event& operator=(event&& other) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event();

  cudaEvent_t get() const noexcept { return handle_; }
  /// Captures the work queued on `s` so far.
  void record(cudaStream_t s) const;
  /// Blocks the host until the captured work has finished.
  void synchronize() const;

 private:
  cudaEvent_t handle_ = nullptr;
};

/// A device copy of the `n` host values at `host`.
template <class T>
device_buffer<T> to_device(const T* host, std::size_t n) {
  device_buffer<T> buffer(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(buffer.data(), host, n * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

/// A host copy of the `n` values of device memory at `device`.
template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> out(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace gbf::detail
