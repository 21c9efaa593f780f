// Device attributes the launch layer reads at every launch, queried once per
// device (kernels/launch.hpp).
#include "kernels/launch.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>

#include "gbf/detail/cuda_check.hpp"

namespace gbf::detail::gpu {

int multiprocessors(int device) {
  // One slot per device ordinal; 0 = not asked yet. A race asks twice and
  // stores the same answer twice, which is harmless.
  constexpr int max_devices = 64;
  static std::array<std::atomic<int>, max_devices> cache{};
  const bool cached = device >= 0 && device < max_devices;
  if (cached) {
    if (const int known = cache[device].load(std::memory_order_relaxed); known != 0) return known;
  }
  int sms = 0;
  GBF_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cached) cache[device].store(sms, std::memory_order_relaxed);
  return sms;
}

}  // namespace gbf::detail::gpu
