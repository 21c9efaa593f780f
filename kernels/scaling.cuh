// Host launchers of the scaling chain's kernels (kernels/scaling.cu). Plain
// C++: host/gpu/scaling_backend.cpp includes it.
//
// A chain's levels share W, k and seed, so a key is hashed once and each level
// differs only in its bit array and block count: the kernels receive the
// levels as a device array of level_ref (one entry per level, oldest first)
// and probe all of them in one launch, newest (largest) first so present keys
// stop early. Every launcher dispatches W to a kernel template, queues its
// work on `stream` without synchronizing and does nothing for n = 0. All
// pointers are device pointers; `status` is a string batch's validation word
// as in kernels/bloom.cuh.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"

namespace gbf::detail::gpu::scaling {

/// One level as the kernels see it.
struct level_ref {
  std::uint32_t* words;     ///< num_blocks * W words, cudaMalloc'd (256-byte aligned).
  std::uint64_t num_blocks;
};

/// The chain as the kernels see it: `levels` is a device array of `num_levels` entries.
struct chain_ref {
  const level_ref* levels;
  std::uint32_t num_levels;
  std::uint32_t words_per_block;
  std::uint32_t bits_per_key;
  std::uint64_t seed;
};

/// found[i] = key i is non-null and present in some level.
void contains(const chain_ref& c, const key_batch& keys, bool* found, const std::uint64_t* status,
              cudaStream_t stream);

/// Adds to *counter (zeroed by the caller) the number of non-null keys present in some level.
void count(const chain_ref& c, const key_batch& keys, std::uint64_t* counter,
           const std::uint64_t* status, cudaStream_t stream);

/// hashes[i] = key i's hash; absent[i] = key i is non-null and in no level
/// (string offsets already checked).
void hash_absent(const chain_ref& c, const key_batch& keys, std::uint64_t* hashes, bool* absent,
                 cudaStream_t stream);

/// absent[j] = stored hash hashes[j] is not in `level` (of the chain's W and k), j < n.
void absent_in_level(const level_ref& level, std::uint32_t words_per_block,
                     std::uint32_t bits_per_key, const std::uint64_t* hashes, std::size_t n,
                     bool* absent, cudaStream_t stream);

/// out_hashes[j] = hashes[rows[j]]; out_positions[j] = positions[rows[j]] (rows[j]
/// itself when positions is null); j < n, n the host count of `rows`.
void gather(const std::uint64_t* hashes, const std::uint32_t* positions,
            const std::uint64_t* rows, std::size_t n, std::uint64_t* out_hashes,
            std::uint32_t* out_positions, cudaStream_t stream);

/// Most hashes one insert_new or first_of_each_hash launch takes (32-bit positions).
inline constexpr std::size_t max_slice = std::size_t{1} << 30;

/// Bytes of scratch insert_new needs for up to `n` hashes into a level of `num_blocks` blocks.
std::size_t insert_new_scratch_bytes(std::uint64_t num_blocks, std::size_t n);

/// Sets the bits of stored hashes hashes[0, n) in `level` and writes, in their
/// order, slice_new[j] = hash j's bits were not all set in (the level before the
/// launch | the bits of hashes 0..j-1): the plain filter's add_new method (sort by
/// block, one thread walks each block's run in order), on hashes instead of keys.
void insert_new(const level_ref& level, std::uint32_t words_per_block,
                std::uint32_t bits_per_key, const std::uint64_t* hashes, std::size_t n,
                bool* slice_new, void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

/// is_new[positions[j]] = slice_new[j] (is_new may be null) and *counter += the
/// number of slice_new[j] set, j < n.
void scatter_new(const bool* slice_new, const std::uint32_t* positions, std::size_t n,
                 bool* is_new, std::uint64_t* counter, cudaStream_t stream);

/// Bytes of scratch first_of_each_hash needs for `n` hashes.
std::size_t first_of_each_hash_scratch_bytes(std::size_t n);

/// keep[j] = no hash before j equals hashes[j], j < n (a stable radix sort of
/// (hash, j) pairs; the head of each run of equal hashes is kept).
void first_of_each_hash(const std::uint64_t* hashes, std::size_t n, bool* keep, void* scratch,
                        std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace gbf::detail::gpu::scaling
