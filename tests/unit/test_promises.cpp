// The statistical promises of sizing, measured on real filters (CPU backend, the
// same bits as every backend): the false-positive rate a user asks for is the
// one they get, estimated_keys is within 1%, over_capacity fires at 1.1x
// capacity and not at 0.9x, and add_new counts distinct keys minus false
// positives. Every bound is 5 standard deviations of the quantity measured,
// with the deviation computed, not guessed.
//
// Run time: by default a quick subset (the layouts that once missed their target,
// the default layout and layouts whose k is not a multiple of W), a few seconds
// on 2 cores. GBF_PROMISES_FULL=1 sweeps every block width W in {1, 2, 4, 8, 16}
// with several k from W to 32 and fpp 0.1, 0.01, 0.001 (about a minute on 2
// cores):  GBF_PROMISES_FULL=1 ctest --preset cpu-only -L promises
// The FPR cases print "fpr W/k ..." lines; docs/layout.md's table comes from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"
#include "tests/support.hpp"

namespace {

using gbf::test::random_keys;

bool full_sweep() {
  const char* v = std::getenv("GBF_PROMISES_FULL");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

gbf::options on_cpu() {
  gbf::options opts;
  opts.where = gbf::backend::cpu;
  return opts;
}

struct wk {
  std::uint32_t w, k;
};

// Quick: the layouts of issue 19's table (k > W missed 1% by 2-6%), the default,
// k = W, and k not a multiple of W.
std::vector<wk> layouts_to_test() {
  if (!full_sweep())
    return {{8, 8}, {1, 4}, {2, 6}, {4, 8}, {8, 16}, {16, 24}, {2, 5}, {4, 7}, {16, 16}};
  return {{1, 1},  {1, 2},  {1, 3},  {1, 4},  {1, 5},  {1, 8},  {1, 13}, {1, 16}, {1, 32},
          {2, 2},  {2, 3},  {2, 5},  {2, 6},  {2, 8},  {2, 11}, {2, 16}, {2, 32}, {4, 4},
          {4, 5},  {4, 6},  {4, 7},  {4, 8},  {4, 10}, {4, 13}, {4, 16}, {4, 32}, {8, 8},
          {8, 9},  {8, 12}, {8, 16}, {8, 20}, {8, 24}, {8, 31}, {8, 32}, {16, 16}, {16, 17},
          {16, 20}, {16, 24}, {16, 31}, {16, 32}};
}

std::vector<double> fpps_to_test() {
  if (!full_sweep()) return {0.01};
  return {0.1, 0.01, 0.001};
}

gbf::shape shape_of(wk s) { return gbf::shape{s.w, s.k, 0}; }

// ---------------------------------------------------------------------------
// An independent implementation of the FPR model, straight from its definition:
// a word of a block holding j keys has received m = j c independent uniform
// probes (c = the word's probes per key); X, its number of set bits, follows the
// occupancy recurrence P_{m+1}(x) = P_m(x) x/32 + P_m(x-1) (33-x)/32. An absent
// key's c probes all hit set bits with probability (X/32)^c, so a block's FPR is
// g = prod_w (X_w/32)^c_w, the words filling independently given j.
// block_moments(l, j_max)[j] = {E[g | j], E[g^2 | j]}.
struct moments {
  double g = 0, g2 = 0;
};

std::vector<moments> block_moments(const gbf::layout& l, int j_max) {
  const std::uint32_t w = l.words_per_block, k = l.bits_per_key;
  // Two word classes: ceil(k/W) probes (k mod W words), floor(k/W) (the rest).
  const std::uint32_t probes[2] = {k / w + 1, k / w};
  const std::uint32_t words[2] = {k % w, w - k % w};
  std::array<std::array<double, 33>, 2> occupancy{};
  occupancy[0][0] = occupancy[1][0] = 1;
  auto advance = [](std::array<double, 33>& p) {
    for (int x = 32; x >= 1; --x) p[x] = p[x] * x / 32.0 + p[x - 1] * (33 - x) / 32.0;
    p[0] = 0;
  };
  auto moment = [](const std::array<double, 33>& p, double r) {
    double e = 0;
    for (int x = 1; x <= 32; ++x) e += p[x] * std::pow(x / 32.0, r);
    return e;
  };
  std::vector<moments> out(j_max + 1);
  for (int j = 0; j <= j_max; ++j) {
    if (j > 0)
      for (int c = 0; c < 2; ++c)
        for (std::uint32_t t = 0; t < probes[c]; ++t) advance(occupancy[c]);
    moments m{1, 1};
    for (int c = 0; c < 2; ++c) {
      if (words[c] == 0) continue;
      m.g *= std::pow(moment(occupancy[c], probes[c]), words[c]);
      m.g2 *= std::pow(moment(occupancy[c], 2.0 * probes[c]), words[c]);
    }
    out[j] = m;
  }
  return out;
}

// The Poisson(n / blocks) mixture: E[g], which must equal gbf::expected_fpr, and
// Var(g), whose spread over blocks makes one filter's FPR differ from E[g]:
//   Var(FPR of one filter) = Var(g) / blocks.
struct fpr_moments {
  double mean = 0;
  double per_block_variance = 0;
};

fpr_moments block_fpr_moments(const gbf::layout& l, double num_keys) {
  const double lambda = num_keys / static_cast<double>(l.num_blocks);
  if (!(lambda > 0)) return {};
  const int j_max = static_cast<int>(lambda + 15 * std::sqrt(lambda) + 40);
  const std::vector<moments> by_j = block_moments(l, j_max);
  fpr_moments out;
  double second = 0;
  for (int j = 0; j <= j_max; ++j) {
    const double pmf = std::exp(-lambda + j * std::log(lambda) - std::lgamma(j + 1.0));
    out.mean += pmf * by_j[j].g;
    second += pmf * by_j[j].g2;
  }
  out.per_block_variance = second - out.mean * out.mean;
  return out;
}

/// 10^7 odd keys; the filters hold even keys, so none of these was added.
const std::vector<std::uint64_t>& absent_keys() {
  static const std::vector<std::uint64_t> keys = [] {
    auto k = random_keys<std::uint64_t>(10'000'000, 1919);
    for (auto& key : k) key |= 1;
    return k;
  }();
  return keys;
}

std::vector<std::uint64_t> even_keys(std::size_t n, std::uint64_t seed) {
  auto k = random_keys<std::uint64_t>(n, seed);
  for (auto& key : k) key &= ~std::uint64_t{1};
  return k;
}

TEST(ModelOracle, ExpectedFprEqualsTheOccupancyModelForEveryLayout) {
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    for (std::uint32_t k = w; k <= 32; ++k) {
      for (double lambda : {0.05, 1.0, 7.5, 40.0}) {
        const gbf::layout l{w, k, 0, 100'000};
        const double n = lambda * 100'000;
        const double oracle = block_fpr_moments(l, n).mean;
        EXPECT_NEAR(gbf::expected_fpr(l, n), oracle, 1e-9 * oracle)
            << "W " << w << " k " << k << " keys per block " << lambda;
      }
    }
  }
}

// The model's premise for k > W, checked on the probe derivation itself: the
// probes j, j+W, j+2W, ... of a key that share word j mod W come from the same
// 32-bit half of the hash with different odd multipliers, yet the number of
// distinct bits they set must follow the law of independent uniform probes,
// P(d distinct | c probes) = occupancy after c probes. Chi-square over 2^20
// hashes per layout, for every word class.
TEST(ModelOracle, ProbesSharingAWordSetAsManyDistinctBitsAsIndependentProbes) {
  for (const wk s : layouts_to_test()) {
    for (std::uint32_t w = 0; w < s.w && w < 2; ++w) {  // words 0 and 1 cover both classes
      const std::uint32_t c = gbf::probes_in_word(w, s.w, s.k);
      if (c == 1) continue;  // one probe: always one bit
      std::array<double, 33> expected{};
      {
        std::array<double, 33> p{};
        p[0] = 1;
        for (std::uint32_t t = 0; t < c; ++t) {
          for (int x = 32; x >= 1; --x) p[x] = p[x] * x / 32.0 + p[x - 1] * (33 - x) / 32.0;
          p[0] = 0;
        }
        expected = p;
      }
      const std::uint64_t samples = std::uint64_t{1} << 20;
      std::array<std::uint64_t, 33> seen{};
      for (std::uint64_t i = 0; i < samples; ++i)
        ++seen[__builtin_popcount(gbf::word_mask(gbf::xxh64_u64(i, 7), w, s.w, s.k))];
      // Cells expected to hold at least 20 samples; the rest pooled into one.
      double chi2 = 0, pooled_expected = 0, pooled_seen = 0;
      int cells = 0;
      for (int d = 1; d <= 32; ++d) {
        const double e = expected[d] * samples;
        if (e >= 20) {
          chi2 += (seen[d] - e) * (seen[d] - e) / e;
          ++cells;
        } else {
          pooled_expected += e;
          pooled_seen += seen[d];
        }
      }
      if (pooled_expected >= 20) {
        chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
        ++cells;
      }
      const double dof = cells - 1;
      std::printf("distinct bits %u/%u word %u (%u probes): chi-square %.1f on %.0f dof\n", s.w, s.k, w, c, chi2, dof);
      EXPECT_LT((chi2 - dof) / std::sqrt(2 * dof), 5.0)
          << "layout " << s.w << "/" << s.k << " word " << w << " (" << c << " probes): chi-square " << chi2
          << " on " << dof << " degrees of freedom";
    }
  }
}

// ---------------------------------------------------------------------------
// 1. The FPR: 10^6 keys, 10^7 absent keys, within 5 sigma of expected_fpr, and
// expected_fpr meets the target. sigma^2 = binomial p(1-p)/probes plus the
// spread of one filter's FPR around the expectation (block_fpr_moments).
// A sharper second check takes the filter's actual keys per block as given
// (hashing the keys as the filter does): the FPR expected of these very blocks
// is mean_b E[g | j_b], and only the bit patterns within blocks and the probes
// vary, which resolves model errors of about 1% at fpp 0.01.
TEST(Promises, MeasuredFprMatchesThePredictionForEveryLayout) {
  const auto& absent = absent_keys();
  const std::uint64_t n = 1'000'000;
  for (const wk s : layouts_to_test()) {
    for (const double fpp : fpps_to_test()) {
      gbf::filter f = gbf::filter::create(n, fpp, on_cpu(), shape_of(s));
      const gbf::layout& l = f.layout();
      const auto keys = even_keys(n, 1000 * s.w + s.k);
      f.add(keys.data(), keys.size());
      ASSERT_EQ(f.count(keys.data(), keys.size()), n) << "false negatives";
      const double probes = static_cast<double>(absent.size());
      const double measured = static_cast<double>(f.count(absent.data(), absent.size())) / probes;
      const double predicted = gbf::expected_fpr(l, static_cast<double>(n));
      const fpr_moments m = block_fpr_moments(l, static_cast<double>(n));
      const double binomial = predicted * (1 - predicted) / probes;
      const double sigma = std::sqrt(binomial + m.per_block_variance / static_cast<double>(l.num_blocks));
      const double z = (measured - predicted) / sigma;

      std::vector<std::uint32_t> keys_in_block(l.num_blocks, 0);
      for (const std::uint64_t key : keys) ++keys_in_block[gbf::block_index(gbf::xxh64_u64(key, l.seed), l.num_blocks)];
      const std::vector<moments> by_j =
          block_moments(l, *std::max_element(keys_in_block.begin(), keys_in_block.end()));
      double given_blocks = 0, within_blocks = 0;
      for (const std::uint32_t j : keys_in_block) {
        given_blocks += by_j[j].g;
        within_blocks += by_j[j].g2 - by_j[j].g * by_j[j].g;
      }
      const double blocks = static_cast<double>(l.num_blocks);
      given_blocks /= blocks;
      const double sigma_given = std::sqrt(binomial + within_blocks / (blocks * blocks));
      const double z_given = (measured - given_blocks) / sigma_given;

      std::printf("fpr %u/%u fpp %g: bits/key %.2f measured %.6f predicted %.6f sigma %.2e z %+.2f"
                  " | given blocks %.6f sigma %.2e z %+.2f\n",
                  s.w, s.k, fpp, gbf::bits_per_key_at(l, n), measured, predicted, sigma, z, given_blocks,
                  sigma_given, z_given);
      EXPECT_LE(predicted, fpp) << "sizing misses the target for " << s.w << "/" << s.k;
      EXPECT_LT(std::fabs(z), 5.0) << "layout " << s.w << "/" << s.k << " fpp " << fpp
                                   << ": measured " << measured << " predicted " << predicted;
      EXPECT_LT(std::fabs(z_given), 5.0) << "layout " << s.w << "/" << s.k << " fpp " << fpp
                                         << ": measured " << measured << " given the blocks' keys "
                                         << given_blocks;
    }
  }
}

// ---------------------------------------------------------------------------
// 2. estimated_keys within 1% (and within 5 of its own standard errors) at fill
// ratios 0.1 .. 0.9, in filters of 2^21 bits where the estimate's noise at fill
// 0.9 is about 0.1%.
TEST(Promises, EstimatedKeysWithinOnePercentUpToFillNinetyPercent) {
  for (const wk s : layouts_to_test()) {
    const gbf::layout l{s.w, s.k, 0, (std::uint64_t{1} << 21) / (32 * s.w)};
    gbf::filter f(l, on_cpu());
    std::mt19937_64 rng(77 * s.w + s.k);
    const std::size_t chunk = 2048;
    std::vector<std::uint64_t> keys(chunk);
    std::uint64_t added = 0;
    int checked = 0;
    for (double target_fill = 0.1; target_fill < 0.95; target_fill += 0.2) {
      // Add keys until the fill ratio passes the target (chunks of 2048 keys:
      // at most ~1% of the keys at fill 0.1 in the smallest case).
      while (f.stats().fill_ratio < target_fill) {
        for (auto& key : keys) key = rng();
        f.add(keys.data(), keys.size());
        added += chunk;
        ASSERT_EQ(f.count(keys.data(), keys.size()), chunk) << "false negatives";
      }
      const gbf::filter_stats st = f.stats();
      const double n = static_cast<double>(added);
      EXPECT_NEAR(st.estimated_keys, n, 0.01 * n)
          << "layout " << s.w << "/" << s.k << " fill " << st.fill_ratio;
      EXPECT_NEAR(st.estimated_keys, n, 5 * gbf::estimate_standard_error(l, n))
          << "layout " << s.w << "/" << s.k << " fill " << st.fill_ratio;
      ++checked;
    }
    EXPECT_EQ(checked, 5);
  }
}

// The standard error that over_capacity relies on is the real spread of the
// estimate: 200 filters of 10^4 keys each.
TEST(Promises, EstimateStandardErrorIsTheSpreadOfEstimates) {
  const std::vector<wk> shapes = {{8, 8}, {1, 1}, {1, 4}, {2, 5}, {16, 24}, {1, 32}};
  for (const wk s : shapes) {
    for (const double fpp : {0.3, 0.01}) {
      const std::uint64_t n = 10'000;
      const gbf::layout l = gbf::size_for(n, fpp, shape_of(s));
      const int trials = 200;
      double sum = 0, sum_sq = 0;
      for (int t = 0; t < trials; ++t) {
        gbf::filter f(l, on_cpu(), n);
        const auto keys = random_keys<std::uint64_t>(n, 5000 + t);
        f.add(keys.data(), keys.size());
        const double e = f.stats().estimated_keys;
        sum += e;
        sum_sq += e * e;
      }
      const double mean = sum / trials;
      const double spread = std::sqrt((sum_sq - trials * mean * mean) / (trials - 1));
      const double model = gbf::estimate_standard_error(l, static_cast<double>(n));
      // The sample deviation of 200 draws is within 5 * 1/sqrt(2 * 199) = 25% of the true one.
      EXPECT_NEAR(spread / model, 1.0, 0.25) << "layout " << s.w << "/" << s.k << " fpp " << fpp;
      EXPECT_NEAR(mean, static_cast<double>(n), 5 * model / std::sqrt(trials * 1.0));
    }
  }
}

// ---------------------------------------------------------------------------
// 3. over_capacity: raised at 1.1x capacity, not at 0.9x, rarely at exactly
// capacity (the margin is 3 standard errors of the estimate: 0.13% of filters
// at capacity). 1.1x is resolvable once 0.1 capacity exceeds the margin plus a
// few standard errors; the error is 0.01-0.65 sqrt(n) at fpp up to 0.1 and up
// to 1.2 sqrt(n) at 0.5, so at 10^3 keys and fpp <= 0.01 a 1.1x filter is at
// least 4 standard errors past the margin (the worst layout, 2/32; 8.5 for the
// default), and at 10^4 keys and fpp up to 0.3 at least 7. The former margin, 3 sqrt(capacity), missed 1.1x
// at 10^3 keys for 18 of the full sweep's layouts at fpp 0.01 and 0.001.
TEST(Promises, OverCapacityAtOnePointOneTimesCapacityNotAtZeroPointNine) {
  int at_capacity_flagged = 0, at_capacity_cases = 0;
  for (const wk s : layouts_to_test()) {
    for (const double fpp : {0.3, 0.1, 0.01, 0.001}) {
      for (const std::uint64_t capacity : {1'000ULL, 10'000ULL, 200'000ULL}) {
        if (capacity < 10'000 && fpp > 0.01) continue;
        const auto keys = random_keys<std::uint64_t>(capacity * 11 / 10, capacity + s.w * 100 + s.k);
        gbf::filter f = gbf::filter::create(capacity, fpp, on_cpu(), shape_of(s));
        const std::size_t at_09 = capacity * 9 / 10;
        f.add(keys.data(), at_09);
        EXPECT_FALSE(f.stats().over_capacity)
            << "0.9x, layout " << s.w << "/" << s.k << " fpp " << fpp << " capacity " << capacity;
        f.add(keys.data() + at_09, capacity - at_09);
        at_capacity_flagged += f.stats().over_capacity;
        ++at_capacity_cases;
        f.add(keys.data() + capacity, keys.size() - capacity);
        EXPECT_TRUE(f.stats().over_capacity)
            << "1.1x, layout " << s.w << "/" << s.k << " fpp " << fpp << " capacity " << capacity
            << ": estimated " << f.stats().estimated_keys;
        ASSERT_EQ(f.count(keys.data(), keys.size()), keys.size()) << "false negatives";
      }
    }
  }
  // Expected 0.13% of the cases; this bound is passed with probability < 10^-3.
  EXPECT_LE(at_capacity_flagged, 2 + at_capacity_cases / 100)
      << "of " << at_capacity_cases << " filters at exactly capacity";
}

// ---------------------------------------------------------------------------
// 4. add_new: among D distinct keys (each repeated up to 3 times, shuffled),
// the first occurrences reported new are D minus the false positives, whose
// expected number is sum_{i < D} expected_fpr(i) (key i meets a filter of i
// keys). Repeats are never new. Filled to 2x capacity so the false positives
// number ~10^4 and the count resolves the FPR model to ~1%.
// sigma^2 = sum_i F_i (1 - F_i) + (sum_i sd(F_i))^2: Bernoulli noise given the
// filter, plus the filter's own FPR spread (fully correlated across i, an upper bound).
TEST(Promises, AddNewCountsDistinctKeysMinusFalsePositives) {
  for (const wk s : layouts_to_test()) {
    const std::uint64_t capacity = 50'000;
    const std::uint64_t distinct = 2 * capacity;
    gbf::filter f = gbf::filter::create(capacity, 0.01, on_cpu(), shape_of(s));
    const gbf::layout& l = f.layout();
    const auto keys = random_keys<std::uint64_t>(distinct, 31 * s.w + s.k);
    std::vector<std::uint64_t> batch;
    std::mt19937_64 rng(s.k);
    for (std::uint64_t i = 0; i < distinct; ++i)
      for (std::uint64_t r = 0, copies = 1 + rng() % 3; r < copies; ++r) batch.push_back(keys[i]);
    std::shuffle(batch.begin(), batch.end(), rng);
    // Two calls, so the second batch's keys also meet keys of the first.
    std::unique_ptr<bool[]> is_new(new bool[batch.size()]);
    const std::size_t half = batch.size() / 2;
    f.add_new(batch.data(), half, is_new.get());
    f.add_new(batch.data() + half, batch.size() - half, is_new.get() + half);

    std::vector<bool> seen_first(distinct, false);
    std::uint64_t reported_new = 0, repeats_new = 0;
    {
      std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted(distinct);
      for (std::uint64_t i = 0; i < distinct; ++i) sorted[i] = {keys[i], i};
      std::sort(sorted.begin(), sorted.end());
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(batch[i], std::uint64_t{0}));
        const std::uint64_t id = it->second;
        if (!seen_first[id]) {
          seen_first[id] = true;
          reported_new += is_new[i];
        } else {
          repeats_new += is_new[i];
        }
      }
    }
    EXPECT_EQ(repeats_new, 0u) << "a repeat is never new";
    ASSERT_EQ(f.count(keys.data(), keys.size()), distinct) << "false negatives";

    // Expected false positives and their deviation, by Simpson's rule over i.
    const int intervals = 200;
    double expected_fp = 0, bernoulli_var = 0, sd_sum = 0;
    for (int t = 0; t <= intervals; ++t) {
      const double i = static_cast<double>(distinct) * t / intervals;
      const double weight = (t == 0 || t == intervals ? 1 : (t % 2 ? 4 : 2)) *
                            static_cast<double>(distinct) / (3.0 * intervals);
      const double fpr = gbf::expected_fpr(l, i);
      const fpr_moments m = block_fpr_moments(l, i);
      expected_fp += weight * fpr;
      bernoulli_var += weight * fpr * (1 - fpr);
      sd_sum += weight * std::sqrt(std::max(m.per_block_variance, 0.0) / static_cast<double>(l.num_blocks));
    }
    const double sigma = std::sqrt(bernoulli_var + sd_sum * sd_sum);
    const double false_positives = static_cast<double>(distinct - reported_new);
    std::printf("add_new %u/%u: %llu distinct, %.0f false positives, expected %.1f, sigma %.1f\n", s.w,
                s.k, static_cast<unsigned long long>(distinct), false_positives, expected_fp, sigma);
    EXPECT_NEAR(false_positives, expected_fp, 5 * sigma) << "layout " << s.w << "/" << s.k;
  }
}

}  // namespace
