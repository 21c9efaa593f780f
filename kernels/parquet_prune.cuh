// Host launchers of row-group pruning (host/parquet/prune.hpp): every key of a
// device batch against every packed Parquet filter, in one launch of the shared
// key loop (launch.cuh) whose operation probes all filters for the key's hash.
// Plain C++: host/gpu/ includes it.
//
// All pointers are device pointers. Each launcher queues its work on `stream`
// and returns without synchronizing; an empty batch launches nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"

namespace gbf::detail::gpu::parquet_prune {

/// The row groups' filters end to end (the default layout: 8-word blocks, 8 bits
/// per key, seed 0): row group g's words start at words + word_offset[g] (a
/// multiple of 8, `words` from cudaMalloc, so blocks are 32-byte aligned) and it
/// has num_blocks[g] blocks; 0 means no filter, and the row group may hold any key.
struct packed_view {
  const std::uint32_t* words = nullptr;
  const std::uint64_t* word_offset = nullptr;
  const std::uint32_t* num_blocks = nullptr;
  std::uint32_t count = 0;
};

/// may_hold[g] = 1 for each row group some non-null key may be in (the caller
/// zeroes may_hold; a row group already marked is not probed again).
void mark(const packed_view& filters, const key_batch& keys, std::uint8_t* may_hold,
          cudaStream_t stream);

/// counts[i] = the row groups key i may be in (0 for a null key), and marks
/// may_hold as mark() does.
void count(const packed_view& filters, const key_batch& keys, std::uint64_t* counts,
           std::uint8_t* may_hold, cudaStream_t stream);

/// Bytes of scratch exclusive_scan needs for n values.
std::size_t scan_scratch_bytes(std::size_t n);

/// out[i] = in[0] + ... + in[i - 1] for i < n (out[0] = 0). `scratch` holds
/// scan_scratch_bytes(n) bytes.
void exclusive_scan(const std::uint64_t* in, std::uint64_t* out, std::size_t n, void* scratch,
                    std::size_t scratch_bytes, cudaStream_t stream);

/// row_groups[offsets[i] ..] = the row groups key i may be in, ascending (offsets
/// from exclusive_scan of count()'s counts).
void fill(const packed_view& filters, const key_batch& keys, const std::uint64_t* offsets,
          std::uint32_t* row_groups, cudaStream_t stream);

}  // namespace gbf::detail::gpu::parquet_prune
