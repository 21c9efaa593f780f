// xxHash64, one implementation for host and device.
//
// This is the XXH64 algorithm of Yann Collet's xxHash (the hash Parquet's
// split-block Bloom filter mandates). It is written from the specification
// (doc/xxhash_spec.md upstream): 4 lanes of 8 bytes over 32-byte stripes, a
// merge of the lanes, then the tail in 8/4/1-byte steps and an avalanche.
// tests/unit/test_hash.cpp checks it against libxxhash (Debian's libxxhash-dev).
//
// Integer keys hash their little-endian bytes: xxh64_u64(v) == xxh64(&v, 8)
// on a little-endian machine, but the fixed-size overloads skip the loops and
// are what the kernels use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gbf/detail/config.hpp"

namespace gbf {
namespace detail {

inline constexpr std::uint64_t xxh_prime64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr std::uint64_t xxh_prime64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr std::uint64_t xxh_prime64_3 = 0x165667B19E3779F9ULL;
inline constexpr std::uint64_t xxh_prime64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr std::uint64_t xxh_prime64_5 = 0x27D4EB2F165667C5ULL;

GBF_HD GBF_FORCEINLINE constexpr std::uint64_t rotl64(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_round(std::uint64_t acc,
                                                           std::uint64_t input) {
  acc += input * xxh_prime64_2;
  acc = rotl64(acc, 31);
  return acc * xxh_prime64_1;
}

GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_merge_round(std::uint64_t acc,
                                                                 std::uint64_t lane) {
  acc ^= xxh64_round(0, lane);
  return acc * xxh_prime64_1 + xxh_prime64_4;
}

GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= xxh_prime64_2;
  h ^= h >> 29;
  h *= xxh_prime64_3;
  h ^= h >> 32;
  return h;
}

// Tail steps of the spec, each consuming 8, 4 or 1 input bytes.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_tail8(std::uint64_t h, std::uint64_t lane) {
  h ^= xxh64_round(0, lane);
  return rotl64(h, 27) * xxh_prime64_1 + xxh_prime64_4;
}
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_tail4(std::uint64_t h, std::uint32_t lane) {
  h ^= static_cast<std::uint64_t>(lane) * xxh_prime64_1;
  return rotl64(h, 23) * xxh_prime64_2 + xxh_prime64_3;
}
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_tail1(std::uint64_t h, std::uint8_t byte) {
  h ^= static_cast<std::uint64_t>(byte) * xxh_prime64_5;
  return rotl64(h, 11) * xxh_prime64_1;
}

// Unaligned little-endian loads. Byte assembly is what nvcc turns into the
// widest legal load; on x86 the host compiler folds it into one mov.
GBF_HD GBF_FORCEINLINE std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  GBF_UNROLL
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
GBF_HD GBF_FORCEINLINE std::uint32_t load_le32(const unsigned char* p) {
  std::uint32_t v = 0;
  GBF_UNROLL
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

/// The four stripe accumulators of xxh64 (spec step 1), for inputs of 32 bytes or more.
struct xxh64_lanes {
  std::uint64_t v[4];
};
GBF_HD GBF_FORCEINLINE constexpr xxh64_lanes xxh64_init_lanes(std::uint64_t seed) {
  return {{seed + xxh_prime64_1 + xxh_prime64_2, seed + xxh_prime64_2, seed,
           seed - xxh_prime64_1}};
}

/// Accumulator `i` (0..3) of xxh64_init_lanes(seed), chosen by selects: a runtime
/// index into the array would put it in local memory on the GPU (warp_xxh64).
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_init_lane(std::uint64_t seed, unsigned i) {
  const std::uint64_t offset = i == 0   ? xxh_prime64_1 + xxh_prime64_2
                               : i == 1 ? xxh_prime64_2
                               : i == 2 ? 0
                                        : std::uint64_t{0} - xxh_prime64_1;
  return seed + offset;
}

/// Spec step 2: feeds one 32-byte stripe at `p`, 8 bytes to each lane.
GBF_HD GBF_FORCEINLINE void xxh64_consume_stripe(xxh64_lanes& lanes, const unsigned char* p) {
  lanes.v[0] = xxh64_round(lanes.v[0], load_le64(p));
  lanes.v[1] = xxh64_round(lanes.v[1], load_le64(p + 8));
  lanes.v[2] = xxh64_round(lanes.v[2], load_le64(p + 16));
  lanes.v[3] = xxh64_round(lanes.v[3], load_le64(p + 24));
}

/// Spec step 3: the converged accumulator of the four lanes (before the length is added).
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_converge(const xxh64_lanes& l) {
  std::uint64_t h = rotl64(l.v[0], 1) + rotl64(l.v[1], 7) + rotl64(l.v[2], 12) + rotl64(l.v[3], 18);
  h = xxh64_merge_round(h, l.v[0]);
  h = xxh64_merge_round(h, l.v[1]);
  h = xxh64_merge_round(h, l.v[2]);
  h = xxh64_merge_round(h, l.v[3]);
  return h;
}

/// Spec steps 5 and 6: consumes the last `len` < 32 bytes at `p` (8, 4, then 1 at a
/// time) into `h` (the accumulator with the total length already added) and avalanches.
GBF_HD GBF_FORCEINLINE std::uint64_t xxh64_finish(std::uint64_t h, const unsigned char* p,
                                                  std::size_t len) {
  const unsigned char* const end = p + len;
  for (; p + 8 <= end; p += 8) h = xxh64_tail8(h, load_le64(p));
  if (p + 4 <= end) {
    h = xxh64_tail4(h, load_le32(p));
    p += 4;
  }
  for (; p < end; ++p) h = xxh64_tail1(h, *p);
  return xxh64_avalanche(h);
}

}  // namespace detail

/// xxHash64 of `len` bytes at `data` with `seed` (any alignment, host or device).
GBF_HD inline std::uint64_t xxh64(const void* data, std::size_t len, std::uint64_t seed = 0) {
  using namespace detail;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h;
  if (len >= 32) {
    xxh64_lanes lanes = xxh64_init_lanes(seed);
    const unsigned char* const last_stripe = p + len - 32;
    do {
      xxh64_consume_stripe(lanes, p);
      p += 32;
    } while (p <= last_stripe);
    h = xxh64_converge(lanes);
  } else {
    h = seed + xxh_prime64_5;
  }
  h += static_cast<std::uint64_t>(len);
  const auto consumed = static_cast<std::size_t>(p - static_cast<const unsigned char*>(data));
  return xxh64_finish(h, p, len - consumed);
}

/// xxHash64 of the 8 little-endian bytes of `key` (same value as xxh64(&key, 8, seed)).
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_u64(std::uint64_t key, std::uint64_t seed = 0) {
  using namespace detail;
  return xxh64_avalanche(xxh64_tail8(seed + xxh_prime64_5 + 8, key));
}

/// xxHash64 of the 4 little-endian bytes of `key` (same value as xxh64(&key, 4, seed)).
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t xxh64_u32(std::uint32_t key, std::uint64_t seed = 0) {
  using namespace detail;
  return xxh64_avalanche(xxh64_tail4(seed + xxh_prime64_5 + 4, key));
}

/// The key hash every gbf backend uses: xxh64 of the key's little-endian bytes.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t hash_key(std::uint64_t key, std::uint64_t seed) {
  return xxh64_u64(key, seed);
}
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t hash_key(std::uint32_t key, std::uint64_t seed) {
  return xxh64_u32(key, seed);
}
/// Byte-string keys hash their bytes, no length prefix (Parquet BYTE_ARRAY hashing).
GBF_HD GBF_FORCEINLINE std::uint64_t hash_key(const void* bytes, std::size_t len,
                                              std::uint64_t seed) {
  return xxh64(bytes, len, seed);
}

}  // namespace gbf
