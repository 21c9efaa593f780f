// CPU kernels of the plain Bloom filter: the per-block probe (portable scalar
// and AVX2) run by the shared batch loop (host/cpu/key_loop.hpp). Internal to
// host/cpu/bloom_backend.cpp, which adds memory, threads and the backend API.
//
// One loop, two instruction sets. run_range() is a template over the block
// kernel. Each instruction set instantiates it through an entry point marked
// `flatten`, which inlines the loop, the hash and the block kernel into that
// one function; the AVX2 entry point also carries target("avx2"). So AVX2
// instructions appear only inside functions that run after the run-time AVX2
// check. Compiling a whole file with -mavx2 instead would also compile the
// inline functions it shares with other files (xxh64, the layout helpers) for
// AVX2, and the linker keeps any one copy of those: a scalar caller could end
// up running AVX2 code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "host/cpu/hash_x8.hpp"
#include "host/cpu/isa.hpp"
#include "host/cpu/key_loop.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define GBF_CPU_X86 1
#include <immintrin.h>
#else
#define GBF_CPU_X86 0
#endif

namespace gbf::detail::cpu {

/// What a pass over a batch does with each key's block.
enum class kernel_op {
  add,         ///< OR the key's masks in; the calling thread is the only writer.
  add_new,     ///< results[i] = some bit of key i was missing; then OR its masks in.
  contains,    ///< results[i] = every bit of key i is set.
  count,       ///< Returns how many keys have every bit set.
  select,      ///< Writes the indices of the present keys to rows + begin, in order; returns how many.
};

/// Work a thread interleaves with a writing pass over stored hashes: every
/// side_work_stride keys visited, the pass calls step(state, side_work_stride).
/// A pass over a filter beyond the caches waits on a miss per key; the steps
/// (hashing the next chunk of a threaded add) run while it waits. Whatever is
/// left when the pass ends is the caller's to finish.
struct side_work {
  void (*step)(void* state, std::size_t steps) = nullptr;  ///< null: none
  void* state = nullptr;
};

/// Keys visited per side_work step: enough to amortise an indirect call, few
/// enough that each step fits between the visits whose misses it hides.
inline constexpr std::size_t side_work_stride = 8;

/// One pass of an operation over a key range: the filter's words and k, and
/// where the answers go.
template <class Hashes>
struct bloom_job {
  kernel_op op;
  key_range<Hashes> keys;
  std::uint32_t* words;
  std::uint32_t bits_per_key;
  /// found / is_new, indexed like the batch; unused by add and count.
  bool* results;
  /// select: the batch's row index array (room for every key); this job writes its
  /// hits to rows[keys.begin ..], which stays inside [keys.begin, keys.end).
  std::uint64_t* rows;
  /// add / add_new over stored hashes: work to interleave (other passes ignore it).
  side_work side{};
};

/// The portable block kernel: masks from gbf::block_masks, one word at a time.
template <std::uint32_t WordsPerBlock>
struct scalar_block {
  static constexpr std::uint32_t words_per_block = WordsPerBlock;
  static constexpr const char* name = "scalar";

  static bool contains(const std::uint32_t* block, std::uint64_t h, std::uint32_t bits_per_key) {
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, bits_per_key, masks);
    std::uint32_t missing = 0;
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) missing |= masks[w] & ~block[w];
    return missing == 0;
  }

  static void add(std::uint32_t* block, std::uint64_t h, std::uint32_t bits_per_key) {
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, bits_per_key, masks);
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) block[w] |= masks[w];
  }

  /// Sets the key's bits; returns whether any of them was unset before.
  static bool add_new(std::uint32_t* block, std::uint64_t h, std::uint32_t bits_per_key) {
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, bits_per_key, masks);
    std::uint32_t missing = 0;
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
      missing |= masks[w] & ~block[w];
      block[w] |= masks[w];
    }
    return missing != 0;
  }
};

#if GBF_CPU_X86
#define GBF_TARGET_AVX2 __attribute__((target("avx2")))

/// gbf::salt(0..31) laid out for aligned 8-lane loads.
struct salt_array {
  alignas(32) std::uint32_t values[max_bits_per_key];
};
constexpr salt_array make_salt_array() {
  salt_array salts{};
  for (std::uint32_t j = 0; j < max_bits_per_key; ++j) salts.values[j] = salt(j);
  return salts;
}
inline constexpr salt_array salt_lanes = make_salt_array();

/// The AVX2 block kernel for 256-bit (W = 8) and 512-bit (W = 16) blocks: the
/// block sits in one or two registers, and all its masks come from a few
/// multiplies and variable shifts instead of W scalar ones.
template <std::uint32_t WordsPerBlock>
struct avx2_block {
  static_assert(WordsPerBlock == 8 || WordsPerBlock == 16,
                "AVX2 kernels hold a block in one or two 256-bit registers");
  static constexpr std::uint32_t words_per_block = WordsPerBlock;
  static constexpr const char* name = "avx2";
  static constexpr std::uint32_t lanes = 8;  // 32-bit words per __m256i
  static constexpr std::uint32_t vectors = WordsPerBlock / lanes;

  /// Lane i of probe_positions(h32, j) is probe_bit(h, j + i): the product's top 5 bits.
  GBF_TARGET_AVX2 static __m256i probe_positions(__m256i h32, std::uint32_t first_probe) {
    const __m256i salts =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(salt_lanes.values + first_probe));
    return _mm256_srli_epi32(_mm256_mullo_epi32(h32, salts), 27);
  }

  /// Lane i of probe_bits(h32, j) is 1 << probe_bit(h, j + i).
  GBF_TARGET_AVX2 static __m256i probe_bits(__m256i h32, std::uint32_t first_probe) {
    return _mm256_sllv_epi32(_mm256_set1_epi32(1), probe_positions(h32, first_probe));
  }

  /// block_masks<W>, 8 probes at a time. Lane i of vector v is word 8v + i; the
  /// probes landing there are j = gW + 8v + i for passes g = 0, 1, ... while
  /// j < k (probe j goes to word j mod W), so each pass over the block is one
  /// probe_bits per vector, with the lanes past k cleared on the last pass.
  GBF_TARGET_AVX2 static void masks(std::uint64_t h, std::uint32_t bits_per_key,
                                    __m256i (&out)[vectors]) {
    const __m256i h32 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(h)));
    // Pass 0 is always whole: k >= W.
    for (std::uint32_t v = 0; v < vectors; ++v) out[v] = probe_bits(h32, v * lanes);
    const __m256i lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (std::uint32_t pass_start = WordsPerBlock; pass_start < bits_per_key;
         pass_start += WordsPerBlock) {
      for (std::uint32_t v = 0; v < vectors; ++v) {
        const std::uint32_t first_probe = pass_start + v * lanes;
        if (first_probe >= bits_per_key) break;
        const __m256i live = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(static_cast<int>(bits_per_key - first_probe)), lane_index);
        out[v] = _mm256_or_si256(out[v], _mm256_and_si256(live, probe_bits(h32, first_probe)));
      }
    }
  }

  // The bit array is 64-byte aligned, so every block is aligned to its size.
  GBF_TARGET_AVX2 static __m256i load(const std::uint32_t* block, std::uint32_t v) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(block) + v);
  }
  GBF_TARGET_AVX2 static void store(std::uint32_t* block, std::uint32_t v, __m256i value) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(block) + v, value);
  }

  GBF_TARGET_AVX2 static bool contains(const std::uint32_t* block, std::uint64_t h,
                                       std::uint32_t bits_per_key) {
    __m256i m[vectors];
    masks(h, bits_per_key, m);
    int present = 1;  // testc: (~block & mask) == 0
    for (std::uint32_t v = 0; v < vectors; ++v) present &= _mm256_testc_si256(load(block, v), m[v]);
    return present != 0;
  }

  GBF_TARGET_AVX2 static void add(std::uint32_t* block, std::uint64_t h,
                                  std::uint32_t bits_per_key) {
    __m256i m[vectors];
    masks(h, bits_per_key, m);
    for (std::uint32_t v = 0; v < vectors; ++v)
      store(block, v, _mm256_or_si256(load(block, v), m[v]));
  }

  GBF_TARGET_AVX2 static bool add_new(std::uint32_t* block, std::uint64_t h,
                                      std::uint32_t bits_per_key) {
    __m256i m[vectors];
    masks(h, bits_per_key, m);
    int present = 1;
    for (std::uint32_t v = 0; v < vectors; ++v) {
      const __m256i old_words = load(block, v);
      present &= _mm256_testc_si256(old_words, m[v]);
      store(block, v, _mm256_or_si256(old_words, m[v]));
    }
    return present == 0;
  }
};
#endif  // GBF_CPU_X86

/// Runs job.op over the job's keys; returns the count for kernel_op::count, else 0.
template <class Block, class Hashes>
std::uint64_t run_range(const bloom_job<Hashes>& job) {
  const std::uint32_t k = job.bits_per_key;
  bool* const results = job.results;
  std::uint32_t* const words = job.words;
  const auto address_of = [words](std::uint64_t block) {
    return words + block * Block::words_per_block;
  };
  const auto for_each = [&](const auto& visit) { for_each_key(job.keys, address_of, visit); };
  const auto for_each_writing = [&](const auto& visit) {
    for_each_key<block_access::write>(job.keys, address_of, visit);
  };
  // A writing pass over stored hashes runs job.side between its visits; the
  // countdown never reaches 0 without side work (2^64 keys), so the check is a
  // predicted branch, and passes over caller keys compile without it.
  constexpr bool may_have_side_work = std::is_same_v<Hashes, stored_hashes>;
  const side_work side = job.side;
  std::size_t countdown = side.step != nullptr ? side_work_stride : ~std::size_t{0};
  const auto after_visit = [&side, &countdown] {
    if constexpr (may_have_side_work) {
      if (--countdown == 0) {
        side.step(side.state, side_work_stride);
        countdown = side_work_stride;
      }
    }
  };
  std::uint64_t present = 0;
  switch (job.op) {
    case kernel_op::add:
      for_each_writing([k, &after_visit](std::size_t, std::uint64_t h, std::uint32_t* block) {
        Block::add(block, h, k);
        after_visit();
      });
      break;
    case kernel_op::add_new:
      for_each_writing([k, results, &after_visit](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        results[i] = Block::add_new(block, h, k);
        after_visit();
      });
      break;
    case kernel_op::contains:
      for_each([k, results](std::size_t i, std::uint64_t h, std::uint32_t* block) {
        results[i] = Block::contains(block, h, k);
      });
      break;
    case kernel_op::count:
      for_each([k, &present](std::size_t, std::uint64_t h, std::uint32_t* block) {
        present += Block::contains(block, h, k) ? 1 : 0;
      });
      break;
    case kernel_op::select: {
      // Branch-free compaction: always write, advance by the answer. The c-th
      // write lands at rows[begin + c] with c <= i - begin, so inside [begin, i].
      std::uint64_t* const out = job.rows + job.keys.begin;
      for_each([k, out, &present](std::size_t i, std::uint64_t h,
                                                  std::uint32_t* block) {
        out[present] = i;
        present += Block::contains(block, h, k) ? 1 : 0;
      });
      break;
    }
  }
  return present;
}

// The entry points the backend calls through kernel_set (see the top of the file).
template <std::uint32_t WordsPerBlock, class Hashes>
__attribute__((flatten)) std::uint64_t scalar_range(const bloom_job<Hashes>& job) {
  return run_range<scalar_block<WordsPerBlock>>(job);
}
#if GBF_CPU_X86
template <std::uint32_t WordsPerBlock, class Hashes>
__attribute__((flatten)) GBF_TARGET_AVX2 std::uint64_t avx2_range(const bloom_job<Hashes>& job) {
  return run_range<avx2_block<WordsPerBlock>>(job);
}
#endif
#if GBF_CPU_AVX512
/// The AVX2 block kernel, integer keys hashed eight at a time with AVX-512.
template <std::uint32_t WordsPerBlock, class Key>
__attribute__((flatten)) GBF_TARGET_AVX512 std::uint64_t avx512_range(
    const bloom_job<key_hashes<Key>>& job) {
  const bloom_job<key_hashes_x8<Key>> eight_at_a_time{
      job.op,        hashing_eight_at_a_time(job.keys), job.words, job.bits_per_key,
      job.results,   job.rows,                          job.side};
  return run_range<avx2_block<WordsPerBlock>>(eight_at_a_time);
}

/// add or add_new of the keys whose block lies in `owned`, by a thread that
/// reads the whole batch and writes only those blocks (for_each_owned_key):
/// the AVX2 block kernel, keys hashed eight at a time.
template <std::uint32_t WordsPerBlock, class Key>
__attribute__((flatten)) GBF_TARGET_AVX512 void avx512_owned_range(
    const bloom_job<key_hashes<Key>>& job, block_span owned) {
  using block_kernel = avx2_block<WordsPerBlock>;
  const std::uint32_t k = job.bits_per_key;
  std::uint32_t* const words = job.words;
  const auto address_of = [words](std::uint64_t block) {
    return words + block * WordsPerBlock;
  };
  const auto keys = hashing_eight_at_a_time(job.keys);
  if (job.op == kernel_op::add) {
    for_each_owned_key(
        keys, owned, address_of,
        [k](std::uint64_t h, std::uint32_t* block) { block_kernel::add(block, h, k); });
  } else if (job.op == kernel_op::add_new) {
    bool* const results = job.results;
    for_each_owned_key(
        keys, owned, address_of, [k, results](std::size_t i, std::uint64_t h, std::uint32_t* block) {
          results[i] = block_kernel::add_new(block, h, k);
        });
  } else {
    throw invalid_argument("the owned-block kernels only add");
  }
}
#endif

template <class Hashes>
using range_kernel = std::uint64_t (*)(const bloom_job<Hashes>&);
template <class Hashes>
using owned_kernel = void (*)(const bloom_job<Hashes>&, block_span);

/// The entry points serving one layout on one instruction set, per hash source.
struct kernel_set {
  range_kernel<key_hashes<std::uint32_t>> u32_keys;
  range_kernel<key_hashes<std::uint64_t>> u64_keys;
  range_kernel<string_hashes<std::int32_t>> str32_keys;
  range_kernel<string_hashes<std::int64_t>> str64_keys;
  range_kernel<stored_hashes> stored;
  const char* isa;  ///< "scalar", "avx2" or "avx512", for the backend description.
  /// add / add_new of one block span's keys (null: none for this layout and ISA).
  owned_kernel<key_hashes<std::uint32_t>> u32_owned = nullptr;
  owned_kernel<key_hashes<std::uint64_t>> u64_owned = nullptr;
};

template <std::uint32_t WordsPerBlock>
kernel_set scalar_kernels() {
  return {&scalar_range<WordsPerBlock, key_hashes<std::uint32_t>>,
          &scalar_range<WordsPerBlock, key_hashes<std::uint64_t>>,
          &scalar_range<WordsPerBlock, string_hashes<std::int32_t>>,
          &scalar_range<WordsPerBlock, string_hashes<std::int64_t>>,
          &scalar_range<WordsPerBlock, stored_hashes>, scalar_block<WordsPerBlock>::name};
}

/// AVX2 serves W = 8 and 16, where a block fills whole registers; narrower
/// blocks keep the scalar kernel even when AVX2 is on. AVX-512 adds the
/// eight-at-a-time hash of integer keys to the AVX2 kernel (string keys and
/// stored hashes keep the AVX2 entry points).
template <std::uint32_t WordsPerBlock>
kernel_set best_kernels([[maybe_unused]] cpu_isa isa) {
#if GBF_CPU_X86
  if constexpr (WordsPerBlock >= 8) {
    if (isa != cpu_isa::scalar) {
      kernel_set set{&avx2_range<WordsPerBlock, key_hashes<std::uint32_t>>,
                     &avx2_range<WordsPerBlock, key_hashes<std::uint64_t>>,
                     &avx2_range<WordsPerBlock, string_hashes<std::int32_t>>,
                     &avx2_range<WordsPerBlock, string_hashes<std::int64_t>>,
                     &avx2_range<WordsPerBlock, stored_hashes>, avx2_block<WordsPerBlock>::name};
#if GBF_CPU_AVX512
      if (isa == cpu_isa::avx512) {
        set.u32_keys = &avx512_range<WordsPerBlock, std::uint32_t>;
        set.u64_keys = &avx512_range<WordsPerBlock, std::uint64_t>;
        set.u32_owned = &avx512_owned_range<WordsPerBlock, std::uint32_t>;
        set.u64_owned = &avx512_owned_range<WordsPerBlock, std::uint64_t>;
        set.isa = "avx512";
      }
#endif
      return set;
    }
  }
#endif
  return scalar_kernels<WordsPerBlock>();
}

/// The kernels for a runtime words_per_block.
inline kernel_set select_kernels(std::uint32_t words_per_block, cpu_isa isa) {
  switch (words_per_block) {
    case 1: return best_kernels<1>(isa);
    case 2: return best_kernels<2>(isa);
    case 4: return best_kernels<4>(isa);
    case 8: return best_kernels<8>(isa);
    case 16: return best_kernels<16>(isa);
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

}  // namespace gbf::detail::cpu
