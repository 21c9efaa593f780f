// Device-to-host copy for the CUDA-free parts of the host library (verify).
#include <cuda_runtime.h>

#include "host/backend.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf::detail {

void copy_device_to_host(void* dst, const void* src, std::size_t bytes) {
  GBF_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace gbf::detail
