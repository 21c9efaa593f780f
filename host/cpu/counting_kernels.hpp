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
  contains,          ///< results[i] = all counters nonzero.
  count,             ///< Returns how many keys have all counters nonzero.
  select,            ///< Writes the indices of the present keys to rows + begin; returns how many.
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
  bool* results;          ///< contains: found; remove_checked: removed (may be null).
  std::uint8_t* counts;   ///< approximate_count.
  std::uint64_t* rows;    ///< select: rows[keys.begin ..] (see bloom_job::rows).
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
  static GBF_FORCEINLINE void for_each_counter(std::uint64_t h, std::uint32_t bits_per_key,
                                               const Fn& fn) {
    if (bits_per_key == WordsPerBlock) {
      for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
        const std::uint32_t bit = probe_bit(h, w);
        fn(counter_word_in_block(w, bit, c), counter_shift(bit, c));
      }
      return;
    }
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, bits_per_key, masks);
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
      for (std::uint32_t m = masks[w]; m != 0; m &= m - 1) {
        const auto bit = static_cast<std::uint32_t>(__builtin_ctz(m));
        fn(counter_word_in_block(w, bit, c), counter_shift(bit, c));
      }
    }
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

/// Runs job.op over the job's keys; returns the count of count, select and
/// remove_checked (its refusals), else 0.
template <std::uint32_t WordsPerBlock, std::uint32_t CounterBits, class Hashes>
__attribute__((flatten)) std::uint64_t run_counting_range(const counting_job<Hashes>& job) {
  using block_ops = counting_block<WordsPerBlock, CounterBits>;
  const std::uint32_t k = job.bits_per_key;
  constexpr std::uint32_t c = CounterBits;
  std::uint32_t* const counters = job.counters;
  const std::uint32_t block_words = counter_words_per_block(WordsPerBlock, c);
  const auto address_of = [counters, block_words](std::uint64_t block) {
    return counters + block * block_words;
  };
  const std::size_t prefetch = counter_block_bytes(WordsPerBlock, c);
  const auto for_each = [&](const auto& visit) {
    for_each_key(job.keys, address_of, visit, prefetch);
  };
  bool* const results = job.results;
  std::uint64_t tally = 0;
  switch (job.op) {
    case counting_op::add:
      for_each([k](std::size_t, std::uint64_t h, std::uint32_t* block) {
        block_ops::increment(block, h, k);
      });
      break;
    case counting_op::remove_unchecked:
      for_each([k](std::size_t, std::uint64_t h, std::uint32_t* block) {
        block_ops::decrement(block, h, k);
      });
      break;
    case counting_op::remove_checked:
      for_each([k, results, &tally](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        const bool present = block_ops::contains(block, h, k);
        if (present) block_ops::decrement(block, h, k);
        if (results != nullptr) results[i] = present;
        tally += present ? 0 : 1;
      });
      break;
    case counting_op::contains:
      for_each([k, results](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        results[i] = block_ops::contains(block, h, k);
      });
      break;
    case counting_op::count:
      for_each([k, &tally](std::size_t, std::uint64_t h, std::uint32_t* block) {
        tally += block_ops::contains(block, h, k) ? 1 : 0;
      });
      break;
    case counting_op::select: {
      // Branch-free compaction, as the plain filter's (bloom_kernels.hpp).
      std::uint64_t* const out = job.rows + job.keys.begin;
      for_each([k, out, &tally](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        out[tally] = i;
        tally += block_ops::contains(block, h, k) ? 1 : 0;
      });
      break;
    }
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
