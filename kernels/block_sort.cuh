// Scratch sizing shared by the kernels that sort a batch's keys by block with
// CUB's radix sort (add_new, the counting filter's checked remove, the scaling
// chain's add): their arrays are carved out of one caller-provided scratch
// allocation, and the sort looks only at the bits a block index can occupy.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>

#include "gbf/detail/cuda_check.hpp"

namespace gbf::detail::gpu {

/// Alignment of each array carved out of a scratch allocation (CUB's temporary
/// storage and coalesced access both want 256 bytes).
inline constexpr std::size_t scratch_alignment = 256;

/// `bytes` rounded up to scratch_alignment.
constexpr std::size_t aligned(std::size_t bytes) {
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

/// Bits the block indices of `num_blocks` blocks occupy (0 for one block): the
/// radix sort skips the rest.
inline int block_index_bits(std::uint64_t num_blocks) {
  int bits = 0;
  while (bits < 32 && ((num_blocks - 1) >> bits) != 0) ++bits;
  return bits;
}

/// Temporary bytes of CUB's radix sort of `n` (Key, uint32 value) pairs over
/// `bits` key bits; 0 when there is nothing to sort (no keys, or one block).
template <class Key = std::uint32_t>
std::size_t sort_temp_bytes(std::size_t n, int bits) {
  if (bits == 0 || n == 0) return 0;
  std::size_t bytes = 0;
  cub::DoubleBuffer<Key> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::uint32_t> values(nullptr, nullptr);
  GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<int>(n),
                                               0, bits));
  return bytes;
}

}  // namespace gbf::detail::gpu
