// Sizing: the exact blocked-filter FPR, the search for the smallest filter, and
// every way a request can be impossible.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gbf/error.hpp"
#include "gbf/sizing.hpp"

namespace {

const gbf::shape all_shapes[] = {{8, 8, 0}, {1, 1, 0}, {1, 4, 0}, {2, 3, 0}, {4, 4, 0},
                                 {4, 6, 0}, {8, 12, 0}, {16, 16, 0}, {16, 23, 0}, {8, 32, 0}};

std::string message_of(std::uint64_t capacity, double fpp, gbf::shape s = {}) {
  try {
    gbf::size_for(capacity, fpp, s);
  } catch (const gbf::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Sizing, ChoosesTheSmallestBlockCountMeetingTheTarget) {
  for (const gbf::shape& s : all_shapes) {
    for (std::uint64_t capacity : {1ULL, 10ULL, 1000ULL, 123457ULL, 10000000ULL}) {
      for (double fpp : {0.9, 0.3, 0.1, 0.01, 0.001, 1e-5, 1e-9}) {  // past 1e-5 the search gallops far above a classic size
        const double n = static_cast<double>(capacity);
        gbf::layout largest{s.words_per_block, s.bits_per_key, s.seed, gbf::max_num_blocks};
        if (gbf::expected_fpr(largest, n) > fpp) {
          // e.g. one bit per key in 32-bit blocks cannot reach 1e-5 for 10 M keys.
          EXPECT_THROW(gbf::size_for(capacity, fpp, s), gbf::invalid_argument);
          continue;
        }
        const gbf::layout l = gbf::size_for(capacity, fpp, s);
        ASSERT_LE(gbf::expected_fpr(l, n), fpp);
        if (l.num_blocks > 1) {
          gbf::layout smaller = l;
          --smaller.num_blocks;
          ASSERT_GT(gbf::expected_fpr(smaller, n), fpp)
              << "W " << s.words_per_block << " k " << s.bits_per_key << " n " << capacity;
        }
        ASSERT_EQ(l.words_per_block, s.words_per_block);
        ASSERT_EQ(l.bits_per_key, s.bits_per_key);
      }
    }
  }
}

TEST(Sizing, BlockedFilterCostsMoreBitsThanTheClassicFormula) {
  for (double fpp : {0.1, 0.01, 0.001}) {
    const gbf::layout l = gbf::size_for(10'000'000, fpp);
    const double blocked = gbf::bits_per_key_at(l, 10'000'000);
    const double classic = gbf::classic_bits_per_key(fpp);
    EXPECT_GT(blocked, classic);
    EXPECT_LT(blocked, 1.3 * classic) << "the split-block price stays moderate at fpp " << fpp;
  }
  EXPECT_NEAR(gbf::classic_bits_per_key(0.01), 9.585, 1e-3);
}

TEST(Sizing, ExpectedFprMatchesTheSplitBlockClosedFormForOneKeyPerBlock) {
  // Poisson(1) mixture of (1 - (31/32)^j)^8, summed directly.
  gbf::layout l;
  l.num_blocks = 1000;
  double direct = 0, pmf = std::exp(-1.0);
  for (int j = 0; j < 60; ++j) {
    if (j > 0) pmf /= j;
    direct += pmf * std::pow(1 - std::pow(31.0 / 32.0, j), 8);
  }
  EXPECT_NEAR(gbf::expected_fpr(l, 1000), direct, 1e-15);
  EXPECT_EQ(gbf::expected_fpr(l, 0), 0.0);
}

TEST(Sizing, TwoProbesPerWordUseTheSecondMomentOfTheWordsFill) {
  // W = 1, k = 2 and W = 2, k = 4: every word takes c = 2 probes per key, so a
  // block of j keys has put m = 2j probes in each word, and a query's two
  // probes both hit set bits with probability E[X^2] / 32^2, X the word's set
  // bits. Closed form: E[X] = 32 (1 - (31/32)^m), E[X (X - 1)] = 32 * 31 *
  // (1 - 2 (31/32)^m + (30/32)^m). The old shortcut (1 - (31/32)^m)^2 ignored
  // that the two probes can coincide and undershot.
  for (std::uint32_t w : {1u, 2u}) {
    gbf::layout l{w, 2 * w, 0, 1000};
    double direct = 0, shortcut = 0, pmf = std::exp(-1.0);  // one key per block on average
    for (int j = 0; j < 60; ++j) {
      if (j > 0) pmf /= j;
      const double m = 2.0 * j;
      const double mean = 32 * (1 - std::pow(31.0 / 32, m));
      const double falling = 32 * 31 * (1 - 2 * std::pow(31.0 / 32, m) + std::pow(30.0 / 32, m));
      direct += pmf * std::pow((falling + mean) / 1024, w);
      shortcut += pmf * std::pow(1 - std::pow(31.0 / 32, m), 2 * w);
    }
    EXPECT_NEAR(gbf::expected_fpr(l, 1000), direct, 1e-13 * direct) << "W " << w;
    EXPECT_GT(direct, 1.005 * shortcut) << "W " << w;  // ~1% at one key per block
  }
}

TEST(Sizing, SplitBlockLayoutsKeepTheirBlockCounts) {
  // k = W was exact before the model covered k > W; these sizes must not move.
  struct pinned {
    std::uint64_t capacity;
    double fpp;
    std::uint32_t w;
    std::uint64_t num_blocks;
  };
  const pinned cases[] = {{10'000'000, 0.01, 8, 411299},         {1'000'000, 0.001, 8, 65976},
                          {1'000'000'000, 0.01, 8, 41129819},    {123457, 0.1, 8, 2888},
                          {5000, 1e-6, 8, 1263},                 {10'000'000, 0.01, 1, 31093489},
                          {1'000'000'000, 0.01, 1, 3109348828},  {10'000'000, 0.01, 16, 243424},
                          {1'000'000, 0.001, 16, 33673},         {5000, 1e-6, 16, 384}};
  for (const pinned& c : cases)
    EXPECT_EQ(gbf::size_for(c.capacity, c.fpp, {c.w, c.w, 0}).num_blocks, c.num_blocks)
        << c.capacity << " keys at " << c.fpp << ", W = k = " << c.w;
}

TEST(Sizing, FprClimbsFastPastCapacity) {
  const gbf::layout l = gbf::size_for(1'000'000, 0.01);
  const double at_capacity = gbf::expected_fpr(l, 1e6);
  const double at_double = gbf::expected_fpr(l, 2e6);
  EXPECT_LE(at_capacity, 0.01);
  EXPECT_GT(at_double, 0.12);
  EXPECT_LT(at_double, 0.2);
}

// The Poisson sum once looped forever past 2^53 keys per block (j += 1 stops moving)
// and on +infinity, which estimate_distinct_keys returns for a full filter, and its
// rounding could exceed 1 by 1e-8.
TEST(Sizing, ExpectedFprIsAProbabilityThatNeverFallsForAnyKeyCount) {
  for (const gbf::shape& s : all_shapes) {
    for (std::uint64_t num_blocks : {std::uint64_t{1}, std::uint64_t{1000}}) {
      gbf::layout l;
      l.words_per_block = s.words_per_block;
      l.bits_per_key = s.bits_per_key;
      l.num_blocks = num_blocks;
      double previous = 0;
      for (double keys = 1; keys < 1e40; keys *= 3.7) {
        const double fpr = gbf::expected_fpr(l, keys);
        // Non-decreasing up to the Poisson sum's rounding (about 1e-11).
        ASSERT_GE(fpr, previous * (1 - 1e-9)) << s.words_per_block << "/" << s.bits_per_key << " at " << keys;
        ASSERT_LE(fpr, 1.0) << s.words_per_block << "/" << s.bits_per_key << " at " << keys;
        previous = fpr;
      }
      EXPECT_EQ(previous, 1.0);
      const double full = gbf::estimate_distinct_keys(l, l.num_bits());
      ASSERT_TRUE(std::isinf(full));
      EXPECT_EQ(gbf::expected_fpr(l, full), 1.0);
      EXPECT_TRUE(std::isinf(gbf::estimate_standard_error(l, full)));
      EXPECT_EQ(gbf::expected_fpr(l, std::numeric_limits<double>::quiet_NaN()), 0.0);
    }
  }
}

TEST(Sizing, RejectsImpossibleRequestsWithNamedErrors) {
  EXPECT_NE(message_of(0, 0.01).find("capacity"), std::string::npos);
  for (double fpp : {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::infinity()})
    EXPECT_NE(message_of(100, fpp).find("fpp must be in (0, 1)"), std::string::npos) << fpp;
  EXPECT_NE(message_of(100, std::nan("")).find("NaN"), std::string::npos);
  EXPECT_NE(message_of(100, 0.01, {3, 8, 0}).find("words_per_block"), std::string::npos);
  EXPECT_NE(message_of(100, 0.01, {8, 4, 0}).find("bits_per_key"), std::string::npos);
  // 2^32 blocks cannot hold 10^13 keys at 10^-9.
  const std::string too_big = message_of(10'000'000'000'000ULL, 1e-9);
  EXPECT_NE(too_big.find("2^32 blocks"), std::string::npos) << too_big;
  EXPECT_THROW(gbf::classic_bits_per_key(0), gbf::invalid_argument);
  EXPECT_THROW(gbf::bits_per_key_at(gbf::layout{}, 0), gbf::invalid_argument);
}

TEST(Sizing, ModelsRefuseAnInvalidLayoutRatherThanReturnANumber) {
  // W = 3 gave an FPR of 0.023 and 0 blocks an estimate of infinity.
  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const gbf::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  gbf::layout odd_width{3, 8, 0, 1024};
  gbf::layout no_blocks{8, 8, 0, 0};
  gbf::layout few_bits{8, 4, 0, 1024};
  for (const gbf::layout& l : {odd_width, no_blocks, few_bits}) {
    const std::string problem = gbf::layout_problem(l);
    EXPECT_EQ(message([&] { gbf::expected_fpr(l, 100); }), "expected_fpr: invalid layout: " + problem);
    EXPECT_EQ(message([&] { gbf::estimate_distinct_keys(l, 100); }),
              "estimate_distinct_keys: invalid layout: " + problem);
    EXPECT_EQ(message([&] { gbf::estimate_standard_error(l, 100); }),
              "estimate_standard_error: invalid layout: " + problem);
  }
}

TEST(Sizing, DistinctKeyEstimateInvertsTheExpectedFill) {
  for (const gbf::shape& s : all_shapes) {
    gbf::layout l;
    l.words_per_block = s.words_per_block;
    l.bits_per_key = s.bits_per_key;
    l.num_blocks = 50'000;
    for (double n : {10.0, 1e4, 2e5, 1e6}) {
      // Expected set bits after n keys: each word w of each block keeps a given
      // bit clear with probability (1 - q_w)^n.
      double unset = 0;
      for (std::uint32_t w = 0; w < l.words_per_block; ++w) {
        const double hit = (1 - std::pow(31.0 / 32.0, gbf::probes_in_word(w, l.words_per_block,
                                                                          l.bits_per_key))) /
                           static_cast<double>(l.num_blocks);
        unset += std::pow(1 - hit, n);
      }
      const double bits_set = static_cast<double>(l.num_bits()) * (1 - unset / l.words_per_block);
      const double estimate = gbf::estimate_distinct_keys(l, static_cast<std::uint64_t>(std::llround(bits_set)));
      EXPECT_NEAR(estimate, n, 0.002 * n + 2) << "W " << l.words_per_block << " k " << l.bits_per_key;
    }
  }
  gbf::layout l;
  EXPECT_EQ(gbf::estimate_distinct_keys(l, 0), 0.0);
  EXPECT_TRUE(std::isinf(gbf::estimate_distinct_keys(l, l.num_bits())));
}

}  // namespace
