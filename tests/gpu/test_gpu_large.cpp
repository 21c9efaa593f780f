// GPU paths that small arrays and batches never reach, against the CPU:
// - staged copies past their first step: loads, saves and copy_to move arrays
//   in steps of 2^20 words (host/word_range.hpp), so only an array of several
//   steps writes and reads at an offset other than 0, for every kind;
// - integer kernels whose grid loops (about 270 thousand keys a launch on an
//   H100) and Arrow null bitmaps that start at a bit other than 0, which the
//   pipeline's chunks do;
// - the filter-level xor and the counting intersect over arrays of many steps.
// Every test skips without a GPU (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "gbf/scaling_filter.hpp"
#include "host/bloom_backend.hpp"
#include "host/keys.hpp"

namespace gbf {
namespace {

using test::on_cpu;
using test::on_gpu;
using test::random_keys;

using GpuLarge = test::gpu_test;

// 2.5 staging steps of words: the last step is partial, the middle one starts
// at neither 0 nor the end.
constexpr std::uint64_t staged_words = (std::uint64_t{5} << 20) / 2;

TEST_F(GpuLarge, APlainFilterOfManyStepsKeepsEveryWordBetweenBackendsAndFiles) {
  const layout l{8, 8, 0, staged_words / 8};
  const auto keys = random_keys<std::uint64_t>(300'000, 11);
  filter gpu(l, on_gpu(), 77);
  filter cpu(l, on_cpu(1), 77);
  gpu.add(keys.data(), keys.size());
  cpu.add(keys.data(), keys.size());
  const std::vector<std::uint32_t> words = cpu.words();
  ASSERT_EQ(gpu.words(), words);
  const std::vector<std::uint8_t> file = serialize(gpu, 0.01);
  EXPECT_EQ(file, serialize(cpu, 0.01));
  // Into a GPU: from the GPU (device to host to device), from the CPU, from a file.
  std::pair<std::string, filter> copies[] = {{"gpu to gpu", gpu.copy_to(backend::gpu)},
                                    {"cpu to gpu", cpu.copy_to(backend::gpu)},
                                    {"file to gpu", deserialize(file.data(), file.size(), on_gpu())},
                                    {"gpu to cpu", gpu.copy_to(backend::cpu)}};
  for (const auto& [route, copy] : copies) {
    SCOPED_TRACE(route);
    EXPECT_EQ(copy.words(), words);
    EXPECT_EQ(copy.stats().keys_added, keys.size());
    EXPECT_EQ(copy.capacity(), 77u);
  }
}

TEST_F(GpuLarge, ACountingFilterOfManyStepsKeepsCountersAndProjectionBetweenBackendsAndFiles) {
  const layout l{8, 8, 0, staged_words / (8 * 4)};  // 4-bit counters: 4 counter words a plain word
  const auto keys = random_keys<std::uint64_t>(150'000, 12);
  counting_filter gpu(l, on_gpu(), 0, 4);
  counting_filter cpu(l, on_cpu(1), 0, 4);
  for (counting_filter* f : {&gpu, &cpu}) {
    f->add(keys.data(), keys.size());
    f->add(keys.data(), 20'000);  // counters of 2 and more
    f->remove(keys.data() + 100'000, 1'000);
  }
  const std::vector<std::uint32_t> counters = cpu.counters();
  const std::vector<std::uint32_t> projected = cpu.projection().words();
  ASSERT_EQ(gpu.counters(), counters);
  const std::vector<std::uint8_t> file = serialize(gpu);
  EXPECT_EQ(file, serialize(cpu));
  std::pair<std::string, counting_filter> copies[] = {{"gpu to gpu", gpu.copy_to(backend::gpu)},
        {"cpu to gpu", cpu.copy_to(backend::gpu)},
        {"file to gpu", deserialize_counting(file.data(), file.size(), on_gpu())},
        {"gpu to cpu", gpu.copy_to(backend::cpu)}};
  for (const auto& [route, copy] : copies) {
    SCOPED_TRACE(route);
    EXPECT_EQ(copy.counters(), counters);
    EXPECT_EQ(copy.projection().words(), projected);
    EXPECT_EQ(copy.stats().keys_added, keys.size() + 20'000);
    EXPECT_EQ(copy.stats().keys_removed, 1'000u);
  }
}

// Counter-wise minimum and in-place doubling over every step of the array.
TEST_F(GpuLarge, CountingIntersectAndSelfMergeOverManyStepsMatchTheCpu) {
  const layout l{8, 8, 0, staged_words / (8 * 4)};
  const auto keys = random_keys<std::uint64_t>(150'000, 13);
  counting_filter a(l, on_gpu(), 0, 4);
  counting_filter b(l, on_gpu(), 0, 4);
  a.add(keys.data(), 100'000);
  a.add(keys.data(), 30'000);
  b.add(keys.data() + 50'000, 100'000);
  counting_filter ca = a.copy_to(backend::cpu);
  const counting_filter cb = b.copy_to(backend::cpu);
  // Across backends the operand comes over a step at a time, both ways.
  counting_filter cpu_with_gpu_operand = a.copy_to(backend::cpu);
  counting_filter gpu_with_cpu_operand = a.copy_to(backend::gpu);
  cpu_with_gpu_operand.intersect(b);
  gpu_with_cpu_operand.intersect(cb);
  a.intersect(b);
  ca.intersect(cb);
  EXPECT_EQ(a.counters(), ca.counters());
  EXPECT_EQ(cpu_with_gpu_operand.counters(), ca.counters());
  EXPECT_EQ(cpu_with_gpu_operand.projection().words(), ca.projection().words());
  EXPECT_EQ(gpu_with_cpu_operand.counters(), ca.counters());
  a.merge(a);
  ca.merge(ca);
  EXPECT_EQ(a.counters(), ca.counters()) << "x + x in place";
}

// The GPU's cuckoo placement need not be the CPU's: the copies must keep the
// GPU table as it is, whatever it holds.
TEST_F(GpuLarge, ACuckooTableOfManyStepsKeepsEveryWordBetweenBackendsAndFiles) {
  cuckoo_layout l;
  l.num_buckets = staged_words / 8;
  cuckoo_filter gpu(l, on_gpu());
  const auto keys = random_keys<std::uint64_t>(300'000, 14);
  gpu.add(keys.data(), keys.size());
  gpu.remove(keys.data(), 100);
  const std::vector<std::uint32_t> table = gpu.words();
  const std::vector<std::uint8_t> file = serialize(gpu);
  std::pair<std::string, cuckoo_filter> copies[] = {{"gpu to gpu", gpu.copy_to(backend::gpu)},
        {"cpu to gpu", gpu.copy_to(backend::cpu).copy_to(backend::gpu)},
        {"file to gpu", deserialize_cuckoo(file.data(), file.size(), on_gpu())},
        {"gpu to cpu", gpu.copy_to(backend::cpu)}};
  for (const auto& [route, copy] : copies) {
    SCOPED_TRACE(route);
    EXPECT_EQ(copy.words(), table);
    EXPECT_EQ(copy.stats().keys_added, gpu.stats().keys_added);
    EXPECT_EQ(copy.stats().keys_removed, 100u);
    EXPECT_EQ(copy.count(keys.data() + 100, keys.size() - 100), gpu.count(keys.data() + 100, keys.size() - 100));
  }
}

TEST_F(GpuLarge, AScalingChainOfManyStepsKeepsEveryLevelBetweenBackendsAndFiles) {
  // Level 0 of 2.5 steps, level 1 of 5.
  const std::uint64_t capacity = staged_words * 32 / 10;
  const auto keys = random_keys<std::uint64_t>(capacity + capacity / 20, 15);
  scaling_filter gpu = scaling_filter::create(capacity, 0.01, {}, on_gpu());
  scaling_filter cpu = scaling_filter::create(capacity, 0.01, {}, on_cpu(1));
  gpu.add(keys.data(), keys.size());
  cpu.add(keys.data(), keys.size());
  ASSERT_EQ(gpu.levels().size(), 2u);
  ASSERT_EQ(cpu.levels().size(), 2u);
  const std::vector<std::uint8_t> file = serialize(gpu);
  EXPECT_EQ(file, serialize(cpu));
  std::pair<std::string, scaling_filter> copies[] = {{"gpu to gpu", gpu.copy_to(backend::gpu)},
        {"cpu to gpu", cpu.copy_to(backend::gpu)},
        {"file to gpu", deserialize_scaling_filter(file.data(), file.size(), on_gpu())},
        {"gpu to cpu", gpu.copy_to(backend::cpu)}};
  for (const auto& [route, copy] : copies) {
    SCOPED_TRACE(route);
    ASSERT_EQ(copy.levels().size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(copy.level_words(i), cpu.level_words(i)) << "level " << i;
      EXPECT_EQ(copy.levels()[i].keys, cpu.levels()[i].keys) << "level " << i;
    }
  }
}

// The filter-level xor on the GPU: the CPU's bits, keys_added reset, and
// a ^ b ^ b = a; with a CPU operand, through the host.
TEST_F(GpuLarge, SymmetricDifferenceOfGpuFiltersMatchesTheCpu) {
  const layout l{8, 8, 0, staged_words / 8};
  const auto keys = random_keys<std::uint64_t>(200'000, 16);
  filter a(l, on_gpu());
  filter b(l, on_gpu());
  a.add(keys.data(), 120'000);
  b.add(keys.data() + 80'000, 120'000);
  filter ca = a.copy_to(backend::cpu);
  const filter cb = b.copy_to(backend::cpu);
  const std::vector<std::uint32_t> before = a.words();
  a.symmetric_difference(b);
  ca.symmetric_difference(cb);
  EXPECT_EQ(a.words(), ca.words());
  EXPECT_EQ(a.stats().keys_added, 0u);
  a.symmetric_difference(cb);  // a CPU operand, a step at a time
  EXPECT_EQ(a.words(), before);
  std::vector<std::uint32_t> expected = ca.words();
  const std::vector<std::uint32_t> b_words = b.words();
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] |= b_words[i];
  ca.merge(b);  // a CPU filter, a GPU operand, a step at a time
  EXPECT_EQ(ca.words(), expected);
}

// ---------------------------------------------------------------------------
// Integer kernels: grid loops and null bitmaps
// ---------------------------------------------------------------------------

const detail::call_options sync_call{"test", nullptr, false};

template <class Key>
detail::key_batch batch_of(const Key* keys, std::size_t n, const std::uint8_t* validity, std::size_t first_bit,
                           detail::memory_space space) {
  detail::key_batch batch{keys, n, detail::key_kind_of<Key>(), space};
  batch.validity = validity;
  batch.validity_bit = first_bit;
  return batch;
}

std::vector<std::uint32_t> words_of(const detail::bloom_backend& b, const layout& l) {
  std::vector<std::uint32_t> words(l.num_words());
  b.read_words(words.data());
  return words;
}

// 10^6 keys + 3 (the grid loops several times on any GPU; the host pipeline
// cuts them into chunks whose bitmaps start mid-byte), about half null, the
// bitmap starting at bit 3: the bits and is_new of the sequential CPU loop,
// nulls answered false, on host and device batches, for both key widths.
template <class Key>
void expect_integer_adds_with_nulls_give_the_cpu_bits() {
  constexpr std::size_t n = 1'000'003;
  constexpr std::size_t first_bit = 3;
  const layout l = test::with_blocks(layout{}, 40'009);  // repeats of blocks, so is_new depends on order
  const std::vector<Key> keys = random_keys<Key>(n, 17);
  const std::vector<std::uint8_t> validity = test::random_validity(n + first_bit, 18);

  auto cpu = detail::make_cpu_bloom(l, on_cpu(1, cpu_simd::scalar), nullptr);
  auto want = test::bools(n);
  cpu->add(batch_of(keys.data(), n, validity.data(), first_bit, detail::memory_space::host), want.get(), sync_call);
  const std::vector<std::uint32_t> words = words_of(*cpu, l);

  // Host keys through small chunks: every chunk's bitmap starts at another bit.
  auto host = detail::make_gpu_bloom(l, on_gpu(65'537, 3), nullptr);
  auto got = test::bools(n);
  host->add(batch_of(keys.data(), n, validity.data(), first_bit, detail::memory_space::host), got.get(), sync_call);
  EXPECT_EQ(words_of(*host, l), words);
  EXPECT_EQ(test::first_difference(got.get(), want.get(), n), n) << "host batch is_new";

  const auto device_keys = test::to_device(keys);
  const auto device_validity = test::to_device(validity);
  auto device = detail::make_gpu_bloom(l, on_gpu(), nullptr);
  detail::device_buffer<bool> device_new(n);
  device->add(batch_of(device_keys.data(), n, device_validity.data(), first_bit, detail::memory_space::device),
              device_new.data(), sync_call);
  EXPECT_EQ(words_of(*device, l), words);
  EXPECT_EQ(test::first_difference(test::bools_from_device(device_new.data(), n).get(), want.get(), n), n)
      << "device batch is_new";

  // Without is_new (the plain add kernel), and the probe of the same batch.
  auto plain = detail::make_gpu_bloom(l, on_gpu(), nullptr);
  plain->add(batch_of(device_keys.data(), n, device_validity.data(), first_bit, detail::memory_space::device),
             nullptr, sync_call);
  EXPECT_EQ(words_of(*plain, l), words);
  detail::device_buffer<bool> found(n);
  plain->contains(batch_of(device_keys.data(), n, device_validity.data(), first_bit, detail::memory_space::device),
                  found.data(), sync_call);
  const auto on_host = test::bools_from_device(found.data(), n);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(on_host[i], detail::key_valid(validity.data(), first_bit, i)) << "key " << i;
}

TEST_F(GpuLarge, IntegerAddsWithNullsOverManyGridStridesGiveTheCpuBits32) {
  expect_integer_adds_with_nulls_give_the_cpu_bits<std::uint32_t>();
}
TEST_F(GpuLarge, IntegerAddsWithNullsOverManyGridStridesGiveTheCpuBits64) {
  expect_integer_adds_with_nulls_give_the_cpu_bits<std::uint64_t>();
}

}  // namespace
}  // namespace gbf
