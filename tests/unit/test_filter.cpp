// The public gbf::filter API on the CPU backend: backend choice, semantics,
// stats, errors, and the calls a CPU filter refuses or ignores (device words,
// _async calls, streams). The GPU side is in tests/gpu/test_gpu_filter.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/filter.hpp"

namespace {

using gbf::test::bools;
using gbf::test::message_of;
using gbf::test::on_cpu;
using gbf::test::random_keys;

TEST(FilterBackend, AutoPicksTheGpuWhenPresentAndSaysWhyOtherwise) {
  gbf::filter f = gbf::filter::create(1000, 0.01);
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (gpu.available) {
    EXPECT_EQ(f.where(), gbf::backend::gpu);
    EXPECT_NE(f.description().find("; auto: GPU present"), std::string::npos) << f.description();
  } else {
    EXPECT_EQ(f.where(), gbf::backend::cpu);
    EXPECT_NE(f.description().find("no GPU"), std::string::npos) << f.description();
    EXPECT_FALSE(gpu.description.empty());
    // "cpu (avx2, 2 threads); auto: no GPU (<the reason query_gpu gives>)"
    EXPECT_EQ(f.description().rfind("cpu (", 0), 0u) << f.description();
    EXPECT_NE(f.description().find("; auto: no GPU (" + gpu.description + ")"), std::string::npos)
        << f.description();
    EXPECT_NO_THROW(f.synchronize());  // nothing is ever deferred on the CPU
    const auto keys = random_keys(1000, 1);
    f.add(keys.data(), keys.size());
    EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
  }
}

TEST(FilterBackend, AnExplicitChoiceIsDescribedWithoutAReason) {
  gbf::filter f(gbf::layout{8, 8, 0, 100}, on_cpu(1, gbf::cpu_simd::scalar));
  EXPECT_EQ(f.where(), gbf::backend::cpu);
  EXPECT_EQ(f.description(), "cpu (scalar, 1 thread)");
}

TEST(FilterBackend, ExplicitGpuWithoutOneThrowsNoGpu) {
  if (gbf::query_gpu().available) GTEST_SKIP() << "a GPU is present; the no-GPU error cannot occur";
  gbf::options opts;
  opts.where = gbf::backend::gpu;
  EXPECT_THROW(gbf::filter::create(1000, 0.01, opts), gbf::no_gpu);
  EXPECT_NE(message_of([&] { gbf::filter::create(1000, 0.01, opts); }).find("no GPU"),
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
  auto is_new = bools(batch.size());
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

// What intersect's documentation promises: the result's own estimate overstates
// the common keys, inclusion-exclusion over the three estimates does not.
TEST(Filter, CommonKeysAreEstimatedByInclusionExclusionNotByTheIntersectionsBits) {
  std::uint64_t seed = 80;
  for (const std::uint64_t common : {10'000u, 50'000u}) {
    const gbf::layout l = gbf::size_for(200'000, 0.01);
    gbf::filter a(l, on_cpu()), b(l, on_cpu());
    const auto shared = random_keys<std::uint64_t>(common, ++seed);
    const auto only_a = random_keys<std::uint64_t>(100'000, ++seed);
    const auto only_b = random_keys<std::uint64_t>(100'000, ++seed);
    for (gbf::filter* f : {&a, &b}) f->add(shared.data(), shared.size());
    a.add(only_a.data(), only_a.size());
    b.add(only_b.data(), only_b.size());
    gbf::filter both = a.copy_to(gbf::backend::cpu);
    both.intersect(b);
    gbf::filter either = a.copy_to(gbf::backend::cpu);
    either.merge(b);
    const double estimate =
        a.stats().estimated_keys + b.stats().estimated_keys - either.stats().estimated_keys;
    EXPECT_NEAR(estimate, static_cast<double>(common), 0.05 * 50'000) << common;
    EXPECT_GT(both.stats().estimated_keys, 1.2 * static_cast<double>(common)) << common;
  }
}

// Hadoop's xor, the delta between two versions of a filter: on every layout the
// bits are a ^ b, the delta applied to either version gives the other, and a
// filter xor itself is empty.
TEST(Filter, SymmetricDifferenceIsTheXorOfTheBitsAndTurnsOneVersionIntoTheOther) {
  std::uint64_t seed = 60;
  for (const unsigned words_per_block : {1u, 2u, 4u, 8u, 16u}) {
    for (const std::uint64_t capacity : {1'000u, 37'000u}) {
      gbf::shape s;
      s.words_per_block = words_per_block;
      s.bits_per_key = std::min(16u, 2 * words_per_block);
      const gbf::layout l = gbf::size_for(capacity, 0.01, s);
      gbf::filter v1(l, on_cpu(2));
      const auto old_keys = random_keys<std::uint64_t>(capacity / 2, ++seed);
      const auto new_keys = random_keys<std::uint64_t>(capacity / 3, ++seed);
      v1.add(old_keys.data(), old_keys.size());
      gbf::filter v2 = v1.copy_to(gbf::backend::cpu);
      v2.add(new_keys.data(), new_keys.size());

      gbf::filter delta = v2.copy_to(gbf::backend::cpu);
      delta.symmetric_difference(v1);
      const auto w1 = v1.words(), w2 = v2.words(), wd = delta.words();
      for (std::size_t i = 0; i < w1.size(); ++i) ASSERT_EQ(wd[i], w1[i] ^ w2[i]) << gbf::to_string(l);
      EXPECT_EQ(delta.stats().keys_added, 0u);  // no count survives an xor

      gbf::filter rebuilt = v1.copy_to(gbf::backend::cpu);
      rebuilt.symmetric_difference(delta);
      EXPECT_EQ(rebuilt.words(), w2) << gbf::to_string(l);
      EXPECT_EQ(rebuilt.count(new_keys.data(), new_keys.size()), new_keys.size());

      delta.symmetric_difference(delta);
      EXPECT_EQ(delta.bits_set(), 0u);
    }
  }
}

TEST(Filter, CopyWordsGivesAnySliceOfWordsAndRefusesRangesPastTheEnd) {
  gbf::filter f = gbf::filter::create(20'000, 0.01, on_cpu());
  const auto keys = random_keys<std::uint64_t>(10'000, 71);
  f.add(keys.data(), keys.size());
  gbf::test::expect_slices_of(f.words(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
    f.copy_words(first, count, out);
  });
}

TEST(Filter, CombiningDifferentLayoutsThrowsLayoutMismatchNamingBoth) {
  gbf::filter a(gbf::layout{8, 8, 0, 100}, on_cpu());
  for (gbf::layout other : {gbf::layout{8, 8, 0, 101}, gbf::layout{8, 8, 1, 100},
                            gbf::layout{16, 16, 0, 50}, gbf::layout{8, 9, 0, 100}}) {
    gbf::filter b(other, on_cpu());
    EXPECT_THROW(a.merge(b), gbf::layout_mismatch);
    EXPECT_THROW(a.intersect(b), gbf::layout_mismatch);
    EXPECT_THROW(a.symmetric_difference(b), gbf::layout_mismatch);
    const std::string message = message_of([&] { a.merge(b); });
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
  EXPECT_NE(message_of([&] { f.add(null_keys, 5); }).find("keys is null"), std::string::npos);
  EXPECT_NE(message_of([&] { f.contains(&key, 1, nullptr); }).find("result array is null"),
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

TEST(Filter, AsyncCallsOnACpuFilterThrowWrongBackendNamingTheCallAndChangeNothing) {
  gbf::filter f(gbf::layout{8, 8, 0, 100}, on_cpu());
  const std::uint64_t key = 1;
  f.add(&key, 1);
  const auto before = f.words();
  const std::uint32_t key32 = 2;
  bool found = false;
  std::uint64_t count = 0;
  std::uint64_t row = 0;
  const std::uint8_t all_valid = 0xff;
  EXPECT_THROW(f.add_async(&key, 1, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.add_async(&key32, 1, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.contains_async(&key, 1, &found, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.count_async(&key, 1, &count, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.select_async(&key, 1, &row, &count, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.select_async(&key, 1, &row, &count, nullptr, &all_valid), gbf::wrong_backend);

  const char bytes[] = "abc";
  const std::int32_t offsets[] = {0, 1, 3};
  const gbf::string_keys<std::int32_t> strings{bytes, 3, offsets, 2, nullptr};
  bool found2[2] = {};
  EXPECT_THROW(f.add_async(strings, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.contains_async(strings, found2, nullptr), gbf::wrong_backend);
  EXPECT_THROW(f.count_async(strings, &count, nullptr), gbf::wrong_backend);

  for (const auto& [call, name] :
       std::vector<std::pair<std::function<void()>, std::string>>{
           {[&] { f.add_async(&key, 1, nullptr); }, "add_async"},
           {[&] { f.contains_async(&key, 1, &found, nullptr); }, "contains_async"},
           {[&] { f.count_async(strings, &count, nullptr); }, "count_async"},
           {[&] { f.select_async(&key, 1, &row, &count, nullptr); }, "select_async"}}) {
    EXPECT_EQ(message_of(call), name + " needs the GPU backend, but this filter lives on the CPU");
  }
  EXPECT_EQ(f.words(), before);
  EXPECT_EQ(f.stats().keys_added, 1u);  // a refused add counts no key
}

TEST(Filter, DeviceWordsOfACpuFilterThrowWrongBackend) {
  gbf::filter f(gbf::layout{8, 8, 0, 100}, on_cpu());
  const gbf::filter& view = f;
  EXPECT_THROW(f.device_words(), gbf::wrong_backend);     // the mutable overload
  EXPECT_THROW(view.device_words(), gbf::wrong_backend);  // the read-only overload
  EXPECT_EQ(message_of([&] { f.device_words(); }),
            "device_words needs the GPU backend, but this filter lives on the CPU");
}

TEST(Filter, SyncCallsOnACpuFilterIgnoreTheStream) {
  // A stream handle that no CUDA call would accept: a CPU filter must never use it.
  const auto stream = reinterpret_cast<gbf::stream_t>(std::uintptr_t{0xdead0});
  const gbf::layout l = gbf::size_for(20'000, 0.01);
  gbf::filter with(l, on_cpu(2)), without(l, on_cpu(2));
  const auto keys = random_keys(10'000, 81);
  const auto keys32 = random_keys<std::uint32_t>(5'000, 82);
  const auto queries = random_keys(20'000, 83);
  const std::size_t n = keys.size(), q = queries.size();

  with.add(keys.data(), n / 2, stream);
  without.add(keys.data(), n / 2);
  with.add(keys32.data(), keys32.size(), stream);
  without.add(keys32.data(), keys32.size());
  auto new_with = bools(n), new_without = bools(n);
  with.add_new(keys.data(), n, new_with.get(), stream);
  without.add_new(keys.data(), n, new_without.get());
  EXPECT_EQ(gbf::test::as_vector(new_with.get(), n), gbf::test::as_vector(new_without.get(), n));
  EXPECT_EQ(with.words(), without.words());

  auto found_with = bools(q), found_without = bools(q);
  with.contains(queries.data(), q, found_with.get(), stream);
  without.contains(queries.data(), q, found_without.get());
  EXPECT_EQ(gbf::test::first_difference(found_with.get(), found_without.get(), q), q);
  EXPECT_EQ(with.count(keys.data(), n, stream), n);  // no false negatives
  EXPECT_EQ(with.count(queries.data(), q, stream), without.count(queries.data(), q));
  std::vector<std::uint64_t> rows_with(q), rows_without(q);
  const std::uint8_t* no_validity = nullptr;
  EXPECT_EQ(with.select(queries.data(), q, rows_with.data(), stream),
            without.select(queries.data(), q, rows_without.data()));
  EXPECT_EQ(rows_with, rows_without);
  EXPECT_EQ(with.select(queries.data(), q, no_validity, rows_with.data(), stream),
            without.select(queries.data(), q, rows_without.data()));
  EXPECT_EQ(rows_with, rows_without);

  gbf::test::string_batch<std::int64_t> strings = gbf::test::mixed_batch<std::int64_t>(2'000, 84, false);
  strings.set_null(5);
  with.add(strings.keys(), stream);
  without.add(strings.keys());
  auto string_new = bools(strings.size());
  with.add_new(strings.keys(), string_new.get(), stream);
  without.add_new(strings.keys(), bools(strings.size()).get());
  for (std::size_t i = 0; i < strings.size(); ++i) EXPECT_FALSE(string_new[i]) << i;
  auto string_found = bools(strings.size());
  with.contains(strings.keys(), string_found.get(), stream);
  for (std::size_t i = 0; i < strings.size(); ++i) EXPECT_EQ(string_found[i], i != 5) << i;
  EXPECT_EQ(with.count(strings.keys(), stream), strings.size() - 1);
  std::vector<std::uint64_t> string_rows(strings.size());
  EXPECT_EQ(with.select(strings.keys(), string_rows.data(), stream), strings.size() - 1);
  EXPECT_EQ(with.words(), without.words());
  EXPECT_EQ(with.stats().keys_added, without.stats().keys_added);
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
    // Refused before any page is touched: on a machine that overcommits (the
    // H100 host did), zeroing a mapping larger than RAM was an OOM kill.
    if (huge.size_bytes() > static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE))) {
      EXPECT_NE(std::string(e.what()).find("physical memory"), std::string::npos) << e.what();
    }
  }
}

// Below physical memory but above what is left: refused as well, by name, before a
// page is touched (a scaling chain's levels, each below physical memory, once grew
// until the OOM killer ended the process).
TEST(Filter, AnAllocationPastTheAvailableMemoryIsAnAllocationError) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0, available = 0;
  while (meminfo >> name >> kib) {
    if (name == "MemAvailable:") available = kib * 1024;
    meminfo.ignore(64, '\n');
  }
  const std::uint64_t physical = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                 static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  if (available == 0 || physical < available + (std::uint64_t{1} << 28))
    GTEST_SKIP() << "no MemAvailable, or less than 256 MiB of memory in use: no size lies between";
  // Halfway between what is available and physical memory, in whole blocks.
  const std::uint64_t bytes = available + (physical - available) / 2;
  if (bytes / 32 > gbf::max_num_blocks) GTEST_SKIP() << bytes << " bytes is past the largest layout";
  const gbf::layout between{8, 8, 0, bytes / 32};
  // Should MemAvailable grow past `bytes` meanwhile, the address-space limit makes
  // the mapping fail (a message without "MemAvailable": the test fails) instead of
  // zeroing most of the machine's memory.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  rlimit capped = saved;
  capped.rlim_cur = std::min<rlim_t>(saved.rlim_cur, rlim_t{1} << 36);  // 64 GiB of address space
  if (capped.rlim_cur > bytes / 2 + (rlim_t{1} << 32)) capped.rlim_cur = bytes / 2 + (rlim_t{1} << 32);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &capped), 0);
  std::string message;
  try {
    gbf::filter f(between, on_cpu());
  } catch (const gbf::allocation_error& e) {
    EXPECT_EQ(e.bytes(), between.size_bytes());
    message = e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_NE(message.find("available (MemAvailable)"), std::string::npos) << message;
}

// A count restored at the maximum (a file may hold any) stays there: it wrapped to
// the keys just added.
TEST(Filter, KeysAddedSaturatesInsteadOfWrapping) {
  const gbf::layout l{8, 8, 0, 64};
  const std::vector<std::uint32_t> zeros(l.num_words());
  const std::uint64_t most = ~std::uint64_t{0};
  gbf::filter f = gbf::filter::from_words(l, zeros.data(), on_cpu(1), 0, most - 1);
  const auto keys = random_keys(4, 1);
  f.add(keys.data(), keys.size());
  EXPECT_EQ(f.stats().keys_added, most);
  gbf::filter g = gbf::filter::from_words(l, zeros.data(), on_cpu(1), 0, 5);
  f.merge(g);
  EXPECT_EQ(f.stats().keys_added, most);
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
  auto found = bools(keys.size());
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

TEST(Filter, SetOperationsCopiesAndClearsKeepTheKeyCountsTheHeaderPromises) {
  const auto keys = random_keys<std::uint64_t>(400, 91);
  gbf::filter a = gbf::filter::create(1'000, 0.01, on_cpu(1));
  gbf::filter b = gbf::filter::create(1'000, 0.01, on_cpu(1));
  a.add(keys.data(), 300);
  b.add(keys.data() + 300, 100);
  EXPECT_EQ(a.copy_to(gbf::backend::cpu).stats().keys_added, 300u);
  gbf::filter merged = a.copy_to(gbf::backend::cpu);
  merged.merge(b);
  EXPECT_EQ(merged.stats().keys_added, 400u);
  merged.merge(merged);  // the same keys again: the count does not double
  EXPECT_EQ(merged.stats().keys_added, 400u);
  gbf::filter common = a.copy_to(gbf::backend::cpu);
  common.intersect(b);
  EXPECT_EQ(common.stats().keys_added, 100u);  // the smaller count
  gbf::filter delta = a.copy_to(gbf::backend::cpu);
  delta.symmetric_difference(b);
  EXPECT_EQ(delta.stats().keys_added, 0u);  // no count survives it
  // A filter made from a layout has no capacity, so it is never over it.
  gbf::filter from_layout(a.layout(), on_cpu(1));
  EXPECT_EQ(from_layout.capacity(), 0u);
  from_layout.add(keys.data(), keys.size());
  EXPECT_FALSE(from_layout.stats().over_capacity);
  EXPECT_TRUE([&] {
    gbf::filter full = gbf::filter::create(10, 0.01, on_cpu(1));
    full.add(keys.data(), keys.size());
    return full.stats().over_capacity;
  }());
}

}  // namespace
