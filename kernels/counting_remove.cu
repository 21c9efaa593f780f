// The counting filter's checked remove (kernels/counting.cuh): hash, sort by
// block, walk each block's keys in batch order.
//
// Scratch: hashes[max_keys] (8 bytes each), then blocks[2][max_keys] and
// positions[2][max_keys] (the sort's double buffers, 4 bytes each), then CUB's
// temporary storage; each region 256-byte aligned (the plain filter's add_new
// uses the same arrangement, kernels/bloom_add_new.cu).
#include <cub/device/device_radix_sort.cuh>

#include <string>

#include "kernels/block_sort.cuh"
#include "kernels/counting.cuh"
#include "kernels/counting_ops.cuh"
#include "kernels/keys.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::counting {
namespace {

// Step 1: each key's hash. Through the shared key loop, so that an _async
// string batch whose offsets failed validation reads no key byte: its keys go
// to skip(), as null keys do. A skipped key gets a hash spread by its row
// (a sort by block then spreads nulls instead of piling them into one block);
// the walk below never uses it.
struct hash_op {
  std::uint64_t* __restrict__ hashes;
  std::uint64_t key_seed;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return key_seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    hashes[i] = h;
    return 0;
  }
  __device__ void skip(std::size_t i) const {
    hashes[i] = static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL;
  }
};

// Step 2: the (block, position) pairs of the sort.
template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    block_of_kernel(counter_view<W> view, const std::uint64_t* __restrict__ hashes, std::size_t n,
                    std::uint32_t* __restrict__ blocks, std::uint32_t* __restrict__ positions) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    blocks[i] = static_cast<std::uint32_t>(view.block_of(hashes[i]));
    positions[i] = static_cast<std::uint32_t>(i);
  }
}

// Step 4 (after a stable sort by block): the head of each run of equal blocks
// walks the run -- positions ascend, the sort being stable -- testing each
// key and decrementing its counters when all are nonzero. No other thread of
// the launch touches the block, so each key sees exactly the removes of the
// keys before it in the batch. Null keys (and every key of a rejected batch)
// are neither removed nor refused.
template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    remove_runs_kernel(counter_view<W> view, const std::uint64_t* __restrict__ hashes,
                       const std::uint8_t* __restrict__ validity, std::size_t validity_bit,
                       std::size_t n, const std::uint32_t* __restrict__ sorted_blocks,
                       const std::uint32_t* __restrict__ sorted_positions,
                       bool* __restrict__ removed, const std::uint64_t* status,
                       counter_t* refused) {
  const bool rejected = status != nullptr && *status != offsets_ok;
  counter_t refusals = 0;
  for (std::size_t head = first_index(); head < n; head += grid_stride()) {
    const std::uint32_t block = sorted_blocks[head];
    if (head != 0 && sorted_blocks[head - 1] == block) continue;  // inside a run, not its head
    for (std::size_t i = head; i < n && sorted_blocks[i] == block; ++i) {
      const std::uint32_t position = sorted_positions[i];
      bool taken = false;
      if (!rejected && key_valid(validity, validity_bit, position)) {
        const std::uint64_t h = hashes[position];
        taken = view.contains(h);
        if (taken) {
          view.decrement(h);
        } else {
          ++refusals;
        }
      }
      if (removed != nullptr) removed[position] = taken;
    }
  }
  if (refused != nullptr) add_block_total(refusals, refused);  // uniform: the whole CTA or none
}

void check_batch_size(std::size_t n) {
  if (n > remove_max_keys)
    throw invalid_argument("a checked remove takes at most 2^30 keys per launch");
}

}  // namespace

std::size_t remove_scratch_bytes(const layout& l, std::size_t max_keys) {
  check_batch_size(max_keys);
  return aligned(max_keys * sizeof(std::uint64_t)) +
         4 * aligned(max_keys * sizeof(std::uint32_t)) +
         aligned(sort_temp_bytes(max_keys, block_index_bits(l.num_blocks)));
}

void remove_checked(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
                    const key_batch& keys, bool* removed, std::uint64_t* refused,
                    const std::uint64_t* status, void* scratch, std::size_t scratch_bytes,
                    cudaStream_t stream) {
  const std::size_t n = keys.count;
  if (n == 0) return;
  check_batch_size(n);
  if (scratch_bytes < remove_scratch_bytes(l, n)) {
    throw invalid_argument("remove: scratch of " + std::to_string(scratch_bytes) +
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

  for_each_key(keys, hash_op{hashes, l.seed}, status, stream);
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    const counter_view<W> view(counters, l, counter_bits);
    launch<block_of_kernel<W>>(n, stream, view, hashes, n, blocks.Current(), positions.Current());
    if (bits != 0) {
      // Stable, so equal blocks keep their keys in batch order.
      std::size_t temp_bytes = sort_temp_bytes(n, bits);
      GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, blocks, positions,
                                                   static_cast<int>(n), 0, bits, stream));
    }
    launch<remove_runs_kernel<W>>(n, stream, view, hashes, keys.validity, keys.validity_bit, n,
                                  blocks.Current(), positions.Current(), removed, status,
                                  reinterpret_cast<counter_t*>(refused));
  });
}

}  // namespace gbf::detail::gpu::counting
