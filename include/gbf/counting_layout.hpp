// The counting filter's counter layout: where the counter of each bit of the
// plain layout (gbf/layout.hpp) lives, and the saturating word arithmetic
// every backend uses on it. Host and device (__host__ __device__); the CUDA
// kernels and the CPU kernels call these functions, none re-derives them.
//
// Every bit of the plain layout becomes a counter of c bits (c = 4, the
// default, or 8). Word w of block B of the plain layout becomes c consecutive
// 32-bit counter words, F = 32 / c counters each:
//
//   counter of bit b of word w of block B:
//     counter word  = (B * W + w) * c + b / F
//     shift         = (b mod F) * c            (field (word >> shift) & (2^c - 1))
//
// so block B's counters are the W * c consecutive words from B * W * c, and
// the counters of word w are its bits in order, F to a counter word. A key
// touches the counters of the bits its masks set (gbf::block_masks: probes of
// one key that land on the same bit count once), all in its own block.
//
// Price. A counting filter is c times the plain filter of the same layout: 4x
// with 4-bit counters. With the default W = 8 a block's counters are 128 bytes,
// one GPU cache line of 4 sectors (a probe touches the sector pair of each word
// it reads) and two 64-byte CPU lines; its projection (counter != 0 -> bit set)
// is exactly the plain filter, so its false-positive rate is the plain
// filter's. 4 bits is the classic choice (Fan, Cao, Almeida, Broder, "Summary
// Cache", 2000): at design load a counter's expected value is below 1 and the
// chance that one reaches 15 is about 1e-15 (docs/counting.md works it out for
// gbf's layouts); 8-bit counters are for multisets where one key is added many
// times (a key added 15 times saturates its 4-bit counters).
//
// Saturation (the standard rule): a counter at its maximum 2^c - 1 never
// changes again, neither up nor down, so overflow can never cause a false
// negative. Below the maximum an increment adds 1; a decrement of a counter at
// 0 does nothing. The word functions below update all the fields of a word at
// once and never carry or borrow into a neighbouring field. Saturating
// increments commute, and so do floored decrements of counters below the
// maximum, so the order of the keys within one batch of adds (or of removes)
// never changes the result.
#pragma once

#include <cstdint>

#include "gbf/detail/config.hpp"
#include "gbf/layout.hpp"

namespace gbf {

/// Counter width of a counting filter unless asked otherwise.
inline constexpr std::uint32_t default_counter_bits = 4;

/// True when `counter_bits` is a supported counter width (4 or 8).
GBF_HD constexpr bool is_valid_counter_bits(std::uint32_t counter_bits) {
  return counter_bits == 4 || counter_bits == 8;
}

/// Counters in one 32-bit counter word: F = 32 / c (8 or 4).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counters_per_word(std::uint32_t counter_bits) {
  return bits_per_word / counter_bits;
}

/// The largest (saturated) counter value, 2^c - 1 (15 or 255).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counter_max(std::uint32_t counter_bits) {
  return (1u << counter_bits) - 1;
}

/// Counter words of a counting filter of layout `l`: l.num_words() * c.
GBF_HD constexpr std::uint64_t num_counter_words(const layout& l, std::uint32_t counter_bits) {
  return l.num_words() * counter_bits;
}

/// Bytes of a counting filter's counters: c times the plain filter's bytes.
GBF_HD constexpr std::uint64_t counter_bytes(const layout& l, std::uint32_t counter_bits) {
  return num_counter_words(l, counter_bits) * bytes_per_word;
}

/// Counter words of one block: W * c.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counter_words_per_block(
    std::uint32_t words_per_block, std::uint32_t counter_bits) {
  return words_per_block * counter_bits;
}

/// Index, within its block's W * c counter words, of the word holding the
/// counter of bit `bit` of plain word `w`: w * c + bit / F.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counter_word_in_block(std::uint32_t w,
                                                                     std::uint32_t bit,
                                                                     std::uint32_t counter_bits) {
  return w * counter_bits + bit / counters_per_word(counter_bits);
}

/// Index in the whole counter array of the word holding the counter of bit
/// `bit` of word `w` of block `block`.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t counter_word_index(std::uint64_t block,
                                                                  std::uint32_t w,
                                                                  std::uint32_t bit,
                                                                  std::uint32_t words_per_block,
                                                                  std::uint32_t counter_bits) {
  return block * counter_words_per_block(words_per_block, counter_bits) +
         counter_word_in_block(w, bit, counter_bits);
}

/// Shift of the counter of bit `bit` inside its counter word: (bit mod F) * c.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counter_shift(std::uint32_t bit,
                                                             std::uint32_t counter_bits) {
  return (bit % counters_per_word(counter_bits)) * counter_bits;
}

/// The counter at `shift` of counter word `word`.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t counter_at(std::uint32_t word, std::uint32_t shift,
                                                          std::uint32_t counter_bits) {
  return (word >> shift) & counter_max(counter_bits);
}

/// The lowest bit of every field: 0x11111111 (c = 4) or 0x01010101 (c = 8).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t field_low_bits(std::uint32_t counter_bits) {
  return counter_bits == 4 ? 0x11111111u : 0x01010101u;
}

/// The low bit of every nonzero field of `word`. With H the fields' top bits
/// and M = ~H: (word & M) + M cannot carry out of a field (at most 2^c - 2) and
/// has the top bit set exactly when the field's low c - 1 bits are not all 0;
/// OR-ing the word adds the fields whose top bit is set.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t nonzero_fields(std::uint32_t word,
                                                              std::uint32_t counter_bits) {
  const std::uint32_t high = field_low_bits(counter_bits) << (counter_bits - 1);
  const std::uint32_t low_part = ~high;
  return ((((word & low_part) + low_part) | word) & high) >> (counter_bits - 1);
}

/// The low bit of every saturated field (all ones) of `word`.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t saturated_fields(std::uint32_t word,
                                                                std::uint32_t counter_bits) {
  return field_low_bits(counter_bits) & ~nonzero_fields(~word, counter_bits);
}

/// Bit i of `bits` (i < F) moved to bit i * c, the low bit of field i
/// (a mask part in counter-field form).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t spread_bits(std::uint32_t bits,
                                                           std::uint32_t counter_bits) {
  if (counter_bits == 4) {
    std::uint32_t x = bits & 0xffu;
    x = (x | (x << 12)) & 0x000f000fu;
    x = (x | (x << 6)) & 0x03030303u;
    return (x | (x << 3)) & 0x11111111u;
  }
  std::uint32_t x = bits & 0xfu;
  x = (x | (x << 14)) & 0x00030003u;
  return (x | (x << 7)) & 0x01010101u;
}

/// The inverse of spread_bits: the low bit of field i moved to bit i.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t gather_fields(std::uint32_t flags,
                                                             std::uint32_t counter_bits) {
  if (counter_bits == 4) {
    std::uint32_t x = flags & 0x11111111u;
    x = (x | (x >> 3)) & 0x03030303u;
    x = (x | (x >> 6)) & 0x000f000fu;
    return (x | (x >> 12)) & 0xffu;
  }
  std::uint32_t x = flags & 0x01010101u;
  x = (x | (x >> 7)) & 0x00030003u;
  return (x | (x >> 14)) & 0xfu;
}

/// The bits of a plain mask that counter word j (0 <= j < c) of its word
/// covers, as a counter-field increment: spread_bits(mask >> (j * F)).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t mask_fields(std::uint32_t mask, std::uint32_t j,
                                                           std::uint32_t counter_bits) {
  return spread_bits(mask >> (j * counters_per_word(counter_bits)), counter_bits);
}

/// `word` with 1 added to each field whose low bit is in `ones`, except the
/// saturated ones (no carry: every field incremented is below its maximum).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t increment_fields(std::uint32_t word,
                                                                std::uint32_t ones,
                                                                std::uint32_t counter_bits) {
  return word + (ones & ~saturated_fields(word, counter_bits));
}

/// `word` with 1 taken from each field whose low bit is in `ones`, except the
/// saturated fields and those at 0 (no borrow: every field decremented is >= 1).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t decrement_fields(std::uint32_t word,
                                                                std::uint32_t ones,
                                                                std::uint32_t counter_bits) {
  return word - (ones & nonzero_fields(word, counter_bits) & ~saturated_fields(word, counter_bits));
}

/// Field-wise min(a + b, 2^c - 1): the counters of a merge.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t add_fields_saturating(std::uint32_t a,
                                                                     std::uint32_t b,
                                                                     std::uint32_t counter_bits) {
  const std::uint32_t max = counter_max(counter_bits);
  std::uint32_t out = 0;
  for (std::uint32_t shift = 0; shift < bits_per_word; shift += counter_bits) {
    const std::uint32_t sum = ((a >> shift) & max) + ((b >> shift) & max);
    out |= (sum < max ? sum : max) << shift;
  }
  return out;
}

/// Field-wise min(a, b): the counters of an intersection (a key counted in both
/// keeps every counter of its bits nonzero, so it stays present).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t min_fields(std::uint32_t a, std::uint32_t b,
                                                          std::uint32_t counter_bits) {
  const std::uint32_t max = counter_max(counter_bits);
  std::uint32_t out = 0;
  for (std::uint32_t shift = 0; shift < bits_per_word; shift += counter_bits) {
    const std::uint32_t x = (a >> shift) & max;
    const std::uint32_t y = (b >> shift) & max;
    out |= (x < y ? x : y) << shift;
  }
  return out;
}

/// The bits of the projection (counter != 0) that counter word j of a plain
/// word holds, in place in that plain word: gather_fields(nonzero) << (j * F).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t projected_bits(std::uint32_t counter_word,
                                                              std::uint32_t j,
                                                              std::uint32_t counter_bits) {
  return gather_fields(nonzero_fields(counter_word, counter_bits), counter_bits)
         << (j * counters_per_word(counter_bits));
}

/// nullptr when (l, counter_bits) is a valid counting layout, else what is wrong.
GBF_HD constexpr const char* counting_layout_problem(const layout& l, std::uint32_t counter_bits) {
  if (const char* problem = layout_problem(l)) return problem;
  if (!is_valid_counter_bits(counter_bits)) return "counter_bits must be 4 or 8";
  return nullptr;
}

}  // namespace gbf
