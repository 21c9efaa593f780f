// Host launchers of the counting filter's kernels (gbf/counting_layout.hpp's
// counter words, run over device batches of any key kind by the shared launch
// layer, launch.cuh). Plain C++: host/gpu/counting_backend.cpp includes it.
//
// Every launcher dispatches the runtime block width W to a kernel template,
// queues its work on `stream` and returns without synchronizing, does nothing
// for an empty batch, and checks every CUDA call. All pointers are device
// pointers. `status` (string batches, may be null) is the batch's validation
// word (keys.cuh): when it says the offsets are bad, nothing is written but
// false / zero answers.
//
// Updates are atomicCAS loops on whole 32-bit counter words: each attempt
// computes the word with its fields incremented or decremented by the
// saturating rules of counting_layout.hpp (which never carry or borrow across
// a field) and retries when another thread changed the word meanwhile, so no
// update is lost and none spills into a neighbouring counter under any
// interleaving.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf::detail::gpu::counting {

/// Increments (saturating) the counters of every non-null key.
void add(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
         const key_batch& keys, const std::uint64_t* status, cudaStream_t stream);

/// Decrements (floored at 0; saturated counters stay) the counters of every non-null key.
void remove_unchecked(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
                      const key_batch& keys, const std::uint64_t* status, cudaStream_t stream);

/// found[i] = key i is non-null and all its counters are nonzero.
void contains(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
              const key_batch& keys, bool* found, const std::uint64_t* status,
              cudaStream_t stream);

/// Adds to *counter (zeroed by the caller) the number of non-null keys whose counters are all nonzero.
void count(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
           const key_batch& keys, std::uint64_t* counter, const std::uint64_t* status,
           cudaStream_t stream);

/// counts[i] = the smallest counter of key i (0 for a null key).
void approximate_count(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
                       const key_batch& keys, std::uint8_t* counts, const std::uint64_t* status,
                       cudaStream_t stream);

/// Most keys one checked-remove launch takes: its sort carries 32-bit key positions.
inline constexpr std::size_t remove_max_keys = std::size_t{1} << 30;

/// Bytes of scratch remove_checked needs for up to `max_keys` keys in layout `l`.
std::size_t remove_scratch_bytes(const layout& l, std::size_t max_keys);

/// Checked remove, in batch order: each non-null key whose counters are all
/// nonzero at its turn has them decremented; the others are refused and their
/// number added to *refused (zeroed by the caller; may be null). removed[i] (may be null) =
/// key i was removed. count <= remove_max_keys; `scratch` holds at least
/// remove_scratch_bytes(l, count) bytes, 256-byte aligned, and is not used by
/// other work until this launch's work on `stream` is done.
///
/// Method (as the plain filter's add_new, kernels/bloom_add_new.cu): hash,
/// sort stably by block, and one thread per block walks that block's keys in
/// batch order. Blocks are disjoint, so this is the sequential answer; the
/// walker's decrements are CAS loops all the same, so that adds queued on other
/// streams at the same time are never lost.
void remove_checked(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
                    const key_batch& keys, bool* removed, std::uint64_t* refused,
                    const std::uint64_t* status, void* scratch, std::size_t scratch_bytes,
                    cudaStream_t stream);

/// Adds to census[0] the nonzero counters and to census[1] the saturated ones of
/// the whole array (census zeroed by the caller).
void census(const std::uint32_t* counters, std::uint64_t num_counter_words,
            std::uint32_t counter_bits, std::uint64_t* census, cudaStream_t stream);

/// dst[i] = field-wise min(dst[i] + src[i], 2^c - 1) for i < num_counter_words (dst != src).
void merge(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_counter_words,
           std::uint32_t counter_bits, cudaStream_t stream);

/// counters[i] = field-wise min(2 counters[i], 2^c - 1) for i < num_counter_words: x + x in place.
void double_counters(std::uint32_t* counters, std::uint64_t num_counter_words, std::uint32_t counter_bits,
                     cudaStream_t stream);

/// dst[i] = field-wise min(dst[i], src[i]) for i < num_counter_words (dst != src).
void intersect(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_counter_words,
               std::uint32_t counter_bits, cudaStream_t stream);

/// words[i] = the projection of plain word i (bit set where its counter is nonzero),
/// for i < num_words.
void project(const std::uint32_t* counters, std::uint64_t num_words, std::uint32_t counter_bits,
             std::uint32_t* words, cudaStream_t stream);

}  // namespace gbf::detail::gpu::counting
