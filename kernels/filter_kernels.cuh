// Host launchers of gbf's CUDA kernels, callable from host code compiled by a
// plain C++ compiler (host/gpu/bloom_backend.cpp). The kernels themselves live in
// filter_kernels.cu and are written against gbf::device_ref.
//
// Every launcher
//   * dispatches the runtime block width W (1, 2, 4, 8, 16) and key type
//     (32/64-bit) to a kernel template; k stays a runtime argument,
//   * queues its work on `stream` and returns without synchronizing,
//   * does nothing for an empty input,
//   * checks every CUDA call, the launch included (gbf::cuda_error).
// All pointers are device pointers. The bit array `words` comes from cudaMalloc
// (256-byte aligned), which the vector loads rely on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/filter.hpp"
#include "gbf/layout.hpp"
#include "host/backend.hpp"

namespace gbf::detail::gpu {

/// Most keys one add_new launch takes: its sort carries 32-bit key positions.
inline constexpr std::size_t add_new_max_keys = std::size_t{1} << 30;

/// Word-wise operation of combine_words.
enum class word_op { bit_or, bit_and };

/// Sets the bits of the `n` keys at `keys`.
void add(const layout& l, std::uint32_t* words, key_kind kind, const void* keys, std::size_t n,
         cudaStream_t stream);

/// found[i] = all bits of key i are set.
void contains(const layout& l, const std::uint32_t* words, key_kind kind, const void* keys,
              std::size_t n, bool* found, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of keys whose bits are all set.
void count(const layout& l, const std::uint32_t* words, key_kind kind, const void* keys,
           std::size_t n, std::uint64_t* counter, cudaStream_t stream);

/// Bytes of scratch memory add_new needs for batches of up to `max_keys` keys
/// (max_keys <= add_new_max_keys) in a filter of layout `l`.
std::size_t add_new_scratch_bytes(const layout& l, std::size_t max_keys);

/// Sets the bits of the `n` keys (n <= add_new_max_keys) and reports, in batch
/// order, whether each was new: is_new[i] = key i's bits were not all set in
/// (the filter before the launch | the bits of keys 0..i-1). `scratch` holds at
/// least add_new_scratch_bytes(l, n) bytes, 256-byte aligned, and must not be
/// used by other work until this launch's work on `stream` has finished.
///
/// Method: the keys are sorted stably by block; one thread per block walks that
/// block's keys in batch order on a register copy of the block, then ORs the new
/// bits back. Blocks are disjoint, so this is the sequential answer. A block that
/// receives many keys of the batch is walked by one thread: a batch of one key
/// repeated is serial (correct, slow).
void add_new(const layout& l, std::uint32_t* words, key_kind kind, const void* keys,
             std::size_t n, bool* is_new, void* scratch, std::size_t scratch_bytes,
             cudaStream_t stream);

// ---------------------------------------------------------------------------
// String keys (key_batch kinds str32 / str64; data, offsets and validity in
// device memory). One kernel per operation walks the batch 32 keys per warp
// step: each lane hashes its own key when it is at most long_string_bytes
// long; the longer keys of the step are then hashed one after another by the
// whole warp (gbf::warp_xxh64), and the lane that owns each finishes it. A 1 MiB
// string thus costs its warp 32 Ki stripe steps of 256-byte coalesced loads,
// not one thread 1 Mi byte loads, and short keys never wait in a divergent
// branch behind it.
//
// `status` (device, may be null) is the word validate_offsets wrote: when it
// is not offsets_ok the launch does nothing but answer false (contains), so a
// batch whose offsets are bad never writes a bit.
// ---------------------------------------------------------------------------

/// Strings longer than this are hashed by a whole warp.
inline constexpr std::size_t long_string_bytes = 256;

/// validate_offsets' "no bad offset" value.
inline constexpr std::uint64_t offsets_ok = ~std::uint64_t{0};

/// atomicMin's the index of every bad offset (bad_offset_message's rule) into
/// *first_bad (which the caller sets to offsets_ok) and, when not null, *sticky.
void validate_offsets(const key_batch& keys, std::uint64_t* first_bad, std::uint64_t* sticky,
                      cudaStream_t stream);

/// Sets the bits of every non-null string key.
void add_strings(const layout& l, std::uint32_t* words, const key_batch& keys,
                 const std::uint64_t* status, cudaStream_t stream);

/// found[i] = key i is non-null and all its bits are set.
void contains_strings(const layout& l, const std::uint32_t* words, const key_batch& keys,
                      bool* found, const std::uint64_t* status, cudaStream_t stream);

/// Adds to *counter the number of non-null keys whose bits are all set.
void count_strings(const layout& l, const std::uint32_t* words, const key_batch& keys,
                   std::uint64_t* counter, const std::uint64_t* status, cudaStream_t stream);

/// Scratch bytes add_new_strings needs for up to `max_keys` keys.
std::size_t add_new_strings_scratch_bytes(const layout& l, std::size_t max_keys);

/// add_new for string keys (n <= add_new_max_keys): the keys are hashed into
/// scratch, then the integer method (stable sort by block, one thread per run)
/// runs on the hashes; null keys get is_new = false and set nothing.
void add_new_strings(const layout& l, std::uint32_t* words, const key_batch& keys, bool* is_new,
                     void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

/// Writes the ascending indices of the non-null keys whose bits are all set to
/// `rows` (room for keys.count) and their number to *count, both device memory.
/// Integer or string keys (device memory; string offsets already checked). Uses
/// stream-ordered allocations for its scratch; never synchronizes.
void select(const layout& l, const std::uint32_t* words, const key_batch& keys,
            std::uint64_t* rows, std::uint64_t* count, cudaStream_t stream);

/// dst[i] = dst[i] op src[i] for i < num_words (both 16-byte aligned).
void combine_words(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_words,
                   word_op op, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of set bits of words[0, num_words)
/// (16-byte aligned).
void popcount(const std::uint32_t* words, std::uint64_t num_words, std::uint64_t* counter,
              cudaStream_t stream);

}  // namespace gbf::detail::gpu
