// add_new for the plain Bloom filter (kernels/bloom.cuh): hash, sort by block,
// walk each block's keys in batch order.
//
// Scratch: hashes[max_keys] (8 bytes each), then blocks[2][max_keys] and
// positions[2][max_keys] (the sort's double buffers, 4 bytes each), then CUB's
// temporary storage; each region 256-byte aligned.
#include <cub/device/device_radix_sort.cuh>

#include <string>

#include "kernels/block_sort.cuh"
#include "kernels/bloom.cuh"
#include "kernels/keys.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::bloom {
namespace {

// Step 1 (after hashing): each key's block (< num_blocks <= 2^32, so 32 bits)
// and its position in the batch, the (key, value) pairs of the sort.
template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    block_of_kernel(device_ref<W> filter, const std::uint64_t* __restrict__ hashes, std::size_t n,
                    std::uint32_t* __restrict__ blocks, std::uint32_t* __restrict__ positions) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    blocks[i] = static_cast<std::uint32_t>(filter.block_of(hashes[i]));
    positions[i] = static_cast<std::uint32_t>(i);
  }
}

// Step 3 (after a stable sort by block): the first entry of each run of equal
// blocks owns that block. Its thread loads the block once, walks the run --
// the run's positions ascend, since the sort is stable -- testing each key
// against the bits of the filter plus those of the run's earlier keys, and
// finally ORs the bits the run added. No other thread of the launch touches
// the block, so the register copy is exact; the final OR is atomic anyway so
// that concurrent adds from other streams are never lost. Null keys are not
// new and add nothing.
template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    add_new_runs_kernel(device_ref<W> filter, const std::uint64_t* __restrict__ hashes,
                        const std::uint8_t* __restrict__ validity, std::size_t validity_bit,
                        std::size_t n, const std::uint32_t* __restrict__ sorted_blocks,
                        const std::uint32_t* __restrict__ sorted_positions,
                        bool* __restrict__ is_new) {
  for (std::size_t head = first_index(); head < n; head += grid_stride()) {
    const std::uint32_t block = sorted_blocks[head];
    if (head != 0 && sorted_blocks[head - 1] == block) continue;  // inside a run, not its head
    std::uint32_t before[W];
    filter.load_block(block, before);
    std::uint32_t bits[W];
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) bits[w] = before[w];
    for (std::size_t i = head; i < n && sorted_blocks[i] == block; ++i) {
      const std::uint32_t position = sorted_positions[i];
      if (!key_valid(validity, validity_bit, position)) {
        is_new[position] = false;
        continue;
      }
      std::uint32_t masks[W];
      filter.masks_of(hashes[position], masks);
      is_new[position] = !device_ref<W>::covers(bits, masks);
#pragma unroll
      for (std::uint32_t w = 0; w < W; ++w) bits[w] |= masks[w];
    }
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) bits[w] &= ~before[w];  // only the new bits
    filter.or_block(block, bits);
  }
}

void check_batch_size(std::size_t n) {
  if (n > add_new_max_keys) throw invalid_argument("add_new takes at most 2^30 keys per launch");
}

}  // namespace

std::size_t add_new_scratch_bytes(const layout& l, std::size_t max_keys) {
  check_batch_size(max_keys);
  return aligned(max_keys * sizeof(std::uint64_t)) +
         4 * aligned(max_keys * sizeof(std::uint32_t)) +
         aligned(sort_temp_bytes(max_keys, block_index_bits(l.num_blocks)));
}

void add_new(const layout& l, std::uint32_t* words, const key_batch& keys, bool* is_new,
             void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  const std::size_t n = keys.count;
  if (n == 0) return;
  check_batch_size(n);
  if (scratch_bytes < add_new_scratch_bytes(l, n)) {
    throw invalid_argument("add_new: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " keys");
  }
  auto* hashes = static_cast<std::uint64_t*>(scratch);
  auto* base = static_cast<unsigned char*>(scratch) + aligned(n * sizeof(std::uint64_t));
  const std::size_t array_bytes = aligned(n * sizeof(std::uint32_t));
  auto region = [&](int i) { return reinterpret_cast<std::uint32_t*>(base + i * array_bytes); };
  cub::DoubleBuffer<std::uint32_t> blocks(region(0), region(1));
  cub::DoubleBuffer<std::uint32_t> positions(region(2), region(3));
  void* sort_temp = base + 4 * array_bytes;
  const int bits = block_index_bits(l.num_blocks);

  hash_keys(keys, l.seed, hashes, stream);
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    const device_ref<W> filter(words, l);
    launch<block_of_kernel<W>>(n, stream, filter, hashes, n, blocks.Current(), positions.Current());
    if (bits != 0) {
      // Stable, so equal blocks keep their keys in batch order.
      std::size_t temp_bytes = sort_temp_bytes(n, bits);
      GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, blocks, positions,
                                                   static_cast<int>(n), 0, bits, stream));
    }
    launch<add_new_runs_kernel<W>>(n, stream, filter, hashes, keys.validity, keys.validity_bit, n,
                                   blocks.Current(), positions.Current(), is_new);
  });
}

}  // namespace gbf::detail::gpu::bloom
