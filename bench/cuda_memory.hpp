// Device memory, pinned host memory and streams for the benchmarks, on the
// public CUDA runtime API alone: the benchmarks use gbf only through its public
// headers (the library's own owners in host/gpu/runtime.hpp are internals).
// Every runtime call is checked with GBF_CUDA_TRY (gbf/detail/cuda_check.hpp),
// which throws gbf::cuda_error naming the call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "gbf/detail/cuda_check.hpp"

namespace gbf_bench {

/// An owning, uninitialized array of `count` T in device memory (cudaMalloc,
/// 256-byte aligned) or, when Pinned, page-locked host memory (cudaMallocHost);
/// move-only. A release error is dropped: a destructor cannot report it, and
/// the next checked call does.
template <class T, bool Pinned>
class cuda_array {
 public:
  cuda_array() noexcept = default;
  explicit cuda_array(std::size_t count) : size_(count) {
    if (count == 0) return;
    void* p = nullptr;
    if constexpr (Pinned) {
      GBF_CUDA_TRY(cudaMallocHost(&p, count * sizeof(T)));
    } else {
      GBF_CUDA_TRY(cudaMalloc(&p, count * sizeof(T)));
    }
    data_.reset(static_cast<T*>(p));
  }
  cuda_array(cuda_array&& other) noexcept
      : data_(std::move(other.data_)), size_(std::exchange(other.size_, 0)) {}
  cuda_array& operator=(cuda_array&& other) noexcept {
    data_ = std::move(other.data_);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }

 private:
  struct release {
    void operator()(T* p) const noexcept {
      if constexpr (Pinned) {
        cudaFreeHost(p);
      } else {
        cudaFree(p);
      }
    }
  };
  std::unique_ptr<T, release> data_;
  std::size_t size_ = 0;
};

/// `count` T in device memory.
template <class T>
using device_array = cuda_array<T, false>;
/// `count` T in page-locked host memory, which cudaMemcpyAsync copies without staging.
template <class T>
using pinned_array = cuda_array<T, true>;

/// An owning stream created with cudaStreamNonBlocking (no implicit
/// synchronization with the legacy default stream); move-only.
class cuda_stream {
 public:
  cuda_stream() { GBF_CUDA_TRY(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking)); }
  cuda_stream(cuda_stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  cuda_stream& operator=(cuda_stream&&) = delete;
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  ~cuda_stream() {
    if (handle_ != nullptr) cudaStreamDestroy(handle_);
  }

  cudaStream_t get() const noexcept { return handle_; }

 private:
  cudaStream_t handle_ = nullptr;
};

}  // namespace gbf_bench
