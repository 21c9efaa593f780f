// Whole-array kernels (kernels/words.cuh): 16-byte vectors, then the
// num_words % 4 tail words.
#include "kernels/launch.cuh"
#include "kernels/words.cuh"

namespace gbf::detail::gpu {
namespace {

template <word_op Op>
__device__ __forceinline__ std::uint32_t apply(std::uint32_t a, std::uint32_t b) {
  if constexpr (Op == word_op::bit_or) return a | b;
  else if constexpr (Op == word_op::bit_and) return a & b;
  else return a ^ b;
}

template <word_op Op>
__global__ void __launch_bounds__(block_threads)
    combine_kernel(std::uint32_t* __restrict__ dst, const std::uint32_t* __restrict__ src,
                   std::uint64_t num_words) {
  const std::uint64_t num_vectors = num_words / 4;
  auto* dst4 = reinterpret_cast<uint4*>(dst);
  const auto* src4 = reinterpret_cast<const uint4*>(src);
  for (std::size_t i = first_index(); i < num_vectors; i += grid_stride()) {
    uint4 a = dst4[i];
    const uint4 b = src4[i];
    a.x = apply<Op>(a.x, b.x);
    a.y = apply<Op>(a.y, b.y);
    a.z = apply<Op>(a.z, b.z);
    a.w = apply<Op>(a.w, b.w);
    dst4[i] = a;
  }
  for (std::size_t i = num_vectors * 4 + first_index(); i < num_words; i += grid_stride()) {
    dst[i] = apply<Op>(dst[i], src[i]);
  }
}

__global__ void __launch_bounds__(block_threads)
    popcount_kernel(const std::uint32_t* __restrict__ words, std::uint64_t num_words,
                    counter_t* counter) {
  const std::uint64_t num_vectors = num_words / 4;
  const auto* words4 = reinterpret_cast<const uint4*>(words);
  counter_t bits = 0;
  for (std::size_t i = first_index(); i < num_vectors; i += grid_stride()) {
    const uint4 v = words4[i];
    bits += __popc(v.x) + __popc(v.y) + __popc(v.z) + __popc(v.w);
  }
  for (std::size_t i = num_vectors * 4 + first_index(); i < num_words; i += grid_stride()) {
    bits += __popc(words[i]);
  }
  add_block_total(bits, counter);
}

// One thread per row word: rows[i] goes to word i % W of block blocks[i / W] (W a
// template argument, so both are shifts and masks).
template <std::uint32_t WordsPerBlock>
__global__ void __launch_bounds__(block_threads)
    or_block_rows_kernel(std::uint32_t* __restrict__ words, const std::uint32_t* __restrict__ blocks,
                         const std::uint32_t* __restrict__ rows, std::uint64_t num_row_words) {
  for (std::size_t i = first_index(); i < num_row_words; i += grid_stride()) {
    const std::uint64_t block = blocks[i / WordsPerBlock];
    words[block * WordsPerBlock + i % WordsPerBlock] |= rows[i];
  }
}

}  // namespace

void or_block_rows(std::uint32_t* words, const std::uint32_t* blocks, const std::uint32_t* rows,
                   std::uint64_t num_blocks, std::uint32_t words_per_block, cudaStream_t stream) {
  const std::uint64_t num_row_words = num_blocks * words_per_block;
  if (num_row_words == 0) return;
  dispatch_words_per_block(words_per_block, [&](auto w) {
    launch<or_block_rows_kernel<decltype(w)::value>>(num_row_words, stream, words, blocks, rows, num_row_words);
  });
}

void combine_words(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_words,
                   word_op op, cudaStream_t stream) {
  const std::size_t work = (num_words + 3) / 4;
  switch (op) {
    case word_op::bit_or: launch<combine_kernel<word_op::bit_or>>(work, stream, dst, src, num_words); break;
    case word_op::bit_and: launch<combine_kernel<word_op::bit_and>>(work, stream, dst, src, num_words); break;
    case word_op::bit_xor: launch<combine_kernel<word_op::bit_xor>>(work, stream, dst, src, num_words); break;
  }
}

void popcount(const std::uint32_t* words, std::uint64_t num_words, std::uint64_t* counter,
              cudaStream_t stream) {
  launch<popcount_kernel>((num_words + 3) / 4, stream, words, num_words,
                          reinterpret_cast<counter_t*>(counter));
}

cudaError_t kernel_image_status() noexcept {
  // Any kernel of the library answers for all: they are built for the same
  // architectures, and the attribute query loads the module for this device.
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, combine_kernel<word_op::bit_or>);
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace gbf::detail::gpu
