// The counting filter's counter layout and word arithmetic
// (gbf/counting_layout.hpp) against field-by-field references: every word
// function updates each field on its own, saturates, floors at 0, and never
// carries into a neighbour.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gbf/counting_layout.hpp"

namespace gbf {
namespace {

constexpr std::uint32_t widths[] = {4, 8};

std::uint32_t field(std::uint32_t word, std::uint32_t i, std::uint32_t c) {
  return (word >> (i * c)) & ((1u << c) - 1);
}

// Words that stress the fields: random, and random mixes of 0, 1, max-1 and max.
std::vector<std::uint32_t> test_words(std::uint32_t c) {
  std::mt19937_64 rng(c);
  std::vector<std::uint32_t> words = {0, ~0u};
  const std::uint32_t max = (1u << c) - 1;
  const std::uint32_t edge[] = {0, 1, max - 1, max};
  for (int n = 0; n < 20000; ++n) {
    std::uint32_t w = 0;
    for (std::uint32_t i = 0; i < 32 / c; ++i)
      w |= (rng() % 2 ? edge[rng() % 4] : static_cast<std::uint32_t>(rng()) & max) << (i * c);
    words.push_back(w);
    words.push_back(static_cast<std::uint32_t>(rng()));
  }
  return words;
}

TEST(CountingLayout, CounterPositionsFollowTheDocumentedFormula) {
  // W = 8, c = 4: word 5 of block 3 is plain word 29; its bit 17 is counter 1 of
  // counter word 29 * 4 + 2 = 118.
  EXPECT_EQ(counter_word_index(3, 5, 17, 8, 4), 118u);
  EXPECT_EQ(counter_shift(17, 4), 4u);
  // c = 8: four counters per word; bit 17 is in counter word 29 * 8 + 4, shift 8.
  EXPECT_EQ(counter_word_index(3, 5, 17, 8, 8), 29u * 8 + 4);
  EXPECT_EQ(counter_shift(17, 8), 8u);
  EXPECT_EQ(counter_words_per_block(8, 4), 32u);  // 128 bytes: one GPU cache line
  layout l;
  l.num_blocks = 1000;
  EXPECT_EQ(counter_bytes(l, 4), 4 * l.size_bytes());
  EXPECT_EQ(counter_bytes(l, 8), 8 * l.size_bytes());
  // Every (w, bit) of a block has its own counter, inside the block's words.
  for (std::uint32_t c : widths) {
    for (std::uint32_t w_count : {1u, 2u, 4u, 8u, 16u}) {
      std::vector<int> used(counter_words_per_block(w_count, c) * 32, 0);
      for (std::uint32_t w = 0; w < w_count; ++w)
        for (std::uint32_t bit = 0; bit < 32; ++bit) {
          const std::uint32_t word = counter_word_in_block(w, bit, c);
          ASSERT_LT(word, counter_words_per_block(w_count, c));
          ++used[word * 32 + counter_shift(bit, c)];
        }
      for (std::size_t i = 0; i < used.size(); ++i)
        EXPECT_EQ(used[i], i % c == 0 ? 1 : 0) << "W" << w_count << " c" << c << " slot " << i;
    }
  }
  EXPECT_FALSE(is_valid_counter_bits(2));
  EXPECT_FALSE(is_valid_counter_bits(16));
  EXPECT_NE(counting_layout_problem(l, 5), nullptr);
  EXPECT_EQ(counting_layout_problem(l, 8), nullptr);
}

TEST(CountingLayout, NonzeroAndSaturatedFieldsAreExact) {
  for (std::uint32_t c : widths) {
    const std::uint32_t max = (1u << c) - 1;
    for (std::uint32_t word : test_words(c)) {
      std::uint32_t nonzero = 0, saturated = 0;
      for (std::uint32_t i = 0; i < 32 / c; ++i) {
        nonzero |= (field(word, i, c) != 0 ? 1u : 0u) << (i * c);
        saturated |= (field(word, i, c) == max ? 1u : 0u) << (i * c);
      }
      ASSERT_EQ(nonzero_fields(word, c), nonzero) << std::hex << word << " c" << c;
      ASSERT_EQ(saturated_fields(word, c), saturated) << std::hex << word << " c" << c;
    }
  }
}

TEST(CountingLayout, IncrementAndDecrementSaturateAndNeverSpill) {
  std::mt19937_64 rng(7);
  for (std::uint32_t c : widths) {
    const std::uint32_t max = (1u << c) - 1;
    for (std::uint32_t word : test_words(c)) {
      const std::uint32_t ones = spread_bits(static_cast<std::uint32_t>(rng()), c);
      const std::uint32_t up = increment_fields(word, ones, c);
      const std::uint32_t down = decrement_fields(word, ones, c);
      for (std::uint32_t i = 0; i < 32 / c; ++i) {
        const std::uint32_t v = field(word, i, c);
        const bool touched = field(ones, i, c) != 0;
        const std::uint32_t want_up = touched && v < max ? v + 1 : v;
        const std::uint32_t want_down = touched && v > 0 && v < max ? v - 1 : v;
        ASSERT_EQ(field(up, i, c), want_up) << std::hex << word << " ones " << ones;
        ASSERT_EQ(field(down, i, c), want_down) << std::hex << word << " ones " << ones;
      }
    }
  }
}

TEST(CountingLayout, SaturatingAddIsFieldwiseMin) {
  std::mt19937_64 rng(9);
  for (std::uint32_t c : widths) {
    const std::uint32_t max = (1u << c) - 1;
    const std::vector<std::uint32_t> words = test_words(c);
    for (std::size_t n = 0; n + 1 < words.size(); n += 2) {
      const std::uint32_t a = words[n], b = words[n + 1];
      const std::uint32_t sum = add_fields_saturating(a, b, c);
      for (std::uint32_t i = 0; i < 32 / c; ++i) {
        const std::uint32_t want = std::min(field(a, i, c) + field(b, i, c), max);
        ASSERT_EQ(field(sum, i, c), want);
      }
    }
  }
}

TEST(CountingLayout, SpreadAndGatherAreInverses) {
  for (std::uint32_t c : widths) {
    const std::uint32_t per_word = 32 / c;
    for (std::uint32_t bits = 0; bits < (1u << per_word); ++bits) {
      const std::uint32_t spread = spread_bits(bits, c);
      for (std::uint32_t i = 0; i < per_word; ++i)
        ASSERT_EQ(field(spread, i, c), (bits >> i) & 1u) << "bits " << bits << " c" << c;
      ASSERT_EQ(gather_fields(spread, c), bits);
    }
    // mask_fields takes counter word j's share of a plain mask.
    const std::uint32_t mask = 0x80000001u;
    EXPECT_EQ(mask_fields(mask, 0, c), 1u);
    EXPECT_EQ(mask_fields(mask, c - 1, c), 1u << ((per_word - 1) * c));
  }
}

TEST(CountingLayout, ProjectedBitsAreTheNonzeroCounters) {
  std::mt19937_64 rng(11);
  for (std::uint32_t c : widths) {
    for (int n = 0; n < 2000; ++n) {
      std::uint32_t words[8];
      std::uint32_t expected = 0;
      for (std::uint32_t j = 0; j < c; ++j) {
        words[j] = static_cast<std::uint32_t>(rng() & rng());
        for (std::uint32_t i = 0; i < 32 / c; ++i)
          if (field(words[j], i, c) != 0) expected |= 1u << (j * (32 / c) + i);
      }
      std::uint32_t bits = 0;
      for (std::uint32_t j = 0; j < c; ++j) bits |= projected_bits(words[j], j, c);
      ASSERT_EQ(bits, expected);
    }
  }
}

}  // namespace
}  // namespace gbf
