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
};

/// Bytes of a block's counters the loop prefetches: all of them (W * c words).
inline std::size_t counter_block_bytes(std::uint32_t words_per_block, std::uint32_t counter_bits) {
  return std::size_t{counter_words_per_block(words_per_block, counter_bits)} * bytes_per_word;
}

/// Runs job.op over the job's keys; returns remove_checked's refusals, else 0.
/// (contains, count and select probe the projection with the plain filter's
/// kernels: see the top of the file.)
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits, class Hashes>
__attribute__((flatten)) std::uint64_t run_counting_range(const counting_job<Hashes>& job) {
  using block_ops = counting_block<WordsPerBlock, CounterBits>;
  const std::uint32_t k = job.bits_per_key;
  constexpr std::uint32_t c = CounterBits;
  std::uint32_t* const counters = job.counters;
  constexpr std::uint32_t block_words = counter_words_per_block(WordsPerBlock, c);
  std::uint32_t* const projection = job.projection;
  const bool writes = job.op == counting_op::add || job.op == counting_op::remove_unchecked ||
                      job.op == counting_op::remove_checked;
  // A write also touches the key's projection block: the loop asks for a
  // block's address when it prefetches it, so that is where its projection
  // block is prefetched too.
  const auto address_of = [counters, projection, writes](std::uint64_t block) {
    if (writes && projection != nullptr) __builtin_prefetch(projection + block * WordsPerBlock);
    return counters + block * block_words;
  };
  // The projection block of the counter block at `block` (null without a projection).
  const auto bits_of = [counters, projection](const std::uint32_t* block) {
    return projection == nullptr
               ? nullptr
               : projection + static_cast<std::size_t>(block - counters) / block_words * WordsPerBlock;
  };
  const std::size_t prefetch = counter_block_bytes(WordsPerBlock, c);
  const auto for_each = [&](const auto& visit) {
    for_each_key(job.keys, address_of, visit, prefetch);
  };
  bool* const results = job.results;
  std::uint64_t tally = 0;
  switch (job.op) {
    case counting_op::add:
      for_each([k, &bits_of](std::size_t, std::uint64_t h, std::uint32_t* block) {
        block_ops::increment(block, h, k);
        if (std::uint32_t* bits = bits_of(block)) block_ops::project_add(bits, h, k);
      });
      break;
    case counting_op::remove_unchecked:
      for_each([k, &bits_of](std::size_t, std::uint64_t h, std::uint32_t* block) {
        block_ops::decrement(block, h, k);
        if (std::uint32_t* bits = bits_of(block)) block_ops::project_remove(block, bits, h, k);
      });
      break;
    case counting_op::remove_checked:
      for_each([k, results, &tally, &bits_of](std::size_t i, std::uint64_t h,
                                              std::uint32_t* block) {
        const bool present = block_ops::contains(block, h, k);
        if (present) {
          block_ops::decrement(block, h, k);
          if (std::uint32_t* bits = bits_of(block)) block_ops::project_remove(block, bits, h, k);
        }
        if (results != nullptr) results[i] = present;
        tally += present ? 0 : 1;
      });
      break;
    case counting_op::approximate_count: {
      std::uint8_t* const counts = job.counts;
      for_each([k, counts](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        counts[i] = static_cast<std::uint8_t>(block_ops::minimum(block, h, k));
      });
      break;
    }
  }
  return tally;
}

template <class Hashes>
using counting_kernel = std::uint64_t (*)(const counting_job<Hashes>&);

/// The entry point of a runtime block width and counter width for hash source `Hashes`.
template <class Hashes>
counting_kernel<Hashes> counting_kernel_for(std::uint32_t words_per_block,
                                            std::uint32_t counter_bits) {
  if (counter_bits != 4 && counter_bits != 8)
    throw invalid_argument("counter_bits must be 4 or 8");
  const bool four = counter_bits == 4;
  switch (words_per_block) {
    case 1: return four ? &run_counting_range<1, 4, Hashes> : &run_counting_range<1, 8, Hashes>;
    case 2: return four ? &run_counting_range<2, 4, Hashes> : &run_counting_range<2, 8, Hashes>;
    case 4: return four ? &run_counting_range<4, 4, Hashes> : &run_counting_range<4, 8, Hashes>;
    case 8: return four ? &run_counting_range<8, 4, Hashes> : &run_counting_range<8, 8, Hashes>;
    case 16: return four ? &run_counting_range<16, 4, Hashes> : &run_counting_range<16, 8, Hashes>;
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

}  // namespace gbf::detail::cpu
