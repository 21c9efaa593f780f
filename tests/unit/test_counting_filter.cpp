// gbf::counting_filter on the CPU against the exact multiset model of
// tests/counting_model.hpp: random sequences of add / checked remove /
// unchecked remove over every geometry, both counter widths and every key
// kind, checking after every batch the counter words, the remove reports, the
// absence of false negatives, approximate_count and the projection (which
// must equal, bit for bit, the plain gbf::filter of the keys held).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/counting_model.hpp"
#include "tests/support.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"

namespace gbf {
namespace {

using test::batch_op;
using test::counting_model;
using test::id_batch;
using test::key_type;
using test::key_universe;

constexpr key_type all_key_types[] = {key_type::u32, key_type::u64, key_type::str32_with_nulls,
                                      key_type::str64};

/// Adds a batch to a plain filter (a with_keys visitor).
struct plain_add_call {
  filter& f;
  template <class Key>
  void integers(const Key* keys, std::size_t n) {
    f.add(keys, n);
  }
  template <class Offset>
  void strings(const string_keys<Offset>& keys) {
    f.add(keys);
  }
};

/// Adds to a plain filter every key the model holds (net > 0), once.
filter plain_filter_of_held(const layout& l, const key_universe& u, const counting_model& model) {
  filter plain(l, test::on_cpu(1));
  id_batch held;
  for (std::size_t id = 0; id < u.size(); ++id) {
    if (model.net(id) == 0) continue;
    held.ids.push_back(id);
    held.null.push_back(false);
  }
  if (!held.ids.empty()) u.with_keys(held, plain_add_call{plain});
  return plain;
}

/// Every id of the universe as one batch, none null.
id_batch whole_universe(const key_universe& u) {
  id_batch all;
  for (std::size_t id = 0; id < u.size(); ++id) {
    all.ids.push_back(id);
    all.null.push_back(false);
  }
  return all;
}

/// Checks the filter against the model: counters, no false negatives, minima, projection.
void expect_matches(const counting_filter& f, const counting_model& model, const key_universe& u,
                    const std::string& where) {
  ASSERT_EQ(f.counters(), model.counter_words()) << where << ": counter words differ";
  const id_batch all = whole_universe(u);
  const std::vector<bool> found = test::contains_of(f, u, all);
  const std::vector<std::uint8_t> minima = test::approximate_counts_of(f, u, all);
  for (std::size_t id = 0; id < u.size(); ++id) {
    ASSERT_EQ(found[id], model.contains(id)) << where << ": key " << id;
    if (model.net(id) > 0 && !model.removed_absent()) {
      ASSERT_TRUE(found[id]) << where << ": false negative for key " << id << " held "
                             << model.net(id) << " times";
    }
    ASSERT_EQ(minima[id], model.minimum(id)) << where << ": approximate_count of key " << id;
    // The minimum counter bounds the net count from above until it saturates.
    if (!model.removed_absent() && minima[id] < model.counter_max()) {
      ASSERT_GE(minima[id], model.net(id)) << where << ": key " << id;
    }
  }
  const filter projected = f.projection();
  ASSERT_EQ(projected.layout(), f.layout());
  ASSERT_EQ(projected.words(), model.projection_words()) << where << ": projection";
  const counting_stats s = f.stats();
  EXPECT_EQ(s.saturated_counters, model.saturated()) << where;
  if (model.saturated() == 0 && !model.removed_absent()) {
    ASSERT_EQ(projected.words(), plain_filter_of_held(f.layout(), u, model).words())
        << where << ": projection is not the plain filter of the keys held";
  }
}

/// A random sequence of batches on one filter, checked after each.
void run_sequence(const layout& l, std::uint32_t counter_bits, key_type type, std::uint64_t seed,
                  bool with_unchecked, cpu_simd simd) {
  const key_universe u(type, 60, seed);
  counting_filter f(l, test::on_cpu(1, simd), 0, counter_bits);
  counting_model model(l, counter_bits, u);
  std::mt19937_64 rng(seed);
  for (int step = 0; step < 12; ++step) {
    const std::string where = test::name_of(l) + " c=" + std::to_string(counter_bits) + " " +
                              test::key_type_name(type) + " " + f.description() + " step " +
                              std::to_string(step);
    const id_batch b = u.random_batch(rng, 1 + rng() % 50);
    const unsigned pick = static_cast<unsigned>(rng() % 10);
    if (pick < 5) {
      test::apply(f, u, b, batch_op::add, nullptr);
      model.apply(b, batch_op::add);
    } else if (pick < 9 || !with_unchecked) {
      auto removed = test::bools(b.ids.size());
      std::uint64_t model_refused = 0;
      const std::vector<bool> expected = model.apply(b, batch_op::remove, &model_refused);
      const remove_report r = test::apply(f, u, b, batch_op::remove, removed.get());
      ASSERT_EQ(test::as_vector(removed.get(), b.ids.size()), expected) << where;
      EXPECT_EQ(r.refused, model_refused) << where;
      const auto non_null = static_cast<std::uint64_t>(
          std::count(b.null.begin(), b.null.end(), false));
      EXPECT_EQ(r.removed + r.refused, non_null) << where;
    } else {
      // Unchecked removes of keys held only, the contract of remove_unchecked.
      id_batch held;
      for (std::size_t i = 0; i < b.ids.size(); ++i)
        if (!b.null[i] && model.net(b.ids[i]) > 0 &&
            std::count(held.ids.begin(), held.ids.end(), b.ids[i]) <
                static_cast<long>(model.net(b.ids[i]))) {
          held.ids.push_back(b.ids[i]);
          held.null.push_back(false);
        }
      if (held.ids.empty()) continue;
      test::apply(f, u, held, batch_op::remove_unchecked, nullptr);
      model.apply(held, batch_op::remove_unchecked);
    }
    expect_matches(f, model, u, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Both counter kernels (AVX2 serves W >= 8 where the CPU has it; the scalar
// one every layout) against the model.
TEST(CountingFilter, RandomAddRemoveSequencesMatchTheModelOnEveryLayoutWidthAndKeyKind) {
  std::uint64_t seed = 1;
  for (const layout& g : test::all_geometries()) {
    for (std::uint64_t blocks : {1u, 3u, 40u}) {
      for (std::uint32_t c : {4u, 8u}) {
        for (key_type type : all_key_types) {
          ++seed;
          for (cpu_simd simd : {cpu_simd::automatic, cpu_simd::scalar}) {
            if (simd == cpu_simd::scalar && (g.words_per_block < 8 || !cpu_has_avx2()))
              continue;  // automatic already ran the scalar kernel
            run_sequence(test::with_blocks(g, blocks), c, type, seed, seed % 2 == 0, simd);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// The AVX2 counter kernel against the scalar one on big batches: every
// operation, every layout it serves, both counter widths, with keys repeated
// until counters saturate (the fields next to a saturated one must not move),
// on one thread and on two (threads that own block ranges run the kernels on
// stored hashes).
// The counting filter's counters have no AVX-512 kernel: an AVX-512 request runs
// the AVX2 counter kernel and the projection's AVX-512 probes, and throws where
// the CPU has no AVX-512.
TEST(CountingFilter, Avx512RequestRunsTheAvx2CounterKernel) {
  const layout l = test::with_blocks(layout{}, 100);
  if (!cpu_has_avx512()) {
    EXPECT_THROW(counting_filter(l, test::on_cpu(1, cpu_simd::avx512), 0, 4), invalid_argument);
    return;
  }
  const counting_filter f(l, test::on_cpu(1, cpu_simd::avx512), 0, 4);
  EXPECT_EQ(f.description(), "cpu (avx2 counters, avx512 probes, 1 thread)");
  const counting_filter g(l, test::on_cpu(1, cpu_simd::avx2), 0, 4);
  EXPECT_EQ(g.description(), "cpu (avx2 counters, avx2 probes, 1 thread)");
}

// AVX2 serves blocks of 8 and 16 words, counters and probes alike; narrower
// blocks run the scalar kernels even when AVX2 is asked for.
TEST(CountingFilter, DescriptionNamesTheKernelsThatRunForEachBlockWidth) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2; only the scalar kernels can run";
  for (const layout& g : test::all_geometries()) {
    SCOPED_TRACE("words_per_block " + std::to_string(g.words_per_block));
    const counting_filter f(test::with_blocks(g, 100), test::on_cpu(1, cpu_simd::avx2), 0, 4);
    const std::string kernels = g.words_per_block >= 8 ? "avx2" : "scalar";
    EXPECT_EQ(f.description(),
              "cpu (" + kernels + " counters, " + kernels + " probes, 1 thread)");
  }
}

TEST(CountingFilter, Avx2CounterKernelWritesAndAnswersLikeTheScalarOne) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2; only the scalar kernel can run";
  std::uint64_t seed = 100;
  for (const layout& g : test::all_geometries()) {
    if (g.words_per_block < 8) continue;
    for (std::uint32_t c : {4u, 8u}) {
      for (unsigned threads : {1u, 2u}) {
        ++seed;
        // 2^18 keys (threads split writes past 2 * 2^16), 1 in 8 of them a
        // repeat of one of 64 keys: about 512 adds each per batch, past the
        // maximum of 4-bit (15) and 8-bit (255) counters.
        const layout l = test::with_blocks(g, 3000);
        std::vector<std::uint64_t> keys = test::random_keys(std::size_t{1} << 18, seed);
        std::mt19937_64 rng(seed);
        for (std::size_t i = 0; i < keys.size(); i += 8) keys[i] = keys[rng() % 64 * 8 + 1];
        const auto absent = test::random_keys(std::size_t{1} << 17, seed + 1000);
        std::vector<std::uint64_t> removals(keys.begin(), keys.begin() + (keys.size() / 2));
        removals.insert(removals.end(), absent.begin(), absent.end());
        const std::string where = test::name_of(l) + " c=" + std::to_string(c) + " " +
                                  std::to_string(threads) + " threads";
        counting_filter scalar(l, test::on_cpu(threads, cpu_simd::scalar), 0, c);
        counting_filter avx2(l, test::on_cpu(threads, cpu_simd::avx2), 0, c);
        ASSERT_NE(avx2.description().find("avx2 counters"), std::string::npos) << avx2.description();
        ASSERT_NE(scalar.description().find("scalar counters"), std::string::npos);
        std::vector<std::vector<std::uint8_t>> removed, minima;
        std::vector<remove_report> reports;
        for (counting_filter* f : {&scalar, &avx2}) {
          f->add(keys.data(), keys.size());
          f->add(keys.data(), keys.size());
          auto flags = test::bools(removals.size());
          reports.push_back(f->remove_with_status(removals.data(), removals.size(), flags.get()));
          removed.emplace_back(flags.get(), flags.get() + removals.size());
          f->remove_unchecked(keys.data() + keys.size() / 2, keys.size() / 4);
          std::vector<std::uint8_t> counts(keys.size());
          f->approximate_count(keys.data(), keys.size(), counts.data());
          minima.push_back(counts);
        }
        ASSERT_GT(avx2.stats().saturated_counters, 0u) << where << ": no counter saturated";
        ASSERT_EQ(scalar.counters(), avx2.counters()) << where;
        ASSERT_EQ(scalar.projection().words(), avx2.projection().words()) << where;
        EXPECT_EQ(reports[0].removed, reports[1].removed) << where;
        EXPECT_EQ(reports[0].refused, reports[1].refused) << where;
        EXPECT_GT(reports[0].refused, 0u) << where;
        ASSERT_EQ(removed[0], removed[1]) << where;
        ASSERT_EQ(minima[0], minima[1]) << where;
      }
    }
  }
}

TEST(CountingFilter, CheckedRemoveRefusesAbsentKeysAndSecondRemovals) {
  const layout l = test::layout_of(8, 8, 4096);
  counting_filter f(l, test::on_cpu(1));
  const auto keys = test::random_keys(200, 7);
  f.add(keys.data(), keys.size());
  // Keys never added: with 200 keys in 4096 blocks none tests present.
  const auto absent = test::random_keys(300, 8);
  const std::vector<std::uint32_t> before = f.counters();
  const remove_report refused = f.remove(absent.data(), absent.size());
  EXPECT_EQ(refused.removed, 0u);
  EXPECT_EQ(refused.refused, 300u);
  EXPECT_EQ(f.counters(), before) << "a refused remove changed counters";
  // The same key twice in one batch, added once: the first is removed, the second refused.
  const std::uint64_t twice[] = {keys[0], keys[0]};
  auto removed = test::bools(2);
  const remove_report r = f.remove_with_status(twice, 2, removed.get());
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.refused, 1u);
  EXPECT_TRUE(removed[0]);
  EXPECT_FALSE(removed[1]);
  // Every other key is still there.
  auto found = test::bools(keys.size());
  f.contains(keys.data(), keys.size(), found.get());
  for (std::size_t i = 1; i < keys.size(); ++i) ASSERT_TRUE(found[i]) << "key " << i;
  EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size() - 1);
}

TEST(CountingFilter, RemovingEveryKeyLeavesAnEmptyFilter) {
  for (std::uint32_t c : {4u, 8u}) {
    counting_filter f = counting_filter::create(5000, 0.01, test::on_cpu(1), {}, c);
    const auto keys = test::random_keys(5000, 11);
    f.add(keys.data(), keys.size());
    f.add(keys.data(), keys.size());
    const remove_report first = f.remove(keys.data(), keys.size());
    EXPECT_EQ(first.removed, keys.size());
    EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
    const remove_report second = f.remove(keys.data(), keys.size());
    EXPECT_EQ(second.removed, keys.size());
    // Only saturated counters stay (8 keys added twice on one bit saturate a 4-bit
    // counter, which happens a few times in 40000 bits); each keeps its keys present.
    const counting_stats s = f.stats();
    EXPECT_EQ(s.nonzero_counters, s.saturated_counters) << "c=" << c;
    if (c == 8) {
      EXPECT_EQ(s.nonzero_counters, 0u);
    }
    EXPECT_EQ(s.keys_added, 2 * keys.size());
    EXPECT_EQ(s.keys_removed, 2 * keys.size());
    if (s.nonzero_counters == 0) {
      EXPECT_EQ(f.count(keys.data(), keys.size()), 0u);
    }
  }
}

TEST(CountingFilter, CountersSaturateStayStuckAndNeverWrap) {
  for (std::uint32_t c : {4u, 8u}) {
    const std::uint32_t max = (1u << c) - 1;
    const layout l = test::layout_of(8, 8, 64);
    counting_filter f(l, test::on_cpu(1), 0, c);
    const std::uint64_t key = 42;
    std::vector<std::uint64_t> many(max + 10, key);
    f.add(many.data(), many.size());
    std::uint8_t count = 0;
    f.approximate_count(&key, 1, &count);
    EXPECT_EQ(count, max) << "c=" << c;
    EXPECT_EQ(f.stats().saturated_counters, 8u) << "c=" << c;
    // Stuck: any number of removes leaves the key present and saturated.
    for (int i = 0; i < 3; ++i) f.remove_unchecked(many.data(), many.size());
    f.approximate_count(&key, 1, &count);
    EXPECT_EQ(count, max) << "c=" << c;
    EXPECT_EQ(f.count(&key, 1), 1u);
    EXPECT_EQ(f.stats().saturated_counters, 8u);
    // Neighbour counters of the saturated ones stayed 0: only 8 counters are nonzero.
    EXPECT_EQ(f.stats().nonzero_counters, 8u);
  }
}

TEST(CountingFilter, ThreadedWritesEqualOneThreadInBatchOrder) {
  // Batches past 2 * 2^16 keys split the blocks between threads.
  const layout l = test::layout_of(8, 8, 20000);
  const auto keys = test::random_keys(300000, 3);
  std::vector<std::uint64_t> removals(keys.begin(), keys.begin() + 150000);
  const auto absent = test::random_keys(150000, 4);
  removals.insert(removals.end(), absent.begin(), absent.end());
  std::vector<std::uint64_t> twice = removals;  // second removals of the same keys
  twice.insert(twice.end(), removals.begin(), removals.begin() + 50000);
  counting_filter one(l, test::on_cpu(1));
  std::vector<remove_report> reports;
  std::vector<std::vector<std::uint8_t>> removed;
  const auto write = [&](counting_filter& f) {
    f.add(keys.data(), keys.size());
    f.add(keys.data(), 200000);
    auto flags = test::bools(twice.size());
    reports.push_back(f.remove_with_status(twice.data(), twice.size(), flags.get()));
    removed.emplace_back(flags.get(), flags.get() + twice.size());
    f.remove_unchecked(keys.data() + 250000, 50000);
  };
  write(one);
  EXPECT_GT(reports[0].refused, 0u);
  auto all_one = test::bools(keys.size());
  one.contains(keys.data(), keys.size(), all_one.get());
  for (unsigned threads : {2u, 3u, 4u}) {
    const std::string where = std::to_string(threads) + " threads";
    counting_filter many(l, test::on_cpu(threads));
    write(many);
    EXPECT_EQ(one.counters(), many.counters()) << where;
    EXPECT_EQ(reports[0].removed, reports.back().removed) << where;
    EXPECT_EQ(reports[0].refused, reports.back().refused) << where;
    EXPECT_EQ(removed[0], removed.back()) << where << ": which keys a checked remove took";
    auto all_many = test::bools(keys.size());
    many.contains(keys.data(), keys.size(), all_many.get());
    EXPECT_EQ(test::first_difference(all_one.get(), all_many.get(), keys.size()), keys.size())
        << where;
  }
}

// Threaded writes drop null keys and answer them false, as one thread does:
// string keys with every third one null, on 1 and 3 threads.
TEST(CountingFilter, ThreadedWritesSkipNullKeysAsOneThreadDoes) {
  const layout l = test::layout_of(8, 8, 20000);
  const key_universe u(key_type::str32_with_nulls, 200000, 21);
  id_batch batch;
  std::mt19937_64 rng(22);
  for (std::size_t i = 0; i < 300000; ++i) {
    batch.ids.push_back(rng() % u.size());
    batch.null.push_back(i % 3 == 0);
  }
  std::vector<std::vector<bool>> answers;
  std::vector<std::vector<std::uint32_t>> counters;
  for (unsigned threads : {1u, 3u}) {
    counting_filter f(l, test::on_cpu(threads));
    test::apply(f, u, batch, batch_op::add, nullptr);
    test::apply(f, u, batch, batch_op::add, nullptr);
    auto removed = test::bools(batch.ids.size());
    test::apply(f, u, batch, batch_op::remove, removed.get());
    answers.push_back(test::as_vector(removed.get(), batch.ids.size()));
    counters.push_back(f.counters());
  }
  EXPECT_EQ(counters[0], counters[1]);
  EXPECT_EQ(answers[0], answers[1]);
  for (std::size_t i = 0; i < batch.ids.size(); i += 3) ASSERT_FALSE(answers[1][i]) << "null key " << i;
}

/// The plain words the counters project to, derived here from counters():
/// plain word i's bits are the nonzero fields of counter words i*c .. i*c+c-1.
std::vector<std::uint32_t> projection_of_counters(const counting_filter& f) {
  const std::vector<std::uint32_t> counters = f.counters();
  const std::uint32_t c = f.counter_bits();
  std::vector<std::uint32_t> words(f.layout().num_words());
  for (std::size_t i = 0; i < words.size(); ++i)
    for (std::uint32_t j = 0; j < c; ++j) words[i] |= projected_bits(counters[i * c + j], j, c);
  return words;
}

// The CPU backend answers contains/count/select from a plain bit array it
// keeps beside the counters (host/cpu/counting_backend.cpp). Pin that it stays
// the projection of the counters through every way counters change.
TEST(CountingFilter, TheProbedProjectionStaysTheCountersProjectionThroughEveryWrite) {
  const layout l = test::layout_of(8, 8, 20000);  // no counter comes near saturation
  const auto keys = test::random_keys(300000, 11);  // past 2 * 2^16 keys: threads split the blocks
  const auto absent = test::random_keys(100000, 12);
  for (unsigned threads : {1u, 2u, 4u}) {
    const std::string where = std::to_string(threads) + " threads";
    counting_filter f(l, test::on_cpu(threads));
    const auto expect_exact = [&](const char* after) {
      ASSERT_EQ(f.projection().words(), projection_of_counters(f)) << where << ", after " << after;
      auto found = test::bools(keys.size());
      f.contains(keys.data(), keys.size(), found.get());
      const filter plain = f.projection();
      auto expected = test::bools(keys.size());
      plain.contains(keys.data(), keys.size(), expected.get());
      ASSERT_EQ(test::first_difference(found.get(), expected.get(), keys.size()), keys.size())
          << where << ", after " << after;
    };
    f.add(keys.data(), keys.size());
    expect_exact("add");
    f.remove(keys.data(), 200000);  // most counters of the removed keys fall to 0
    expect_exact("checked remove");
    f.remove(absent.data(), absent.size());  // mostly refused
    expect_exact("checked remove of absent keys");
    f.remove_unchecked(keys.data() + 200000, 50000);
    expect_exact("unchecked remove");
    f.merge(f);
    expect_exact("merge");
    f.remove_unchecked(keys.data() + 250000, 50000);
    f.remove_unchecked(keys.data() + 250000, 50000);
    expect_exact("removing every key");
    EXPECT_EQ(f.count(keys.data(), keys.size()), 0u) << where << ": every key was removed";
    f.add(keys.data(), 1000);
    const std::vector<std::uint32_t> counters = f.counters();
    const counting_filter copy =
        counting_filter::from_counters(l, f.counter_bits(), counters.data(), test::on_cpu(threads));
    EXPECT_EQ(copy.projection().words(), projection_of_counters(f)) << where << ", from_counters";
    f.clear();
    expect_exact("clear");
  }
}

TEST(CountingFilter, SelectAndCountAgreeWithContains) {
  counting_filter f = counting_filter::create(2000, 0.01, test::on_cpu(1));
  const auto keys = test::random_keys(2000, 5);
  f.add(keys.data(), keys.size());
  f.remove(keys.data(), 500);
  const auto probes = test::random_keys(3000, 6);
  std::vector<std::uint64_t> mixed(keys.begin(), keys.end());
  mixed.insert(mixed.end(), probes.begin(), probes.end());
  auto found = test::bools(mixed.size());
  f.contains(mixed.data(), mixed.size(), found.get());
  std::vector<std::uint64_t> rows(mixed.size());
  const std::uint64_t selected = f.select(mixed.data(), mixed.size(), rows.data());
  std::vector<std::uint64_t> expected;
  for (std::size_t i = 0; i < mixed.size(); ++i)
    if (found[i]) expected.push_back(i);
  rows.resize(selected);
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(f.count(mixed.data(), mixed.size()), expected.size());
  for (std::size_t i = 500; i < keys.size(); ++i) ASSERT_TRUE(found[i]) << "false negative " << i;
}

// Saves stream the counters in slices (copy_counters), for both counter widths.
TEST(CountingFilter, CopyCountersGivesAnySliceOfCountersAndRefusesRangesPastTheEnd) {
  for (const std::uint32_t counter_bits : {4u, 8u}) {
    counting_filter f(test::layout_of(8, 8, 3'001), test::on_cpu(1), 0, counter_bits);
    const auto keys = test::random_keys(5'000, 9);
    f.add(keys.data(), keys.size());
    test::expect_slices_of(f.counters(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
      f.copy_counters(first, count, out);
    });
  }
}

TEST(CountingFilter, KeyCountsSaturateInsteadOfWrapping) {
  // A file may hold any counts; a remove at 2^64 - 1 removed keys wrapped the
  // count to 0 and keys_held() jumped to 2^64 - 1.
  const layout l = test::layout_of(8, 8, 64);
  const std::uint64_t most = ~std::uint64_t{0};
  const std::vector<std::uint32_t> zeros(num_counter_words(l, 4));
  counting_filter f = counting_filter::from_counters(l, 4, zeros.data(), test::on_cpu(1), 0, most, most);
  const std::uint64_t key = 12345;
  f.add(&key, 1);
  (void)f.remove(&key, 1);
  EXPECT_EQ(f.stats().keys_added, most);
  EXPECT_EQ(f.stats().keys_removed, most);
  EXPECT_EQ(f.projection().stats().keys_added, 0u);  // the keys held, added - removed
  counting_filter g = counting_filter::from_counters(l, 4, zeros.data(), test::on_cpu(1), 0, 3, 2);
  f.merge(g);
  EXPECT_EQ(f.stats().keys_removed, most);
}

TEST(CountingFilter, MergeAddsCountersSaturatingAndChecksLayouts) {
  const layout l = test::layout_of(8, 8, 500);
  counting_filter a(l, test::on_cpu(1));
  counting_filter b(l, test::on_cpu(1));
  counting_filter both(l, test::on_cpu(1));
  const auto ka = test::random_keys(800, 1);
  const auto kb = test::random_keys(800, 2);
  a.add(ka.data(), ka.size());
  b.add(kb.data(), kb.size());
  both.add(ka.data(), ka.size());
  both.add(kb.data(), kb.size());
  a.merge(b);
  EXPECT_EQ(a.counters(), both.counters());
  EXPECT_EQ(a.stats().keys_added, 1600u);
  a.merge(a);  // x + x, saturating
  both.add(ka.data(), ka.size());
  both.add(kb.data(), kb.size());
  EXPECT_EQ(a.counters(), both.counters());
  counting_filter wider(l, test::on_cpu(1), 0, 8);
  EXPECT_THROW(a.merge(wider), layout_mismatch);
  counting_filter other(test::layout_of(8, 8, 501), test::on_cpu(1));
  EXPECT_THROW(a.merge(other), layout_mismatch);
}

TEST(CountingFilter, ProjectionExportsAsParquetSbbfLikeThePlainFilter) {
  const layout l = parquet_compatible_layout(10000, 0.01);
  counting_filter f(l, test::on_cpu(1), 10000);
  filter plain(l, test::on_cpu(1), 10000);
  const auto keys = test::random_keys(10000, 9);
  const auto gone = test::random_keys(3000, 10);
  f.add(keys.data(), keys.size());
  f.add(gone.data(), gone.size());
  EXPECT_EQ(f.remove(gone.data(), gone.size()).removed, gone.size());
  plain.add(keys.data(), keys.size());
  EXPECT_EQ(to_parquet_sbbf(f.projection()), to_parquet_sbbf(plain));
}

TEST(CountingFilter, StatsReportCountersPriceAndEstimates) {
  counting_filter f = counting_filter::create(100000, 0.01, test::on_cpu(1));
  const auto keys = test::random_keys(100000, 12);
  f.add(keys.data(), keys.size());
  const counting_stats s = f.stats();
  const filter plain = f.projection();
  EXPECT_EQ(s.counter_bits, 4u);
  EXPECT_EQ(s.num_counters, f.layout().num_bits());
  EXPECT_EQ(s.size_bytes, 4 * f.layout().size_bytes());
  EXPECT_NEAR(s.bytes_per_key, 4.0 * static_cast<double>(f.layout().size_bytes()) / 100000, 1e-9);
  EXPECT_EQ(s.nonzero_counters, plain.stats().bits_set);
  EXPECT_NEAR(s.estimated_keys, 100000, 3000);
  EXPECT_NEAR(s.estimated_fpr, plain.stats().estimated_fpr, 1e-12);
  EXPECT_FALSE(s.over_capacity);
  EXPECT_EQ(s.saturated_counters, 0u);
}

TEST(CountingFilter, BadArgumentsAreNamed) {
  EXPECT_NE(test::message_of([] { counting_filter f(test::layout_of(8, 8, 10), test::on_cpu(), 0, 5); })
                .find("counter_bits must be 4 or 8"),
            std::string::npos);
  counting_filter f(test::layout_of(8, 8, 10), test::on_cpu(1));
  EXPECT_THROW(f.add(static_cast<const std::uint64_t*>(nullptr), 3), invalid_argument);
  EXPECT_THROW(f.remove(static_cast<const std::uint64_t*>(nullptr), 3), invalid_argument);
  const std::uint64_t key = 1;
  EXPECT_THROW(f.contains(&key, 1, nullptr), invalid_argument);
  EXPECT_THROW(counting_filter::from_counters(f.layout(), 4, nullptr), invalid_argument);
}

TEST(CountingFilter, CopyAndClearKeepLayoutAndCounters) {
  counting_filter f(test::layout_of(4, 6, 77, 99), test::on_cpu(1), 0, 8);
  const auto keys = test::random_keys(400, 13);
  f.add(keys.data(), keys.size());
  const counting_filter g = f.copy_to(backend::cpu);
  EXPECT_EQ(g.counters(), f.counters());
  EXPECT_EQ(g.counter_bits(), 8u);
  EXPECT_EQ(g.stats().keys_added, 400u);
  f.clear();
  EXPECT_EQ(f.stats().nonzero_counters, 0u);
  EXPECT_EQ(f.count(keys.data(), keys.size()), 0u);
  EXPECT_EQ(g.count(keys.data(), keys.size()), keys.size());
}

}  // namespace
}  // namespace gbf

namespace gbf {
namespace {

// The FPR after adds and removes is the plain filter's prediction at the keys
// held: 300k keys added, 100k of them removed, probed with 2M absent keys.
// Printed, for docs/counting.md.
TEST(CountingFilter, MeasuredFprAfterRemovesMatchesThePredictionAtTheKeysHeld) {
  for (std::uint32_t w : {8u, 16u}) {
    shape s;
    s.words_per_block = w;
    s.bits_per_key = w;
    counting_filter f = counting_filter::create(200'000, 0.01, test::on_cpu(), s);
    const auto keys = test::random_keys(300'000, 41);
    f.add(keys.data(), keys.size());
    EXPECT_EQ(f.remove(keys.data(), 100'000).refused, 0u);
    const auto probes = test::random_keys(2'000'000, 42);  // 64-bit random: absent
    const double measured =
        static_cast<double>(f.count(probes.data(), probes.size())) / probes.size();
    const double predicted = expected_fpr(f.layout(), 200'000);
    // Binomial noise over 2M probes at ~1% is 7e-5; the removes' false-positive
    // removals (none were refused) can only lower the FPR slightly.
    const double sigma = std::sqrt(predicted * (1 - predicted) / probes.size());
    std::printf("W=%u k=%u, %llu blocks: measured FPR %.5f, predicted %.5f at 200k keys held\n", w,
                w, static_cast<unsigned long long>(f.layout().num_blocks), measured, predicted);
    EXPECT_NEAR(measured, predicted, 5 * sigma + 0.0005);
    // Exactly the plain filter's false positives: the projection is its bits.
    filter plain(f.layout(), test::on_cpu());
    plain.add(keys.data() + 100'000, 200'000);
    EXPECT_EQ(f.count(probes.data(), probes.size()), plain.count(probes.data(), probes.size()));
    EXPECT_EQ(f.count(keys.data() + 100'000, 200'000), 200'000u) << "false negatives";
  }
}

TEST(CountingFilter, KeyCountsFollowAddsRemovesMergesProjectionsAndClears) {
  const auto keys = test::random_keys(500, 93);
  counting_filter f(test::layout_of(8, 8, 200), test::on_cpu(1));
  f.add(keys.data(), 300);
  // 50 present keys are removed; 50 never added are refused and not counted.
  const remove_report r = f.remove(keys.data(), 50);
  EXPECT_EQ(r.removed, 50u);
  const remove_report absent = f.remove(keys.data() + 400, 50);
  EXPECT_EQ(absent.removed + absent.refused, 50u);
  EXPECT_EQ(f.stats().keys_removed, 50u + absent.removed);
  const std::uint64_t removed = f.stats().keys_removed;
  // The projection holds the keys held: added - removed.
  EXPECT_EQ(f.projection().stats().keys_added, 300u - removed);
  // A merge sums both counts.
  counting_filter g(test::layout_of(8, 8, 200), test::on_cpu(1));
  g.add(keys.data() + 300, 100);
  g.remove(keys.data() + 300, 10);
  f.merge(g);
  EXPECT_EQ(f.stats().keys_added, 400u);
  EXPECT_EQ(f.stats().keys_removed, removed + 10u);
  f.clear();
  EXPECT_EQ(f.stats().keys_added, 0u);
  EXPECT_EQ(f.stats().keys_removed, 0u);
}

TEST(CountingFilter, IntersectTakesTheCounterMinimumAndKeepsTheKeysOfBoth) {
  for (const std::uint32_t counter_bits : {4u, 8u}) {
    SCOPED_TRACE(std::to_string(counter_bits) + "-bit counters");
    const auto keys = test::random_keys(3'000, 95);
    counting_filter a(test::layout_of(8, 8, 500), test::on_cpu(2), 0, counter_bits);
    counting_filter b(test::layout_of(8, 8, 500), test::on_cpu(1), 0, counter_bits);
    a.add(keys.data(), 2'000);          // keys 0..1999
    a.add(keys.data(), 500);            // 0..499 twice
    b.add(keys.data() + 1'000, 2'000);  // keys 1000..2999
    b.remove(keys.data() + 2'900, 100);
    const std::vector<std::uint32_t> ca = a.counters(), cb = b.counters();
    const std::vector<std::uint32_t> plain_a = a.projection().words(), plain_b = b.projection().words();
    counting_filter both = a.copy_to(backend::cpu);
    both.intersect(b);
    const std::vector<std::uint32_t> counters = both.counters();
    ASSERT_EQ(counters.size(), ca.size());
    for (std::size_t i = 0; i < counters.size(); ++i)
      ASSERT_EQ(counters[i], min_fields(ca[i], cb[i], counter_bits)) << "word " << i;
    // Field by field against the definition, for one word of mixed fields.
    const std::uint32_t max = counter_max(counter_bits);
    const std::uint32_t x = counter_bits == 4 ? 0x0F3A0152u : 0x00FF7F01u;
    const std::uint32_t y = counter_bits == 4 ? 0x1F2B0340u : 0x01FE8000u;
    for (std::uint32_t shift = 0; shift < 32; shift += counter_bits)
      EXPECT_EQ((min_fields(x, y, counter_bits) >> shift) & max,
                std::min((x >> shift) & max, (y >> shift) & max));
    // The projection is the AND of the two: the plain intersection.
    const std::vector<std::uint32_t> projected = both.projection().words();
    for (std::size_t i = 0; i < projected.size(); ++i) ASSERT_EQ(projected[i], plain_a[i] & plain_b[i]);
    // Keys counted in both (1000..1999) stay; the key count is the smaller held.
    EXPECT_EQ(both.count(keys.data() + 1'000, 1'000), 1'000u);
    EXPECT_EQ(both.stats().keys_added, 1'900u);
    EXPECT_EQ(both.stats().keys_removed, 0u);
    // With itself, nothing changes.
    both.intersect(both);
    EXPECT_EQ(both.counters(), counters);
    counting_filter other_width(test::layout_of(8, 8, 500), test::on_cpu(1), 0, counter_bits == 4 ? 8 : 4);
    EXPECT_THROW(both.intersect(other_width), layout_mismatch);
  }
}

}  // namespace
}  // namespace gbf
