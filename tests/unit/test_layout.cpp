// The layout math: Parquet SBBF known answers and the invariants every backend relies on.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"

namespace {

// Runtime W -> block_masks<W> for tests that sweep layouts.
void masks_for(std::uint64_t h, const gbf::layout& l, std::uint32_t* out) {
  switch (l.words_per_block) {
    case 1: { std::uint32_t m[1]; gbf::block_masks<1>(h, l.bits_per_key, m); std::memcpy(out, m, sizeof m); break; }
    case 2: { std::uint32_t m[2]; gbf::block_masks<2>(h, l.bits_per_key, m); std::memcpy(out, m, sizeof m); break; }
    case 4: { std::uint32_t m[4]; gbf::block_masks<4>(h, l.bits_per_key, m); std::memcpy(out, m, sizeof m); break; }
    case 8: { std::uint32_t m[8]; gbf::block_masks<8>(h, l.bits_per_key, m); std::memcpy(out, m, sizeof m); break; }
    case 16: { std::uint32_t m[16]; gbf::block_masks<16>(h, l.bits_per_key, m); std::memcpy(out, m, sizeof m); break; }
    default: FAIL() << "bad W";
  }
}

TEST(ParquetSbbf, SaltsAreTheSpecConstants) {
  const std::uint32_t spec[8] = {0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
                                 0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U};
  for (std::uint32_t i = 0; i < 8; ++i) EXPECT_EQ(gbf::salt(i), spec[i]);
  for (std::uint32_t i = 0; i < gbf::max_bits_per_key; ++i) EXPECT_EQ(gbf::salt(i) & 1u, 1u) << i;
}

TEST(ParquetSbbf, OneBlockFixtureForA0ToA9MatchesByteForByte) {
  // The 32-byte filter parquet-mr/Spark wrote for the strings "a0".."a9"
  // (the fixture arrow-rs tests its reader with).
  const std::vector<std::uint8_t>& expected = gbf::test::parquet_a0_to_a9();
  gbf::layout l;  // the default layout is the Parquet SBBF
  l.num_blocks = 1;
  std::uint32_t words[8] = {};
  for (int i = 0; i < 10; ++i) {
    const std::string key = "a" + std::to_string(i);
    const std::uint64_t h = gbf::xxh64(key.data(), key.size(), 0);
    ASSERT_EQ(gbf::block_index(h, l.num_blocks), 0u);
    std::uint32_t masks[8];
    gbf::block_masks<8>(h, l.bits_per_key, masks);
    for (int w = 0; w < 8; ++w) words[w] |= masks[w];
  }
  unsigned char bytes[32];
  for (int w = 0; w < 8; ++w)
    for (int b = 0; b < 4; ++b) bytes[4 * w + b] = static_cast<unsigned char>(words[w] >> (8 * b));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(bytes[i], expected[i]) << "byte " << i;
}

TEST(Layout, DefaultIsSplitBlockOneBitPerWord) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    std::uint32_t masks[8];
    gbf::block_masks<8>(rng(), 8, masks);
    for (std::uint32_t m : masks) EXPECT_EQ(__builtin_popcount(m), 1);
  }
}

TEST(Layout, BlockIndexIsMultiplyShiftAndInRangeForAnyBlockCount) {
  std::mt19937_64 rng(2);
  for (std::uint64_t num_blocks : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{1000}, (std::uint64_t{1} << 31) + 11, gbf::max_num_blocks}) {
    for (int i = 0; i < 2000; ++i) {
      const std::uint64_t h = rng();
      const std::uint64_t b = gbf::block_index(h, num_blocks);
      ASSERT_LT(b, num_blocks);
      ASSERT_EQ(b, static_cast<std::uint64_t>((static_cast<unsigned __int128>(h >> 32) * num_blocks) >> 32));
    }
  }
  // Extremes of the 32-bit fraction map to the first and last block.
  EXPECT_EQ(gbf::block_index(0, 1000), 0u);
  EXPECT_EQ(gbf::block_index(~0ULL, 1000), 999u);
}

TEST(Layout, UnrolledMasksEqualThePortableWordMaskForEveryLayout) {
  std::mt19937_64 rng(3);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    for (std::uint32_t k = w; k <= gbf::max_bits_per_key; ++k) {
      gbf::layout l;
      l.words_per_block = w;
      l.bits_per_key = k;
      for (int i = 0; i < 200; ++i) {
        const std::uint64_t h = rng();
        std::uint32_t masks[16];
        masks_for(h, l, masks);
        int bits = 0;
        for (std::uint32_t word = 0; word < w; ++word) {
          ASSERT_EQ(masks[word], gbf::word_mask(h, word, w, k)) << "W " << w << " k " << k;
          ASSERT_NE(masks[word], 0u) << "every word gets a bit";
          bits += __builtin_popcount(masks[word]);
        }
        // Probes may coincide within a word, never exceed k.
        ASSERT_LE(bits, static_cast<int>(k));
        ASSERT_GE(bits, static_cast<int>(w));
      }
    }
  }
}

TEST(Layout, ProbesPerWordSumToBitsPerKey) {
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    for (std::uint32_t k = w; k <= gbf::max_bits_per_key; ++k) {
      std::uint32_t total = 0;
      for (std::uint32_t word = 0; word < w; ++word) total += gbf::probes_in_word(word, w, k);
      EXPECT_EQ(total, k);
    }
  }
}

TEST(Layout, ProblemsAreNamed) {
  gbf::layout ok;
  EXPECT_EQ(gbf::layout_problem(ok), nullptr);
  auto problem = [](gbf::layout l) { return std::string(gbf::layout_problem(l) ? gbf::layout_problem(l) : ""); };
  gbf::layout l = ok;
  l.words_per_block = 3;
  EXPECT_NE(problem(l).find("words_per_block"), std::string::npos);
  l = ok;
  l.bits_per_key = 4;
  EXPECT_NE(problem(l).find("bits_per_key"), std::string::npos);
  l = ok;
  l.bits_per_key = 33;
  EXPECT_NE(problem(l).find("at most 32"), std::string::npos);
  l = ok;
  l.num_blocks = 0;
  EXPECT_NE(problem(l).find("num_blocks"), std::string::npos);
  l = ok;
  l.num_blocks = gbf::max_num_blocks + 1;
  EXPECT_NE(problem(l).find("2^32"), std::string::npos);
  l = ok;
  l.hash = static_cast<gbf::hash_id>(7);
  EXPECT_NE(problem(l).find("hash"), std::string::npos);
}

TEST(Layout, SizesFollowFromGeometry) {
  gbf::layout l;
  l.words_per_block = 16;
  l.num_blocks = 1000;
  EXPECT_EQ(l.num_words(), 16000u);
  EXPECT_EQ(l.num_bits(), 512000u);
  EXPECT_EQ(l.size_bytes(), 64000u);
}

}  // namespace
