// filter::select (the join prefilter): the selected rows are exactly the
// indices where contains answers true, ascending, for every layout, both key
// types, string keys, one thread and many, scalar and AVX2; validity bitmaps
// drop null rows; empty batches and bad arguments. The GPU's rows against the
// CPU's: tests/gpu/test_gpu_filter.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"

namespace gbf {
namespace {

using gbf::test::probes_for;
using gbf::test::random_keys;
using gbf::test::random_validity;
using gbf::test::selected_rows;

// The rows contains() reports present (and non-null), ascending.
template <class Key>
std::vector<std::uint64_t> expected_rows(const filter& f, const std::vector<Key>& keys,
                                         const std::uint8_t* validity = nullptr) {
  auto found = gbf::test::bools(keys.size());
  f.contains(keys.data(), keys.size(), found.get());
  std::vector<std::uint64_t> rows;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool valid = validity == nullptr || ((validity[i / 8] >> (i % 8)) & 1) != 0;
    if (found[i] && valid) rows.push_back(i);
  }
  return rows;
}

struct cpu_config {
  cpu_simd simd;
  unsigned threads;
};

template <class Key>
void check_cpu_select(const shape& s, const cpu_config& config) {
  options opts;
  opts.where = backend::cpu;
  opts.simd = config.simd == cpu_simd::avx2 && !cpu_has_avx2() ? cpu_simd::scalar : config.simd;
  opts.cpu_threads = config.threads;
  filter f = filter::create(20'000, 0.05, opts, s);
  const std::vector<Key> added = random_keys<Key>(20'000, 1);
  f.add(added.data(), added.size());
  // 300k probes: above the threads' split threshold, so several threads compact.
  const std::vector<Key> probes = probes_for(added, 300'000, 2);
  const std::vector<std::uint64_t> rows = selected_rows(f, probes);
  EXPECT_EQ(rows, expected_rows(f, probes)) << to_string(f.layout());
  EXPECT_GE(rows.size(), probes.size() / 2);  // every added key is selected
  const std::vector<std::uint8_t> validity = random_validity(probes.size(), 3);
  EXPECT_EQ(selected_rows(f, probes, validity.data()),
            expected_rows(f, probes, validity.data()));
}

TEST(Select, MatchesContainsForEveryLayoutAndKeyTypeOnTheCpu) {
  const shape shapes[] = {{1, 1, 0}, {2, 4, 0}, {4, 4, 7}, {8, 8, 0}, {8, 12, 0}, {16, 16, 0}, {16, 24, 3}};
  const cpu_config configs[] = {{cpu_simd::scalar, 1}, {cpu_simd::automatic, 1}, {cpu_simd::automatic, 4}};
  for (const shape& s : shapes) {
    for (const cpu_config& config : configs) {
      SCOPED_TRACE("W=" + std::to_string(s.words_per_block) + " k=" + std::to_string(s.bits_per_key) +
                   " threads=" + std::to_string(config.threads));
      check_cpu_select<std::uint32_t>(s, config);
      check_cpu_select<std::uint64_t>(s, config);
    }
  }
}

TEST(Select, SelectsEveryAddedKeyAndOnlyThem) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(1000, 0.001, opts);
  std::vector<std::int64_t> keys(5000);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<std::int64_t>(i) * 7 - 10'000;
  std::vector<std::int64_t> build;
  for (std::size_t i = 0; i < keys.size(); i += 5) build.push_back(keys[i]);
  f.add(build.data(), build.size());
  std::vector<std::uint64_t> rows(keys.size());
  const std::uint64_t n = f.select(keys.data(), keys.size(), rows.data());
  rows.resize(n);
  std::size_t next = 0;  // every multiple of 5 must appear, in order
  for (std::uint64_t row : rows) {
    if (row % 5 == 0) {
      EXPECT_EQ(row, next);
      next += 5;
    }
  }
  EXPECT_EQ(next, keys.size());
  EXPECT_LT(n, build.size() + 50u);  // fpp 0.001 over 4000 absent keys: a handful
}

TEST(Select, NullRowsAreNeverSelected) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(1000, 0.01, opts);
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(1000, 9);
  f.add(keys.data(), keys.size());
  std::vector<std::uint8_t> validity(125, 0x55);  // even rows valid
  std::vector<std::uint64_t> rows(keys.size());
  ASSERT_EQ(f.select(keys.data(), keys.size(), validity.data(), rows.data()), 500u);
  for (std::size_t j = 0; j < 500; ++j) EXPECT_EQ(rows[j], 2 * j);
  std::vector<std::uint8_t> none(125, 0);
  EXPECT_EQ(f.select(keys.data(), keys.size(), none.data(), rows.data()), 0u);
}

TEST(Select, StringKeysWithNulls) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(100, 0.01, opts);
  std::string data;
  std::vector<std::int32_t> offsets{0};
  for (int i = 0; i < 200; ++i) {
    data += "key-" + std::to_string(i);
    offsets.push_back(static_cast<std::int32_t>(data.size()));
  }
  string_keys<std::int32_t> keys{data.data(), data.size(), offsets.data(), 200, nullptr};
  string_keys<std::int32_t> first_half = keys;
  first_half.count = 100;
  f.add(first_half);
  std::vector<std::uint64_t> rows(200);
  const std::uint64_t n = f.select(keys, rows.data());
  auto found = gbf::test::bools(200);
  f.contains(keys, found.get());
  std::vector<std::uint64_t> want;
  for (std::uint64_t i = 0; i < 200; ++i)
    if (found[i]) want.push_back(i);
  rows.resize(n);
  EXPECT_EQ(rows, want);
  ASSERT_GE(n, 100u);
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_EQ(rows[i], i);

  std::vector<std::uint8_t> validity(25, 0xff);
  validity[0] = 0xfe;  // row 0 null
  keys.validity = validity.data();
  rows.assign(200, 0);
  const std::uint64_t with_null = f.select(keys, rows.data());
  EXPECT_EQ(with_null, n - 1);
  EXPECT_EQ(rows[0], 1u);
}

TEST(Select, EmptyBatchAndErrors) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(100, 0.01, opts);
  EXPECT_EQ(f.select(static_cast<const std::uint64_t*>(nullptr), 0, nullptr), 0u);
  std::uint64_t key = 1;
  std::uint64_t row = 0;
  EXPECT_THROW(f.select(static_cast<const std::uint64_t*>(nullptr), 1, &row), invalid_argument);
  EXPECT_THROW(f.select(&key, 1, nullptr), invalid_argument);
  std::uint64_t count = 0;
  EXPECT_THROW(f.select_async(&key, 1, &row, &count, nullptr), wrong_backend);
  EXPECT_THROW(f.select_async(&key, 1, &row, nullptr, nullptr), invalid_argument);
}

}  // namespace
}  // namespace gbf
