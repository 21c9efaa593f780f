// Device memory for the CLI's device-resident rows (`gbf bench` gpu-device,
// `gbf demo`). gbf's API takes device pointers but leaves allocating them to
// the caller, as CUB and cuCollections do, so the CLI calls the CUDA runtime
// itself; every call is checked with GBF_CUDA_TRY (gbf::cuda_error naming the
// call). Compiled only in builds with CUDA (GBF_HAS_CUDA, cli/CMakeLists.txt).
#pragma once

#if defined(GBF_HAS_CUDA)

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "gbf/detail/cuda_check.hpp"

namespace gbf::cli {

/// `n` values of T in device memory of the current device (cudaMalloc, freed on destruction).
template <class T>
class device_array {
 public:
  device_array() = default;
  explicit device_array(std::size_t n) : size_(n) {
    if (n != 0) GBF_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)));
  }
  /// A device copy of the `n` host values at `host`.
  device_array(const T* host, std::size_t n) : device_array(n) {
    if (n != 0) GBF_CUDA_TRY(cudaMemcpy(data_, host, size_bytes(), cudaMemcpyHostToDevice));
  }
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() {
    if (data_ != nullptr) cudaFree(data_);  // no throw from a destructor; the free cannot be retried
  }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }

  /// Copies all size() values to the host array `host`.
  void copy_to_host(T* host) const {
    if (size_ != 0) GBF_CUDA_TRY(cudaMemcpy(host, data_, size_bytes(), cudaMemcpyDeviceToHost));
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Free memory of the current device in bytes (cudaMemGetInfo); 0 when the runtime cannot say.
inline std::uint64_t device_free_bytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  return cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess ? free_bytes : 0;
}

}  // namespace gbf::cli

#endif  // GBF_HAS_CUDA
