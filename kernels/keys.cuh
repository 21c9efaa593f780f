// Host launchers of the kernels every filter kind shares for its key batches:
// checking string offsets on the device and hashing a batch into an array.
// Plain C++ (host/gpu/ includes it); the kernels live in keys.cu.
//
// All pointers are device pointers; every launcher queues its work on
// `stream`, returns without synchronizing, does nothing for an empty batch and
// checks every CUDA call (gbf::cuda_error).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"

namespace gbf::detail::gpu {

/// The status word of a batch whose offsets passed validation.
inline constexpr std::uint64_t offsets_ok = ~std::uint64_t{0};

/// atomicMin's the index of every bad offset of a string batch (offset_is_bad's
/// rule) into *first_bad, which the caller sets to offsets_ok, and, when not
/// null, into *sticky.
void validate_offsets(const key_batch& keys, std::uint64_t* first_bad, std::uint64_t* sticky,
                      cudaStream_t stream);

/// hashes[i] = the hash of key i with `seed`, for a batch of any kind (string
/// offsets already checked). A null key gets the hash of its row number, so
/// that a sort by block spreads nulls instead of piling them into one block.
void hash_keys(const key_batch& keys, std::uint64_t seed, std::uint64_t* hashes,
               cudaStream_t stream);

}  // namespace gbf::detail::gpu
