// CPU kernels of the counting filter: the per-key counter work on one block
// (gbf/counting_layout.hpp) run by the shared batch loop (host/cpu/key_loop.hpp).
// Internal to host/cpu/counting_backend.cpp, which adds memory, threads and the
// backend API.
//
// A key's counters are those of the bits its masks set (gbf::block_masks), all
// in its block's W * c counter words. Each kernel walks the set bits of the
// masks: with the default k = W that is one bit per word, a loop the branch
// predictor learns. contains does not stop at the first zero counter: the
// block's lines were prefetched together, and a data-dependent exit would
// mispredict on about half of the absent keys.
//
// Two kernels, as for the plain filter (host/cpu/bloom_kernels.hpp): the
// portable one above, and for W = 8 and 16 an AVX2 one that updates a whole
// block's counters in registers (avx2_counting_block, below). Both compute
// the same words: the AVX2 kernel is the word functions of
// gbf/counting_layout.hpp applied 8 counter words at a time.
//
// Writes are plain loads and stores: the backend runs the writing operations
// on threads that own disjoint block ranges (host/cpu/owned_blocks.hpp), so no
// two threads ever touch one counter word.
//
// The projection. The CPU backend keeps, beside the counters, the plain bit
// array they project to (bit set <=> its counter is nonzero) and probes that
// instead of the counters: one 32-byte block per key instead of two 64-byte
// lines of counters, so contains costs what the plain filter's does. Every
// write keeps it exact: add sets the key's bits (its counters are all nonzero
// afterwards), a remove re-derives the key's bits from its counters. The block
// owner that writes a key's counters also writes its projection block, so the
// projection needs no atomics either.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "gbf/layout.hpp"
#include "host/cpu/bloom_kernels.hpp"
#include "host/cpu/key_loop.hpp"

namespace gbf::detail::cpu {

/// What a pass over a batch does with each key's counters.
enum class counting_op {
  add,               ///< Increment every counter (saturating).
  remove_unchecked,  ///< Decrement every counter (floored at 0; saturated stay).
  remove_checked,    ///< When all are nonzero, decrement; else refuse. Returns the refusals.
  approximate_count  ///< counts[i] = the smallest counter.
};

/// One pass of an operation over a key range.
template <class Hashes>
struct counting_job {
  counting_op op;
  key_range<Hashes> keys;
  std::uint32_t* counters;
  std::uint32_t bits_per_key;
  std::uint32_t counter_bits;
  std::uint32_t* projection;  ///< The plain words the counters project to, kept in step (may be null).
  bool* results;              ///< remove_checked: removed (may be null).
  std::uint8_t* counts;       ///< approximate_count.
};

/// The counter work on one block, W and c fixed at compile time (so that the
/// field positions, b / F and (b mod F) * c, are shifts and masks).
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits>
struct counting_block {
  static constexpr std::uint32_t words_per_block = WordsPerBlock;
  static constexpr std::uint32_t c = CounterBits;

  /// Calls fn(word index in the block, shift) for the counter of every bit of h's masks.
  /// With k = W (the default) a key has one bit per word, probe w's, computed
  /// directly; otherwise the set bits of the masks (probes on one bit count once).
  template <class Fn>
  static GBF_FORCEINLINE void for_each_position(std::uint64_t h, std::uint32_t bits_per_key,
                                                const Fn& fn) {
    if (bits_per_key == WordsPerBlock) {
      for (std::uint32_t w = 0; w < WordsPerBlock; ++w) fn(w, probe_bit(h, w));
      return;
    }
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, bits_per_key, masks);
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
      for (std::uint32_t m = masks[w]; m != 0; m &= m - 1)
        fn(w, static_cast<std::uint32_t>(__builtin_ctz(m)));
    }
  }

  /// fn(counter word in the block, shift) for each counter of the key.
  template <class Fn>
  static GBF_FORCEINLINE void for_each_counter(std::uint64_t h, std::uint32_t bits_per_key,
                                               const Fn& fn) {
    for_each_position(h, bits_per_key, [&](std::uint32_t w, std::uint32_t bit) {
      fn(counter_word_in_block(w, bit, c), counter_shift(bit, c));
    });
  }

  /// After an add: the key's bits of its projection block are set.
  static void project_add(std::uint32_t* bits, std::uint64_t h, std::uint32_t k) {
    for_each_position(h, k, [&](std::uint32_t w, std::uint32_t bit) { bits[w] |= 1u << bit; });
  }

  /// After a remove: each of the key's bits is (its counter != 0) again.
  static void project_remove(const std::uint32_t* block, std::uint32_t* bits, std::uint64_t h,
                             std::uint32_t k) {
    for_each_position(h, k, [&](std::uint32_t w, std::uint32_t bit) {
      const std::uint32_t live =
          counter_at(block[counter_word_in_block(w, bit, c)], counter_shift(bit, c), c) != 0 ? 1u : 0u;
      bits[w] = (bits[w] & ~(1u << bit)) | (live << bit);
    });
  }

  static bool contains(const std::uint32_t* block, std::uint64_t h, std::uint32_t k) {
    bool all = true;
    for_each_counter(h, k, [&](std::uint32_t word, std::uint32_t shift) {
      all &= counter_at(block[word], shift, c) != 0;
    });
    return all;
  }

  static std::uint32_t minimum(const std::uint32_t* block, std::uint64_t h, std::uint32_t k) {
    std::uint32_t least = counter_max(c);
    for_each_counter(h, k, [&](std::uint32_t word, std::uint32_t shift) {
      const std::uint32_t value = counter_at(block[word], shift, c);
      least = value < least ? value : least;
    });
    return least;
  }

  static void increment(std::uint32_t* block, std::uint64_t h, std::uint32_t k) {
    for_each_counter(h, k, [&](std::uint32_t word, std::uint32_t shift) {
      block[word] = increment_fields(block[word], 1u << shift, c);
    });
  }

  static void decrement(std::uint32_t* block, std::uint64_t h, std::uint32_t k) {
    for_each_counter(h, k, [&](std::uint32_t word, std::uint32_t shift) {
      block[word] = decrement_fields(block[word], 1u << shift, c);
    });
  }

  // A key's whole write: its counters, then its projection block `bits` (may be null).
  static void add(std::uint32_t* block, std::uint32_t* bits, std::uint64_t h, std::uint32_t k) {
    increment(block, h, k);
    if (bits != nullptr) project_add(bits, h, k);
  }
  static void remove(std::uint32_t* block, std::uint32_t* bits, std::uint64_t h, std::uint32_t k) {
    decrement(block, h, k);
    if (bits != nullptr) project_remove(block, bits, h, k);
  }
  /// A checked remove: removes the key when all its counters are nonzero; returns whether it did.
  static bool remove_if_present(std::uint32_t* block, std::uint32_t* bits, std::uint64_t h,
                                std::uint32_t k) {
    if (!contains(block, h, k)) return false;
    remove(block, bits, h, k);
    return true;
  }
};

#if GBF_CPU_X86
/// The AVX2 counter kernel for W = 8 and 16. A block's W * c counter words
/// fill W * c / 8 registers; lane L of register r is counter word 8r + L, the
/// counter word j = (8r + L) mod c of plain word w = (8r + L) / c, which holds
/// the counters of that word's bits jF .. jF + F - 1 (F = 32 / c). For every
/// register the kernel builds `ones`, the low bit of each field whose counter
/// the key touches (the argument of increment_fields / decrement_fields), from
/// the plain kernel's probes (avx2_block) with one lane permute:
/// - k = W (the default): one probe per word, at bit b; its field in counter
///   word j is at shift c * (b - jF) when 0 <= b - jF < F. A variable shift
///   by c * (b - jF) of a 1 gives exactly that, and 0 in the other lanes of
///   the word, since AVX2 variable shifts by 32 or more (as unsigned: a
///   negative b - jF too) give 0;
/// - any k: the word's mask shifted down by jF, its low F bits spread one to
///   a field (spread_bits, 8 lanes at a time).
/// Then the fields are updated with the word functions of
/// gbf/counting_layout.hpp, written here for 8 lanes.
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits>
struct avx2_counting_block {
  static_assert(WordsPerBlock == 8 || WordsPerBlock == 16,
                "AVX2 kernels hold a block's probes in one or two 256-bit registers");
  static_assert(CounterBits == 4 || CounterBits == 8, "counters are 4 or 8 bits");
  static constexpr std::uint32_t words_per_block = WordsPerBlock;
  static constexpr std::uint32_t c = CounterBits;
  using probes = avx2_block<WordsPerBlock>;
  using scalar = counting_block<WordsPerBlock, CounterBits>;
  static constexpr std::uint32_t lanes = 8;
  static constexpr std::uint32_t probe_vectors = WordsPerBlock / lanes;
  static constexpr std::uint32_t counter_vectors = WordsPerBlock * c / lanes;
  static constexpr std::uint32_t fields = counters_per_word(c);  // F
  static constexpr int log2_c = c == 4 ? 2 : 3;

  /// Per counter register r, lane L: the lane of the probe register holding
  /// its plain word, and jF, the first plain bit its counter word covers.
  struct lane_tables {
    alignas(32) std::uint32_t probe_lane[counter_vectors * lanes];
    alignas(32) std::uint32_t first_bit[counter_vectors * lanes];
  };
  static constexpr lane_tables make_lane_tables() {
    lane_tables t{};
    for (std::uint32_t i = 0; i < counter_vectors * lanes; ++i) {
      t.probe_lane[i] = (i / c) % lanes;
      t.first_bit[i] = (i % c) * fields;
    }
    return t;
  }
  static constexpr lane_tables tables = make_lane_tables();

  GBF_TARGET_AVX2 static __m256i table(const std::uint32_t* row, std::uint32_t r) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(row + r * lanes));
  }
  GBF_TARGET_AVX2 static __m256i load(const std::uint32_t* words, std::uint32_t r) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(words) + r);
  }
  GBF_TARGET_AVX2 static void store(std::uint32_t* words, std::uint32_t r, __m256i value) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(words) + r, value);
  }

  // The word functions of gbf/counting_layout.hpp, 8 words at a time.
  GBF_TARGET_AVX2 static __m256i low_bits() {
    return _mm256_set1_epi32(static_cast<int>(field_low_bits(c)));
  }
  GBF_TARGET_AVX2 static __m256i nonzero_fields(__m256i word) {
    const __m256i high = _mm256_slli_epi32(low_bits(), c - 1);
    const __m256i low_part = _mm256_xor_si256(high, _mm256_set1_epi32(-1));
    const __m256i sum = _mm256_add_epi32(_mm256_and_si256(word, low_part), low_part);
    return _mm256_srli_epi32(_mm256_and_si256(_mm256_or_si256(sum, word), high), c - 1);
  }
  /// Lanes: the low bit of every field that is not saturated (~saturated_fields).
  GBF_TARGET_AVX2 static __m256i unsaturated_fields(__m256i word) {
    return nonzero_fields(_mm256_xor_si256(word, _mm256_set1_epi32(-1)));
  }
  /// One step of spread_bits: (x | x << shift) & mask.
  GBF_TARGET_AVX2 static __m256i spread_step(__m256i x, int shift, std::uint32_t mask) {
    return _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi32(x, shift)),
                            _mm256_set1_epi32(static_cast<int>(mask)));
  }
  GBF_TARGET_AVX2 static __m256i spread_bits(__m256i bits) {
    if constexpr (c == 4) {
      __m256i x = _mm256_and_si256(bits, _mm256_set1_epi32(0xff));
      x = spread_step(x, 12, 0x000f000fu);
      x = spread_step(x, 6, 0x03030303u);
      return spread_step(x, 3, 0x11111111u);
    } else {
      __m256i x = _mm256_and_si256(bits, _mm256_set1_epi32(0xf));
      x = spread_step(x, 14, 0x00030003u);
      return spread_step(x, 7, 0x01010101u);
    }
  }

  /// The key's `ones`, one register per counter register, and its plain masks.
  GBF_TARGET_AVX2 static void probe(std::uint64_t h, std::uint32_t bits_per_key,
                                    __m256i (&ones)[counter_vectors],
                                    __m256i (&masks)[probe_vectors]) {
    if (bits_per_key == WordsPerBlock) {
      const __m256i h32 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(h)));
      __m256i position[probe_vectors];
      for (std::uint32_t v = 0; v < probe_vectors; ++v) {
        position[v] = probes::probe_positions(h32, v * lanes);
        masks[v] = _mm256_sllv_epi32(_mm256_set1_epi32(1), position[v]);
      }
      for (std::uint32_t r = 0; r < counter_vectors; ++r) {
        const __m256i bit = _mm256_permutevar8x32_epi32(position[r * lanes / c / lanes],
                                                        table(tables.probe_lane, r));
        const __m256i shift =
            _mm256_slli_epi32(_mm256_sub_epi32(bit, table(tables.first_bit, r)), log2_c);
        ones[r] = _mm256_sllv_epi32(_mm256_set1_epi32(1), shift);
      }
      return;
    }
    probes::masks(h, bits_per_key, masks);
    for (std::uint32_t r = 0; r < counter_vectors; ++r) {
      const __m256i mask = _mm256_permutevar8x32_epi32(masks[r * lanes / c / lanes],
                                                       table(tables.probe_lane, r));
      ones[r] = spread_bits(_mm256_srlv_epi32(mask, table(tables.first_bit, r)));
    }
  }

  // k = W, the default, for the operations that read the key's counters
  // (removes, minimum): its W counters lie in W distinct counter words, one
  // per plain word, so the kernel gathers those W words into W / 8 registers
  // (one lane per probe) and writes them back lane by lane, instead of
  // updating every counter register of the block.

  /// Lane i of register v is probe 8v + i of the key (plain word 8v + i, at
  /// bit b): `index`, the block's counter word holding its counter,
  /// counter_word_in_block(w, b, c); `shift`, counter_shift(b, c); `masks`, 1 << b.
  GBF_TARGET_AVX2 static void probe_one_per_word(std::uint64_t h,
                                                 __m256i (&index)[probe_vectors],
                                                 __m256i (&shift)[probe_vectors],
                                                 __m256i (&masks)[probe_vectors]) {
    const __m256i h32 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(h)));
    constexpr int log2_fields = c == 4 ? 3 : 2;
    for (std::uint32_t v = 0; v < probe_vectors; ++v) {
      const __m256i bit = probes::probe_positions(h32, v * lanes);
      const __m256i word = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i first = _mm256_slli_epi32(
          _mm256_add_epi32(word, _mm256_set1_epi32(static_cast<int>(v * lanes))), log2_c);
      index[v] = _mm256_add_epi32(first, _mm256_srli_epi32(bit, log2_fields));
      shift[v] = _mm256_slli_epi32(
          _mm256_and_si256(bit, _mm256_set1_epi32(static_cast<int>(fields - 1))), log2_c);
      masks[v] = _mm256_sllv_epi32(_mm256_set1_epi32(1), bit);
    }
  }
  GBF_TARGET_AVX2 static __m256i gather(const std::uint32_t* block, __m256i index) {
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(block), index, 4);
  }
  /// block[index lane i] = lane i of `words` (the lanes' words are distinct).
  GBF_TARGET_AVX2 static void scatter(std::uint32_t* block, __m256i index, __m256i words) {
    alignas(32) std::uint32_t at[lanes];
    alignas(32) std::uint32_t value[lanes];
    store(at, 0, index);
    store(value, 0, words);
    for (std::uint32_t i = 0; i < lanes; ++i) block[at[i]] = value[i];
  }
  /// The gathered words of a key present (all its counters nonzero) lose 1
  /// in each of its counters (decrement_fields), and its bits in `bits` (may
  /// be null) become (counter != 0).
  GBF_TARGET_AVX2 static void decrement_one_per_word(std::uint32_t* block, std::uint32_t* bits,
                                                     const __m256i (&index)[probe_vectors],
                                                     const __m256i (&shift)[probe_vectors],
                                                     const __m256i (&masks)[probe_vectors],
                                                     const __m256i (&words)[probe_vectors]) {
    for (std::uint32_t v = 0; v < probe_vectors; ++v) {
      const __m256i ones = _mm256_sllv_epi32(_mm256_set1_epi32(1), shift[v]);
      const __m256i movable =
          _mm256_and_si256(nonzero_fields(words[v]), unsaturated_fields(words[v]));
      const __m256i after = _mm256_sub_epi32(words[v], _mm256_and_si256(ones, movable));
      scatter(block, index[v], after);
      if (bits == nullptr) continue;
      // All ones in the lanes whose counter fell to 0.
      const __m256i dead =
          _mm256_cmpeq_epi32(_mm256_and_si256(ones, nonzero_fields(after)), _mm256_setzero_si256());
      store(bits, v, _mm256_or_si256(_mm256_andnot_si256(masks[v], load(bits, v)),
                                     _mm256_andnot_si256(dead, masks[v])));
    }
  }

  /// increment_fields on every counter of the key; its bits set in `bits` (may be null).
  GBF_TARGET_AVX2 static void add(std::uint32_t* block, std::uint32_t* bits, std::uint64_t h,
                                  std::uint32_t k) {
    __m256i ones[counter_vectors], masks[probe_vectors];
    probe(h, k, ones, masks);
    for (std::uint32_t r = 0; r < counter_vectors; ++r) {
      const __m256i word = load(block, r);
      store(block, r, _mm256_add_epi32(word, _mm256_and_si256(ones[r], unsaturated_fields(word))));
    }
    if (bits != nullptr)
      for (std::uint32_t v = 0; v < probe_vectors; ++v)
        store(bits, v, _mm256_or_si256(load(bits, v), masks[v]));
  }

  /// decrement_fields on every counter of the key (k > W); then its bits in
  /// `bits` (may be null) are re-derived from the counters by the scalar
  /// kernel. (Gathering them out of the registers instead measured no faster:
  /// a checked remove at 1 MiB, one thread, 34-39 ns a key against 34-46.)
  GBF_TARGET_AVX2 static void decrement(std::uint32_t* block, std::uint32_t* bits,
                                        std::uint64_t h, std::uint32_t k,
                                        const __m256i (&ones)[counter_vectors]) {
    for (std::uint32_t r = 0; r < counter_vectors; ++r) {
      const __m256i word = load(block, r);
      const __m256i movable = _mm256_and_si256(nonzero_fields(word), unsaturated_fields(word));
      store(block, r, _mm256_sub_epi32(word, _mm256_and_si256(ones[r], movable)));
    }
    if (bits != nullptr) scalar::project_remove(block, bits, h, k);
  }

  GBF_TARGET_AVX2 static void remove(std::uint32_t* block, std::uint32_t* bits, std::uint64_t h,
                                     std::uint32_t k) {
    if (k == WordsPerBlock) {
      __m256i index[probe_vectors], shift[probe_vectors], masks[probe_vectors], words[probe_vectors];
      probe_one_per_word(h, index, shift, masks);
      for (std::uint32_t v = 0; v < probe_vectors; ++v) words[v] = gather(block, index[v]);
      decrement_one_per_word(block, bits, index, shift, masks, words);
      return;
    }
    __m256i ones[counter_vectors], masks[probe_vectors];
    probe(h, k, ones, masks);
    decrement(block, bits, h, k, ones);
  }

  GBF_TARGET_AVX2 static bool remove_if_present(std::uint32_t* block, std::uint32_t* bits,
                                                std::uint64_t h, std::uint32_t k) {
    if (k == WordsPerBlock) {
      __m256i index[probe_vectors], shift[probe_vectors], masks[probe_vectors], words[probe_vectors];
      probe_one_per_word(h, index, shift, masks);
      int present = 1;
      for (std::uint32_t v = 0; v < probe_vectors; ++v) {
        words[v] = gather(block, index[v]);
        const __m256i ones = _mm256_sllv_epi32(_mm256_set1_epi32(1), shift[v]);
        present &= _mm256_testc_si256(nonzero_fields(words[v]), ones);
      }
      if (present == 0) return false;
      decrement_one_per_word(block, bits, index, shift, masks, words);
      return true;
    }
    __m256i ones[counter_vectors], masks[probe_vectors];
    probe(h, k, ones, masks);
    int present = 1;  // testc: (~nonzero & ones) == 0, every counter of the key nonzero
    for (std::uint32_t r = 0; r < counter_vectors; ++r)
      present &= _mm256_testc_si256(nonzero_fields(load(block, r)), ones[r]);
    if (present == 0) return false;
    decrement(block, bits, h, k, ones);
    return true;
  }

  /// The key's smallest counter: the fields it does not touch are raised to the
  /// maximum, then a byte-wise minimum over all registers (c = 4: over each
  /// byte's two nibbles first) and across the lanes.
  GBF_TARGET_AVX2 static std::uint32_t minimum(const std::uint32_t* block, std::uint64_t h,
                                               std::uint32_t k) {
    if (k == WordsPerBlock) {
      __m256i index[probe_vectors], shift[probe_vectors], masks[probe_vectors];
      probe_one_per_word(h, index, shift, masks);
      __m256i least = _mm256_set1_epi32(static_cast<int>(counter_max(c)));
      for (std::uint32_t v = 0; v < probe_vectors; ++v) {
        const __m256i counter = _mm256_and_si256(_mm256_srlv_epi32(gather(block, index[v]), shift[v]),
                                                 _mm256_set1_epi32(static_cast<int>(counter_max(c))));
        least = _mm256_min_epu32(least, counter);
      }
      __m128i m = _mm_min_epu32(_mm256_castsi256_si128(least), _mm256_extracti128_si256(least, 1));
      m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0x4e));
      m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0xb1));
      return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
    }
    __m256i ones[counter_vectors], masks[probe_vectors];
    probe(h, k, ones, masks);
    __m256i least = _mm256_set1_epi32(-1);
    for (std::uint32_t r = 0; r < counter_vectors; ++r) {
      // ones * (2^c - 1): the key's fields all ones; its complement marks the others.
      const __m256i own = _mm256_sub_epi32(_mm256_slli_epi32(ones[r], c), ones[r]);
      const __m256i raised = _mm256_or_si256(load(block, r), _mm256_xor_si256(own, _mm256_set1_epi32(-1)));
      if constexpr (c == 4) {
        const __m256i nibble = _mm256_set1_epi8(0x0f);
        least = _mm256_min_epu8(least, _mm256_and_si256(raised, nibble));
        least = _mm256_min_epu8(least, _mm256_and_si256(_mm256_srli_epi32(raised, 4), nibble));
      } else {
        least = _mm256_min_epu8(least, raised);
      }
    }
    __m128i m = _mm_min_epu8(_mm256_castsi256_si128(least), _mm256_extracti128_si256(least, 1));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 8));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 4));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 2));
    m = _mm_min_epu8(m, _mm_srli_si128(m, 1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m)) & 0xffu;
  }
};
#endif  // GBF_CPU_X86

/// Bytes of a block's counters the loop prefetches: all of them (W * c words).
inline std::size_t counter_block_bytes(std::uint32_t words_per_block, std::uint32_t counter_bits) {
  return std::size_t{counter_words_per_block(words_per_block, counter_bits)} * bytes_per_word;
}

/// Runs job.op over the job's keys with block kernel `Block`; returns
/// remove_checked's refusals, else 0. (contains, count and select probe the
/// projection with the plain filter's kernels: see the top of the file.)
template <class Block, class Hashes>
std::uint64_t run_counting_range(const counting_job<Hashes>& job) {
  constexpr std::uint32_t W = Block::words_per_block;
  const std::uint32_t k = job.bits_per_key;
  std::uint32_t* const counters = job.counters;
  constexpr std::uint32_t block_words = counter_words_per_block(W, Block::c);
  std::uint32_t* const projection = job.projection;
  const bool writes = job.op != counting_op::approximate_count;
  // A write also touches the key's projection block: the loop asks for a
  // block's address when it prefetches it, so that is where its projection
  // block is prefetched too.
  const auto address_of = [counters, projection, writes](std::uint64_t block) {
    if (writes && projection != nullptr) __builtin_prefetch(projection + block * W);
    return counters + block * block_words;
  };
  // The projection block of the counter block at `block` (null without a projection).
  const auto bits_of = [counters, projection](const std::uint32_t* block) {
    return projection == nullptr
               ? nullptr
               : projection + static_cast<std::size_t>(block - counters) / block_words * W;
  };
  const std::size_t prefetch = counter_block_bytes(W, Block::c);
  const auto for_each = [&](const auto& visit) {
    for_each_key(job.keys, address_of, visit, prefetch);
  };
  bool* const results = job.results;
  std::uint64_t tally = 0;
  switch (job.op) {
    case counting_op::add:
      for_each([k, &bits_of](std::size_t, std::uint64_t h, std::uint32_t* block) {
        Block::add(block, bits_of(block), h, k);
      });
      break;
    case counting_op::remove_unchecked:
      for_each([k, &bits_of](std::size_t, std::uint64_t h, std::uint32_t* block) {
        Block::remove(block, bits_of(block), h, k);
      });
      break;
    case counting_op::remove_checked:
      for_each([k, results, &tally, &bits_of](std::size_t i, std::uint64_t h,
                                              std::uint32_t* block) {
        const bool present = Block::remove_if_present(block, bits_of(block), h, k);
        if (results != nullptr) results[i] = present;
        tally += present ? 0 : 1;
      });
      break;
    case counting_op::approximate_count: {
      std::uint8_t* const counts = job.counts;
      for_each([k, counts](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        counts[i] = static_cast<std::uint8_t>(Block::minimum(block, h, k));
      });
      break;
    }
  }
  return tally;
}

// The entry points (one function each, everything inlined into it; the AVX2
// one compiled for AVX2 alone, as bloom_kernels.hpp explains).
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits, class Hashes>
__attribute__((flatten)) std::uint64_t scalar_counting_range(const counting_job<Hashes>& job) {
  return run_counting_range<counting_block<WordsPerBlock, CounterBits>>(job);
}
#if GBF_CPU_X86
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits, class Hashes>
__attribute__((flatten)) GBF_TARGET_AVX2 std::uint64_t avx2_counting_range(
    const counting_job<Hashes>& job) {
  return run_counting_range<avx2_counting_block<WordsPerBlock, CounterBits>>(job);
}
#endif

template <class Hashes>
using counting_kernel = std::uint64_t (*)(const counting_job<Hashes>&);

/// The best entry point of W and c for hash source `Hashes`: AVX2 for W >= 8
/// when `use_avx2`, else scalar.
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits, class Hashes>
counting_kernel<Hashes> best_counting_kernel([[maybe_unused]] bool use_avx2) {
#if GBF_CPU_X86
  if constexpr (WordsPerBlock >= 8) {
    if (use_avx2) return &avx2_counting_range<WordsPerBlock, CounterBits, Hashes>;
  }
#endif
  return &scalar_counting_range<WordsPerBlock, CounterBits, Hashes>;
}

/// The kernel of a runtime block width and counter width for hash source `Hashes`.
template <class Hashes>
counting_kernel<Hashes> counting_kernel_for(std::uint32_t words_per_block,
                                            std::uint32_t counter_bits, bool use_avx2) {
  if (counter_bits != 4 && counter_bits != 8)
    throw invalid_argument("counter_bits must be 4 or 8");
  const bool four = counter_bits == 4;
  switch (words_per_block) {
    case 1: return four ? best_counting_kernel<1, 4, Hashes>(use_avx2) : best_counting_kernel<1, 8, Hashes>(use_avx2);
    case 2: return four ? best_counting_kernel<2, 4, Hashes>(use_avx2) : best_counting_kernel<2, 8, Hashes>(use_avx2);
    case 4: return four ? best_counting_kernel<4, 4, Hashes>(use_avx2) : best_counting_kernel<4, 8, Hashes>(use_avx2);
    case 8: return four ? best_counting_kernel<8, 4, Hashes>(use_avx2) : best_counting_kernel<8, 8, Hashes>(use_avx2);
    case 16: return four ? best_counting_kernel<16, 4, Hashes>(use_avx2) : best_counting_kernel<16, 8, Hashes>(use_avx2);
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

/// Whether the counters of a W-word layout get the AVX2 kernel when AVX2 is on.
inline bool avx2_counters(std::uint32_t words_per_block, bool use_avx2) {
  return GBF_CPU_X86 && use_avx2 && words_per_block >= 8;
}

}  // namespace gbf::detail::cpu
