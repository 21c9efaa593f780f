// select's compaction (kernels/select.cuh): cub::DeviceSelect::Flagged over the
// row numbers 0..n-1 (a counting iterator), stable, so the rows come out
// ascending, and the count is written on the device.
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <string>

#include "gbf/detail/cuda_check.hpp"
#include "gbf/error.hpp"
#include "kernels/select.cuh"

namespace gbf::detail::gpu {

std::size_t compact_scratch_bytes(std::size_t n) {
  const thrust::counting_iterator<std::uint64_t> row_numbers(0);
  std::size_t bytes = 0;
  GBF_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, bytes, row_numbers,
                                          static_cast<const bool*>(nullptr),
                                          static_cast<std::uint64_t*>(nullptr),
                                          static_cast<std::uint64_t*>(nullptr),
                                          static_cast<std::int64_t>(n)));
  return (bytes + 255) / 256 * 256;
}

void compact_flags(const bool* flags, std::size_t n, std::uint64_t* rows, std::uint64_t* count,
                   void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) {
    GBF_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(std::uint64_t), stream));
    return;
  }
  if (scratch_bytes < compact_scratch_bytes(n))
    throw invalid_argument("compact_flags: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " flags");
  const thrust::counting_iterator<std::uint64_t> row_numbers(0);
  std::size_t temp_bytes = scratch_bytes;
  GBF_CUDA_TRY(cub::DeviceSelect::Flagged(scratch, temp_bytes, row_numbers, flags, rows, count,
                                          static_cast<std::int64_t>(n), stream));
}

}  // namespace gbf::detail::gpu
