// gbf::device_ref — a filter as a CUDA kernel sees it.
//
// A device_ref is a small, trivially copyable view (bit array pointer, block
// count, bits per key, seed) that a kernel receives by value and probes from
// any thread. It holds no memory: the owner (gbf::filter, or your own
// allocation) must outlive every kernel that uses it. gbf's own kernels are
// written against this same class, so a user kernel that fuses a probe (a join
// operator, say) runs exactly the library's logic.
//
//   // Host: W must match the filter's layout (checked, throws invalid_argument).
//   gbf::device_ref<8> ref(const_cast<std::uint32_t*>(f.device_words()), f.get_layout());
//   // Device:
//   __global__ void probe(gbf::device_ref<8> ref, const std::uint64_t* keys, int* out, int n) {
//     int i = blockIdx.x * blockDim.x + threadIdx.x;
//     if (i < n) out[i] = ref.contains(keys[i]);
//   }
//
// Layout (gbf/layout.hpp is the single source of the math): a key's 64-bit
// xxh64 hash picks one block of W words; its k bits are spread over the
// block's words (block_masks). contains() reads the whole block with the
// widest vector loads its alignment allows: one 16-byte load per 4 words for
// W >= 4 (a W = 8 block is one 32-byte DRAM sector), 8 bytes for W = 2, 4 for
// W = 1. add() ORs each word's mask with atomicOr; the old value is never
// used, so the compiler emits the fire-and-forget RED instruction.
//
// Memory ordering: add() is relaxed. Kernels that add and probe concurrently
// get either answer for the keys being added (as with any concurrent set);
// a kernel launched after an add kernel in stream order sees all its bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"

namespace gbf {

template <std::uint32_t WordsPerBlock>
class device_ref {
  static_assert(WordsPerBlock == 1 || WordsPerBlock == 2 || WordsPerBlock == 4 ||
                    WordsPerBlock == 8 || WordsPerBlock == 16,
                "words per block must be 1, 2, 4, 8 or 16");

 public:
  /// W: 32-bit words per block, fixed at compile time so the block lives in registers.
  static constexpr std::uint32_t words_per_block = WordsPerBlock;

  /// A view of the bit array `words` (device memory, l.num_words() words) of layout `l`.
  /// Throws invalid_argument when l is not a valid layout, when l.words_per_block is not
  /// WordsPerBlock, or when `words` is not aligned to a block (min(W, 4) * 4 bytes).
  __host__ device_ref(std::uint32_t* words, const layout& l)
      : words_(words), num_blocks_(l.num_blocks), bits_per_key_(l.bits_per_key), seed_(l.seed) {
    if (const char* problem = layout_problem(l)) throw invalid_argument(problem);
    if (l.words_per_block != WordsPerBlock) {
      throw invalid_argument("device_ref<" + std::to_string(WordsPerBlock) +
                             "> cannot view a layout of " + std::to_string(l.words_per_block) +
                             " words per block");
    }
    if (reinterpret_cast<std::uintptr_t>(words) % vector_bytes != 0) {
      throw invalid_argument("device_ref: the bit array must be aligned to " +
                             std::to_string(vector_bytes) + " bytes for vector loads");
    }
  }

  /// The key's hash: xxh64 of its little-endian bytes with the filter's seed.
  template <class Key>
  __host__ __device__ __forceinline__ std::uint64_t hash(Key key) const {
    static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                  "gbf keys are 32- or 64-bit integers");
    if constexpr (sizeof(Key) == 4) {
      return hash_key(static_cast<std::uint32_t>(key), seed_);
    } else {
      return hash_key(static_cast<std::uint64_t>(key), seed_);
    }
  }

  /// Index of the block hash `h` falls in (< num_blocks <= 2^32).
  __host__ __device__ __forceinline__ std::uint64_t block_of(std::uint64_t h) const {
    return block_index(h, num_blocks_);
  }

  /// The W word masks of hash `h` (k bits in all, see block_masks).
  __host__ __device__ __forceinline__ void masks_of(std::uint64_t h,
                                                    std::uint32_t (&masks)[WordsPerBlock]) const {
    block_masks<WordsPerBlock>(h, bits_per_key_, masks);
  }

  /// Loads block `block` into `out` with vector loads (plain, coherent loads: the
  /// block may be written by other kernels between launches).
  __device__ __forceinline__ void load_block(std::uint64_t block,
                                             std::uint32_t (&out)[WordsPerBlock]) const {
    const std::uint32_t* first = words_ + block * WordsPerBlock;
    if constexpr (WordsPerBlock >= 4) {
      const auto* vectors = reinterpret_cast<const uint4*>(first);
#pragma unroll
      for (std::uint32_t v = 0; v < WordsPerBlock / 4; ++v) {
        const uint4 x = vectors[v];
        out[4 * v + 0] = x.x;
        out[4 * v + 1] = x.y;
        out[4 * v + 2] = x.z;
        out[4 * v + 3] = x.w;
      }
    } else if constexpr (WordsPerBlock == 2) {
      const uint2 x = *reinterpret_cast<const uint2*>(first);
      out[0] = x.x;
      out[1] = x.y;
    } else {
      out[0] = *first;
    }
  }

  /// ORs `bits` into block `block`, one atomicOr per nonzero word (the result is unused:
  /// a RED, no round trip).
  __device__ __forceinline__ void or_block(std::uint64_t block,
                                           const std::uint32_t (&bits)[WordsPerBlock]) const {
    std::uint32_t* first = words_ + block * WordsPerBlock;
#pragma unroll
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
      if (bits[w] != 0) atomicOr(first + w, bits[w]);
    }
  }

  /// True when every bit of `masks` is set in `block_words`.
  __device__ __forceinline__ static bool covers(const std::uint32_t (&block_words)[WordsPerBlock],
                                                const std::uint32_t (&masks)[WordsPerBlock]) {
    bool all = true;
#pragma unroll
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) all &= (block_words[w] & masks[w]) == masks[w];
    return all;
  }

  /// Sets the bits of the key with hash `h`.
  __device__ __forceinline__ void add_hash(std::uint64_t h) const {
    std::uint32_t masks[WordsPerBlock];
    masks_of(h, masks);
    or_block(block_of(h), masks);
  }

  /// True when all bits of the key with hash `h` are set (false: definitely absent).
  __device__ __forceinline__ bool contains_hash(std::uint64_t h) const {
    std::uint32_t block_words[WordsPerBlock];
    load_block(block_of(h), block_words);
    std::uint32_t masks[WordsPerBlock];
    masks_of(h, masks);
    return covers(block_words, masks);
  }

  /// Sets the bits of `key` (a 32- or 64-bit integer).
  template <class Key>
  __device__ __forceinline__ void add(Key key) const {
    add_hash(hash(key));
  }

  /// True when `key` may be present; false means it was never added.
  template <class Key>
  __device__ __forceinline__ bool contains(Key key) const {
    return contains_hash(hash(key));
  }

  /// Device address of the bit array.
  __host__ __device__ std::uint32_t* words() const { return words_; }
  /// Number of blocks.
  __host__ __device__ std::uint64_t num_blocks() const { return num_blocks_; }
  /// Bits set per key (k).
  __host__ __device__ std::uint32_t bits_per_key() const { return bits_per_key_; }
  /// xxh64 seed.
  __host__ __device__ std::uint64_t seed() const { return seed_; }

 private:
  // Bytes of the widest load of one block, hence the bit array's required alignment.
  static constexpr std::uint32_t vector_bytes =
      (WordsPerBlock < 4 ? WordsPerBlock : 4) * bytes_per_word;

  std::uint32_t* words_;
  std::uint64_t num_blocks_;
  std::uint32_t bits_per_key_;
  std::uint64_t seed_;
};

// Kernels receive the view by value: it must stay a plain bundle of values.
static_assert(std::is_trivially_copyable_v<device_ref<8>>,
              "device_ref is passed to kernels by value");

}  // namespace gbf
