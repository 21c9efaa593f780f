// The scaling chain's promises, measured (CPU backend; the GPU makes the same
// bits): as a chain grows to 1x, 4x and 16x its initial capacity, over many
// expansions, tightening ratios, capacities and layouts,
//   - no key ever added is missing (no false negatives);
//   - the measured FPR on absent keys is at most the target fpp, within 5
//     binomial standard deviations of the measurement, and agrees with the
//     chain's own model (scaling_stats::compound_fpr, from the exact per-layout
//     FPR of gbf/sizing.hpp);
//   - add_new reports each distinct key new at most once, never a key seen
//     before, and misses a truly new key only at a false-positive rate (the
//     model: a std::unordered_set of the keys added);
//   - a plain filter sized for the initial capacity breaks the same target
//     long before 16x (the reason the chain exists).
// Sizes are small enough for the whole file to run in a few seconds on 2 cores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "gbf/sizing.hpp"
#include "tests/support.hpp"

namespace gbf {
namespace {

using test::on_cpu;

struct chain_case {
  std::uint64_t initial;
  double fpp;
  std::uint32_t expansion;
  double tightening;
  shape s;
};

std::string name_of(const chain_case& c) {
  return "initial " + std::to_string(c.initial) + " fpp " + std::to_string(c.fpp) +
         " expansion " + std::to_string(c.expansion) + " r " + std::to_string(c.tightening) +
         " layout " + std::to_string(c.s.words_per_block) + "/" +
         std::to_string(c.s.bits_per_key);
}

// Keys whose top bit is set are added, keys whose top bit is clear are probed:
// the probes are absent by construction, so every hit is a false positive.
std::vector<std::uint64_t> keys_with_top_bit(std::size_t n, std::uint64_t seed, bool top) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> keys(n);
  const std::uint64_t top_bit = std::uint64_t{1} << 63;
  for (auto& k : keys) k = top ? (rng() | top_bit) : (rng() & ~top_bit);
  return keys;
}

// Five standard deviations of a rate p measured over n independent trials.
double five_sigma(double p, std::size_t n) {
  return 5 * std::sqrt(p * (1 - p) / static_cast<double>(n));
}

TEST(ScalingPromises, FprStaysUnderTheTargetAt1x4x16xAndNoKeyIsLost) {
  const std::vector<chain_case> cases = {
      {2'000, 0.01, 2, 0.5, {8, 8, 0}},   {1'000, 0.01, 2, 0.5, {16, 16, 0}},
      {3'000, 0.05, 4, 0.5, {4, 8, 1}},   {1'500, 0.01, 1, 0.5, {8, 8, 2}},
      {2'500, 0.02, 2, 0.8, {2, 6, 3}},   {1'000, 0.01, 3, 0.3, {1, 4, 4}},
      {4'000, 0.001, 2, 0.5, {16, 24, 5}}, {2'000, 0.05, 2, 0.9, {8, 16, 6}},
  };
  constexpr std::size_t probes_per_check = 200'000;
  for (const chain_case& c : cases) {
    SCOPED_TRACE(name_of(c));
    scaling_policy p;
    p.expansion = c.expansion;
    p.tightening = c.tightening;
    scaling_filter f = scaling_filter::create(c.initial, c.fpp, p, on_cpu(2), c.s);
    const auto keys = keys_with_top_bit(16 * c.initial, c.initial, true);
    const auto probes = keys_with_top_bit(probes_per_check, c.initial + 1, false);
    std::size_t added = 0;
    for (std::size_t multiple : {1u, 4u, 16u}) {
      const std::size_t target = multiple * c.initial;
      // Distinct keys are all new but for the chain's false positives at their turn.
      const std::size_t n = target - added;
      const std::uint64_t inserted = f.add(keys.data() + added, n);
      EXPECT_LE(inserted, n);
      EXPECT_GE(static_cast<double>(inserted), n * (1 - c.fpp) - 5 * std::sqrt(n * c.fpp))
          << "at " << multiple << "x";
      added = target;
      // No false negatives, ever.
      ASSERT_EQ(f.count(keys.data(), added), added) << "false negatives at " << multiple << "x";
      const std::uint64_t hits = f.count(probes.data(), probes.size());
      const double measured = static_cast<double>(hits) / static_cast<double>(probes.size());
      const scaling_stats s = f.stats();
      std::printf("scaling fpr %s at %zux: %zu levels, measured %.5f, model %.5f, target %g\n",
                  name_of(c).c_str(), multiple, s.num_levels, measured, s.compound_fpr, c.fpp);
      EXPECT_LE(measured, c.fpp + five_sigma(c.fpp, probes.size())) << "at " << multiple << "x";
      EXPECT_LE(s.compound_fpr, c.fpp) << "the model's own bound at " << multiple << "x";
      // The model's expectation: the measurement's binomial spread, plus 20% for the
      // spread of one small filter's block loads around their expectation.
      EXPECT_NEAR(measured, s.compound_fpr,
                  0.2 * s.compound_fpr + five_sigma(s.compound_fpr, probes.size()))
          << "at " << multiple << "x";
    }
    EXPECT_EQ(f.keys_inserted(), f.stats().keys_inserted);
  }
}

TEST(ScalingPromises, APlainFilterSizedForTheInitialCapacityBreaksTheTargetTheChainKeeps) {
  const std::uint64_t initial = 2'000;
  const double fpp = 0.01;
  filter plain = filter::create(initial, fpp, on_cpu(2));
  scaling_filter chain = scaling_filter::create(initial, fpp, {}, on_cpu(2));
  const auto keys = keys_with_top_bit(16 * initial, 7, true);
  const auto probes = keys_with_top_bit(100'000, 8, false);
  plain.add(keys.data(), keys.size());
  chain.add(keys.data(), keys.size());
  const double plain_fpr =
      static_cast<double>(plain.count(probes.data(), probes.size())) / probes.size();
  const double chain_fpr =
      static_cast<double>(chain.count(probes.data(), probes.size())) / probes.size();
  std::printf("at 16x capacity: plain filter FPR %.4f, scaling chain FPR %.5f (target %g)\n",
              plain_fpr, chain_fpr, fpp);
  EXPECT_GT(plain_fpr, 0.5) << "16x past capacity a plain filter is mostly ones";
  EXPECT_LE(chain_fpr, fpp + five_sigma(fpp, probes.size()));
}

TEST(ScalingPromises, AddNewIsExactlyOnceAgainstAnUnorderedSetModel) {
  const std::vector<chain_case> cases = {
      {500, 0.01, 2, 0.5, {8, 8, 0}},  {300, 0.05, 3, 0.5, {4, 4, 1}},
      {800, 0.01, 1, 0.7, {16, 16, 2}}, {200, 0.02, 2, 0.5, {1, 2, 3}},
  };
  for (const chain_case& c : cases) {
    SCOPED_TRACE(name_of(c));
    scaling_policy p;
    p.expansion = c.expansion;
    p.tightening = c.tightening;
    scaling_filter f = scaling_filter::create(c.initial, c.fpp, p, on_cpu(2), c.s);
    std::unordered_set<std::uint64_t> model;
    std::mt19937_64 rng(c.initial);
    const std::uint64_t range = 12 * c.initial;  // about 8x the initial capacity distinct keys
    std::uint64_t reported_new = 0;
    std::uint64_t fresh_missed = 0;
    std::uint64_t fresh = 0;
    std::uniform_int_distribution<std::size_t> batch_size(1, 3 * c.initial);
    for (int batch = 0; batch < 30; ++batch) {
      std::vector<std::uint64_t> keys(batch_size(rng));
      for (auto& k : keys) k = rng() % range;
      auto is_new = test::bools(keys.size());
      const std::uint64_t inserted = f.add_new(keys.data(), keys.size(), is_new.get());
      std::uint64_t counted = 0;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const bool seen = model.count(keys[i]) != 0;
        counted += is_new[i];
        if (seen) {
          ASSERT_FALSE(is_new[i]) << "key " << keys[i] << " reported new twice (batch " << batch
                                  << ", row " << i << ")";
        } else {
          ++fresh;
          fresh_missed += !is_new[i];  // a false positive of the chain at its turn
          model.insert(keys[i]);
        }
      }
      EXPECT_EQ(inserted, counted) << "add_new's return is the number of is_new";
      reported_new += counted;
      // Every key the model holds is found.
      std::vector<std::uint64_t> all(model.begin(), model.end());
      ASSERT_EQ(f.count(all.data(), all.size()), all.size()) << "false negatives, batch " << batch;
    }
    EXPECT_EQ(f.keys_inserted(), reported_new);
    EXPECT_EQ(reported_new + fresh_missed, fresh);
    // A fresh key is missed when the chain answers a false positive for it, at
    // most at the target rate.
    EXPECT_LE(static_cast<double>(fresh_missed) / static_cast<double>(fresh),
              c.fpp + five_sigma(c.fpp, fresh));
    EXPECT_GE(f.levels().size(), 3u) << "the model test should cross several levels";
    // Levels below the newest are exactly full; the newest is within capacity.
    for (std::size_t i = 0; i + 1 < f.levels().size(); ++i)
      EXPECT_EQ(f.levels()[i].keys, f.levels()[i].capacity) << "level " << i;
    EXPECT_LE(f.levels().back().keys, f.levels().back().capacity);
  }
}

}  // namespace
}  // namespace gbf
