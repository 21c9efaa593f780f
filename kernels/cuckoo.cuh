// Host launchers of the cuckoo filter's kernels: the table math of
// gbf/cuckoo_layout.hpp run over device batches of any key kind by the shared
// launch layer (launch.cuh). Plain C++: host/gpu/ includes it.
//
// Every launcher dispatches the tag width to a kernel template, queues its
// work on `stream` and returns without synchronizing, does nothing for an
// empty batch, and checks every CUDA call. All pointers are device pointers;
// the table comes from cudaMalloc (256-byte aligned), which the 16-byte vector
// loads of a bucket rely on. `offsets` (string batches, may be null) is the
// batch's validation word (keys.cuh): when it says the offsets are bad,
// nothing is written but empty answers.
//
// Concurrency. Inserts and removes update the table with 64-bit atomicCAS,
// each word holding 8, 4 or 2 tags, and read buckets through L2 (__ldcg):
// many threads may insert and remove at once (docs/cuckoo.md says what that
// guarantees). Queries read each bucket as two 16-byte loads (__ldg).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/cuckoo_filter.hpp"
#include "gbf/keys.hpp"

namespace gbf::detail::gpu::cuckoo {

/// The cumulative counters a GPU cuckoo filter keeps in device memory.
enum counter : int { inserted = 0, present, failed, evictions, removed, counter_count };

/// What the updating kernels need of a table.
struct table_ref {
  std::uint64_t* words;            ///< num_buckets * 4 words.
  cuckoo_layout layout;
  std::uint32_t max_kicks;
  std::uint64_t* counters;         ///< counter_count cumulative counters.
};

/// placement::fastest, not unique: inserts every non-null key concurrently;
/// status[i] (may be null) per key. Adds to the inserted, failed and evictions counters.
void add(const table_ref& t, const key_batch& keys, cuckoo_status* status,
         const std::uint64_t* offsets, cudaStream_t stream);

/// Removes one copy of each non-null key's tag where found; removed[i] (may be
/// null) per key. Adds to the removed counter.
void remove(const table_ref& t, const key_batch& keys, bool* removed,
            const std::uint64_t* offsets, cudaStream_t stream);

/// found[i] = key i is non-null and its tag is in one of its buckets.
void contains(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
              bool* found, const std::uint64_t* offsets, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of non-null keys found.
void count(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
           std::uint64_t* counter, const std::uint64_t* offsets, cudaStream_t stream);

/// copies[i] = copies of key i's tag in its two buckets (0 for null keys).
void approximate_count(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
                       std::uint8_t* copies, const std::uint64_t* offsets, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of non-empty slots.
void occupied(const cuckoo_layout& l, const std::uint64_t* words, std::uint64_t* counter,
              cudaStream_t stream);

/// Most keys one sorted add takes: it carries 32-bit positions.
inline constexpr std::size_t sorted_max_keys = std::size_t{1} << 30;

/// Bytes of scratch add_sorted needs for batches of up to `max_keys` keys.
std::size_t sorted_scratch_bytes(std::size_t max_keys);

/// Unique adds (either placement) and deterministic placement, for a batch of
/// at most sorted_max_keys keys whose string offsets, if any, are known good:
/// the steps of cuckoo_placement::deterministic (gbf/cuckoo_filter.hpp), which
/// host/cpu/cuckoo_backend.cpp runs on one thread. `unique` first marks keys
/// present before the batch or equal to an earlier key of it; `deterministic`
/// places the rest in sorted rounds and one thread for the tail, else
/// concurrently as add() does. status[i] (may be null) per key; adds to the
/// inserted, present, failed and evictions counters. `scratch` holds
/// sorted_scratch_bytes(keys.count) bytes, 256-byte aligned, not used by other
/// work until this work on `stream` is done.
void add_sorted(const table_ref& t, const key_batch& keys, cuckoo_status* status, bool unique,
                bool deterministic, void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace gbf::detail::gpu::cuckoo
