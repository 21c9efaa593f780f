// The public gbf::filter API: backend choice, semantics, stats and errors.
// Runs on the CPU backend everywhere; the GPU cases skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/filter.hpp"

namespace {

using gbf::test::random_keys;

gbf::options on_cpu() {
  gbf::options opts;
  opts.where = gbf::backend::cpu;
  return opts;
}

std::vector<bool> answers(const gbf::filter& f, const std::vector<std::uint64_t>& keys) {
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  f.contains(keys.data(), keys.size(), found.get());
  return std::vector<bool>(found.get(), found.get() + keys.size());
}

std::string what_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const gbf::error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FilterBackend, AutoPicksTheGpuWhenPresentAndSaysWhyOtherwise) {
  gbf::filter f = gbf::filter::create(1000, 0.01);
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (gpu.available) {
    EXPECT_EQ(f.where(), gbf::backend::gpu);
  } else {
    EXPECT_EQ(f.where(), gbf::backend::cpu);
    EXPECT_NE(f.description().find("no GPU"), std::string::npos) << f.description();
    EXPECT_FALSE(gpu.description.empty());
  }
}

TEST(FilterBackend, ExplicitGpuWithoutOneThrowsNoGpu) {
  if (gbf::query_gpu().available) GTEST_SKIP() << "a GPU is present; the no-GPU error cannot occur";
  gbf::options opts;
  opts.where = gbf::backend::gpu;
  EXPECT_THROW(gbf::filter::create(1000, 0.01, opts), gbf::no_gpu);
  EXPECT_NE(what_of([&] { gbf::filter::create(1000, 0.01, opts); }).find("no GPU"),
            std::string::npos);
}

TEST(Filter, NoFalseNegativesForAnyKeyTypeAndLayout) {
  for (gbf::shape s : {gbf::shape{8, 8, 0}, gbf::shape{1, 3, 5}, gbf::shape{2, 2, 0},
                       gbf::shape{4, 7, 0}, gbf::shape{16, 16, 99}, gbf::shape{16, 32, 0}}) {
    for (std::uint64_t n : {1ULL, 17ULL, 5000ULL, 200000ULL}) {
      gbf::filter f = gbf::filter::create(n, 0.01, on_cpu(), s);
      const auto k64 = random_keys<std::uint64_t>(n, n);
      const auto k32 = random_keys<std::uint32_t>(n, n + 1);
      const auto ki64 = random_keys<std::int64_t>(n, n + 2);
      const auto ki32 = random_keys<std::int32_t>(n, n + 3);
      f.add(k64.data(), n);
      f.add(k32.data(), n);
      f.add(ki64.data(), n);
      f.add(ki32.data(), n);
      EXPECT_EQ(f.count(k64.data(), n), n);
      EXPECT_EQ(f.count(k32.data(), n), n);
      EXPECT_EQ(f.count(ki64.data(), n), n);
      EXPECT_EQ(f.count(ki32.data(), n), n);
      EXPECT_EQ(f.stats().keys_added, 4 * n);
    }
  }
}

TEST(Filter, SignedAndUnsignedKeysWithTheSameBytesAreTheSameKey) {
  gbf::filter f(gbf::layout{8, 8, 0, 64}, on_cpu());
  const std::int64_t negative = -12345;
  f.add(&negative, 1);
  const auto as_unsigned = static_cast<std::uint64_t>(negative);
  EXPECT_EQ(f.count(&as_unsigned, 1), 1u);
}

TEST(Filter, MeasuredFprMatchesTheModelWithinStatisticalBounds) {
  for (gbf::shape s : {gbf::shape{8, 8, 0}, gbf::shape{16, 16, 0}, gbf::shape{4, 4, 0},
                       gbf::shape{1, 3, 0}, gbf::shape{8, 12, 0}}) {
    for (double fpp : {0.1, 0.01}) {
      const std::uint64_t n = 200'000;
      gbf::filter f = gbf::filter::create(n, fpp, on_cpu(), s);
      // Inserted keys are even, probes odd: no probe was inserted.
      auto keys = random_keys<std::uint64_t>(n, 11);
      for (auto& k : keys) k &= ~1ULL;
      f.add(keys.data(), n);
      const std::size_t probes = 2'000'000;
      auto absent = random_keys<std::uint64_t>(probes, 12);
      for (auto& k : absent) k |= 1ULL;
      const double measured = static_cast<double>(f.count(absent.data(), probes)) / probes;
      const double predicted = gbf::expected_fpr(f.layout(), static_cast<double>(n));
      // 5 binomial sigmas, plus 3% for the model's independent-probe approximation.
      const double sigma = std::sqrt(predicted * (1 - predicted) / probes);
      EXPECT_NEAR(measured, predicted, 5 * sigma + 0.03 * predicted)
          << "W " << s.words_per_block << " k " << s.bits_per_key << " fpp " << fpp;
      EXPECT_LE(predicted, fpp);
    }
  }
}

TEST(Filter, AddNewReportsFirstOccurrencesOfAbsentKeysOnly) {
  gbf::filter f = gbf::filter::create(100'000, 0.0001, on_cpu());
  const auto old_keys = random_keys<std::uint64_t>(1000, 21);
  f.add(old_keys.data(), old_keys.size());
  // Batch: 1000 fresh keys, each repeated, interleaved with the old keys.
  const auto fresh = random_keys<std::uint64_t>(1000, 22);
  std::vector<std::uint64_t> batch;
  for (std::size_t i = 0; i < 1000; ++i) {
    batch.push_back(fresh[i]);
    batch.push_back(old_keys[i]);
    batch.push_back(fresh[i]);
  }
  std::unique_ptr<bool[]> is_new(new bool[batch.size()]);
  f.add_new(batch.data(), batch.size(), is_new.get());
  std::size_t fresh_reported_new = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    fresh_reported_new += is_new[3 * i];
    EXPECT_FALSE(is_new[3 * i + 1]) << "a key added earlier is not new";
    EXPECT_FALSE(is_new[3 * i + 2]) << "a repeat within the batch is not new";
  }
  // A fresh key reads as present only through a false positive (fpp 1e-4).
  EXPECT_GE(fresh_reported_new, 998u);
  EXPECT_EQ(f.count(fresh.data(), fresh.size()), fresh.size());
}

TEST(Filter, StatsTrackFillEstimatedKeysAndCapacity) {
  const std::uint64_t capacity = 100'000;
  gbf::filter f = gbf::filter::create(capacity, 0.01, on_cpu());
  gbf::filter_stats empty = f.stats();
  EXPECT_EQ(empty.bits_set, 0u);
  EXPECT_EQ(empty.estimated_keys, 0.0);
  EXPECT_FALSE(empty.over_capacity);

  const auto keys = random_keys<std::uint64_t>(3 * capacity / 2, 31);
  f.add(keys.data(), capacity / 2);
  gbf::filter_stats half = f.stats();
  EXPECT_EQ(half.num_bits, f.layout().num_bits());
  EXPECT_DOUBLE_EQ(half.fill_ratio, static_cast<double>(half.bits_set) / half.num_bits);
  EXPECT_NEAR(half.estimated_keys, capacity / 2.0, 0.02 * capacity / 2);
  EXPECT_LT(half.estimated_fpr, 0.01);
  EXPECT_FALSE(half.over_capacity);

  f.add(keys.data(), keys.size());  // the first half again, then past capacity
  gbf::filter_stats over = f.stats();
  EXPECT_NEAR(over.estimated_keys, 1.5 * capacity, 0.02 * 1.5 * capacity);
  EXPECT_GT(over.estimated_fpr, 0.01);
  EXPECT_TRUE(over.over_capacity);
  EXPECT_EQ(over.keys_added, capacity / 2 + keys.size());
  EXPECT_EQ(over.capacity, capacity);

  f.clear();
  EXPECT_EQ(f.bits_set(), 0u);
  EXPECT_EQ(f.stats().keys_added, 0u);
}

TEST(Filter, MergeIsUnionAndIntersectIsIntersectionOfTheBits) {
  const gbf::layout l = gbf::size_for(50'000, 0.01);
  gbf::filter a(l, on_cpu()), b(l, on_cpu());
  const auto ka = random_keys<std::uint64_t>(20'000, 41);
  const auto kb = random_keys<std::uint64_t>(20'000, 42);
  a.add(ka.data(), ka.size());
  b.add(kb.data(), kb.size());
  const auto wa = a.words(), wb = b.words();

  gbf::filter united = a.copy_to(gbf::backend::cpu);
  united.merge(b);
  gbf::filter common = a.copy_to(gbf::backend::cpu);
  common.intersect(b);
  const auto wu = united.words(), wc = common.words();
  for (std::size_t i = 0; i < wa.size(); ++i) {
    ASSERT_EQ(wu[i], wa[i] | wb[i]);
    ASSERT_EQ(wc[i], wa[i] & wb[i]);
  }
  EXPECT_EQ(united.count(ka.data(), ka.size()), ka.size());
  EXPECT_EQ(united.count(kb.data(), kb.size()), kb.size());
  // Keys in both filters survive the intersection.
  gbf::filter both_a(l, on_cpu()), both_b(l, on_cpu());
  both_a.add(ka.data(), ka.size());
  both_b.add(ka.data(), ka.size());
  both_b.add(kb.data(), kb.size());
  both_a.intersect(both_b);
  EXPECT_EQ(both_a.count(ka.data(), ka.size()), ka.size());
}

TEST(Filter, CombiningDifferentLayoutsThrowsLayoutMismatchNamingBoth) {
  gbf::filter a(gbf::layout{8, 8, 0, 100}, on_cpu());
  for (gbf::layout other : {gbf::layout{8, 8, 0, 101}, gbf::layout{8, 8, 1, 100},
                            gbf::layout{16, 16, 0, 50}, gbf::layout{8, 9, 0, 100}}) {
    gbf::filter b(other, on_cpu());
    EXPECT_THROW(a.merge(b), gbf::layout_mismatch);
    EXPECT_THROW(a.intersect(b), gbf::layout_mismatch);
    const std::string message = what_of([&] { a.merge(b); });
    EXPECT_NE(message.find(gbf::to_string(a.layout())), std::string::npos) << message;
    EXPECT_NE(message.find(gbf::to_string(other)), std::string::npos) << message;
    if (other.num_blocks != 100) {
      EXPECT_NE(message.find("num_blocks 100 vs " + std::to_string(other.num_blocks)),
                std::string::npos) << message;
    }
  }
}

TEST(Filter, BadArgumentsGiveNamedErrorsAndChangeNothing) {
  gbf::filter f(gbf::layout{8, 8, 0, 100}, on_cpu());
  const std::uint64_t key = 1;
  f.add(&key, 1);
  const auto before = f.words();
  const std::uint64_t* null_keys = nullptr;
  EXPECT_NE(what_of([&] { f.add(null_keys, 5); }).find("keys is null"), std::string::npos);
  EXPECT_NE(what_of([&] { f.contains(&key, 1, nullptr); }).find("result array is null"),
            std::string::npos);
  f.add(null_keys, 0);  // an empty batch is fine
  EXPECT_EQ(f.words(), before);

  EXPECT_THROW(gbf::filter(gbf::layout{3, 8, 0, 100}, on_cpu()), gbf::invalid_argument);
  EXPECT_THROW(gbf::filter(gbf::layout{8, 8, 0, 0}, on_cpu()), gbf::invalid_argument);
  EXPECT_THROW(gbf::filter::from_words(gbf::layout{8, 8, 0, 10}, nullptr, on_cpu()),
               gbf::invalid_argument);
  EXPECT_THROW(gbf::filter::create(0, 0.01, on_cpu()), gbf::invalid_argument);
  EXPECT_THROW(gbf::filter::create(10, std::nan(""), on_cpu()), gbf::invalid_argument);
}

TEST(Filter, GpuOnlyOperationsOnACpuFilterThrowWrongBackend) {
  gbf::filter f(gbf::layout{8, 8, 0, 100}, on_cpu());
  const std::uint64_t key = 1;
  bool found = false;
  std::uint64_t count = 0;
  EXPECT_THROW(f.add_async(&key, 1, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.contains_async(&key, 1, &found, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.count_async(&key, 1, &count, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.device_words(), gbf::wrong_backend);
}

TEST(Filter, AnImpossibleAllocationIsAnAllocationError) {
  // 2^32 blocks of 16 words is 256 GiB: more than this machine class has.
  const gbf::layout huge{16, 16, 0, gbf::max_num_blocks};
  try {
    gbf::filter f(huge, on_cpu());
    GTEST_SKIP() << "this machine allocated 256 GiB; nothing to test";
  } catch (const gbf::allocation_error& e) {
    EXPECT_EQ(e.bytes(), huge.size_bytes());
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
  }
}

TEST(Filter, WordsRoundTripThroughFromWordsAndCopyTo) {
  gbf::filter f = gbf::filter::create(10'000, 0.01, on_cpu());
  const auto keys = random_keys<std::uint64_t>(10'000, 51);
  f.add(keys.data(), keys.size());
  const auto bits = f.words();
  gbf::filter g = gbf::filter::from_words(f.layout(), bits.data(), on_cpu(), f.capacity());
  EXPECT_EQ(g.words(), bits);
  EXPECT_EQ(g.capacity(), f.capacity());
  EXPECT_EQ(f.copy_to(gbf::backend::cpu).words(), bits);
}

TEST(Filter, VerifyContainsFindsEveryTamperedAnswer) {
  gbf::filter f = gbf::filter::create(10'000, 0.01, on_cpu());
  const auto keys = random_keys<std::uint64_t>(10'000, 61);
  f.add(keys.data(), 5'000);
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  f.contains(keys.data(), keys.size(), found.get());
  gbf::verify_report clean = f.verify_contains(keys.data(), keys.size(), found.get());
  EXPECT_TRUE(clean.ok());
  EXPECT_EQ(clean.keys_checked, keys.size());
  found[7] = !found[7];
  found[9000] = !found[9000];
  gbf::verify_report tampered = f.verify_contains(keys.data(), keys.size(), found.get());
  EXPECT_EQ(tampered.mismatches, 2u);
  EXPECT_EQ(tampered.first_mismatch, 7u);
}

TEST(FilterGpu, GpuAndCpuFiltersHoldTheSameBitsAndAnswers) {
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  gbf::options on_gpu;
  on_gpu.where = gbf::backend::gpu;
  on_gpu.gpu_chunk_keys = 10'000;  // many pipeline chunks
  for (gbf::shape s : {gbf::shape{8, 8, 0}, gbf::shape{16, 16, 0}, gbf::shape{1, 3, 0}}) {
    gbf::filter g = gbf::filter::create(100'000, 0.01, on_gpu, s);
    gbf::filter c = gbf::filter::create(100'000, 0.01, on_cpu(), s);
    const auto keys = random_keys<std::uint64_t>(100'000, 71);
    g.add(keys.data(), keys.size());
    c.add(keys.data(), keys.size());
    ASSERT_EQ(g.words(), c.words());
    const auto queries = random_keys<std::uint64_t>(300'000, 72);
    EXPECT_EQ(answers(g, queries), answers(c, queries));
    EXPECT_EQ(g.count(queries.data(), queries.size()), c.count(queries.data(), queries.size()));
    std::unique_ptr<bool[]> found(new bool[queries.size()]);
    g.contains(queries.data(), queries.size(), found.get());
    EXPECT_TRUE(g.verify_contains(queries.data(), queries.size(), found.get()).ok());
    EXPECT_EQ(g.copy_to(gbf::backend::cpu).words(), c.words());
    EXPECT_EQ(c.copy_to(gbf::backend::gpu).words(), c.words());
    g.merge(c);  // across backends
    EXPECT_EQ(g.words(), c.words());
  }
}

}  // namespace
