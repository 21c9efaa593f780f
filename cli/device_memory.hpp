// Device memory for the CLI's device-resident rows (`gbf bench` gpu-device,
// `gbf demo`). gbf's API takes device pointers but leaves allocating them to
// the caller, as CUB and cuCollections do; the CLI uses gbf's own RAII owners
// (gbf/detail/cuda_memory.hpp). Compiled only in builds with CUDA
// (GBF_HAS_CUDA, gbf_tool_settings in CMakeLists.txt).
#pragma once

#if defined(GBF_HAS_CUDA)

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gbf/detail/cuda_memory.hpp"

namespace gbf::cli {

using detail::device_buffer;
using detail::to_device;

/// Free memory of the current device in bytes (cudaMemGetInfo); 0 when the runtime cannot say.
inline std::uint64_t device_free_bytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  return cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess ? free_bytes : 0;
}

}  // namespace gbf::cli

#endif  // GBF_HAS_CUDA
