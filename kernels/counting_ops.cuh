// Device side of the counting filter's kernels (counting.cu, counting_remove.cu):
// a view of the counter array that applies gbf/counting_layout.hpp's word
// functions to one key's counters. Internal to kernels/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gbf/counting_layout.hpp"
#include "gbf/layout.hpp"

namespace gbf::detail::gpu::counting {

/// The counters of a filter of W words per block, by value in kernel arguments.
template <std::uint32_t W>
struct counter_view {
  std::uint32_t* counters;
  std::uint64_t num_blocks;
  std::uint64_t seed;
  std::uint32_t bits_per_key;
  std::uint32_t counter_bits;

  counter_view(std::uint32_t* words, const layout& l, std::uint32_t c)
      : counters(words), num_blocks(l.num_blocks), seed(l.seed), bits_per_key(l.bits_per_key),
        counter_bits(c) {}

  __device__ __forceinline__ std::uint64_t block_of(std::uint64_t h) const {
    return block_index(h, num_blocks);
  }

  /// Calls fn(counter word, fields) for every counter word of h's block that
  /// holds some of h's counters; `fields` has the low bit of each of them (all
  /// the key's counters in that word, so one CAS updates them together).
  template <class Fn>
  __device__ __forceinline__ void for_each_word(std::uint64_t h, const Fn& fn) const {
    std::uint32_t masks[W];
    block_masks<W>(h, bits_per_key, masks);
    std::uint32_t* const block = counters + block_of(h) * counter_words_per_block(W, counter_bits);
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) {
      for (std::uint32_t j = 0; j < counter_bits; ++j) {
        const std::uint32_t fields = mask_fields(masks[w], j, counter_bits);
        if (fields != 0) fn(block + w * counter_bits + j, fields);
      }
    }
  }

  /// Saturating increment (decrement when `down`) of the fields of *word, by CAS loop.
  __device__ __forceinline__ void update(std::uint32_t* word, std::uint32_t fields,
                                         bool down) const {
    std::uint32_t old = *reinterpret_cast<volatile std::uint32_t*>(word);
    while (true) {
      const std::uint32_t next = down ? decrement_fields(old, fields, counter_bits)
                                      : increment_fields(old, fields, counter_bits);
      if (next == old) return;  // every field saturated (or at 0 for a decrement)
      const std::uint32_t seen = atomicCAS(word, old, next);
      if (seen == old) return;
      old = seen;
    }
  }

  __device__ __forceinline__ void increment(std::uint64_t h) const {
    for_each_word(h, [&](std::uint32_t* word, std::uint32_t fields) { update(word, fields, false); });
  }

  __device__ __forceinline__ void decrement(std::uint64_t h) const {
    for_each_word(h, [&](std::uint32_t* word, std::uint32_t fields) { update(word, fields, true); });
  }

  /// All of h's counters are nonzero. No early exit: the key's words are few,
  /// and the loads of all of them are in flight together.
  __device__ __forceinline__ bool contains(std::uint64_t h) const {
    bool all = true;
    for_each_word(h, [&](std::uint32_t* word, std::uint32_t fields) {
      const std::uint32_t value = *word;
      all &= (nonzero_fields(value, counter_bits) & fields) == fields;
    });
    return all;
  }

  /// The smallest of h's counters.
  __device__ __forceinline__ std::uint32_t minimum(std::uint64_t h) const {
    std::uint32_t least = counter_max(counter_bits);
    for_each_word(h, [&](std::uint32_t* word, std::uint32_t fields) {
      const std::uint32_t value = *word;
      for (std::uint32_t f = fields; f != 0; f &= f - 1) {
        const std::uint32_t v = counter_at(value, static_cast<std::uint32_t>(__ffs(f) - 1), counter_bits);
        least = v < least ? v : least;
      }
    });
    return least;
  }
};

}  // namespace gbf::detail::gpu::counting
