// CPU kernels of the cuckoo filter: the key walk (hash a group of keys,
// prefetch both buckets of each, then visit them) and the probes of a key's
// two buckets, portable (SWAR on 64-bit words, gbf/cuckoo_layout.hpp) and
// AVX2 (a bucket is one 256-bit register: one compare tests all its 8, 16 or
// 32 tags). Internal to host/cpu/cuckoo_backend.cpp.
//
// As in bloom_kernels.hpp, each instruction set gets its own entry points
// marked `flatten` (and target("avx2")), so AVX2 instructions exist only in
// functions that run after the run-time AVX2 check.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "gbf/cuckoo_layout.hpp"
#include "gbf/keys.hpp"
#include "host/cpu/key_loop.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define GBF_CUCKOO_X86 1
#include <immintrin.h>
#else
#define GBF_CUCKOO_X86 0
#endif

namespace gbf::detail::cpu {

/// Calls visit(i, place) for each non-null key i of [begin, end), in order, a
/// prefetched group at a time: a key's two buckets are two independent cache
/// misses, and a group of prefetch_group keys keeps a core's line fill buffers busy.
template <class Hashes, class Visit>
void for_each_place(const Hashes& hash_of, std::size_t begin, std::size_t end,
                    const std::uint8_t* validity, std::size_t validity_bit,
                    const cuckoo_layout& l, const std::uint64_t* table, const Visit& visit) {
  for (std::size_t group_begin = begin; group_begin < end; group_begin += prefetch_group) {
    const std::size_t group_end = std::min(group_begin + prefetch_group, end);
    std::size_t index[prefetch_group];
    cuckoo_place place[prefetch_group];
    std::size_t queued = 0;
    for (std::size_t i = group_begin; i < group_end; ++i) {
      if (!key_valid(validity, validity_bit, i)) continue;
      const cuckoo_place p = cuckoo_place_of(hash_of(i), l);
      __builtin_prefetch(table + p.bucket * cuckoo_bucket_words);
      __builtin_prefetch(table + p.alternate * cuckoo_bucket_words);
      index[queued] = i;
      place[queued] = p;
      ++queued;
    }
    for (std::size_t q = 0; q < queued; ++q) visit(index[q], place[q]);
  }
}

/// The portable probe: SWAR compares over the two buckets' words.
template <std::uint32_t TagBits>
struct scalar_probe {
  static constexpr const char* name = "scalar";
  using bucket = cuckoo_bucket<TagBits>;
  static bool holds(const std::uint64_t* a, const std::uint64_t* b, std::uint32_t tag) {
    return bucket::holds(a, tag) || bucket::holds(b, tag);
  }
  static std::uint32_t copies(const std::uint64_t* a, const std::uint64_t* b, std::uint32_t tag,
                              bool same_bucket) {
    return bucket::count(a, tag) + (same_bucket ? 0 : bucket::count(b, tag));
  }
};

#if GBF_CUCKOO_X86
#define GBF_CUCKOO_AVX2 __attribute__((target("avx2")))

/// The AVX2 probe: each bucket in one register, compared with the broadcast tag.
template <std::uint32_t TagBits>
struct avx2_probe {
  static constexpr const char* name = "avx2";
  // The table is 64-byte aligned, so every 32-byte bucket is aligned.
  GBF_CUCKOO_AVX2 static __m256i load(const std::uint64_t* bucket) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(bucket));
  }
  GBF_CUCKOO_AVX2 static __m256i equal(__m256i bucket, std::uint32_t tag) {
    if constexpr (TagBits == 8) {
      return _mm256_cmpeq_epi8(bucket, _mm256_set1_epi8(static_cast<char>(tag)));
    } else if constexpr (TagBits == 16) {
      return _mm256_cmpeq_epi16(bucket, _mm256_set1_epi16(static_cast<short>(tag)));
    } else {
      return _mm256_cmpeq_epi32(bucket, _mm256_set1_epi32(static_cast<int>(tag)));
    }
  }
  GBF_CUCKOO_AVX2 static bool holds(const std::uint64_t* a, const std::uint64_t* b,
                                    std::uint32_t tag) {
    const __m256i hits = _mm256_or_si256(equal(load(a), tag), equal(load(b), tag));
    return _mm256_testz_si256(hits, hits) == 0;
  }
  GBF_CUCKOO_AVX2 static std::uint32_t copies(const std::uint64_t* a, const std::uint64_t* b,
                                              std::uint32_t tag, bool same_bucket) {
    return (matching_bytes(a, tag) + (same_bucket ? 0 : matching_bytes(b, tag))) / (TagBits / 8);
  }
  // movemask gives one bit per byte: a matching f-bit tag sets f / 8 of them.
  GBF_CUCKOO_AVX2 static std::uint32_t matching_bytes(const std::uint64_t* bucket,
                                                      std::uint32_t tag) {
    return static_cast<std::uint32_t>(
        __builtin_popcount(static_cast<unsigned>(_mm256_movemask_epi8(equal(load(bucket), tag)))));
  }
};
#endif  // GBF_CUCKOO_X86

/// What a read-only pass does with each key.
enum class probe_op {
  contains,  ///< found[i] = the key's tag is in one of its buckets.
  count,     ///< Returns how many keys are found.
  copies,    ///< copies[i] = copies of the tag in its buckets.
  select,    ///< Writes the indices of the found keys to rows + begin, in order; returns how many.
};

/// One read-only pass over keys [begin, end) of a batch.
template <class Hashes>
struct probe_job {
  probe_op op;
  Hashes hash_of;
  std::size_t begin;
  std::size_t end;
  const std::uint8_t* validity;
  std::size_t validity_bit;
  cuckoo_layout layout;
  const std::uint64_t* table;
  bool* found;
  std::uint8_t* copies;
  std::uint64_t* rows;
};

template <class Probe, class Hashes>
std::uint64_t run_probe(const probe_job<Hashes>& job) {
  const std::uint64_t* const table = job.table;
  const auto buckets = [table](const cuckoo_place& p) {
    return std::pair<const std::uint64_t*, const std::uint64_t*>{
        table + p.bucket * cuckoo_bucket_words, table + p.alternate * cuckoo_bucket_words};
  };
  const auto walk = [&](const auto& visit) {
    for_each_place(job.hash_of, job.begin, job.end, job.validity, job.validity_bit, job.layout,
                   table, visit);
  };
  std::uint64_t hits = 0;
  switch (job.op) {
    case probe_op::contains:
      walk([&](std::size_t i, const cuckoo_place& p) {
        const auto [a, b] = buckets(p);
        job.found[i] = Probe::holds(a, b, p.tag);
      });
      break;
    case probe_op::count:
      walk([&](std::size_t, const cuckoo_place& p) {
        const auto [a, b] = buckets(p);
        hits += Probe::holds(a, b, p.tag) ? 1 : 0;
      });
      break;
    case probe_op::copies:
      walk([&](std::size_t i, const cuckoo_place& p) {
        const auto [a, b] = buckets(p);
        job.copies[i] = static_cast<std::uint8_t>(Probe::copies(a, b, p.tag, a == b));
      });
      break;
    case probe_op::select: {
      // Branch-free compaction, as the Bloom kernels do: the c-th write lands at
      // rows[begin + c] with c <= i - begin.
      std::uint64_t* const out = job.rows + job.begin;
      walk([&](std::size_t i, const cuckoo_place& p) {
        const auto [a, b] = buckets(p);
        out[hits] = i;
        hits += Probe::holds(a, b, p.tag) ? 1 : 0;
      });
      break;
    }
  }
  return hits;
}

template <std::uint32_t TagBits, class Hashes>
__attribute__((flatten)) std::uint64_t scalar_probe_range(const probe_job<Hashes>& job) {
  return run_probe<scalar_probe<TagBits>>(job);
}
#if GBF_CUCKOO_X86
template <std::uint32_t TagBits, class Hashes>
__attribute__((flatten)) GBF_CUCKOO_AVX2 std::uint64_t avx2_probe_range(const probe_job<Hashes>& job) {
  return run_probe<avx2_probe<TagBits>>(job);
}
#endif

template <class Hashes>
using probe_kernel = std::uint64_t (*)(const probe_job<Hashes>&);

/// The probe entry points of one tag width on one instruction set, per hash source.
struct probe_set {
  probe_kernel<key_hashes<std::uint32_t>> u32_keys;
  probe_kernel<key_hashes<std::uint64_t>> u64_keys;
  probe_kernel<string_hashes<std::int32_t>> str32_keys;
  probe_kernel<string_hashes<std::int64_t>> str64_keys;
  const char* isa;
};

template <std::uint32_t TagBits>
probe_set probe_kernels([[maybe_unused]] bool use_avx2) {
#if GBF_CUCKOO_X86
  if (use_avx2)
    return {&avx2_probe_range<TagBits, key_hashes<std::uint32_t>>,
            &avx2_probe_range<TagBits, key_hashes<std::uint64_t>>,
            &avx2_probe_range<TagBits, string_hashes<std::int32_t>>,
            &avx2_probe_range<TagBits, string_hashes<std::int64_t>>, "avx2"};
#endif
  return {&scalar_probe_range<TagBits, key_hashes<std::uint32_t>>,
          &scalar_probe_range<TagBits, key_hashes<std::uint64_t>>,
          &scalar_probe_range<TagBits, string_hashes<std::int32_t>>,
          &scalar_probe_range<TagBits, string_hashes<std::int64_t>>, "scalar"};
}

/// The probe kernels for a runtime tag width.
inline probe_set select_probe_kernels(std::uint32_t tag_bits, bool use_avx2) {
  return dispatch_tag_bits(tag_bits, [&](auto bits) {
    return probe_kernels<decltype(bits)::value>(use_avx2);
  });
}

}  // namespace gbf::detail::cpu
