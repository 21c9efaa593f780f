// The scaling chain's kernels (kernels/scaling.cuh): the probes of every level
// in one launch as key operations of the shared loops (launch.cuh), and the
// steps of an add on stored hashes: insert into one level with sequential
// answers, gather, scatter, and the first of each hash.
//
// Scratch of insert_new: blocks[2][n] and positions[2][n] (the sort's double
// buffers, 4 bytes each), then CUB's temporary storage. Scratch of
// first_of_each_hash: hashes[2][n] (8 bytes), indices[2][n] (4 bytes), then
// CUB's. Each region 256-byte aligned.
#include <cub/device/device_radix_sort.cuh>

#include <string>

#include "kernels/block_sort.cuh"
#include "kernels/launch.cuh"
#include "kernels/scaling.cuh"

namespace gbf::detail::gpu::scaling {
namespace {

// Whether the key of hash `h` is in `level`: the plain filter's probe
// (gbf::device_ref::contains_hash) on a level of the chain's W and k.
template <std::uint32_t W>
__device__ __forceinline__ bool in_level(const level_ref& level, std::uint64_t h,
                                         std::uint32_t bits_per_key) {
  std::uint32_t masks[W];
  block_masks<W>(h, bits_per_key, masks);
  const std::uint32_t* block = level.words + block_index(h, level.num_blocks) * W;
  bool all = true;
#pragma unroll
  for (std::uint32_t w = 0; w < W; ++w) all &= (block[w] & masks[w]) == masks[w];
  return all;
}

// In some level, the newest (largest, holding the most keys) first.
template <std::uint32_t W>
__device__ __forceinline__ bool in_chain(const chain_ref& c, std::uint64_t h) {
  for (std::uint32_t level = c.num_levels; level-- > 0;)
    if (in_level<W>(c.levels[level], h, c.bits_per_key)) return true;
  return false;
}

template <std::uint32_t W>
struct contains_op {
  chain_ref chain;
  bool* __restrict__ found;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return chain.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    found[i] = in_chain<W>(chain, h);
    return 0;
  }
  __device__ void skip(std::size_t i) const { found[i] = false; }
};

template <std::uint32_t W>
struct count_op {
  chain_ref chain;
  counter_t* tally;
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return chain.seed; }
  __device__ unsigned key(std::size_t, std::uint64_t h) const {
    return in_chain<W>(chain, h) ? 1u : 0u;
  }
  __device__ void skip(std::size_t) const {}
};

template <std::uint32_t W>
struct hash_absent_op {
  chain_ref chain;
  std::uint64_t* __restrict__ hashes;
  bool* __restrict__ absent;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return chain.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    hashes[i] = h;
    absent[i] = !in_chain<W>(chain, h);
    return 0;
  }
  __device__ void skip(std::size_t i) const {
    hashes[i] = 0;
    absent[i] = false;
  }
};

template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    absent_in_level_kernel(level_ref level, std::uint32_t bits_per_key,
                           const std::uint64_t* __restrict__ hashes, std::size_t n,
                           bool* __restrict__ absent) {
  for (std::size_t j = first_index(); j < n; j += grid_stride())
    absent[j] = !in_level<W>(level, hashes[j], bits_per_key);
}

__global__ void __launch_bounds__(block_threads)
    gather_kernel(const std::uint64_t* __restrict__ hashes,
                  const std::uint32_t* __restrict__ positions,
                  const std::uint64_t* __restrict__ rows, std::size_t n,
                  std::uint64_t* __restrict__ out_hashes, std::uint32_t* __restrict__ out_positions) {
  for (std::size_t j = first_index(); j < n; j += grid_stride()) {
    const std::uint64_t row = rows[j];
    out_hashes[j] = hashes[row];
    out_positions[j] = positions != nullptr ? positions[row] : static_cast<std::uint32_t>(row);
  }
}

__global__ void __launch_bounds__(block_threads)
    scatter_new_kernel(const bool* __restrict__ slice_new,
                       const std::uint32_t* __restrict__ positions, std::size_t n,
                       bool* __restrict__ is_new, counter_t* counter) {
  counter_t tally = 0;
  for (std::size_t j = first_index(); j < n; j += grid_stride()) {
    const bool fresh = slice_new[j];
    if (is_new != nullptr) is_new[positions[j]] = fresh;
    tally += fresh ? 1 : 0;
  }
  add_block_total(tally, counter);
}

template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    block_of_kernel(std::uint64_t num_blocks, const std::uint64_t* __restrict__ hashes,
                    std::size_t n, std::uint32_t* __restrict__ blocks,
                    std::uint32_t* __restrict__ positions) {
  for (std::size_t j = first_index(); j < n; j += grid_stride()) {
    blocks[j] = static_cast<std::uint32_t>(block_index(hashes[j], num_blocks));
    positions[j] = static_cast<std::uint32_t>(j);
  }
}

// After a stable sort by block, the head of each run of equal blocks walks the
// run in slice order on a register copy of its block (kernels/bloom_add_new.cu
// gives the argument); the final OR is atomic so concurrent work is never lost.
template <std::uint32_t W>
__global__ void __launch_bounds__(block_threads)
    insert_runs_kernel(level_ref level, std::uint32_t bits_per_key,
                       const std::uint64_t* __restrict__ hashes, std::size_t n,
                       const std::uint32_t* __restrict__ sorted_blocks,
                       const std::uint32_t* __restrict__ sorted_positions,
                       bool* __restrict__ slice_new) {
  for (std::size_t head = first_index(); head < n; head += grid_stride()) {
    const std::uint32_t block = sorted_blocks[head];
    if (head != 0 && sorted_blocks[head - 1] == block) continue;
    std::uint32_t* const words = level.words + static_cast<std::uint64_t>(block) * W;
    std::uint32_t before[W];
    std::uint32_t bits[W];
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) bits[w] = before[w] = words[w];
    for (std::size_t i = head; i < n && sorted_blocks[i] == block; ++i) {
      const std::uint32_t position = sorted_positions[i];
      std::uint32_t masks[W];
      block_masks<W>(hashes[position], bits_per_key, masks);
      bool covered = true;
#pragma unroll
      for (std::uint32_t w = 0; w < W; ++w) {
        covered &= (bits[w] & masks[w]) == masks[w];
        bits[w] |= masks[w];
      }
      slice_new[position] = !covered;
    }
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) {
      const std::uint32_t added = bits[w] & ~before[w];
      if (added != 0) atomicOr(words + w, added);
    }
  }
}

__global__ void __launch_bounds__(block_threads)
    index_kernel(std::size_t n, std::uint32_t* __restrict__ indices) {
  for (std::size_t j = first_index(); j < n; j += grid_stride())
    indices[j] = static_cast<std::uint32_t>(j);
}

__global__ void __launch_bounds__(block_threads)
    run_heads_kernel(const std::uint64_t* __restrict__ sorted_hashes,
                     const std::uint32_t* __restrict__ sorted_indices, std::size_t n,
                     bool* __restrict__ keep) {
  for (std::size_t t = first_index(); t < n; t += grid_stride())
    keep[sorted_indices[t]] = t == 0 || sorted_hashes[t] != sorted_hashes[t - 1];
}

void check_slice(std::size_t n, const char* what) {
  if (n > max_slice)
    throw invalid_argument(std::string(what) + " takes at most 2^30 hashes per launch");
}

}  // namespace

void contains(const chain_ref& c, const key_batch& keys, bool* found, const std::uint64_t* status,
              cudaStream_t stream) {
  dispatch_words_per_block(c.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, contains_op<W>{c, found}, status, stream);
  });
}

void count(const chain_ref& c, const key_batch& keys, std::uint64_t* counter,
           const std::uint64_t* status, cudaStream_t stream) {
  dispatch_words_per_block(c.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, count_op<W>{c, reinterpret_cast<counter_t*>(counter)}, status, stream);
  });
}

void hash_absent(const chain_ref& c, const key_batch& keys, std::uint64_t* hashes, bool* absent,
                 cudaStream_t stream) {
  dispatch_words_per_block(c.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, hash_absent_op<W>{c, hashes, absent}, nullptr, stream);
  });
}

void absent_in_level(const level_ref& level, std::uint32_t words_per_block,
                     std::uint32_t bits_per_key, const std::uint64_t* hashes, std::size_t n,
                     bool* absent, cudaStream_t stream) {
  dispatch_words_per_block(words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    launch<absent_in_level_kernel<W>>(n, stream, level, bits_per_key, hashes, n, absent);
  });
}

void gather(const std::uint64_t* hashes, const std::uint32_t* positions,
            const std::uint64_t* rows, std::size_t n, std::uint64_t* out_hashes,
            std::uint32_t* out_positions, cudaStream_t stream) {
  launch<gather_kernel>(n, stream, hashes, positions, rows, n, out_hashes, out_positions);
}

std::size_t insert_new_scratch_bytes(std::uint64_t num_blocks, std::size_t n) {
  check_slice(n, "insert_new");
  return 4 * aligned(n * sizeof(std::uint32_t)) +
         aligned(sort_temp_bytes<std::uint32_t>(n, block_index_bits(num_blocks)));
}

void insert_new(const level_ref& level, std::uint32_t words_per_block,
                std::uint32_t bits_per_key, const std::uint64_t* hashes, std::size_t n,
                bool* slice_new, void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) return;
  check_slice(n, "insert_new");
  if (scratch_bytes < insert_new_scratch_bytes(level.num_blocks, n))
    throw invalid_argument("insert_new: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " hashes");
  auto* base = static_cast<unsigned char*>(scratch);
  const std::size_t array_bytes = aligned(n * sizeof(std::uint32_t));
  auto region = [&](int i) { return reinterpret_cast<std::uint32_t*>(base + i * array_bytes); };
  cub::DoubleBuffer<std::uint32_t> blocks(region(0), region(1));
  cub::DoubleBuffer<std::uint32_t> positions(region(2), region(3));
  void* sort_temp = base + 4 * array_bytes;
  const int bits = block_index_bits(level.num_blocks);
  dispatch_words_per_block(words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    launch<block_of_kernel<W>>(n, stream, level.num_blocks, hashes, n, blocks.Current(),
                               positions.Current());
    if (bits != 0) {
      std::size_t temp_bytes = sort_temp_bytes<std::uint32_t>(n, bits);
      GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, blocks, positions,
                                                   static_cast<int>(n), 0, bits, stream));
    }
    launch<insert_runs_kernel<W>>(n, stream, level, bits_per_key, hashes, n, blocks.Current(),
                                  positions.Current(), slice_new);
  });
}

void scatter_new(const bool* slice_new, const std::uint32_t* positions, std::size_t n,
                 bool* is_new, std::uint64_t* counter, cudaStream_t stream) {
  launch<scatter_new_kernel>(n, stream, slice_new, positions, n, is_new,
                             reinterpret_cast<counter_t*>(counter));
}

std::size_t first_of_each_hash_scratch_bytes(std::size_t n) {
  check_slice(n, "first_of_each_hash");
  return 2 * aligned(n * sizeof(std::uint64_t)) + 2 * aligned(n * sizeof(std::uint32_t)) +
         aligned(sort_temp_bytes<std::uint64_t>(n, 64));
}

void first_of_each_hash(const std::uint64_t* hashes, std::size_t n, bool* keep, void* scratch,
                        std::size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0) return;
  if (scratch_bytes < first_of_each_hash_scratch_bytes(n))
    throw invalid_argument("first_of_each_hash: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " hashes");
  auto* base = static_cast<unsigned char*>(scratch);
  const std::size_t hash_bytes = aligned(n * sizeof(std::uint64_t));
  const std::size_t index_bytes = aligned(n * sizeof(std::uint32_t));
  auto* sorted0 = reinterpret_cast<std::uint64_t*>(base);
  auto* sorted1 = reinterpret_cast<std::uint64_t*>(base + hash_bytes);
  auto* indices0 = reinterpret_cast<std::uint32_t*>(base + 2 * hash_bytes);
  auto* indices1 = reinterpret_cast<std::uint32_t*>(base + 2 * hash_bytes + index_bytes);
  void* sort_temp = base + 2 * hash_bytes + 2 * index_bytes;
  GBF_CUDA_TRY(cudaMemcpyAsync(sorted0, hashes, n * sizeof(std::uint64_t),
                               cudaMemcpyDeviceToDevice, stream));
  launch<index_kernel>(n, stream, n, indices0);
  cub::DoubleBuffer<std::uint64_t> keys(sorted0, sorted1);
  cub::DoubleBuffer<std::uint32_t> values(indices0, indices1);
  // Stable: equal hashes keep ascending indices, so each run's head is its earliest.
  std::size_t temp_bytes = sort_temp_bytes<std::uint64_t>(n, 64);
  GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, keys, values,
                                               static_cast<int>(n), 0, 64, stream));
  launch<run_heads_kernel>(n, stream, keys.Current(), values.Current(), n, keep);
}

}  // namespace gbf::detail::gpu::scaling
