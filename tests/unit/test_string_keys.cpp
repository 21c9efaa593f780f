// Byte-string keys (gbf::string_keys, the Arrow layout): the hash against
// libxxhash, the Parquet fixture, CPU kernels and threads bit for bit, nulls,
// add_new's exact answers, bad offsets, and the GPU against the CPU (skipped
// with the reason when there is no GPU).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"

#if GBF_HAS_CUDA
#include <cuda_runtime.h>

#include "host/gpu/runtime.hpp"
#endif

namespace {

// A batch of strings in the Arrow layout, owning its buffers.
template <class Offset>
struct string_batch {
  std::vector<unsigned char> data;
  std::vector<Offset> offsets{0};
  std::vector<std::uint8_t> validity;  // empty: no bitmap
  std::vector<std::string> values;     // the keys, for reference

  void push(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    offsets.push_back(static_cast<Offset>(data.size()));
    values.push_back(s);
  }
  std::size_t size() const { return values.size(); }
  // Marks key i null (allocating an all-valid bitmap on first use).
  void set_null(std::size_t i) {
    if (validity.empty()) validity.assign((size() + 7) / 8 + 1, 0xff);
    validity[i / 8] = static_cast<std::uint8_t>(validity[i / 8] & ~(1u << (i % 8)));
  }
  bool valid(std::size_t i) const {
    return validity.empty() || ((validity[i / 8] >> (i % 8)) & 1u) != 0;
  }
  gbf::string_keys<Offset> keys() const {
    gbf::string_keys<Offset> k;
    k.data = data.data();
    k.data_bytes = data.size();
    k.offsets = offsets.data();
    k.count = size();
    k.validity = validity.empty() ? nullptr : validity.data();
    return k;
  }
};

std::string random_string(std::mt19937_64& rng, std::size_t len) {
  std::string s(len, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);  // any byte: non-ASCII, NULs
  return s;
}

// The mixed-length batch of the issue: empty, 1, 7/8/9, 31/32/33, 4 KiB, 1 MiB,
// non-ASCII bytes and embedded NULs, among `short_keys` random short strings.
template <class Offset>
string_batch<Offset> mixed_batch(std::size_t short_keys, std::uint64_t seed, bool with_mib = true) {
  std::mt19937_64 rng(seed);
  string_batch<Offset> b;
  const std::size_t special[] = {0, 1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 4096};
  for (std::size_t len : special) b.push(random_string(rng, len));
  b.push(std::string("\0a\0b\0", 5));
  b.push("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  b.push("");
  for (std::size_t i = 0; i < short_keys; ++i) {
    b.push(random_string(rng, rng() % 40));
    if (i % 997 == 0) b.push(random_string(rng, 300 + rng() % 3000));  // some long ones
    if (with_mib && i == short_keys / 2) b.push(random_string(rng, std::size_t{1} << 20));
  }
  if (with_mib) b.push(random_string(rng, (std::size_t{1} << 20) + 13));
  return b;
}

std::unique_ptr<bool[]> bools(std::size_t n) { return std::unique_ptr<bool[]>(new bool[n]()); }

gbf::options cpu_options(gbf::cpu_simd simd, unsigned threads) {
  gbf::options o;
  o.where = gbf::backend::cpu;
  o.simd = simd;
  o.cpu_threads = threads;
  return o;
}

gbf::layout layout_of(std::uint32_t w, std::uint32_t k, std::uint64_t blocks, std::uint64_t seed = 0) {
  gbf::layout l;
  l.words_per_block = w;
  l.bits_per_key = k;
  l.num_blocks = blocks;
  l.seed = seed;
  return l;
}

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
  const unsigned char expected[32] = {200, 1,  80,  20, 64, 68, 8,  109, 6,  37, 4,
                                      67,  144, 80, 96, 32, 8,  132, 43, 33, 0,  5,
                                      99,  65,  2,  0,  224, 44, 64, 78, 96, 4};
  string_batch<Offset> b;
  for (int i = 0; i < 10; ++i) b.push("a" + std::to_string(i));
  gbf::layout l;  // default: the Parquet SBBF
  l.num_blocks = 1;
  gbf::filter f(l, cpu_options(gbf::cpu_simd::automatic, 1));
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

struct outcome {
  std::vector<std::uint32_t> words;
  std::vector<bool> is_new;
  std::vector<bool> found;
  std::uint64_t count = 0;
};

// add_new of `b`, then contains/count of `queries`, on a filter built with `o`.
template <class Offset>
outcome run_filter(const gbf::layout& l, const gbf::options& o, const string_batch<Offset>& b,
                   const string_batch<Offset>& queries) {
  gbf::filter f(l, o);
  outcome out;
  auto is_new = bools(b.size());
  f.add_new(b.keys(), is_new.get());
  out.is_new.assign(is_new.get(), is_new.get() + b.size());
  auto found = bools(queries.size());
  f.contains(queries.keys(), found.get());
  out.found.assign(found.get(), found.get() + queries.size());
  out.count = f.count(queries.keys());
  out.words = f.words();
  // add (not add_new) on a second filter must set the same bits.
  gbf::filter g(l, o);
  g.add(b.keys());
  EXPECT_EQ(g.words(), out.words) << "add and add_new set different bits";
  return out;
}

template <class Offset>
void check_cpu_kernels_agree() {
  // Big enough for several threads (work >= 2 x 2^16 keys), with 1 MiB strings.
  string_batch<Offset> b = mixed_batch<Offset>(150000, 11);
  for (std::size_t i = 0; i < b.size(); i += 5) b.push(b.values[i]);  // repeats
  for (std::size_t i = 3; i < b.size(); i += 17) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(20000, 12, false);
  for (std::size_t i = 0; i < b.size(); i += 3) q.push(b.values[i]);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const gbf::layout l = layout_of(w, w == 1 ? 3 : w, 20000, 5);
    const outcome reference = run_filter(l, cpu_options(gbf::cpu_simd::scalar, 1), b, q);
    const outcome scalar_threads = run_filter(l, cpu_options(gbf::cpu_simd::scalar, 4), b, q);
    EXPECT_EQ(scalar_threads.words, reference.words) << "W " << w;
    EXPECT_EQ(scalar_threads.is_new, reference.is_new) << "W " << w;
    EXPECT_EQ(scalar_threads.found, reference.found) << "W " << w;
    EXPECT_EQ(scalar_threads.count, reference.count) << "W " << w;
    if (gbf::cpu_has_avx2()) {
      for (unsigned threads : {1u, 3u}) {
        const outcome avx2 = run_filter(l, cpu_options(gbf::cpu_simd::avx2, threads), b, q);
        EXPECT_EQ(avx2.words, reference.words) << "W " << w << " threads " << threads;
        EXPECT_EQ(avx2.is_new, reference.is_new) << "W " << w;
        EXPECT_EQ(avx2.found, reference.found) << "W " << w;
        EXPECT_EQ(avx2.count, reference.count) << "W " << w;
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
  gbf::filter f(l, cpu_options(gbf::cpu_simd::automatic, 2));
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
  gbf::filter f32(l, cpu_options(gbf::cpu_simd::automatic, 0));
  gbf::filter f64(l, cpu_options(gbf::cpu_simd::automatic, 0));
  f32.add(b32.keys());
  f64.add(b64.keys());
  EXPECT_EQ(f32.words(), f64.words());
}

TEST(StringKeys, NoFalseNegativesAndSlicedOffsets) {
  string_batch<std::int64_t> b = mixed_batch<std::int64_t>(30000, 5);
  gbf::filter f = gbf::filter::create(b.size(), 0.01, cpu_options(gbf::cpu_simd::automatic, 0));
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
    gbf::filter with_nulls(l, cpu_options(gbf::cpu_simd::automatic, threads));
    gbf::filter reference(l, cpu_options(gbf::cpu_simd::automatic, threads));
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
    gbf::filter plain(l, cpu_options(gbf::cpu_simd::automatic, threads));
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
    gbf::filter f(l, cpu_options(gbf::cpu_simd::automatic, threads));
    auto is_new = bools(b.size());
    f.add_new(b.keys(), is_new.get());
    gbf::filter one_by_one(l, cpu_options(gbf::cpu_simd::scalar, 1));
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
  gbf::filter f(layout_of(8, 8, 16), cpu_options(gbf::cpu_simd::automatic, 1));
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

// `results` (room for keys.count answers) lives where the keys do.
template <class Offset>
void expect_rejected(gbf::filter& f, const gbf::string_keys<Offset>& keys, const std::string& says,
                     bool* results) {
  const std::vector<std::uint32_t> before = f.words();
  const auto expect_message = [&](auto&& call, const char* op) {
    try {
      call();
      ADD_FAILURE() << op << " accepted a bad batch (expected: " << says << ")";
    } catch (const gbf::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos)
          << op << ": \"" << e.what() << "\" does not say \"" << says << "\"";
    }
  };
  expect_message([&] { f.add(keys); }, "add");
  expect_message([&] { f.add_new(keys, results); }, "add_new");
  expect_message([&] { f.contains(keys, results); }, "contains");
  expect_message([&] { (void)f.count(keys); }, "count");
  EXPECT_EQ(f.words(), before) << "a rejected batch changed the filter";
  EXPECT_EQ(f.stats().keys_added, 0u);
}

TEST(StringKeys, BadOffsetsAreRejectedWithTheFirstBadIndex) {
  gbf::filter f(layout_of(8, 8, 64), cpu_options(gbf::cpu_simd::automatic, 2));
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

// ---------------------------------------------------------------------------
// GPU == CPU (skipped without a GPU)
// ---------------------------------------------------------------------------

class StringKeysGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const gbf::gpu_status gpu = gbf::query_gpu();
    if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  }
};

gbf::options gpu_options(std::size_t chunk_keys) {
  gbf::options o;
  o.where = gbf::backend::gpu;
  o.gpu_chunk_keys = chunk_keys;
  o.gpu_streams = 3;
  return o;
}

template <class Offset>
void check_gpu_host_batches() {
  string_batch<Offset> b = mixed_batch<Offset>(20000, 21);
  for (std::size_t i = 0; i < b.size(); i += 7) b.push(b.values[i]);
  for (std::size_t i = 5; i < b.size(); i += 13) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(5000, 22, false);
  for (std::size_t i = 0; i < b.size(); i += 2) q.push(b.values[i]);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const gbf::layout l = layout_of(w, w == 1 ? 3 : w, 3000, 7);
    const outcome cpu = run_filter(l, cpu_options(gbf::cpu_simd::scalar, 1), b, q);
    // Tiny chunks: strings cross chunk boundaries, 1 MiB strings outgrow the staging.
    for (std::size_t chunk : {std::size_t{7}, std::size_t{1000}, std::size_t{0}}) {
      const outcome gpu = run_filter(l, gpu_options(chunk), b, q);
      EXPECT_EQ(gpu.words, cpu.words) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.is_new, cpu.is_new) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.found, cpu.found) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.count, cpu.count) << "W " << w << " chunk " << chunk;
    }
  }
}

TEST_F(StringKeysGpu, HostBatchesMatchCpuBitForBitInt32) { check_gpu_host_batches<std::int32_t>(); }
TEST_F(StringKeysGpu, HostBatchesMatchCpuBitForBitInt64) { check_gpu_host_batches<std::int64_t>(); }

#if GBF_HAS_CUDA
using gbf::detail::device_buffer;

template <class T>
device_buffer<T> to_device(const std::vector<T>& v) {
  device_buffer<T> d(v.size());
  if (!v.empty())
    GBF_CUDA_TRY(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// A string batch copied to device memory (data offset by 3 bytes: misaligned strings).
template <class Offset>
struct device_batch {
  device_buffer<unsigned char> data;
  device_buffer<Offset> offsets;
  device_buffer<std::uint8_t> validity;
  gbf::string_keys<Offset> keys;
  explicit device_batch(const string_batch<Offset>& b) {
    std::vector<unsigned char> shifted(3, 0xab);
    shifted.insert(shifted.end(), b.data.begin(), b.data.end());
    data = to_device(shifted);
    offsets = to_device(b.offsets);
    validity = to_device(b.validity);
    keys.data = data.data() + 3;
    keys.data_bytes = b.data.size();
    keys.offsets = offsets.data();
    keys.count = b.size();
    keys.validity = b.validity.empty() ? nullptr : validity.data();
  }
};

std::vector<bool> from_device(const bool* d, std::size_t n) {
  auto h = bools(n);
  GBF_CUDA_TRY(cudaMemcpy(h.get(), d, n, cudaMemcpyDeviceToHost));
  return std::vector<bool>(h.get(), h.get() + n);
}

template <class Offset>
void check_gpu_device_batches() {
  string_batch<Offset> b = mixed_batch<Offset>(20000, 31);
  for (std::size_t i = 0; i < b.size(); i += 7) b.push(b.values[i]);
  for (std::size_t i = 5; i < b.size(); i += 13) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(5000, 32, false);
  for (std::size_t i = 0; i < b.size(); i += 2) q.push(b.values[i]);
  const device_batch<Offset> db(b);
  const device_batch<Offset> dq(q);
  device_buffer<bool> results(std::max(b.size(), q.size()));
  device_buffer<std::uint64_t> counter(1);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const gbf::layout l = layout_of(w, w == 1 ? 3 : w, 3000, 7);
    const outcome cpu = run_filter(l, cpu_options(gbf::cpu_simd::scalar, 1), b, q);
    gbf::filter f(l, gpu_options(1000));  // add_new in pieces of 1000 keys
    f.add_new(db.keys, results.data());
    EXPECT_EQ(from_device(results.data(), b.size()), cpu.is_new) << "W " << w;
    EXPECT_EQ(f.words(), cpu.words) << "W " << w;
    f.contains(dq.keys, results.data());
    EXPECT_EQ(from_device(results.data(), q.size()), cpu.found) << "W " << w;
    EXPECT_EQ(f.count(dq.keys), cpu.count) << "W " << w;
    EXPECT_TRUE(f.verify_contains(dq.keys, results.data()).ok());

    gbf::filter g(l, gpu_options(0));
    g.add_async(db.keys, nullptr);
    g.contains_async(dq.keys, results.data(), nullptr);
    g.count_async(dq.keys, counter.data(), nullptr);
    GBF_CUDA_TRY(cudaDeviceSynchronize());
    EXPECT_EQ(g.words(), cpu.words) << "W " << w;
    EXPECT_EQ(from_device(results.data(), q.size()), cpu.found) << "W " << w;
    std::uint64_t hits = 0;
    GBF_CUDA_TRY(cudaMemcpy(&hits, counter.data(), sizeof hits, cudaMemcpyDeviceToHost));
    EXPECT_EQ(hits, cpu.count) << "W " << w;
  }
}

TEST_F(StringKeysGpu, DeviceBatchesAndAsyncMatchCpuBitForBitInt32) {
  check_gpu_device_batches<std::int32_t>();
}
TEST_F(StringKeysGpu, DeviceBatchesAndAsyncMatchCpuBitForBitInt64) {
  check_gpu_device_batches<std::int64_t>();
}

TEST_F(StringKeysGpu, BadDeviceOffsetsAreRejectedBeforeAnyBitIsWritten) {
  const std::string bytes(100, 'x');
  std::vector<std::int32_t> offsets(21);
  for (int i = 0; i <= 20; ++i) offsets[i] = 3 * i;
  offsets[17] = 40;
  const device_buffer<unsigned char> data =
      to_device(std::vector<unsigned char>(bytes.begin(), bytes.end()));
  const device_buffer<std::int32_t> d_offsets = to_device(offsets);
  gbf::string_keys<std::int32_t> keys;
  keys.data = data.data();
  keys.data_bytes = bytes.size();
  keys.offsets = d_offsets.data();
  keys.count = 20;
  gbf::filter f(layout_of(8, 8, 64), gpu_options(0));
  device_buffer<bool> results(20);
  expect_rejected(f, keys, "offsets[17] = 40 < offsets[16] = 48 (offsets must not decrease)",
                  results.data());
  keys.data_bytes = 30;
  expect_rejected(f, keys, "offsets[11] = 33 is past the end of the data (data_bytes = 30)",
                  results.data());

  // _async: nothing written, and the next synchronous call reports it.
  f.add_async(keys, nullptr);
  GBF_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(f.bits_set(), 0u);
  keys.data_bytes = bytes.size();
  offsets[17] = 51;
  const device_buffer<std::int32_t> good = to_device(offsets);
  keys.offsets = good.data();
  EXPECT_THROW((void)f.count(keys), gbf::invalid_argument);
  EXPECT_EQ(f.count(keys), 0u);  // reported once; the good batch now works

  // synchronize() reports it too, and so does an integer operation.
  keys.offsets = d_offsets.data();
  f.add_async(keys, nullptr);
  try {
    f.synchronize();
    ADD_FAILURE() << "synchronize() did not report the bad _async batch";
  } catch (const gbf::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("synchronize: string keys: an earlier _async call had a bad offset at offsets[11]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(f.synchronize());
  f.contains_async(keys, results.data(), nullptr);
  const std::uint64_t integer_keys[] = {1, 2, 3};
  EXPECT_THROW((void)f.count(integer_keys, 3), gbf::invalid_argument);
  EXPECT_EQ(f.count(integer_keys, 3), 0u);
  EXPECT_EQ(f.bits_set(), 0u);
}

TEST_F(StringKeysGpu, AutomaticFilterReportsABadAsyncBatchEvenWhenTheNextCallRunsOnTheMirror) {
  // Copies nearly free and the CPU far cheaper: every host batch runs on the mirror.
  gbf::cost_model m = gbf::cost_model::defaults();
  for (gbf::cost_point& p : m.points) p.cpu_probe = p.cpu_add = {1e-9, 1e12, 1e12};
  m.copy = {1e-9, 1e15};
  gbf::options o;
  o.costs = m;
  gbf::filter f(layout_of(8, 8, 64), o);
  ASSERT_TRUE(f.dispatch().mirrored);
  const std::vector<std::int32_t> offsets = {0, 3, 2};
  const device_buffer<unsigned char> data = to_device(std::vector<unsigned char>(3, 'x'));
  const device_buffer<std::int32_t> d_offsets = to_device(offsets);
  gbf::string_keys<std::int32_t> keys;
  keys.data = data.data();
  keys.data_bytes = 3;
  keys.offsets = d_offsets.data();
  keys.count = 2;
  f.add_async(keys, nullptr);
  const std::uint64_t host_keys[] = {7, 8};
  EXPECT_THROW((void)f.count(host_keys, 2), gbf::invalid_argument);
  EXPECT_EQ(f.count(host_keys, 2), 0u);
  EXPECT_GT(f.dispatch().cpu_batches, 0u);
}
#endif  // GBF_HAS_CUDA

}  // namespace
