// The gbf bit layout: the single source of truth for where a key's bits live.
//
// Every backend (CUDA kernels, CPU AVX2, CPU scalar) and every file format
// calls these functions; none re-derives the math.
//
// A filter is `num_blocks` blocks of `words_per_block` (W) 32-bit words.
// A key with 64-bit hash h = xxh64(key bytes, seed):
//   block  = ((h >> 32) * num_blocks) >> 32         multiply-shift, any num_blocks <= 2^32
//   probe j in [0, k):  word  = j mod W
//                       bit   = ((uint32_t)h * salt(j)) >> 27
//   add:      word[w] |= mask[w]          (atomic OR where threads share words)
//   contains: (word[w] & mask[w]) == mask[w] for every w
//
// With W = 8, k = 8 and seed 0 this is bit for bit the Apache Parquet
// split-block Bloom filter (SBBF): salts 0..7 are the eight constants of the
// Parquet format spec (BloomFilter.md), one bit per word, 256-bit blocks.
//
// gbf extensions (documented in docs/layout.md, tested like the default):
//   * W in {1, 2, 4, 8, 16}; k in [W, 32]. Requiring k >= W keeps every word
//     of a block in use (a word that never receives a probe is dead space).
//   * When k > W, probe j lands in word j mod W, so words get floor(k/W) or
//     ceil(k/W) bits each; probes of one key may hit the same bit.
//   * Salts 8..31 are gbf's own: odd 32-bit constants, the high halves of
//     SplitMix64(8..31) with the low bit forced to 1 (odd multipliers make
//     h32 -> h32 * salt a bijection, so every salt spreads bits evenly).
//
// Reference FPR (sizing.hpp computes it exactly): W = k = 8 at 10.0 bits/key
// gives 1.26%; a classic Bloom filter with the optimal k at the same bits/key
// gives 0.82%. Meeting 1% takes 10.5 bits/key here versus 9.6 classic: that gap
// is the space price of touching one 32-byte sector per key.
#pragma once

#include <cstdint>

#include "gbf/detail/config.hpp"

namespace gbf {

/// Identifies the key hash function; stored in every filter and file.
enum class hash_id : std::uint32_t { xxh64 = 1 };

inline constexpr std::uint32_t bits_per_word = 32;
inline constexpr std::uint32_t bytes_per_word = 4;
inline constexpr std::uint32_t max_bits_per_key = 32;
/// Multiply-shift indexes blocks with a 32-bit fraction, hence the cap.
inline constexpr std::uint64_t max_num_blocks = std::uint64_t{1} << 32;

/// The geometry and hash of a filter; a value type compared before any merge.
struct layout {
  std::uint32_t words_per_block = 8;  ///< W: 32-bit words per block, one of 1, 2, 4, 8, 16.
  std::uint32_t bits_per_key = 8;     ///< k: bits set per key, W <= k <= 32.
  std::uint64_t seed = 0;             ///< xxh64 seed (Parquet uses 0).
  std::uint64_t num_blocks = 1;       ///< Blocks in the filter, 1 <= num_blocks <= 2^32.
  hash_id hash = hash_id::xxh64;      ///< Key hash function.

  /// Total 32-bit words in the filter.
  GBF_HD constexpr std::uint64_t num_words() const { return num_blocks * words_per_block; }
  /// Total bits in the filter.
  GBF_HD constexpr std::uint64_t num_bits() const { return num_words() * bits_per_word; }
  /// Size of the bit array in bytes.
  GBF_HD constexpr std::uint64_t size_bytes() const { return num_words() * bytes_per_word; }

  friend GBF_HD constexpr bool operator==(const layout& a, const layout& b) {
    return a.words_per_block == b.words_per_block && a.bits_per_key == b.bits_per_key &&
           a.seed == b.seed && a.num_blocks == b.num_blocks && a.hash == b.hash;
  }
  friend GBF_HD constexpr bool operator!=(const layout& a, const layout& b) { return !(a == b); }
};

/// True when `words_per_block` is one of the supported block widths.
GBF_HD constexpr bool is_valid_words_per_block(std::uint32_t words_per_block) {
  return words_per_block == 1 || words_per_block == 2 || words_per_block == 4 ||
         words_per_block == 8 || words_per_block == 16;
}

/// nullptr when `l` is a valid layout, otherwise a sentence naming what is wrong.
GBF_HD constexpr const char* layout_problem(const layout& l) {
  if (!is_valid_words_per_block(l.words_per_block))
    return "words_per_block must be one of 1, 2, 4, 8, 16";
  if (l.bits_per_key < l.words_per_block)
    return "bits_per_key must be at least words_per_block (every word of a block gets a bit)";
  if (l.bits_per_key > max_bits_per_key) return "bits_per_key must be at most 32";
  if (l.num_blocks == 0) return "num_blocks must be at least 1";
  if (l.num_blocks > max_num_blocks) return "num_blocks must be at most 2^32";
  if (l.hash != hash_id::xxh64) return "unknown hash id (only xxh64 = 1 is defined)";
  return nullptr;
}

/// The multiplier of probe `j` (0 <= j < 32); 0..7 are Parquet SBBF's salts.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t salt(std::uint32_t j) {
  constexpr std::uint32_t table[max_bits_per_key] = {
      // Parquet BloomFilter.md, SALT[0..7].
      0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
      0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U,
      // gbf: (SplitMix64(i) >> 32) | 1 for i = 8..31.
      0x9e5651b1U, 0xaeaf52ffU, 0x088712bfU, 0x50f5647dU,
      0x943ff9fdU, 0xc4ca37b7U, 0x6aa9d615U, 0x875b9307U,
      0x5de186ddU, 0x808475f1U, 0x1120b3d1U, 0xbc4075f3U,
      0x36225991U, 0x06ca0a95U, 0xc80de0f9U, 0xe8d7da01U,
      0xaac8c001U, 0xa208c12dU, 0xc3b7f4e9U, 0x974e3533U,
      0x905c768bU, 0xbb7b49abU, 0xa8ee577bU, 0xd7599677U};
  return table[j];
}

/// Block of hash `h` in a filter of `num_blocks` blocks: ((h >> 32) * num_blocks) >> 32.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t block_index(std::uint64_t h,
                                                           std::uint64_t num_blocks) {
  return ((h >> 32) * num_blocks) >> 32;
}

/// Bit (0..31) that probe `j` of hash `h` sets in its word.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t probe_bit(std::uint64_t h, std::uint32_t j) {
  return (static_cast<std::uint32_t>(h) * salt(j)) >> 27;
}

/// Masks of the W words of h's block for k bits per key (W known at compile time,
/// the probe loop fully unrolled so salts become immediates on the GPU).
template <std::uint32_t WordsPerBlock>
GBF_HD GBF_FORCEINLINE void block_masks(std::uint64_t h, std::uint32_t bits_per_key,
                                        std::uint32_t (&masks)[WordsPerBlock]) {
  static_assert(WordsPerBlock == 1 || WordsPerBlock == 2 || WordsPerBlock == 4 ||
                    WordsPerBlock == 8 || WordsPerBlock == 16,
                "words per block must be 1, 2, 4, 8 or 16");
  // Probes 0..W-1 always exist (k >= W): one per word.
  GBF_UNROLL
  for (std::uint32_t w = 0; w < WordsPerBlock; ++w) masks[w] = 1u << probe_bit(h, w);
  // Probes W..k-1 wrap around the words; the loop bound is the constant 32 so
  // that j (and j mod W) are compile-time after unrolling.
  GBF_UNROLL
  for (std::uint32_t j = WordsPerBlock; j < max_bits_per_key; ++j) {
    if (j < bits_per_key) masks[j % WordsPerBlock] |= 1u << probe_bit(h, j);
  }
}

/// Mask of word `w` of h's block, for any runtime W and k (the portable path).
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t word_mask(std::uint64_t h, std::uint32_t w,
                                                         std::uint32_t words_per_block,
                                                         std::uint32_t bits_per_key) {
  std::uint32_t mask = 0;
  for (std::uint32_t j = w; j < bits_per_key; j += words_per_block) mask |= 1u << probe_bit(h, j);
  return mask;
}

/// Probes that land in word `w` of a block: floor(k/W), plus one for w < k mod W.
GBF_HD constexpr std::uint32_t probes_in_word(std::uint32_t w, std::uint32_t words_per_block,
                                              std::uint32_t bits_per_key) {
  return bits_per_key / words_per_block + (w < bits_per_key % words_per_block ? 1u : 0u);
}

}  // namespace gbf
