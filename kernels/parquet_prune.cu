// Row-group pruning kernels (kernels/parquet_prune.cuh). Each is one operation
// run by for_each_key (launch.cuh): the launch layer hashes the key (integer
// or string, warp-cooperatively for long strings) and the operation tests that
// hash against every packed filter, so one launch covers all (key, filter)
// pairs. Threads of a warp walk the filters in step, so each filter's table
// entry is a broadcast load and each test one 32-byte sector.
#include <cub/device/device_scan.cuh>

#include "gbf/layout.hpp"
#include "kernels/launch.cuh"
#include "kernels/parquet_prune.cuh"

namespace gbf::detail::gpu::parquet_prune {
namespace {

constexpr std::uint32_t sbbf_words = 8;
constexpr std::uint32_t sbbf_bits_per_key = 8;

/// May the key with hash `h` be in row group g? The SBBF test of gbf/layout.hpp
/// (block_index, block_masks) on a block read with two 16-byte loads.
__device__ __forceinline__ bool may_hold_hash(const packed_view& f, std::uint32_t g,
                                              std::uint64_t h) {
  const std::uint32_t num_blocks = f.num_blocks[g];
  if (num_blocks == 0) return true;
  const auto* block = reinterpret_cast<const uint4*>(
      f.words + f.word_offset[g] + block_index(h, num_blocks) * sbbf_words);
  const uint4 lo = block[0];
  const uint4 hi = block[1];
  const std::uint32_t words[sbbf_words] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  std::uint32_t masks[sbbf_words];
  block_masks<sbbf_words>(h, sbbf_bits_per_key, masks);
  bool all = true;
#pragma unroll
  for (std::uint32_t w = 0; w < sbbf_words; ++w) all &= (words[w] & masks[w]) == masks[w];
  return all;
}

/// Marks row group g; skips the store when it is already marked (the flag is
/// read through volatile so that marks of other SMs are seen; a stale read
/// costs only a redundant probe).
__device__ __forceinline__ bool marked(const std::uint8_t* may_hold, std::uint32_t g) {
  return *static_cast<const volatile std::uint8_t*>(may_hold + g) != 0;
}

struct mark_op {
  packed_view filters;
  std::uint8_t* may_hold;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return 0; }  // Parquet's xxh64 seed
  __device__ unsigned key(std::size_t, std::uint64_t h) const {
    for (std::uint32_t g = 0; g < filters.count; ++g)
      if (!marked(may_hold, g) && may_hold_hash(filters, g, h)) may_hold[g] = 1;
    return 0;
  }
  __device__ void skip(std::size_t) const {}
};

struct count_op {
  packed_view filters;
  std::uint64_t* counts_out;
  std::uint8_t* may_hold;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return 0; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    std::uint64_t found = 0;
    for (std::uint32_t g = 0; g < filters.count; ++g) {
      if (may_hold_hash(filters, g, h)) {
        ++found;
        if (!marked(may_hold, g)) may_hold[g] = 1;
      }
    }
    counts_out[i] = found;
    return 0;
  }
  __device__ void skip(std::size_t i) const { counts_out[i] = 0; }
};

struct fill_op {
  packed_view filters;
  const std::uint64_t* offsets;
  std::uint32_t* row_groups;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return 0; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    std::uint64_t at = offsets[i];
    for (std::uint32_t g = 0; g < filters.count; ++g)
      if (may_hold_hash(filters, g, h)) row_groups[at++] = g;
    return 0;
  }
  __device__ void skip(std::size_t) const {}
};

}  // namespace

void mark(const packed_view& filters, const key_batch& keys, std::uint8_t* may_hold,
          cudaStream_t stream) {
  for_each_key(keys, mark_op{filters, may_hold}, nullptr, stream);
}

void count(const packed_view& filters, const key_batch& keys, std::uint64_t* counts,
           std::uint8_t* may_hold, cudaStream_t stream) {
  for_each_key(keys, count_op{filters, counts, may_hold}, nullptr, stream);
}

std::size_t scan_scratch_bytes(std::size_t n) {
  std::size_t bytes = 0;
  GBF_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                             static_cast<std::uint64_t*>(nullptr), n));
  return bytes;
}

void exclusive_scan(const std::uint64_t* in, std::uint64_t* out, std::size_t n, void* scratch,
                    std::size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) return;
  GBF_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scratch, scratch_bytes, in, out, n, stream));
}

void fill(const packed_view& filters, const key_batch& keys, const std::uint64_t* offsets,
          std::uint32_t* row_groups, cudaStream_t stream) {
  for_each_key(keys, fill_op{filters, offsets, row_groups}, nullptr, stream);
}

}  // namespace gbf::detail::gpu::parquet_prune
