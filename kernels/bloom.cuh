// Host launchers of the plain Bloom filter's kernels: the kind's word math
// (gbf::device_ref over gbf/layout.hpp) run over device batches of any key
// kind by the shared launch layer (launch.cuh). Plain C++: host/gpu/ includes it.
//
// Every launcher dispatches the runtime block width W to a kernel template (k
// stays a runtime argument), queues its work on `stream` and returns without
// synchronizing, does nothing for an empty batch, and checks every CUDA call.
// All pointers are device pointers; the bit array `words` comes from cudaMalloc
// (256-byte aligned), which the vector loads rely on. `status` (string batches,
// may be null) is the batch's validation word (keys.cuh): when it says the
// offsets are bad, nothing is written but false answers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf::detail::gpu::bloom {

/// Sets the bits of every non-null key.
void add(const layout& l, std::uint32_t* words, const key_batch& keys,
         const std::uint64_t* status, cudaStream_t stream);

/// found[i] = key i is non-null and all its bits are set.
void contains(const layout& l, const std::uint32_t* words, const key_batch& keys, bool* found,
              const std::uint64_t* status, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of non-null keys whose bits are all set.
void count(const layout& l, const std::uint32_t* words, const key_batch& keys,
           std::uint64_t* counter, const std::uint64_t* status, cudaStream_t stream);

/// Most keys one add_new launch takes: its sort carries 32-bit key positions.
inline constexpr std::size_t add_new_max_keys = std::size_t{1} << 30;

/// Bytes of scratch add_new needs for batches of up to `max_keys` keys
/// (max_keys <= add_new_max_keys) in a filter of layout `l`.
std::size_t add_new_scratch_bytes(const layout& l, std::size_t max_keys);

/// Sets the bits of the batch's keys (count <= add_new_max_keys; string offsets
/// already checked) and reports, in batch order, whether each was new:
/// is_new[i] = key i's bits were not all set in (the filter before the launch |
/// the bits of keys 0..i-1); a null key is not new and sets nothing. `scratch`
/// holds at least add_new_scratch_bytes(l, count) bytes, 256-byte aligned, and
/// must not be used by other work until this launch's work on `stream` is done.
///
/// Method: the keys are hashed and sorted stably by block; one thread per block
/// walks that block's keys in batch order on a register copy of the block, then
/// ORs the new bits back. Blocks are disjoint, so this is the sequential answer.
/// A block that receives many keys of the batch is walked by one thread: a batch
/// of one key repeated is serial (correct, slow).
void add_new(const layout& l, std::uint32_t* words, const key_batch& keys, bool* is_new,
             void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace gbf::detail::gpu::bloom
