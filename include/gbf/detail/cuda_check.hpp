// GBF_CUDA_TRY: every CUDA runtime call gbf makes, host library and kernel
// launchers alike, goes through it, so that no error is dropped and every
// failure names the call.
#pragma once

#include <cuda_runtime_api.h>

namespace gbf::detail {

/// Throws gbf::cuda_error "<call> failed at <file>:<line>: <name>: <description>" for `code`
/// (and clears the runtime's last error, so a later check does not report it again).
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

}  // namespace gbf::detail

/// Runs a CUDA runtime call and turns any error into gbf::cuda_error naming the
/// call, its source location and CUDA's own name and text for the error.
#define GBF_CUDA_TRY(call)                                                              \
  do {                                                                                  \
    const cudaError_t gbf_cuda_try_status_ = (call);                                    \
    if (gbf_cuda_try_status_ != cudaSuccess)                                            \
      ::gbf::detail::throw_cuda_error(gbf_cuda_try_status_, #call, __FILE__, __LINE__); \
  } while (0)
