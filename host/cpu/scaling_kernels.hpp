// CPU kernels of the scaling chain: one pass per key over every level. A key
// is hashed once; all levels share the chain's W, k and seed, so only the
// block index differs between levels. Internal to host/cpu/scaling_backend.cpp.
//
// The loop is the plain filter's (host/cpu/key_loop.hpp) with a level loop
// inside: a group of 16 keys is hashed, then, level by level from the newest
// (the largest, holding the most keys, so present keys stop early), the blocks
// of the keys not found yet are prefetched together and probed. The block
// probe is the plain filter's (scalar or AVX2, host/cpu/bloom_kernels.hpp),
// compiled per instruction set through `flatten` entry points the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host/cpu/bloom_kernels.hpp"
#include "host/cpu/key_loop.hpp"

namespace gbf::detail::cpu {

/// A level as the probe loop sees it.
struct chain_level_view {
  const std::uint32_t* words;
  std::uint64_t num_blocks;
};

/// What a pass over a batch does with each key's answer.
enum class chain_op {
  contains,  ///< results[i] = key i is in some level (false for nulls).
  count,     ///< Returns how many keys are in some level.
  select,    ///< Writes the indices of the present keys to rows + begin, in order; returns how many.
  absent,    ///< Writes (hash, position) of each key in no level to out_* + begin, in order;
             ///< position = in_positions[i], or i without them; returns how many.
};

/// One pass of an operation over keys [begin, end) against levels [0, num_levels).
template <class Hashes>
struct chain_job {
  chain_op op;
  Hashes hash_of;
  std::size_t begin;
  std::size_t end;
  const std::uint8_t* validity;  ///< Arrow bitmap (null: all valid); key i's bit is validity_bit + i.
  std::size_t validity_bit;
  const chain_level_view* levels;  ///< Oldest first.
  std::size_t num_levels;
  std::uint32_t bits_per_key;
  bool* results;                       ///< contains.
  std::uint64_t* rows;                 ///< select: room for every key of the batch.
  std::uint64_t* out_hashes;           ///< absent.
  std::uint32_t* out_positions;        ///< absent.
  const std::uint32_t* in_positions;   ///< absent: positions of stored hashes (may be null).
};

/// Runs job.op; returns the count (count, select, absent), else 0. In-place
/// compaction (select, absent writing over the hashes it reads) is safe: the
/// c-th output lands at begin + c <= the index being read, and a group's hashes
/// are read before any of its outputs are written.
template <class Block, class Hashes>
std::uint64_t run_chain(const chain_job<Hashes>& job) {
  constexpr std::uint32_t W = Block::words_per_block;
  const std::uint32_t k = job.bits_per_key;
  std::uint64_t total = 0;
  for (std::size_t group_begin = job.begin; group_begin < job.end; group_begin += prefetch_group) {
    const std::size_t group_end = std::min(group_begin + prefetch_group, job.end);
    std::size_t index[prefetch_group];
    std::uint64_t hash[prefetch_group];
    bool found[prefetch_group];
    std::size_t queued = 0;
    for (std::size_t i = group_begin; i < group_end; ++i) {
      if (!key_valid(job.validity, job.validity_bit, i)) {
        if (job.op == chain_op::contains) job.results[i] = false;
        continue;
      }
      index[queued] = i;
      hash[queued] = job.hash_of(i);
      found[queued] = false;
      ++queued;
    }
    std::size_t missing = queued;
    for (std::size_t level = job.num_levels; level-- > 0 && missing > 0;) {
      const chain_level_view view = job.levels[level];
      const std::uint32_t* block[prefetch_group];
      for (std::size_t q = 0; q < queued; ++q) {
        block[q] = view.words + block_index(hash[q], view.num_blocks) * W;
        if (!found[q]) __builtin_prefetch(block[q]);
      }
      for (std::size_t q = 0; q < queued; ++q) {
        if (found[q] || !Block::contains(block[q], hash[q], k)) continue;
        found[q] = true;
        --missing;
      }
    }
    for (std::size_t q = 0; q < queued; ++q) {
      const std::size_t i = index[q];
      switch (job.op) {
        case chain_op::contains: job.results[i] = found[q]; break;
        case chain_op::count: total += found[q] ? 1 : 0; break;
        case chain_op::select:  // branch-free: always write, advance by the answer
          job.rows[job.begin + total] = i;
          total += found[q] ? 1 : 0;
          break;
        case chain_op::absent: {
          const std::uint32_t position =
              job.in_positions != nullptr ? job.in_positions[i] : static_cast<std::uint32_t>(i);
          job.out_hashes[job.begin + total] = hash[q];
          job.out_positions[job.begin + total] = position;
          total += found[q] ? 0 : 1;
          break;
        }
      }
    }
  }
  return total;
}

// The entry points (see the top of bloom_kernels.hpp for why `flatten`).
template <std::uint32_t WordsPerBlock, class Hashes>
__attribute__((flatten)) std::uint64_t scalar_chain(const chain_job<Hashes>& job) {
  return run_chain<scalar_block<WordsPerBlock>>(job);
}
#if GBF_CPU_X86
template <std::uint32_t WordsPerBlock, class Hashes>
__attribute__((flatten)) GBF_TARGET_AVX2 std::uint64_t avx2_chain(const chain_job<Hashes>& job) {
  return run_chain<avx2_block<WordsPerBlock>>(job);
}
#endif

template <class Hashes>
using chain_kernel = std::uint64_t (*)(const chain_job<Hashes>&);

/// The chain probes of one block width on one instruction set, per hash source.
struct chain_kernel_set {
  chain_kernel<key_hashes<std::uint32_t>> u32_keys;
  chain_kernel<key_hashes<std::uint64_t>> u64_keys;
  chain_kernel<string_hashes<std::int32_t>> str32_keys;
  chain_kernel<string_hashes<std::int64_t>> str64_keys;
  chain_kernel<stored_hashes> stored;
};

template <std::uint32_t WordsPerBlock>
chain_kernel_set best_chain_kernels([[maybe_unused]] bool use_avx2) {
#if GBF_CPU_X86
  if constexpr (WordsPerBlock >= 8) {
    if (use_avx2)
      return {&avx2_chain<WordsPerBlock, key_hashes<std::uint32_t>>,
              &avx2_chain<WordsPerBlock, key_hashes<std::uint64_t>>,
              &avx2_chain<WordsPerBlock, string_hashes<std::int32_t>>,
              &avx2_chain<WordsPerBlock, string_hashes<std::int64_t>>,
              &avx2_chain<WordsPerBlock, stored_hashes>};
  }
#endif
  return {&scalar_chain<WordsPerBlock, key_hashes<std::uint32_t>>,
          &scalar_chain<WordsPerBlock, key_hashes<std::uint64_t>>,
          &scalar_chain<WordsPerBlock, string_hashes<std::int32_t>>,
          &scalar_chain<WordsPerBlock, string_hashes<std::int64_t>>,
          &scalar_chain<WordsPerBlock, stored_hashes>};
}

/// The chain probes for a runtime words_per_block (the same choice as select_kernels).
inline chain_kernel_set select_chain_kernels(std::uint32_t words_per_block, bool use_avx2) {
  switch (words_per_block) {
    case 1: return best_chain_kernels<1>(use_avx2);
    case 2: return best_chain_kernels<2>(use_avx2);
    case 4: return best_chain_kernels<4>(use_avx2);
    case 8: return best_chain_kernels<8>(use_avx2);
    case 16: return best_chain_kernels<16>(use_avx2);
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

/// The entry point of a hash source.
template <class Hashes>
chain_kernel<Hashes> chain_kernel_for(const chain_kernel_set& set);
template <>
inline chain_kernel<key_hashes<std::uint32_t>> chain_kernel_for(const chain_kernel_set& set) {
  return set.u32_keys;
}
template <>
inline chain_kernel<key_hashes<std::uint64_t>> chain_kernel_for(const chain_kernel_set& set) {
  return set.u64_keys;
}
template <>
inline chain_kernel<string_hashes<std::int32_t>> chain_kernel_for(const chain_kernel_set& set) {
  return set.str32_keys;
}
template <>
inline chain_kernel<string_hashes<std::int64_t>> chain_kernel_for(const chain_kernel_set& set) {
  return set.str64_keys;
}
template <>
inline chain_kernel<stored_hashes> chain_kernel_for(const chain_kernel_set& set) {
  return set.stored;
}

}  // namespace gbf::detail::cpu
