// xxh64 against the reference implementation (libxxhash) and known answers.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gbf/hash.hpp"

namespace {

TEST(Xxh64, EmptyInputKnownAnswer) {
  // The value Parquet implementations pin for the empty byte string.
  EXPECT_EQ(gbf::xxh64("", 0, 0), 17241709254077376921ULL);
}

TEST(Xxh64, MatchesLibxxhashForEveryLengthAcrossStripeBoundaries) {
  std::mt19937_64 rng(42);
  std::vector<unsigned char> buf(300);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (std::uint64_t seed : {0ULL, 1ULL, 0x9E3779B97F4A7C15ULL, ~0ULL}) {
    for (std::size_t len = 0; len <= 260; ++len) {
      // Misaligned starts exercise the byte-assembled loads.
      for (std::size_t offset : {0, 1, 3}) {
        ASSERT_EQ(gbf::xxh64(buf.data() + offset, len, seed),
                  XXH64(buf.data() + offset, len, seed))
            << "len " << len << " offset " << offset << " seed " << seed;
      }
    }
  }
}

TEST(Xxh64, MatchesLibxxhashOnLargeRandomInputs) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<unsigned char> buf(1000 + rng() % 100000);
    for (auto& b : buf) b = static_cast<unsigned char>(rng());
    const std::uint64_t seed = rng();
    ASSERT_EQ(gbf::xxh64(buf.data(), buf.size(), seed), XXH64(buf.data(), buf.size(), seed));
  }
}

TEST(Xxh64, IntegerKeysHashTheirLittleEndianBytes) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t key = rng(), seed = i % 2 ? rng() : 0;
    unsigned char le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<unsigned char>(key >> (8 * b));
    ASSERT_EQ(gbf::xxh64_u64(key, seed), XXH64(le, 8, seed));
    ASSERT_EQ(gbf::hash_key(key, seed), XXH64(le, 8, seed));
    const auto key32 = static_cast<std::uint32_t>(key);
    ASSERT_EQ(gbf::xxh64_u32(key32, seed), XXH64(le, 4, seed));
    ASSERT_EQ(gbf::hash_key(key32, seed), XXH64(le, 4, seed));
  }
}

TEST(Xxh64, KnownAnswersHoldAtCompileTime) {
  // Values printed by libxxhash 0.8.1; constexpr so a kernel can fold them too.
  static_assert(gbf::xxh64_u64(0, 0) == 0x34c96acdcadb1bbbULL);
  static_assert(gbf::xxh64_u32(0, 0) == 0x3aefa6fd5cf2deb4ULL);
  EXPECT_EQ(gbf::xxh64("hello", 5, 0), 0x26c7827d889f6da3ULL);
}

TEST(Xxh64, OneInitialLaneEqualsThatLaneOfTheFour) {
  // warp_xxh64 starts each lane's chain from xxh64_init_lane(seed, lane & 3).
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::uint64_t seed = trial < 2 ? (trial == 0 ? 0 : ~0ULL) : rng();
    const gbf::detail::xxh64_lanes lanes = gbf::detail::xxh64_init_lanes(seed);
    for (unsigned i = 0; i < 4; ++i) ASSERT_EQ(gbf::detail::xxh64_init_lane(seed, i), lanes.v[i]) << i;
  }
  static_assert(gbf::detail::xxh64_init_lane(0, 3) == gbf::detail::xxh64_init_lanes(0).v[3]);
}

}  // namespace
