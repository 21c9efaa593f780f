// The counting filter on the GPU against the CPU backend and the multiset
// model (tests/counting_model.hpp): the same counter words after the same
// operations (adds and unchecked removes in any thread order, checked removes
// in batch order), host and device batches of every key kind, _async calls,
// hot counters hammered by many threads (saturation without spills), and the
// projection. Every test skips without a GPU (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/counting_model.hpp"
#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"

namespace gbf {
namespace {

using test::batch_op;
using test::counting_model;
using test::id_batch;
using test::key_type;
using test::key_universe;
using test::on_cpu;
using test::on_gpu;
using test::random_keys;

using GpuCounting = test::gpu_test;
using GpuCountingLayouts = test::gpu_layout_test;

TEST_P(GpuCountingLayouts, RandomSequencesGiveTheModelsCountersOnEveryKeyKind) {
  for (std::uint32_t c : {4u, 8u}) {
    for (key_type type : {key_type::u32, key_type::u64, key_type::str32_with_nulls,
                          key_type::str64}) {
      const key_universe u(type, 80, c * 7 + static_cast<unsigned>(type));
      counting_filter g(current_layout(), on_gpu(16), 0, c);  // pieces of 16 keys
      counting_model model(current_layout(), c, u);
      std::mt19937_64 rng(c + 100 * static_cast<unsigned>(type));
      for (int step = 0; step < 10; ++step) {
        const id_batch b = u.random_batch(rng, 1 + rng() % 60);
        if (rng() % 2 == 0) {
          test::apply(g, u, b, batch_op::add, nullptr);
          model.apply(b, batch_op::add);
        } else {
          auto removed = test::bools(b.ids.size());
          std::uint64_t refused = 0;
          const std::vector<bool> expected = model.apply(b, batch_op::remove, &refused);
          const remove_report r = test::apply(g, u, b, batch_op::remove, removed.get());
          ASSERT_EQ(test::as_vector(removed.get(), b.ids.size()), expected) << "step " << step;
          EXPECT_EQ(r.refused, refused);
        }
        ASSERT_EQ(g.counters(), model.counter_words()) << "c=" << c << " step " << step;
        ASSERT_EQ(g.projection().words(), model.projection_words());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllGeometries, GpuCountingLayouts,
                         ::testing::ValuesIn(test::layout_params(37)), test::layout_param_name{});

TEST_F(GpuCounting, GpuAndCpuHoldTheSameCountersAfterBigBatches) {
  for (std::uint32_t c : {4u, 8u}) {
    counting_filter g = counting_filter::create(200'000, 0.01, on_gpu(50'000), {}, c);
    counting_filter h = counting_filter::create(200'000, 0.01, on_cpu(2), {}, c);
    const auto keys = random_keys(300'000, 21);
    const auto absent = random_keys(100'000, 22);
    std::vector<std::uint64_t> removals(keys.begin(), keys.begin() + 100'000);
    removals.insert(removals.end(), absent.begin(), absent.end());
    remove_report rg;
    remove_report rh;
    for (counting_filter* f : {&g, &h}) {
      f->add(keys.data(), keys.size());
      f->add(keys.data(), 50'000);
      (f == &g ? rg : rh) = f->remove(removals.data(), removals.size());
      f->remove_unchecked(keys.data() + 250'000, 50'000);
    }
    ASSERT_EQ(g.counters(), h.counters()) << "c=" << c;
    EXPECT_EQ(rg.removed, rh.removed);
    EXPECT_EQ(rg.refused, rh.refused);
    EXPECT_EQ(g.stats().saturated_counters, h.stats().saturated_counters);
    EXPECT_EQ(g.stats().nonzero_counters, h.stats().nonzero_counters);
    EXPECT_EQ(g.projection().words(), h.projection().words());
    const auto probes = random_keys(200'000, 23);
    EXPECT_EQ(g.count(probes.data(), probes.size()), h.count(probes.data(), probes.size()));
    std::vector<std::uint8_t> cg(probes.size());
    std::vector<std::uint8_t> ch(probes.size());
    g.approximate_count(probes.data(), probes.size(), cg.data());
    h.approximate_count(probes.data(), probes.size(), ch.data());
    EXPECT_EQ(cg, ch);
    EXPECT_EQ(g.copy_to(backend::cpu).counters(), h.counters());
  }
}

TEST_F(GpuCounting, OneKeyAddedByManyThreadsSaturatesWithoutSpilling) {
  // 1 Mi copies of one key: every thread of the launch CASes the same words.
  for (std::uint32_t c : {4u, 8u}) {
    counting_filter g(test::layout_of(8, 8, 16), on_gpu(), 0, c);
    const std::vector<std::uint64_t> same(1 << 20, 12345);
    g.add(same.data(), same.size());
    EXPECT_EQ(g.stats().saturated_counters, 8u);
    EXPECT_EQ(g.stats().nonzero_counters, 8u) << "an increment spilled into a neighbour";
    // 1000 other keys once each: the same counters as on the CPU.
    counting_filter h(test::layout_of(8, 8, 16), on_cpu(1), 0, c);
    h.add(same.data(), same.size());
    const auto few = random_keys(1000, 5);
    g.add(few.data(), few.size());
    h.add(few.data(), few.size());
    EXPECT_EQ(g.counters(), h.counters());
    g.remove_unchecked(same.data(), same.size());
    EXPECT_EQ(g.count(same.data(), 1), 1u) << "a saturated counter was decremented";
  }
}

TEST_F(GpuCounting, DeviceKeysAndAsyncCallsMatchTheCpu) {
  const auto keys = random_keys(100'000, 31);
  const auto dkeys = test::to_device(keys);
  counting_filter g = counting_filter::create(100'000, 0.01, on_gpu());
  counting_filter h = counting_filter::create(100'000, 0.01, on_cpu());
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  g.add_async(dkeys.data(), keys.size(), s);
  g.add_async(dkeys.data(), 1000, s);
  detail::device_buffer<std::uint64_t> refused(1);
  g.remove_async(dkeys.data(), 2000, s, refused.data());
  g.synchronize();
  h.add(keys.data(), keys.size());
  h.add(keys.data(), 1000);
  const remove_report r = h.remove(keys.data(), 2000);
  EXPECT_EQ(g.counters(), h.counters());
  EXPECT_EQ(test::to_host(refused.data(), 1)[0], r.refused);
  detail::device_buffer<bool> found(keys.size());
  g.contains(dkeys.data(), keys.size(), found.data());
  const auto on_device = test::bools_from_device(found.data(), keys.size());
  for (std::size_t i = 2000; i < keys.size(); ++i) ASSERT_TRUE(on_device[i]) << "key " << i;
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Checked removes share the filter's one scratch buffer. A small remove on one
// stream, then a larger one on another (the scratch grows between them) with
// no synchronization between: the second must wait for the first, so the
// counters and refusals are those of the two removes in call order on the CPU.
TEST_F(GpuCounting, AsyncRemovesOnTwoStreamsShareTheScratchInCallOrder) {
  const auto keys = random_keys(300'000, 33);
  const auto dkeys = test::to_device(keys);
  counting_filter g = counting_filter::create(300'000, 0.01, on_gpu());
  counting_filter h = counting_filter::create(300'000, 0.01, on_cpu());
  g.add(keys.data(), keys.size());
  h.add(keys.data(), keys.size());
  cudaStream_t first = nullptr;
  cudaStream_t second = nullptr;
  ASSERT_EQ(cudaStreamCreate(&first), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&second), cudaSuccess);
  detail::device_buffer<std::uint64_t> refused(2);
  // Keys 0 .. 9,999 are removed by both: the second remove refuses them (or
  // finds them through other keys' counters), as the CPU's second remove does.
  g.remove_async(dkeys.data(), 10'000, first, refused.data());
  g.remove_async(dkeys.data(), 250'000, second, refused.data() + 1);
  g.synchronize();
  const remove_report r1 = h.remove(keys.data(), 10'000);
  const remove_report r2 = h.remove(keys.data(), 250'000);
  EXPECT_EQ(g.counters(), h.counters());
  const std::vector<std::uint64_t> got = test::to_host(refused.data(), 2);
  EXPECT_EQ(got[0], r1.refused);
  EXPECT_EQ(got[1], r2.refused);
  EXPECT_GT(r2.refused, 0u) << "the test needs keys the second remove refuses";
  ASSERT_EQ(cudaStreamDestroy(first), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(second), cudaSuccess);
}

// A counting filter merged with itself doubles its counters (saturating), as on
// the CPU; the GPU doubles them in place (the merge kernel's operands must not
// alias, so x + x has a kernel of its own).
TEST_F(GpuCounting, MergeWithItselfDoublesTheCountersAsOnTheCpu) {
  for (const std::uint32_t counter_bits : {4u, 8u}) {
    counting_filter g(test::layout_of(8, 8, 2'001), on_gpu(), 0, counter_bits);
    const auto keys = random_keys(6'000, 41);
    g.add(keys.data(), keys.size());
    counting_filter c = g.copy_to(backend::cpu);
    g.merge(g);
    c.merge(c);
    EXPECT_EQ(g.counters(), c.counters()) << counter_bits << "-bit counters";
    test::expect_slices_of(g.counters(), [&](std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
      g.copy_counters(first, count, out);
    });
  }
}

TEST_F(GpuCounting, IntersectTakesTheCounterMinimumAsOnTheCpu) {
  for (const std::uint32_t counter_bits : {4u, 8u}) {
    const auto keys = random_keys(6'000, 43);
    counting_filter a(test::layout_of(8, 8, 2'001), on_gpu(), 0, counter_bits);
    counting_filter b(test::layout_of(8, 8, 2'001), on_gpu(), 0, counter_bits);
    a.add(keys.data(), 4'000);
    a.add(keys.data(), 1'000);
    b.add(keys.data() + 2'000, 4'000);
    counting_filter ca = a.copy_to(backend::cpu);
    const counting_filter cb = b.copy_to(backend::cpu);
    a.intersect(b);
    ca.intersect(cb);
    EXPECT_EQ(a.counters(), ca.counters()) << counter_bits << "-bit counters";
    // Against a CPU filter: through the host, the same counters.
    counting_filter from_cpu = b.copy_to(backend::gpu);
    from_cpu.intersect(cb);
    EXPECT_EQ(from_cpu.counters(), cb.counters());
    a.intersect(a);
    EXPECT_EQ(a.counters(), ca.counters()) << "min(x, x) = x";
  }
}

}  // namespace
}  // namespace gbf
