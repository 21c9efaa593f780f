// xxh64 of eight integer keys at once with AVX-512, for the CPU kernels.
//
// gbf must hash with xxh64 (Parquet's hash): five 64-bit multiplies per 8-byte
// key, and a core has few scalar 64-bit multipliers, so in a filter that fits
// in cache the hash is most of a key's cost. AVX-512DQ's vpmullq multiplies
// eight 64-bit lanes at once. The functions below are the lane-wise form of
// gbf/hash.hpp's xxh64_u64 / xxh64_u32 and gbf/layout.hpp's block_index, step
// for step, so they give the same values (CpuBackend.Avx512HashesEqualTheScalarHash
// pins it).
//
// Every function here that uses AVX-512 carries GBF_TARGET_AVX512 and may run
// only where cpu_has_avx512() says yes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "host/cpu/key_loop.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GBF_CPU_AVX512 1
#define GBF_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512dq")))
#else
#define GBF_CPU_AVX512 0
#endif

#if GBF_CPU_AVX512
namespace gbf::detail::cpu {

GBF_TARGET_AVX512 inline __m512i splat64(std::uint64_t v) {
  return _mm512_set1_epi64(static_cast<long long>(v));
}

// Shift, rotate and widen in their zero-masking form with every lane selected: the
// same instructions, but GCC 12's unmasked intrinsics start from an undefined
// register it then warns about (-Wmaybe-uninitialized, GCC bug 105593).
GBF_TARGET_AVX512 inline __m512i shr64_x8(__m512i v, unsigned bits) {
  return _mm512_maskz_srli_epi64(0xff, v, bits);
}
template <int Bits>
GBF_TARGET_AVX512 inline __m512i rotl64_x8(__m512i v) {
  return _mm512_maskz_rol_epi64(0xff, v, Bits);
}

/// xxh64_round(0, lane) per lane: rotl(lane * P2, 31) * P1.
GBF_TARGET_AVX512 inline __m512i xxh64_round0_x8(__m512i lane) {
  return _mm512_mullo_epi64(rotl64_x8<31>(_mm512_mullo_epi64(lane, splat64(xxh_prime64_2))),
                            splat64(xxh_prime64_1));
}

/// xxh64_avalanche per lane.
GBF_TARGET_AVX512 inline __m512i xxh64_avalanche_x8(__m512i h) {
  h = _mm512_xor_si512(h, shr64_x8(h, 33));
  h = _mm512_mullo_epi64(h, splat64(xxh_prime64_2));
  h = _mm512_xor_si512(h, shr64_x8(h, 29));
  h = _mm512_mullo_epi64(h, splat64(xxh_prime64_3));
  return _mm512_xor_si512(h, shr64_x8(h, 32));
}

/// xxh64_u64(keys[l], seed) in lane l: the 8-byte tail step, then the avalanche.
GBF_TARGET_AVX512 inline __m512i xxh64_u64_x8(const std::uint64_t* keys, std::uint64_t seed) {
  const __m512i key = _mm512_loadu_si512(keys);
  __m512i h = _mm512_xor_si512(splat64(seed + xxh_prime64_5 + 8), xxh64_round0_x8(key));
  h = _mm512_add_epi64(_mm512_mullo_epi64(rotl64_x8<27>(h), splat64(xxh_prime64_1)),
                       splat64(xxh_prime64_4));
  return xxh64_avalanche_x8(h);
}

/// xxh64_u32(keys[l], seed) in lane l: the 4-byte tail step, then the avalanche.
GBF_TARGET_AVX512 inline __m512i xxh64_u32_x8(const std::uint32_t* keys, std::uint64_t seed) {
  const __m512i key =
      _mm512_maskz_cvtepu32_epi64(0xff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys)));
  __m512i h = _mm512_xor_si512(splat64(seed + xxh_prime64_5 + 4),
                               _mm512_mullo_epi64(key, splat64(xxh_prime64_1)));
  h = _mm512_add_epi64(_mm512_mullo_epi64(rotl64_x8<23>(h), splat64(xxh_prime64_2)),
                       splat64(xxh_prime64_3));
  return xxh64_avalanche_x8(h);
}

/// block_index(h, num_blocks) per lane: ((h >> 32) * num_blocks) >> 32, exact
/// for every num_blocks up to 2^32 (the product stays below 2^64).
GBF_TARGET_AVX512 inline __m512i block_index_x8(__m512i h, std::uint64_t num_blocks) {
  return shr64_x8(_mm512_mullo_epi64(shr64_x8(h, 32), splat64(num_blocks)), 32);
}

/// Hash source of a caller's integer batch that also hashes eight keys at a
/// time (the key loop's tiled walk, host/cpu/key_loop.hpp, asks for hash8).
template <class Key>
struct key_hashes_x8 {
  static_assert(sizeof(Key) == 4 || sizeof(Key) == 8, "integer keys of 4 or 8 bytes");
  const Key* keys;
  std::uint64_t seed;

  std::uint64_t operator()(std::size_t i) const { return hash_key(keys[i], seed); }

  /// Asks for the cache line of key i (which may lie past the batch: a
  /// prefetch never faults, and the address is formed as an integer).
  void prefetch(std::size_t i) const {
    __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(keys) +
                                                     i * sizeof(Key)));
  }

  /// Lane l: the hash of key i + l, for l = 0..7.
  GBF_TARGET_AVX512 __m512i hash8(std::size_t i) const {
    if constexpr (sizeof(Key) == 8) {
      return xxh64_u64_x8(reinterpret_cast<const std::uint64_t*>(keys + i), seed);
    } else {
      return xxh64_u32_x8(reinterpret_cast<const std::uint32_t*>(keys + i), seed);
    }
  }
  /// hashes[l] = hash of key i + l, for l = 0..7.
  GBF_TARGET_AVX512 void hash8(std::size_t i, std::uint64_t* hashes) const {
    _mm512_storeu_si512(hashes, hash8(i));
  }
  /// hashes[l] = hash of key i + l and blocks[l] its block, for l = 0..7.
  GBF_TARGET_AVX512 void hash8(std::size_t i, std::uint64_t num_blocks, std::uint64_t* hashes,
                               std::uint64_t* blocks) const {
    const __m512i h = hash8(i);
    _mm512_storeu_si512(hashes, h);
    _mm512_storeu_si512(blocks, block_index_x8(h, num_blocks));
  }
  /// Hashes keys i..i + 7 and keeps those of `lanes` (bit l: key i + l is not
  /// null) whose hash's high half lies in `owned` (owned_high_span: exactly the
  /// hashes of a block span): their hashes and, unless `indices` is null, batch
  /// indices, in key order, go to hashes[0..] and indices[0..] (eight slots of
  /// each are written: those past the kept ones get zeros). Returns how many
  /// were kept.
  GBF_TARGET_AVX512 unsigned hash8_owned(std::size_t i, high_span owned, unsigned lanes,
                                         std::uint64_t* hashes, std::uint64_t* indices) const {
    const __m512i h = hash8(i);
    // first <= h >> 32 < first + count as one unsigned compare; no block index
    // (a multiply) for the keys the thread drops.
    const __mmask8 keep = _mm512_mask_cmplt_epu64_mask(
        static_cast<__mmask8>(lanes), _mm512_sub_epi64(shr64_x8(h, 32), splat64(owned.first)),
        splat64(owned.count));
    _mm512_storeu_si512(hashes, _mm512_maskz_compress_epi64(keep, h));
    if (indices != nullptr) {
      const __m512i index = _mm512_add_epi64(splat64(i), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
      _mm512_storeu_si512(indices, _mm512_maskz_compress_epi64(keep, index));
    }
    return static_cast<unsigned>(__builtin_popcount(keep));
  }
};

/// The same keys, hashed eight at a time.
template <class Key>
key_hashes_x8<Key> hashing_eight_at_a_time(const key_hashes<Key>& hashes) {
  return {hashes.keys, hashes.seed};
}
template <class Key>
key_range<key_hashes_x8<Key>> hashing_eight_at_a_time(const key_range<key_hashes<Key>>& range) {
  return {hashing_eight_at_a_time(range.hash_of), range.begin,    range.end,
          range.num_blocks,                       range.validity, range.validity_bit};
}

}  // namespace gbf::detail::cpu
#endif  // GBF_CPU_AVX512
