// Host launchers of the kernels over a filter's whole word array, whatever its
// kind: word-wise set operations and the popcount. Plain C++; kernels in words.cu.
// Queued on `stream`, never synchronizing; arrays 16-byte aligned device memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gbf::detail::gpu {

/// Word-wise operation of combine_words.
enum class word_op { bit_or, bit_and, bit_xor };

/// dst[i] = dst[i] op src[i] for i < num_words.
void combine_words(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_words,
                   word_op op, cudaStream_t stream);

/// words[blocks[r] * W + w] |= rows[r * W + w] for r < num_blocks, w < W = words_per_block:
/// a block_bits' rows into a filter. The blocks are distinct, so each word has one writer.
void or_block_rows(std::uint32_t* words, const std::uint32_t* blocks, const std::uint32_t* rows,
                   std::uint64_t num_blocks, std::uint32_t words_per_block, cudaStream_t stream);

/// Adds to *counter (which the caller zeroes) the number of set bits of words[0, num_words).
void popcount(const std::uint32_t* words, std::uint64_t num_words, std::uint64_t* counter,
              cudaStream_t stream);

/// cudaSuccess when this build holds code the current device can run, else the
/// runtime's reason (e.g. cudaErrorNoKernelImageForDevice on an architecture
/// older than the build's, cudaErrorDevicesUnavailable on a busy exclusive GPU).
/// Creates the device's context; leaves the runtime's last error as it found it.
cudaError_t kernel_image_status() noexcept;

}  // namespace gbf::detail::gpu
