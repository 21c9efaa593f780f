// The cuckoo filter on the CPU (gbf/cuckoo_filter.hpp): the table math, the
// probes, sequences of adds and removes against an exact multiset model, the
// measured FPR against the prediction, inserts up to the advertised load,
// full filters, deterministic placement, unique adds, string keys, merges, sizing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gbf/cuckoo_filter.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/hash.hpp"
#include "gbf/io.hpp"
#include "tests/io/io_support.hpp"
#include "tests/support.hpp"

namespace gbf::test {
namespace {

/// Distinct 64-bit keys: SplitMix64 is a bijection, so distinct counters give distinct keys.
std::vector<std::uint64_t> distinct_keys(std::size_t n, std::uint64_t first) {
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = detail::splitmix64(first + i);
  return keys;
}

cuckoo_layout table_of(std::uint32_t tag_bits, std::uint64_t buckets, std::uint64_t seed = 0) {
  cuckoo_layout l;
  l.tag_bits = tag_bits;
  l.num_buckets = buckets;
  l.seed = seed;
  return l;
}

const std::uint32_t tag_widths[] = {8, 16, 32};

// ---------------------------------------------------------------------------
// The table math
// ---------------------------------------------------------------------------

TEST(CuckooLayout, AlternateOfAlternateIsTheBucketForAnyBucketCount) {
  std::mt19937_64 rng(1);
  for (const std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 1023ull, 65536ull,
                                (1ull << 32) - 1, 1ull << 32}) {
    for (int trial = 0; trial < 2000; ++trial) {
      const std::uint64_t b = rng() % n;
      const auto tag = static_cast<std::uint32_t>(rng());
      const std::uint64_t a = cuckoo_alternate(b, tag, n);
      ASSERT_LT(a, n) << "n=" << n;
      ASSERT_EQ(cuckoo_alternate(a, tag, n), b) << "n=" << n << " b=" << b << " tag=" << tag;
    }
  }
}

TEST(CuckooLayout, TagsAreNonZeroAndFitTheirWidth) {
  std::mt19937_64 rng(2);
  for (const std::uint32_t f : tag_widths) {
    const std::uint64_t top = f == 32 ? 0xffffffffULL : (1ULL << f) - 1;
    EXPECT_EQ(cuckoo_tag(0, f), 1u);
    EXPECT_EQ(cuckoo_tag(0xffffffffULL, f), top);
    for (int i = 0; i < 10000; ++i) {
      const std::uint32_t t = cuckoo_tag(rng(), f);
      ASSERT_GE(t, 1u);
      ASSERT_LE(t, top);
    }
  }
}

TEST(CuckooLayout, EightBitTagsAreUniformOverTheNonZeroValues) {
  std::vector<int> seen(256, 0);
  std::mt19937_64 rng(3);
  const int draws = 255 * 2000;
  for (int i = 0; i < draws; ++i) ++seen[cuckoo_tag(rng(), 8)];
  EXPECT_EQ(seen[0], 0);
  for (int t = 1; t < 256; ++t) {
    // 2000 expected per value; 6 sigma is about 270.
    EXPECT_NEAR(seen[t], 2000, 270) << "tag " << t;
  }
}

TEST(CuckooLayout, PlaceIsTheBlockIndexTagAndAlternateOfTheKeyHash) {
  const cuckoo_layout l = table_of(16, 12345, 9);
  for (const std::uint64_t key : distinct_keys(1000, 0)) {
    const std::uint64_t h = hash_key(key, l.seed);
    const cuckoo_place p = cuckoo_place_of(h, l);
    EXPECT_EQ(p.bucket, block_index(h, l.num_buckets));
    EXPECT_EQ(p.tag, cuckoo_tag(h, 16));
    EXPECT_EQ(p.alternate, cuckoo_alternate(p.bucket, p.tag, l.num_buckets));
  }
}

template <std::uint32_t F>
void check_bucket_ops_against_a_loop() {
  using ops = cuckoo_bucket<F>;
  std::mt19937_64 rng(F);
  for (int trial = 0; trial < 3000; ++trial) {
    std::uint64_t words[4];
    std::uint32_t tags[ops::slots];
    // Small tag values so that repeats and empty slots are common.
    for (std::uint32_t s = 0; s < ops::slots; ++s) tags[s] = static_cast<std::uint32_t>(rng() % 5);
    for (auto& w : words) w = 0;
    for (std::uint32_t s = 0; s < ops::slots; ++s)
      words[s / ops::slots_per_word] = ops::with_tag(words[s / ops::slots_per_word], s, tags[s]);
    for (std::uint32_t s = 0; s < ops::slots; ++s) ASSERT_EQ(ops::tag_at(words, s), tags[s]);
    for (std::uint32_t t = 0; t < 5; ++t) {
      const auto expected = static_cast<std::uint32_t>(std::count(tags, tags + ops::slots, t));
      ASSERT_EQ(ops::count(words, t), expected);
      ASSERT_EQ(ops::holds(words, t), expected > 0);
      const std::uint32_t first =
          static_cast<std::uint32_t>(std::find(tags, tags + ops::slots, t) - tags);
      ASSERT_EQ(ops::find(words, t), first);
    }
  }
}

TEST(CuckooLayout, SwarBucketOperationsMatchASlotLoop) {
  check_bucket_ops_against_a_loop<8>();
  check_bucket_ops_against_a_loop<16>();
  check_bucket_ops_against_a_loop<32>();
}

TEST(CuckooLayout, InvalidTablesAreNamed) {
  EXPECT_STREQ(cuckoo_layout_problem(table_of(12, 10)), "tag_bits must be 8, 16 or 32");
  EXPECT_STREQ(cuckoo_layout_problem(table_of(16, 0)), "num_buckets must be at least 1");
  EXPECT_STREQ(cuckoo_layout_problem(table_of(16, 1ull << 32)), "num_buckets must be at most 2^32 - 1");
  EXPECT_EQ(cuckoo_layout_problem(table_of(32, (1ull << 32) - 1)), nullptr);
  EXPECT_NE(message_of([] { cuckoo_filter f(table_of(12, 10), on_cpu()); }).find("tag_bits"),
            std::string::npos);
  EXPECT_NE(message_of([] { cuckoo_filter f(table_of(16, 10), on_cpu(), 0, 0); }).find("max_kicks"),
            std::string::npos);
  EXPECT_NE(message_of([] { cuckoo_filter f(table_of(16, 10), on_cpu(), 0, 33); }).find("max_kicks"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Against an exact multiset model
// ---------------------------------------------------------------------------

/// Random adds (some repeated), removes of present keys and contains, checked
/// after every step against the multiset of keys added minus removed.
void run_model_sequence(std::uint32_t tag_bits, std::uint64_t buckets, cpu_simd simd,
                        std::uint64_t seed) {
  SCOPED_TRACE("tag_bits " + std::to_string(tag_bits) + " buckets " + std::to_string(buckets) +
               " seed " + std::to_string(seed));
  cuckoo_filter f(table_of(tag_bits, buckets, seed), on_cpu(1, simd));
  std::map<std::uint64_t, int> model;
  std::mt19937_64 rng(seed);
  const std::vector<std::uint64_t> universe = distinct_keys(4000, seed << 20);
  const std::uint64_t room = f.layout().num_slots() * 8 / 10;  // stay under 80% load
  std::uint64_t stored = 0;
  std::uint64_t added = 0, removed = 0;
  for (int step = 0; step < 60; ++step) {
    // A batch of adds: random keys of the universe, repeats allowed.
    const std::size_t n_add = rng() % 200;
    std::vector<std::uint64_t> adds;
    for (std::size_t i = 0; i < n_add && stored + adds.size() < room; ++i)
      adds.push_back(universe[rng() % universe.size()]);
    std::vector<cuckoo_status> status(adds.size());
    const cuckoo_add_report r = f.add(adds.data(), adds.size(), status.data());
    ASSERT_EQ(r.failed, 0u);
    ASSERT_EQ(r.inserted, adds.size());
    for (std::size_t i = 0; i < adds.size(); ++i) {
      ASSERT_EQ(status[i], cuckoo_status::inserted);
      ++model[adds[i]];
    }
    stored += adds.size();
    added += adds.size();
    // A batch of removes of present keys (one copy each).
    std::vector<std::uint64_t> present;
    for (const auto& [key, copies] : model)
      if (copies > 0) present.push_back(key);
    std::vector<std::uint64_t> removes;
    for (std::size_t i = 0, n = rng() % 150; i < n && !present.empty(); ++i) {
      const std::uint64_t key = present[rng() % present.size()];
      if (std::count(removes.begin(), removes.end(), key) < model[key]) removes.push_back(key);
    }
    auto ok = bools(removes.size());
    ASSERT_EQ(f.remove(removes.data(), removes.size(), ok.get()), removes.size());
    for (std::size_t i = 0; i < removes.size(); ++i) {
      ASSERT_TRUE(ok[i]);
      --model[removes[i]];
    }
    stored -= removes.size();
    removed += removes.size();
    // Every key still held is found, and counted at least as often as held.
    auto found = bools(universe.size());
    std::vector<std::uint8_t> copies(universe.size());
    f.contains(universe.data(), universe.size(), found.get());
    f.approximate_count(universe.data(), universe.size(), copies.data());
    for (std::size_t i = 0; i < universe.size(); ++i) {
      const auto it = model.find(universe[i]);
      const int held = it == model.end() ? 0 : it->second;
      if (held > 0) {
        ASSERT_TRUE(found[i]) << "false negative: key " << universe[i] << " held " << held;
        ASSERT_GE(copies[i], held);
      }
      ASSERT_EQ(found[i], copies[i] > 0);
    }
    const cuckoo_stats s = f.stats();
    ASSERT_EQ(s.occupied_slots, stored);
    ASSERT_EQ(s.keys_added, added);
    ASSERT_EQ(s.keys_removed, removed);
  }
}

TEST(CuckooModel, RandomAddsAndRemovesNeverLoseAKeyAnyTagWidth) {
  for (const std::uint32_t f : tag_widths)
    for (const std::uint64_t buckets : {16ull, 100ull, 257ull})
      run_model_sequence(f, buckets, cpu_simd::automatic, f * 1000 + buckets);
}

TEST(CuckooModel, RandomAddsAndRemovesWithThePortableProbe) {
  for (const std::uint32_t f : tag_widths) run_model_sequence(f, 100, cpu_simd::scalar, f + 7);
}

TEST(CuckooModel, RemovingAnAbsentKeyIsRefusedAndChangesNothing) {
  cuckoo_filter f(table_of(16, 64), on_cpu(1));
  const auto keys = distinct_keys(500, 0);
  f.add(keys.data(), keys.size());
  const std::vector<std::uint32_t> before = f.words();
  // Absent keys whose tags are not in their buckets (false positives excluded).
  std::vector<std::uint64_t> absent;
  for (const std::uint64_t k : distinct_keys(2000, 1 << 20)) {
    bool hit = false;
    f.contains(&k, 1, &hit);
    if (!hit) absent.push_back(k);
  }
  auto ok = bools(absent.size());
  EXPECT_EQ(f.remove(absent.data(), absent.size(), ok.get()), 0u);
  EXPECT_EQ(std::count(ok.get(), ok.get() + absent.size(), true), 0);
  EXPECT_EQ(f.words(), before);
  EXPECT_EQ(f.stats().keys_removed, 0u);
}

TEST(CuckooModel, ApproximateCountCountsRepeatedAdds) {
  cuckoo_filter f(table_of(16, 64), on_cpu(1));
  const std::uint64_t key = 42;
  for (int i = 0; i < 3; ++i) f.add(&key, 1);
  std::uint8_t copies = 0;
  f.approximate_count(&key, 1, &copies);
  EXPECT_EQ(copies, 3);
  EXPECT_EQ(f.remove(&key, 1), 1u);
  f.approximate_count(&key, 1, &copies);
  EXPECT_EQ(copies, 2);
  f.remove(&key, 1);
  f.remove(&key, 1);
  bool found = true;
  f.contains(&key, 1, &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(f.remove(&key, 1), 0u);
}

// Saves stream the table in slices (copy_words).
TEST(CuckooFilter, CopyWordsGivesAnySliceOfTheTableAndRefusesRangesPastTheEnd) {
  cuckoo_filter f(table_of(16, 1'001), on_cpu(1));
  const auto keys = distinct_keys(5'000, 8);
  f.add(keys.data(), keys.size());
  expect_slices_of(f.words(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
    f.copy_words(first, count, out);
  });
}

TEST(CuckooModel, RemoveIsOrderIndependent) {
  const auto keys = distinct_keys(3000, 5);
  cuckoo_filter a(table_of(16, 256), on_cpu(1));
  a.add(keys.data(), keys.size());
  a.add(keys.data(), 500);  // some keys twice
  cuckoo_filter b = a.copy_to(backend::cpu);
  std::vector<std::uint64_t> removes(keys.begin(), keys.begin() + 1500);
  a.remove(removes.data(), removes.size());
  std::shuffle(removes.begin(), removes.end(), std::mt19937_64(1));
  b.remove(removes.data(), removes.size());
  EXPECT_EQ(a.words(), b.words());
}

// ---------------------------------------------------------------------------
// The FPR, the advertised load, full filters
// ---------------------------------------------------------------------------

/// Fills a table of `buckets` buckets to `load` and measures the FPR of
/// `probes` absent keys against cuckoo_expected_fpr: within 4 binomial sigmas
/// plus 3% (the prediction treats the slots of the two buckets as independent).
void check_fpr(std::uint32_t tag_bits, std::uint64_t buckets, double load, std::size_t probes) {
  SCOPED_TRACE("tag_bits " + std::to_string(tag_bits) + " load " + std::to_string(load));
  cuckoo_filter f(table_of(tag_bits, buckets, 3), on_cpu());
  const auto n = static_cast<std::size_t>(load * static_cast<double>(f.layout().num_slots()));
  const auto keys = distinct_keys(n, 0);
  f.add(keys.data(), keys.size());
  const auto absent = distinct_keys(probes, 1ull << 40);
  const double measured =
      static_cast<double>(f.count(absent.data(), absent.size())) / static_cast<double>(probes);
  const double predicted = cuckoo_expected_fpr(f.layout(), n);
  const double sigma = std::sqrt(predicted * (1 - predicted) / static_cast<double>(probes));
  EXPECT_NEAR(measured, predicted, 4 * sigma + 0.03 * predicted)
      << "measured " << measured << " predicted " << predicted;
  EXPECT_NEAR(f.stats().estimated_fpr, predicted, 1e-12);
  EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
}

TEST(CuckooFpr, MeasuredFprMatchesThePredictionAt50And80And95PercentLoad) {
  for (const double load : {0.5, 0.8, 0.95}) {
    check_fpr(16, 1 << 14, load, 2'000'000);
    check_fpr(8, 1 << 12, load, 200'000);
  }
}

TEST(CuckooFpr, SixteenBitTagsAtEightyPercentLoadPredictUnderFourHundredthsOfAPercent) {
  // The GPU target: FPR <= 0.04% with 16-bit tags at 80% load.
  const double fpr = cuckoo_expected_fpr(table_of(16, 1000), 16 * 1000 * 8 / 10);
  EXPECT_LT(fpr, 0.0004);
  EXPECT_GT(fpr, 0.00038);
}

TEST(CuckooFpr, AnInvalidTableIsRefusedRatherThanGivenFprZero) {
  gbf::cuckoo_layout twelve_bit_tags = table_of(16, 1000);
  twelve_bit_tags.tag_bits = 12;
  EXPECT_THROW(cuckoo_expected_fpr(twelve_bit_tags, 100), gbf::invalid_argument);
  gbf::cuckoo_layout no_buckets = table_of(16, 1000);
  no_buckets.num_buckets = 0;
  EXPECT_THROW(cuckoo_expected_fpr(no_buckets, 100), gbf::invalid_argument);
}

TEST(CuckooFpr, ThirtyTwoBitTagsGiveNoFalsePositiveInAMillionProbes) {
  // Predicted about 3.5e-9 at 95% load: 0.0035 expected hits.
  cuckoo_filter f(table_of(32, 1 << 12), on_cpu());
  const auto keys = distinct_keys(f.layout().num_slots() * 95 / 100, 0);
  f.add(keys.data(), keys.size());
  const auto absent = distinct_keys(1'000'000, 1ull << 40);
  EXPECT_EQ(f.count(absent.data(), absent.size()), 0u);
}

TEST(CuckooLoad, InsertsUpToTheAdvertisedLoadNeverFail) {
  for (const std::uint32_t f : tag_widths) {
    for (const std::uint64_t buckets : {1000ull, 1024ull, 4099ull, 1ull << 13}) {
      for (const cuckoo_placement placement :
           {cuckoo_placement::fastest, cuckoo_placement::deterministic}) {
        for (std::uint64_t seed = 0; seed < 3; ++seed) {
          SCOPED_TRACE("tag_bits " + std::to_string(f) + " buckets " + std::to_string(buckets) +
                       " seed " + std::to_string(seed) + " placement " +
                       std::to_string(static_cast<int>(placement)));
          cuckoo_filter filter(table_of(f, buckets, seed), on_cpu(1));
          const auto n = static_cast<std::size_t>(cuckoo_max_load(f) *
                                                  static_cast<double>(filter.layout().num_slots()));
          const auto keys = distinct_keys(n, seed << 32);
          // In batches, as a stream of inserts would come.
          for (std::size_t first = 0; first < n; first += 1 << 12) {
            const std::size_t count = std::min<std::size_t>(n - first, 1 << 12);
            cuckoo_add_options how;
            how.placement = placement;
            const cuckoo_add_report r = filter.add(keys.data() + first, count, nullptr, how);
            ASSERT_EQ(r.failed, 0u) << "at load "
                                    << static_cast<double>(first) / filter.layout().num_slots();
          }
          ASSERT_EQ(filter.count(keys.data(), n), n);
          ASSERT_EQ(filter.stats().occupied_slots, n);
        }
      }
    }
  }
}

TEST(CuckooLoad, AFullFilterThrowsFilterFullNamingTheKeysNotInsertedAndKeepsTheOthers) {
  cuckoo_filter f(table_of(16, 64), on_cpu(1));
  const auto keys = distinct_keys(f.layout().num_slots() + 100, 0);
  std::uint64_t not_inserted = 0;
  std::string message;
  try {
    f.add(keys.data(), keys.size());
  } catch (const filter_full& e) {
    not_inserted = e.not_inserted();
    message = e.what();
  }
  ASSERT_GE(not_inserted, 100u);
  EXPECT_NE(message.find(std::to_string(not_inserted) + " of " + std::to_string(keys.size()) +
                         " keys were not inserted"),
            std::string::npos)
      << message;
  EXPECT_EQ(f.stats().failed_inserts, not_inserted);
  EXPECT_EQ(f.stats().occupied_slots, keys.size() - not_inserted);
}

TEST(CuckooLoad, PastCapacityEveryKeyReportedInsertedIsPresent) {
  for (const std::uint32_t tag_bits : tag_widths) {
    for (const cuckoo_placement placement :
         {cuckoo_placement::fastest, cuckoo_placement::deterministic}) {
      cuckoo_filter f(table_of(tag_bits, 100), on_cpu(1));
      const auto keys = distinct_keys(f.layout().num_slots() * 11 / 10, tag_bits);
      std::vector<cuckoo_status> status(keys.size());
      cuckoo_add_options how;
      how.placement = placement;
      const cuckoo_add_report r = f.add(keys.data(), keys.size(), status.data(), how);
      EXPECT_GT(r.failed, 0u);
      EXPECT_EQ(r.inserted + r.failed, keys.size());
      std::vector<std::uint64_t> inserted;
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (status[i] == cuckoo_status::inserted) inserted.push_back(keys[i]);
      EXPECT_EQ(inserted.size(), r.inserted);
      EXPECT_EQ(f.count(inserted.data(), inserted.size()), inserted.size());
      EXPECT_EQ(f.stats().occupied_slots, r.inserted);
      // Removing the inserted keys empties the table: nothing else got in.
      EXPECT_EQ(f.remove(inserted.data(), inserted.size()), inserted.size());
      EXPECT_EQ(f.stats().occupied_slots, 0u);
    }
  }
}

// Sized for a low fpp, a table sits below its maximum load at capacity and keeps
// taking keys past it, its FPR past the target: over capacity from the first key
// beyond it, as the plain and counting filters are (it once waited for the load).
TEST(CuckooLoad, PastItsCapacityAFilterIsOverCapacityBeforeItsLoadLimit) {
  for (const double fpp : {0.12, 0.01, 0.001}) {
    SCOPED_TRACE(fpp);
    const std::uint64_t capacity = 500;
    cuckoo_filter f = cuckoo_filter::create(capacity, fpp, on_cpu(1));
    const auto keys = distinct_keys(capacity + 1, 3);
    f.add(keys.data(), capacity);
    cuckoo_stats s = f.stats();
    EXPECT_FALSE(s.over_capacity) << "load " << s.load_factor;
    f.add(keys.data() + capacity, 1);
    s = f.stats();
    EXPECT_TRUE(s.over_capacity) << "load " << s.load_factor << " of " << s.max_load;
    if (fpp == 0.12) {
      EXPECT_LT(s.load_factor, s.max_load);  // the case the load test missed
    }
  }
  // Without a known capacity, only the load decides.
  cuckoo_filter unknown(table_of(8, 64), on_cpu(1));
  const auto keys = distinct_keys(64, 9);
  unknown.add(keys.data(), keys.size());
  EXPECT_FALSE(unknown.stats().over_capacity);
}

TEST(CuckooLoad, EvictionsAreCountedAndMaxKicksBoundsThem) {
  // One kick: fewer keys fit before the first refusal than with twenty.
  const auto keys = distinct_keys(16 * 256, 0);
  std::uint64_t first_failure[2] = {0, 0};
  int which = 0;
  for (const std::uint32_t kicks : {1u, 20u}) {
    cuckoo_filter f(table_of(16, 256), on_cpu(1), 0, kicks);
    std::vector<cuckoo_status> status(keys.size());
    f.add(keys.data(), keys.size(), status.data());
    first_failure[which++] = static_cast<std::uint64_t>(
        std::find(status.begin(), status.end(), cuckoo_status::failed) - status.begin());
    EXPECT_GT(f.stats().evictions, 0u);
    EXPECT_EQ(f.max_kicks(), kicks);
  }
  EXPECT_LT(first_failure[0], first_failure[1]);
}

// ---------------------------------------------------------------------------
// Placement, unique adds
// ---------------------------------------------------------------------------

TEST(CuckooPlacement, DeterministicTablesDoNotDependOnKeyOrderOrThreads) {
  for (const std::uint32_t f : tag_widths) {
    auto keys = distinct_keys(200 * (256 / f) * 9 / 10, 11);  // 90% load of 200 buckets
    cuckoo_add_options how;
    how.placement = cuckoo_placement::deterministic;
    cuckoo_filter a(table_of(f, 200), on_cpu(1));
    a.add(keys.data(), keys.size(), nullptr, how);
    std::shuffle(keys.begin(), keys.end(), std::mt19937_64(f));
    cuckoo_filter b(table_of(f, 200), on_cpu(2));
    b.add(keys.data(), keys.size(), nullptr, how);
    EXPECT_EQ(a.words(), b.words()) << "tag_bits " << f;
    EXPECT_EQ(a.count(keys.data(), keys.size()), keys.size());
  }
}

// Keys with the same tag and buckets but swapped primary buckets are one key to a
// unique add. The first in batch order used to be placed by its own primary
// bucket, so the table depended on which came first.
TEST(CuckooPlacement, DeterministicUniqueAddsDoNotDependOnWhichTwinComesFirst) {
  for (const std::uint32_t f : {8u, 16u}) {
    const cuckoo_layout l = table_of(f, 64);
    // Twins: (smaller bucket, tag) equal, primaries different.
    std::map<std::pair<std::uint64_t, std::uint32_t>, std::uint64_t> seen;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> twins;
    for (std::uint64_t key = 1; twins.size() < 40 && key < 50'000'000; ++key) {
      const gbf::cuckoo_place p = gbf::cuckoo_place_of(gbf::hash_key(key, l.seed), l);
      if (p.bucket == p.alternate) continue;
      const auto group = std::make_pair(std::min(p.bucket, p.alternate), p.tag);
      const auto found = seen.find(group);
      if (found == seen.end()) {
        seen.emplace(group, key);
      } else if (gbf::cuckoo_place_of(gbf::hash_key(found->second, l.seed), l).bucket != p.bucket) {
        twins.emplace_back(found->second, key);
        seen.erase(found);
      }
    }
    ASSERT_EQ(twins.size(), 40u) << "tag_bits " << f;
    std::vector<std::uint64_t> order_a, order_b;
    for (const auto& [a, b] : twins) {
      order_a.insert(order_a.end(), {a, b});
      order_b.insert(order_b.end(), {b, a});
    }
    cuckoo_add_options how;
    how.unique = true;
    how.placement = cuckoo_placement::deterministic;
    cuckoo_filter first(l, on_cpu(1)), second(l, on_cpu(2));
    std::vector<cuckoo_status> status_a(order_a.size()), status_b(order_b.size());
    first.add(order_a.data(), order_a.size(), status_a.data(), how);
    second.add(order_b.data(), order_b.size(), status_b.data(), how);
    EXPECT_EQ(first.words(), second.words()) << "tag_bits " << f;
    for (std::size_t i = 0; i < order_a.size(); ++i) {  // batch order decides the statuses
      EXPECT_EQ(status_a[i], i % 2 == 0 ? cuckoo_status::inserted : cuckoo_status::present) << i;
      EXPECT_EQ(status_b[i], status_a[i]) << i;
    }
    EXPECT_EQ(first.stats().occupied_slots, twins.size());
  }
}

TEST(CuckooPlacement, DeterministicAddsOntoAFilledTableAreDeterministicToo) {
  const auto first = distinct_keys(2000, 1);
  auto second = distinct_keys(1200, 2);
  cuckoo_add_options how;
  how.placement = cuckoo_placement::deterministic;
  cuckoo_filter a(table_of(16, 220), on_cpu(1));
  a.add(first.data(), first.size());  // fastest: any table before
  cuckoo_filter b = a.copy_to(backend::cpu);
  a.add(second.data(), second.size(), nullptr, how);
  std::reverse(second.begin(), second.end());
  b.add(second.data(), second.size(), nullptr, how);
  EXPECT_EQ(a.words(), b.words());
  EXPECT_EQ(a.count(first.data(), first.size()), first.size());
  EXPECT_EQ(a.count(second.data(), second.size()), second.size());
}

TEST(CuckooPlacement, UniqueAddsReportKeysPresentBeforeAndRepeatedInTheBatch) {
  for (const cuckoo_placement placement :
       {cuckoo_placement::fastest, cuckoo_placement::deterministic}) {
    cuckoo_filter f(table_of(16, 64), on_cpu(1));
    const auto old_keys = distinct_keys(100, 0);
    f.add(old_keys.data(), old_keys.size());
    const auto new_keys = distinct_keys(100, 1000);
    // old, new, new again, old again.
    std::vector<std::uint64_t> batch(old_keys.begin(), old_keys.begin() + 20);
    batch.insert(batch.end(), new_keys.begin(), new_keys.begin() + 50);
    batch.insert(batch.end(), new_keys.begin(), new_keys.begin() + 50);
    batch.insert(batch.end(), old_keys.begin(), old_keys.begin() + 10);
    std::vector<cuckoo_status> status(batch.size());
    cuckoo_add_options how;
    how.unique = true;
    how.placement = placement;
    const cuckoo_add_report r = f.add(batch.data(), batch.size(), status.data(), how);
    EXPECT_EQ(r.inserted, 50u);
    EXPECT_EQ(r.present, 80u);
    EXPECT_EQ(r.failed, 0u);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const bool first_new = i >= 20 && i < 70;
      EXPECT_EQ(status[i], first_new ? cuckoo_status::inserted : cuckoo_status::present) << i;
    }
    std::uint8_t copies = 0;
    f.approximate_count(&new_keys[0], 1, &copies);
    EXPECT_EQ(copies, 1);
  }
}

// ---------------------------------------------------------------------------
// Keys, results, backends
// ---------------------------------------------------------------------------

TEST(CuckooKeys, StringKeysWithNullsAndThirtyTwoBitKeys) {
  // Short random strings repeat (the empty one about 50 times), more often than
  // the 2 * 16 slots of a key's two buckets hold: unique adds store each once.
  string_batch<std::int32_t> b = mixed_batch<std::int32_t>(2000, 4, false);
  for (std::size_t i = 0; i < b.size(); i += 5) b.set_null(i);
  cuckoo_filter f(table_of(16, 512), on_cpu());
  std::vector<cuckoo_status> status(b.size());
  cuckoo_add_options unique;
  unique.unique = true;
  const cuckoo_add_report r = f.add(b.keys(), status.data(), unique);
  std::size_t valid = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    valid += b.valid(i);
    if (b.valid(i)) {
      EXPECT_TRUE(status[i] == cuckoo_status::inserted || status[i] == cuckoo_status::present) << i;
    } else {
      EXPECT_EQ(status[i], cuckoo_status::skipped) << i;
    }
  }
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.inserted + r.present, valid);
  EXPECT_GT(r.present, 40u);  // the repeats
  auto found = bools(b.size());
  f.contains(b.keys(), found.get());
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.valid(i)) {
      EXPECT_TRUE(found[i]) << i;
    }
  }
  EXPECT_EQ(f.count(b.keys()), f.select(b.keys(), std::vector<std::uint64_t>(b.size()).data()));
  // One copy of each stored key: the first removal of each takes it, repeats find nothing.
  EXPECT_EQ(f.remove(b.keys()), r.inserted);
  EXPECT_EQ(f.stats().occupied_slots, 0u);

  // A 32-bit key hashes its 4 bytes: not the same key as the 64-bit one.
  const std::uint32_t k32 = 7;
  const std::uint64_t k64 = 7;
  f.add(&k32, 1);
  bool hit32 = false;
  f.contains(&k32, 1, &hit32);
  EXPECT_TRUE(hit32);
  std::uint8_t copies = 9;
  f.approximate_count(&k64, 1, &copies);
  EXPECT_EQ(copies, 0);
}

TEST(CuckooKeys, SelectReturnsTheAscendingRowsContainsFinds) {
  cuckoo_filter f(table_of(8, 64), on_cpu(2));
  const auto keys = distinct_keys(1500, 0);
  f.add(keys.data(), keys.size());
  const auto probes = probes_for(keys, 300'000, 5);  // two threads' worth
  auto found = bools(probes.size());
  f.contains(probes.data(), probes.size(), found.get());
  std::vector<std::uint64_t> rows(probes.size());
  const std::uint64_t n = f.select(probes.data(), probes.size(), rows.data());
  std::vector<std::uint64_t> expected;
  for (std::size_t i = 0; i < probes.size(); ++i)
    if (found[i]) expected.push_back(i);
  rows.resize(n);
  EXPECT_EQ(rows, expected);

  // Null-aware: every third key null, the others selected as without a bitmap.
  std::vector<std::uint8_t> validity((probes.size() + 7) / 8, 0);
  std::vector<std::uint64_t> expected_valid;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    if (i % 3 == 0) continue;
    validity[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
    if (found[i]) expected_valid.push_back(i);
  }
  std::vector<std::uint64_t> valid_rows(probes.size());
  valid_rows.resize(f.select(probes.data(), probes.size(), validity.data(), valid_rows.data()));
  EXPECT_EQ(valid_rows, expected_valid);
  EXPECT_EQ(f.select(probes.data(), probes.size(), static_cast<const std::uint8_t*>(nullptr), valid_rows.data()), n);
}

// The cuckoo filter has no AVX-512 kernel: an AVX-512 request runs its AVX2 one,
// and throws where the CPU has no AVX-512.
TEST(CuckooKeys, Avx512RequestRunsTheAvx2Probe) {
  if (!cpu_has_avx512()) {
    EXPECT_THROW(cuckoo_filter(table_of(16, 300), on_cpu(1, cpu_simd::avx512)), invalid_argument);
    return;
  }
  const cuckoo_filter f(table_of(16, 300), on_cpu(1, cpu_simd::avx512));
  EXPECT_NE(f.description().find("avx2"), std::string::npos) << f.description();
}

TEST(CuckooKeys, PortableAndAvx2ProbesGiveTheSameAnswers) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const std::uint32_t f : tag_widths) {
    cuckoo_filter scalar(table_of(f, 300), on_cpu(1, cpu_simd::scalar));
    const auto keys = distinct_keys(300 * 256 / f * 9 / 10, f);
    scalar.add(keys.data(), keys.size());
    scalar.add(keys.data(), 200);
    cuckoo_filter avx2 = scalar.copy_to(backend::cpu, on_cpu(1, cpu_simd::avx2));
    EXPECT_NE(avx2.description().find("avx2"), std::string::npos);
    const auto probes = probes_for(keys, 100'000, f);
    auto a = bools(probes.size());
    auto b = bools(probes.size());
    scalar.contains(probes.data(), probes.size(), a.get());
    avx2.contains(probes.data(), probes.size(), b.get());
    EXPECT_EQ(first_difference(a.get(), b.get(), probes.size()), probes.size());
    std::vector<std::uint8_t> ca(probes.size()), cb(probes.size());
    scalar.approximate_count(probes.data(), probes.size(), ca.data());
    avx2.approximate_count(probes.data(), probes.size(), cb.data());
    EXPECT_EQ(ca, cb);
    EXPECT_EQ(avx2.verify_contains(probes.data(), probes.size(), b.get()).mismatches, 0u);
    b[7] = !b[7];  // one wrong answer: the report names it
    const verify_report wrong = avx2.verify_contains(probes.data(), probes.size(), b.get());
    EXPECT_EQ(wrong.keys_checked, probes.size());
    EXPECT_EQ(wrong.mismatches, 1u);
    EXPECT_EQ(wrong.first_mismatch, 7u);
  }
}

TEST(CuckooKeys, AsyncCallsAndDeviceWordsNeedTheGpu) {
  cuckoo_filter f(table_of(16, 8), on_cpu());
  const std::uint64_t key = 1;
  EXPECT_THROW(f.add_async(&key, 1, nullptr), wrong_backend);
  EXPECT_THROW(f.remove_async(&key, 1, nullptr), wrong_backend);
  EXPECT_THROW(f.device_words(), wrong_backend);
  EXPECT_THROW(f.contains(&key, 1, nullptr), invalid_argument);
}

TEST(CuckooKeys, CopyToAndClearKeepWhatTheySay) {
  cuckoo_filter f(table_of(16, 100), on_cpu(), 1000, 7);
  const auto keys = distinct_keys(1000, 0);
  f.add(keys.data(), keys.size());
  f.remove(keys.data(), 10);
  const cuckoo_filter g = f.copy_to(backend::cpu);
  EXPECT_EQ(g.words(), f.words());
  EXPECT_EQ(g.max_kicks(), 7u);
  EXPECT_EQ(g.capacity(), 1000u);
  EXPECT_EQ(g.stats().keys_added, 1000u);
  EXPECT_EQ(g.stats().keys_removed, 10u);
  f.clear();
  EXPECT_EQ(f.stats().occupied_slots, 0u);
  EXPECT_EQ(f.stats().keys_added, 0u);
  EXPECT_EQ(f.count(keys.data(), keys.size()), 0u);
}

TEST(CuckooMerge, AMergedTableHoldsBothMultisetsForEveryTagWidth) {
  std::mt19937_64 rng(11);
  for (const std::uint32_t tag_bits : tag_widths) {
    for (int trial = 0; trial < 6; ++trial) {
      const std::uint64_t buckets = 50 + rng() % 400;
      const cuckoo_layout l = table_of(tag_bits, buckets, rng());
      // Up to 40% load each, overlapping: keys of both, and repeats of some.
      const std::size_t room = l.num_slots() * 2 / 5;
      const auto a_keys = distinct_keys(room, trial * 1'000'000);
      auto b_keys = distinct_keys(room, trial * 1'000'000 + room / 2);
      b_keys.insert(b_keys.end(), b_keys.begin(), b_keys.begin() + room / 10);
      cuckoo_filter a(l, on_cpu(), 0);
      cuckoo_filter b(l, on_cpu(), 0);
      a.add(a_keys.data(), a_keys.size());
      b.add(b_keys.data(), b_keys.size());
      std::map<std::uint64_t, unsigned> model;
      for (const std::uint64_t k : a_keys) ++model[k];
      for (const std::uint64_t k : b_keys) ++model[k];
      cuckoo_filter merged = a.copy_to(backend::cpu);
      merged.merge(b);
      const cuckoo_stats s = merged.stats();
      ASSERT_EQ(s.occupied_slots, a.stats().occupied_slots + b.stats().occupied_slots);
      EXPECT_EQ(s.keys_added, a_keys.size() + b_keys.size());
      for (const auto& [key, copies] : model) {
        std::uint8_t held = 0;
        merged.approximate_count(&key, 1, &held);
        ASSERT_GE(held, copies) << "tag_bits " << tag_bits << " key " << key;
      }
      // Every copy comes out again: removing both batches empties the table.
      EXPECT_EQ(merged.remove(a_keys.data(), a_keys.size()), a_keys.size());
      EXPECT_EQ(merged.remove(b_keys.data(), b_keys.size()), b_keys.size());
      EXPECT_EQ(merged.stats().occupied_slots, 0u);
      // The same inputs give the same table.
      cuckoo_filter again = a.copy_to(backend::cpu);
      again.merge(b);
      cuckoo_filter twice = a.copy_to(backend::cpu);
      twice.merge(b);
      EXPECT_EQ(again.words(), twice.words());
    }
  }
}

TEST(CuckooMerge, AMergeThatDoesNotFitChangesNothingAndOtherLayoutsAreRefused) {
  const cuckoo_layout l = table_of(16, 64);
  cuckoo_filter a(l, on_cpu(), 0);
  cuckoo_filter b(l, on_cpu(), 0);
  const auto a_keys = distinct_keys(l.num_slots() * 7 / 10, 0);
  const auto b_keys = distinct_keys(l.num_slots() * 7 / 10, 1'000'000);
  a.add(a_keys.data(), a_keys.size());
  b.add(b_keys.data(), b_keys.size());
  const std::vector<std::uint32_t> before = a.words();
  const cuckoo_totals totals = a.totals();
  try {
    a.merge(b);
    FAIL() << "140% of the slots merged";
  } catch (const filter_full& e) {
    EXPECT_EQ(e.not_inserted(), 0u) << "no batch in a merge";
    EXPECT_NE(std::string(e.what()).find("more tags than slots; nothing was merged"), std::string::npos)
        << e.what();
  }
  // Fewer tags than slots, but more than a table with one move per insert can
  // place: the insert that finds no chain stops the merge, and nothing changes.
  cuckoo_filter tight(l, on_cpu(), 0, 1);
  tight.add(a_keys.data(), a_keys.size());
  cuckoo_filter c(l, on_cpu(), 0);
  const auto c_keys = distinct_keys(l.num_slots() * 29 / 100, 2'000'000);
  c.add(c_keys.data(), c_keys.size());
  const std::vector<std::uint32_t> tight_before = tight.words();
  try {
    tight.merge(c);
    FAIL() << "99% of the slots merged with max_kicks 1";
  } catch (const filter_full& e) {
    EXPECT_NE(std::string(e.what()).find("found no free slot within max_kicks = 1 moves"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tight.words(), tight_before);
  EXPECT_EQ(a.words(), before);
  EXPECT_EQ(a.totals().keys_added, totals.keys_added);
  EXPECT_EQ(a.count(a_keys.data(), a_keys.size()), a_keys.size());

  for (const cuckoo_layout& other : {table_of(16, 65), table_of(8, 64), table_of(16, 64, 1)}) {
    cuckoo_filter c(other, on_cpu(), 0);
    EXPECT_THROW(a.merge(c), layout_mismatch) << to_string(other);
  }
  EXPECT_EQ(a.words(), before);
}

TEST(CuckooMerge, AFilterMergedWithItselfHoldsEachKeyTwice) {
  cuckoo_filter f(table_of(16, 200), on_cpu(), 0);
  const auto keys = distinct_keys(600, 5);
  f.add(keys.data(), keys.size());
  f.merge(f);
  EXPECT_EQ(f.stats().occupied_slots, 1200u);
  EXPECT_EQ(f.stats().keys_added, 1200u);
  std::vector<std::uint8_t> copies(keys.size());
  f.approximate_count(keys.data(), keys.size(), copies.data());
  EXPECT_TRUE(std::all_of(copies.begin(), copies.end(), [](std::uint8_t c) { return c >= 2; }));
}

// ---------------------------------------------------------------------------
// Sizing
// ---------------------------------------------------------------------------

TEST(CuckooSizing, PicksTheTagWidthWithTheSmallestTableAndMeetsBothPromises) {
  struct expectation {
    double fpp;
    std::uint32_t tag_bits;
  };
  for (const expectation e : {expectation{0.3, 8}, {0.05, 16}, {0.01, 16}, {0.0005, 16},
                              {0.0001, 32}, {1e-6, 32}, {1e-9, 32}}) {
    for (const std::uint64_t n : {1ull, 1000ull, 1'000'000ull, 123'456'789ull}) {
      const cuckoo_layout l = cuckoo_size_for(n, e.fpp);
      SCOPED_TRACE("fpp " + std::to_string(e.fpp) + " n " + std::to_string(n));
      // One key fits one bucket of any width: the tie goes to the wider tags.
      if (n >= 1000) {
        EXPECT_EQ(l.tag_bits, e.tag_bits);
      }
      EXPECT_LE(cuckoo_expected_fpr(l, n), e.fpp);
      EXPECT_LE(static_cast<double>(n), cuckoo_max_load(l.tag_bits) * static_cast<double>(l.num_slots()));
      // One bucket fewer would break a promise (n large enough to matter).
      if (l.num_buckets > 1) {
        cuckoo_layout smaller = l;
        --smaller.num_buckets;
        EXPECT_TRUE(cuckoo_expected_fpr(smaller, n) > e.fpp ||
                    static_cast<double>(n) > cuckoo_max_load(l.tag_bits) * static_cast<double>(smaller.num_slots()));
      }
    }
  }
  cuckoo_shape eight;
  eight.tag_bits = 8;
  EXPECT_EQ(cuckoo_size_for(1000, 0.01, eight).tag_bits, 8u);  // forced: a low load instead
  EXPECT_LE(cuckoo_expected_fpr(cuckoo_size_for(1000, 0.01, eight), 1000), 0.01);
}

TEST(CuckooSizing, SixteenBitTagsCostAboutSeventeenBitsPerKey) {
  const cuckoo_layout l = cuckoo_size_for(1'000'000, 0.001);
  EXPECT_EQ(l.tag_bits, 16u);
  EXPECT_NEAR(cuckoo_bits_per_key(l, 1'000'000), 16 / cuckoo_max_load(16), 0.01);
  EXPECT_EQ(to_string(table_of(16, 4096)), "16-bit tags, 16 slots/bucket, seed 0, 4096 buckets (128.0 KiB)");
}

TEST(CuckooSizing, BadArgumentsAreNamed) {
  EXPECT_NE(message_of([] { cuckoo_size_for(0, 0.01); }).find("capacity"), std::string::npos);
  EXPECT_NE(message_of([] { cuckoo_size_for(10, 1.0); }).find("fpp"), std::string::npos);
  cuckoo_shape bad;
  bad.tag_bits = 4;
  EXPECT_NE(message_of([&] { cuckoo_size_for(10, 0.01, bad); }).find("tag_bits"), std::string::npos);
  bad.tag_bits = 16;
  bad.max_kicks = 100;
  EXPECT_NE(message_of([&] { cuckoo_size_for(10, 0.01, bad); }).find("max_kicks"), std::string::npos);
  EXPECT_NE(message_of([] { cuckoo_size_for(1ull << 40, 1e-12); }).find("2^32 - 1 buckets"),
            std::string::npos);
}

TEST(CuckooSizing, AnFppNoTableReachesSaysTheLowestItCan) {
  // Too many keys for any table, or an fpp below what the widest tags give at the
  // largest table: the error says which, and for the fpp the floor it can reach.
  EXPECT_NE(message_of([] { cuckoo_size_for(1ull << 40, 0.01); }).find("the largest table holds about"),
            std::string::npos);
  const std::string low = message_of([] { cuckoo_size_for(100, 1e-30); });
  EXPECT_NE(low.find("with 32-bit tags (the widest that hold that many) the lowest fpp for that many keys is about"),
            std::string::npos) << low;
  // 8 x 10^10 keys fit only the 8-bit tags' largest table (~1.3 x 10^11 keys; 16-bit:
  // ~6.5 x 10^10): the fpp is what fails, not the room, which it once blamed
  // computing the room of 32-bit tags (~3.2 x 10^10).
  const std::string narrow = message_of([] { cuckoo_size_for(80'000'000'000ull, 0.01); });
  EXPECT_NE(narrow.find("with 8-bit tags (the widest that hold that many) the lowest fpp"), std::string::npos)
      << narrow;
  cuckoo_shape eight;
  eight.tag_bits = 8;
  const std::string low8 = message_of([&] { cuckoo_size_for(100, 1e-15, eight); });
  EXPECT_NE(low8.find("with 8-bit tags the lowest fpp"), std::string::npos) << low8;
  // The floor it names is one a table then keeps.
  cuckoo_layout largest;
  largest.tag_bits = 32;
  largest.num_buckets = cuckoo_max_buckets;
  const double floor = cuckoo_expected_fpr(largest, 100);
  EXPECT_LE(cuckoo_expected_fpr(cuckoo_size_for(100, floor * 1.01), 100), floor * 1.01);
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

/// A 16-bit filter of 300 buckets at about 80% load, with some removes, 7 kicks and capacity 4000.
cuckoo_filter filled_cuckoo(std::uint32_t tag_bits = 16) {
  cuckoo_filter f(table_of(tag_bits, 300, 77), on_cpu(1), 4000, 7);
  const auto keys = distinct_keys(300 * 256 / tag_bits * 8 / 10, tag_bits);
  f.add(keys.data(), keys.size());
  f.remove(keys.data(), 100);
  return f;
}

TEST(CuckooFile, SaveLoadRoundTripKeepsTableSettingsCountersAndAnswers) {
  temp_dir dir;
  for (const std::uint32_t tag_bits : tag_widths) {
    const cuckoo_filter f = filled_cuckoo(tag_bits);
    const std::string path = dir.file("f" + std::to_string(tag_bits) + ".gbf");
    save(f, path, 0.001);
    EXPECT_EQ(read_file_kind(path), file_kind::cuckoo);
    cuckoo_file_metadata m;
    const cuckoo_filter g = load_cuckoo(path, on_cpu(1), &m);
    EXPECT_EQ(g.layout(), f.layout());
    EXPECT_EQ(g.words(), f.words());
    EXPECT_EQ(g.max_kicks(), 7u);
    EXPECT_EQ(g.capacity(), 4000u);
    EXPECT_EQ(m.fpp, 0.001);
    EXPECT_EQ(m.l, f.layout());
    const cuckoo_totals a = f.totals(), b = g.totals();
    EXPECT_EQ(b.keys_added, a.keys_added);
    EXPECT_EQ(b.keys_removed, 100u);
    EXPECT_EQ(b.evictions, a.evictions);
    EXPECT_EQ(b.failed_inserts, a.failed_inserts);
    const auto keys = distinct_keys(300 * 256 / tag_bits * 8 / 10, tag_bits);
    EXPECT_EQ(g.count(keys.data() + 100, keys.size() - 100), keys.size() - 100);
    // serialize / deserialize_cuckoo are the same bytes as the file.
    const bytes in_memory = serialize(f, 0.001);
    EXPECT_EQ(in_memory, read_all(path));
    EXPECT_EQ(deserialize_cuckoo(in_memory.data(), in_memory.size()).words(), f.words());
  }
  EXPECT_EQ(dir.entries().size(), 3u);  // no temporary file left behind
}

TEST(CuckooFile, EveryFlippedByteAndEveryTruncationIsAFormatError) {
  const cuckoo_filter f(table_of(16, 4), on_cpu(1));
  const bytes good = serialize(f);
  ASSERT_EQ(good.size(), 32u + 72u + 4u * 32u + 8u);
  for (std::size_t i = 0; i < good.size(); ++i) {
    bytes bad = good;
    bad[i] ^= 0x10;
    EXPECT_THROW(deserialize_cuckoo(bad.data(), bad.size()), format_error) << "byte " << i;
  }
  for (std::size_t n = 0; n < good.size(); n += 7)
    EXPECT_THROW(deserialize_cuckoo(good.data(), n), format_error) << "size " << n;
  bytes longer = good;
  longer.push_back(0);
  EXPECT_THROW(deserialize_cuckoo(longer.data(), longer.size()), format_error);
}

/// `good` with the u32 at `offset` replaced and the checksum recomputed.
bytes with_field(bytes data, std::size_t offset, std::uint64_t value, std::size_t width) {
  for (std::size_t b = 0; b < width; ++b) data[offset + b] = static_cast<std::uint8_t>(value >> (8 * b));
  const std::size_t body = data.size() - 8;
  const std::uint64_t sum = xxh64(data.data(), body, 0);
  for (std::size_t b = 0; b < 8; ++b) data[body + b] = static_cast<std::uint8_t>(sum >> (8 * b));
  return data;
}

TEST(CuckooFile, ImpossibleFieldsWithAValidChecksumAreNamed) {
  const bytes good = serialize(cuckoo_filter(table_of(16, 4), on_cpu(1)));
  const auto says = [&](const bytes& bad) {
    return message_of([&] { deserialize_cuckoo(bad.data(), bad.size()); });
  };
  EXPECT_NE(says(with_field(good, 32, 12, 4)).find("tag_bits"), std::string::npos);
  EXPECT_NE(says(with_field(good, 36, 0, 4)).find("max_kicks"), std::string::npos);
  EXPECT_NE(says(with_field(good, 36, 99, 4)).find("max_kicks"), std::string::npos);
  EXPECT_NE(says(with_field(good, 48, 0, 8)).find("num_buckets"), std::string::npos);
  EXPECT_NE(says(with_field(good, 48, 5, 8)).find("payload size"), std::string::npos);
  EXPECT_NE(says(with_field(good, 64, 0x3ff0000000000000ull, 8)).find("fpp"), std::string::npos);
  // Past the limit is the file's problem, found before the table is read, like 0.
  const bytes many_kicks = with_field(good, 36, cuckoo_max_kicks_limit + 1, 4);
  EXPECT_THROW(deserialize_cuckoo(many_kicks.data(), many_kicks.size()), format_error);
  EXPECT_NE(says(many_kicks).find("gbf data"), std::string::npos) << says(many_kicks);
  EXPECT_NE(says(many_kicks).find("max_kicks 33 is not between 1 and 32"), std::string::npos) << says(many_kicks);
}

TEST(CuckooFile, FailedInsertsAndEvictionsSurviveARoundTrip) {
  cuckoo_filter f(table_of(16, 16), on_cpu(1), 0, 3);
  const auto keys = distinct_keys(f.layout().num_slots() + 200, 5);
  EXPECT_THROW(f.add(keys.data(), keys.size()), filter_full);
  const cuckoo_totals before = f.totals();
  ASSERT_GT(before.failed_inserts, 0u);
  ASSERT_GT(before.evictions, 0u);
  const bytes file = serialize(f);
  const cuckoo_totals after = deserialize_cuckoo(file.data(), file.size()).totals();
  EXPECT_EQ(after.failed_inserts, before.failed_inserts);
  EXPECT_EQ(after.evictions, before.evictions);
  EXPECT_EQ(after.keys_added, before.keys_added);
}

TEST(CuckooSizing, TiesGoToTheWiderTags) {
  // One key fits one bucket of any width; at 1% the 32-bit tags cost the same
  // 32 bytes as the 8-bit ones and have the lower false-positive rate.
  const cuckoo_layout l = cuckoo_size_for(1, 0.01);
  EXPECT_EQ(l.num_buckets, 1u);
  EXPECT_EQ(l.tag_bits, 32u);
}

TEST(CuckooFile, AFileOfAnotherKindSaysWhatItHolds) {
  temp_dir dir;
  const std::string bloom_path = dir.file("bloom.gbf");
  filter plain(layout_of(8, 8, 64), on_cpu(1));
  save(plain, bloom_path);
  const std::string message = message_of([&] { load_cuckoo(bloom_path); });
  EXPECT_NE(message.find("plain"), std::string::npos) << message;
  const std::string cuckoo_path = dir.file("cuckoo.gbf");
  save(filled_cuckoo(), cuckoo_path);
  EXPECT_THROW(load(cuckoo_path), format_error);
  EXPECT_THROW(load_cuckoo(dir.file("missing.gbf")), io_error);
}

}  // namespace
}  // namespace gbf::test
