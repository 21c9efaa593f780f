// Device-to-host copy for the CUDA-free parts of the host library (verify,
// keys_added of a device bitmap).
#include <cuda_runtime.h>

#include "host/gpu/runtime.hpp"
#include "host/keys.hpp"

namespace gbf::detail {

void copy_device_to_host(void* dst, const void* src, std::size_t bytes) {
  GBF_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace gbf::detail
