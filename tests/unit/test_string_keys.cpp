// Byte-string keys (gbf::string_keys, the Arrow layout): the hash against
// libxxhash, the Parquet fixture, CPU kernels and threads bit for bit, nulls,
// add_new's exact answers, bad offsets. The GPU against the CPU:
// tests/gpu/test_gpu_string_keys.cpp.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"

namespace {

using gbf::test::bools;
using gbf::test::layout_of;
using gbf::test::mixed_batch;
using gbf::test::on_cpu;
using gbf::test::random_string;
using gbf::test::run_string_filter;
using gbf::test::string_batch;
using gbf::test::string_outcome;

// ---------------------------------------------------------------------------
// Hash
// ---------------------------------------------------------------------------

TEST(StringHash, MatchesLibxxhashForEveryLengthAlignmentAndSeed) {
  std::mt19937_64 rng(7);
  const std::string buffer = random_string(rng, (std::size_t{1} << 20) + 64);
  const std::uint64_t seeds[] = {0, 1, 0x9e3779b97f4a7c15ULL};
  std::vector<std::size_t> lengths;
  for (std::size_t len = 0; len <= 300; ++len) lengths.push_back(len);
  for (std::size_t len : {1023u, 1024u, 4096u, 4097u, 65536u + 5u}) lengths.push_back(len);
  lengths.push_back(std::size_t{1} << 20);
  for (std::uint64_t seed : seeds) {
    for (std::size_t len : lengths) {
      for (std::size_t misalign = 0; misalign < 4; ++misalign) {
        const char* p = buffer.data() + misalign;
        const std::uint64_t expected = XXH64(p, len, seed);
        ASSERT_EQ(gbf::xxh64(p, len, seed), expected) << "len " << len << " seed " << seed;
        ASSERT_EQ(gbf::hash_key(p, len, seed), expected) << "len " << len;
      }
    }
  }
}

TEST(StringHash, KnownAnswers) {
  // Pinned values (libxxhash 0.8): an empty string and "a0" with seed 0.
  EXPECT_EQ(gbf::hash_key("", 0, 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(gbf::hash_key("", 0, 0), XXH64("", 0, 0));
  EXPECT_EQ(gbf::hash_key("a0", 2, 0), XXH64("a0", 2, 0));
  EXPECT_EQ(gbf::hash_key("abc", 3, 0), 0x44BC2CF5AD770999ULL);
}

// ---------------------------------------------------------------------------
// Parquet: string keys through the filter API give the pinned SBBF fixture.
// ---------------------------------------------------------------------------

template <class Offset>
void check_parquet_fixture() {
  const std::vector<std::uint8_t>& expected = gbf::test::parquet_a0_to_a9();
  string_batch<Offset> b;
  for (int i = 0; i < 10; ++i) b.push("a" + std::to_string(i));
  gbf::layout l;  // default: the Parquet SBBF
  l.num_blocks = 1;
  gbf::filter f(l, on_cpu(1, gbf::cpu_simd::automatic));
  f.add(b.keys());
  const std::vector<std::uint32_t> words = f.words();
  ASSERT_EQ(words.size(), 8u);
  unsigned char bytes[32];
  std::memcpy(bytes, words.data(), 32);  // little-endian host
  for (int i = 0; i < 32; ++i) EXPECT_EQ(bytes[i], expected[i]) << "byte " << i;
  EXPECT_EQ(f.count(b.keys()), 10u);
}

TEST(StringKeys, ParquetFixtureA0ToA9Int32Offsets) { check_parquet_fixture<std::int32_t>(); }
TEST(StringKeys, ParquetFixtureA0ToA9Int64Offsets) { check_parquet_fixture<std::int64_t>(); }

// ---------------------------------------------------------------------------
// CPU: every kernel and thread count, same bits and answers.
// ---------------------------------------------------------------------------

template <class Offset>
void check_cpu_kernels_agree() {
  // Big enough for several threads (work >= 2 x 2^16 keys), with 1 MiB strings.
  string_batch<Offset> b = mixed_batch<Offset>(150000, 11);
  for (std::size_t i = 0; i < b.size(); i += 5) b.push(b.values[i]);  // repeats
  for (std::size_t i = 3; i < b.size(); i += 17) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(20000, 12, false);
  for (std::size_t i = 0; i < b.size(); i += 3) q.push(b.values[i]);
  // 20,000 blocks: a plain add on threads goes into private copies. 3 MiB: a
  // batch this small against the filter is partitioned by block range on 3 or
  // 4 threads, add and add_new alike, in slices of equal work, so the slice
  // holding the 1 MiB string has far fewer keys than the others.
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    for (std::uint64_t blocks : {std::uint64_t{20000}, (std::uint64_t{3} << 20) / (4 * w) + 1}) {
      SCOPED_TRACE("W " + std::to_string(w) + " blocks " + std::to_string(blocks));
      const gbf::layout l = layout_of(w, w == 1 ? 3 : w, blocks, 5);
      const string_outcome reference = run_string_filter(l, on_cpu(1, gbf::cpu_simd::scalar), b, q);
      const string_outcome scalar_threads =
          run_string_filter(l, on_cpu(4, gbf::cpu_simd::scalar), b, q);
      EXPECT_EQ(scalar_threads.words, reference.words);
      EXPECT_EQ(scalar_threads.is_new, reference.is_new);
      EXPECT_EQ(scalar_threads.found, reference.found);
      EXPECT_EQ(scalar_threads.count, reference.count);
      if (gbf::cpu_has_avx2()) {
        for (unsigned threads : {1u, 3u}) {
          SCOPED_TRACE("avx2, threads " + std::to_string(threads));
          const string_outcome avx2 = run_string_filter(l, on_cpu(threads, gbf::cpu_simd::avx2), b, q);
          EXPECT_EQ(avx2.words, reference.words);
          EXPECT_EQ(avx2.is_new, reference.is_new);
          EXPECT_EQ(avx2.found, reference.found);
          EXPECT_EQ(avx2.count, reference.count);
        }
      }
    }
  }
}

TEST(StringKeys, CpuScalarAvx2AndThreadsAgreeBitForBitInt32) {
  check_cpu_kernels_agree<std::int32_t>();
}
TEST(StringKeys, CpuScalarAvx2AndThreadsAgreeBitForBitInt64) {
  check_cpu_kernels_agree<std::int64_t>();
}

TEST(StringKeys, BitsAreThoseOfTheHashOfEachKey) {
  // The filter's bits equal the layout math applied to xxh64 of each key.
  const string_batch<std::int32_t> b = mixed_batch<std::int32_t>(2000, 3);
  const gbf::layout l = layout_of(8, 8, 512, 42);
  gbf::filter f(l, on_cpu(2, gbf::cpu_simd::automatic));
  f.add(b.keys());
  std::vector<std::uint32_t> expected(l.num_words());
  for (const std::string& s : b.values) {
    const std::uint64_t h = XXH64(s.data(), s.size(), 42);
    std::uint32_t masks[8];
    gbf::block_masks<8>(h, 8, masks);
    const std::uint64_t block = gbf::block_index(h, l.num_blocks);
    for (int w = 0; w < 8; ++w) expected[block * 8 + w] |= masks[w];
  }
  EXPECT_EQ(f.words(), expected);
}

TEST(StringKeys, Int32AndInt64OffsetsGiveTheSameBits) {
  const string_batch<std::int32_t> b32 = mixed_batch<std::int32_t>(5000, 4);
  string_batch<std::int64_t> b64;
  for (const std::string& s : b32.values) b64.push(s);
  const gbf::layout l = layout_of(8, 8, 1000);
  gbf::filter f32(l, on_cpu(0, gbf::cpu_simd::automatic));
  gbf::filter f64(l, on_cpu(0, gbf::cpu_simd::automatic));
  f32.add(b32.keys());
  f64.add(b64.keys());
  EXPECT_EQ(f32.words(), f64.words());
}

TEST(StringKeys, NoFalseNegativesAndSlicedOffsets) {
  string_batch<std::int64_t> b = mixed_batch<std::int64_t>(30000, 5);
  gbf::filter f = gbf::filter::create(b.size(), 0.01, on_cpu(0, gbf::cpu_simd::automatic));
  f.add(b.keys());
  auto found = bools(b.size());
  f.contains(b.keys(), found.get());
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_TRUE(found[i]) << "key " << i;
  EXPECT_EQ(f.count(b.keys()), b.size());
  EXPECT_EQ(f.stats().keys_added, b.size());

  // A sliced Arrow array: offsets starting past 0 index the same data buffer.
  gbf::string_keys<std::int64_t> slice = b.keys();
  slice.offsets += 100;
  slice.count = 50;
  EXPECT_EQ(f.count(slice), 50u);
  auto slice_found = bools(50);
  f.contains(slice, slice_found.get());
  for (std::size_t i = 0; i < 50; ++i) EXPECT_TRUE(slice_found[i]);
}

TEST(StringKeys, NullsAreNeitherAddedNorFoundNorCounted) {
  string_batch<std::int32_t> b = mixed_batch<std::int32_t>(5000, 6, false);
  string_batch<std::int32_t> only_valid;
  for (std::size_t i = 0; i < b.size(); i += 3) b.set_null(i);
  std::size_t valid = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.valid(i)) {
      only_valid.push(b.values[i]);
      ++valid;
    }
  }
  const gbf::layout l = layout_of(8, 8, 2000);
  for (unsigned threads : {1u, 4u}) {
    gbf::filter with_nulls(l, on_cpu(threads, gbf::cpu_simd::automatic));
    gbf::filter reference(l, on_cpu(threads, gbf::cpu_simd::automatic));
    auto is_new = bools(b.size());
    with_nulls.add_new(b.keys(), is_new.get());
    reference.add(only_valid.keys());
    EXPECT_EQ(with_nulls.words(), reference.words()) << "null keys were added";
    EXPECT_EQ(with_nulls.stats().keys_added, valid);
    auto found = bools(b.size());
    std::memset(found.get(), 1, b.size());
    with_nulls.contains(b.keys(), found.get());
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b.valid(i)) {
        EXPECT_TRUE(found[i]) << i;
      } else {
        EXPECT_FALSE(found[i]) << "null key " << i << " reported present";
        EXPECT_FALSE(is_new[i]) << "null key " << i << " reported new";
      }
    }
    EXPECT_EQ(with_nulls.count(b.keys()), valid);
    gbf::filter plain(l, on_cpu(threads, gbf::cpu_simd::automatic));
    plain.add(b.keys());
    EXPECT_EQ(plain.words(), reference.words());
  }
}

TEST(StringKeys, AddNewIsExactInBatchOrder) {
  // Repeats within a batch are new only the first time; the answers equal
  // those of adding the keys one at a time.
  std::mt19937_64 rng(9);
  string_batch<std::int32_t> b;
  for (int i = 0; i < 3000; ++i) b.push(random_string(rng, rng() % 20));
  for (int i = 0; i < 3000; ++i) b.push(b.values[rng() % 3000]);
  b.push("x");
  b.push("x");
  const gbf::layout l = layout_of(8, 8, 64);  // crowded: many keys per block
  for (unsigned threads : {1u, 4u}) {
    gbf::filter f(l, on_cpu(threads, gbf::cpu_simd::automatic));
    auto is_new = bools(b.size());
    f.add_new(b.keys(), is_new.get());
    gbf::filter one_by_one(l, on_cpu(1, gbf::cpu_simd::scalar));
    for (std::size_t i = 0; i < b.size(); ++i) {
      string_batch<std::int32_t> single;
      single.push(b.values[i]);
      bool was_new = false;
      one_by_one.add_new(single.keys(), &was_new);
      ASSERT_EQ(is_new[i], was_new) << "key " << i << " threads " << threads;
    }
    EXPECT_FALSE(is_new[b.size() - 1]) << "a repeat within the batch is not new";
    EXPECT_EQ(f.words(), one_by_one.words());
  }
}

TEST(StringKeys, EmptyBatchesAndNullPointersWithCountZero) {
  gbf::filter f(layout_of(8, 8, 16), on_cpu(1, gbf::cpu_simd::automatic));
  gbf::string_keys<std::int32_t> empty;  // everything null, count 0
  f.add(empty);
  EXPECT_EQ(f.count(empty), 0u);
  f.contains(empty, nullptr);
  f.add_new(empty, nullptr);
  // Only empty strings: data may be null with data_bytes = 0.
  const std::int32_t zeros[3] = {0, 0, 0};
  gbf::string_keys<std::int32_t> blanks;
  blanks.offsets = zeros;
  blanks.count = 2;
  f.add(blanks);
  EXPECT_EQ(f.count(blanks), 2u);
  EXPECT_EQ(f.bits_set(), 8u);
}

// ---------------------------------------------------------------------------
// Bad input: invalid_argument naming the problem, filter unchanged.
// ---------------------------------------------------------------------------

using gbf::test::expect_rejected;

TEST(StringKeys, BadOffsetsAreRejectedWithTheFirstBadIndex) {
  gbf::filter f(layout_of(8, 8, 64), on_cpu(2, gbf::cpu_simd::automatic));
  const std::string bytes(100, 'x');
  std::vector<std::int32_t> offsets(21);
  for (int i = 0; i <= 20; ++i) offsets[i] = 3 * i;
  gbf::string_keys<std::int32_t> keys;
  keys.data = bytes.data();
  keys.data_bytes = bytes.size();
  keys.offsets = offsets.data();
  keys.count = 20;
  const auto results = bools(keys.count);

  std::vector<std::int32_t> decreasing = offsets;
  decreasing[17] = 40;  // offsets[16] = 48
  keys.offsets = decreasing.data();
  expect_rejected(f, keys, "offsets[17] = 40 < offsets[16] = 48 (offsets must not decrease)",
                  results.get());

  std::vector<std::int32_t> negative = offsets;
  negative[0] = -1;
  keys.offsets = negative.data();
  expect_rejected(f, keys, "offsets[0] = -1 is negative", results.get());

  keys.offsets = offsets.data();
  keys.data_bytes = 50;  // offsets[17] = 51 is the first past it
  expect_rejected(f, keys, "offsets[17] = 51 is past the end of the data (data_bytes = 50)",
                  results.get());
  keys.data_bytes = bytes.size();

  gbf::string_keys<std::int32_t> no_offsets = keys;
  no_offsets.offsets = nullptr;
  expect_rejected(f, no_offsets, "offsets is null but count = 20", results.get());

  gbf::string_keys<std::int32_t> no_data = keys;
  no_data.data = nullptr;
  expect_rejected(f, no_data, "data is null but data_bytes = 100", results.get());

  // int64 offsets past what int32 holds.
  std::vector<std::int64_t> big(21);
  for (int i = 0; i <= 20; ++i) big[i] = 3 * i;
  big[20] = std::int64_t{1} << 40;
  gbf::string_keys<std::int64_t> keys64;
  keys64.data = bytes.data();
  keys64.data_bytes = bytes.size();
  keys64.offsets = big.data();
  keys64.count = 20;
  expect_rejected(f, keys64, "offsets[20] = 1099511627776 is past the end of the data",
                  results.get());

  EXPECT_EQ(f.bits_set(), 0u);
  keys.offsets = offsets.data();
  f.add(keys);  // the good batch still works
  EXPECT_EQ(f.count(keys), 20u);
}

}  // namespace
