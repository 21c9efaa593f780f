// Host launcher of the compaction behind every kind's select: the ascending
// indices of the set flags. Plain C++; the kernel work is CUB's (select.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gbf::detail::gpu {

/// Bytes of scratch compact_flags needs for `n` flags (256-byte aligned).
std::size_t compact_scratch_bytes(std::size_t n);

/// Writes the ascending indices i < n with flags[i] to `rows` (room for n) and
/// their number to *count, both device memory; queued on `stream`, never
/// synchronizing. `scratch` holds compact_scratch_bytes(n) bytes and must not be
/// reused before this work has finished on `stream`.
void compact_flags(const bool* flags, std::size_t n, std::uint64_t* rows, std::uint64_t* count,
                   void* scratch, std::size_t scratch_bytes, cudaStream_t stream);

}  // namespace gbf::detail::gpu
