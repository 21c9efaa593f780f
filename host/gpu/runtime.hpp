// The CUDA runtime as the host library uses it beyond memory and streams
// (gbf/detail/cuda_memory.hpp): pointer queries and the device scope.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "gbf/detail/cuda_check.hpp"
#include "gbf/detail/cuda_memory.hpp"
#include "gbf/error.hpp"

namespace gbf::detail {

/// What cudaPointerGetAttributes says `p` is; cudaMemoryTypeUnregistered for
/// ordinary host memory, for null and whenever the query fails (never throws).
cudaMemoryType pointer_type(const void* p) noexcept;
/// The GPU whose device memory holds `p`; -1 for any other memory and when the query fails.
int pointer_device(const void* p) noexcept;

/// Makes `device` the calling thread's current GPU for the scope's lifetime and
/// restores the caller's afterwards, so that an object made on one GPU keeps
/// working there whatever cudaSetDevice the caller ran since. Throws cuda_error.
class device_scope {
 public:
  explicit device_scope(int device);
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  ~device_scope();

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace gbf::detail
