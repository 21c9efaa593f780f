// The CPU backend against an independent reference: the words it writes, its
// answers, AVX2 and AVX-512 against scalar, many threads against one, add_new against the
// sequential loop, and its measured false-positive rate against the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"
#include "host/backend.hpp"
#include "host/bloom_backend.hpp"
#include "host/cpu/block_owner.hpp"
#include "host/cpu/hash_x8.hpp"
#include "host/cpu/threads.hpp"

namespace gbf::detail {
namespace {

using gbf::test::all_geometries;
using gbf::test::name_of;
using gbf::test::on_cpu;
using gbf::test::random_keys;
using gbf::test::with_blocks;

// Big enough that 4 threads each get a full share (the backend gives a thread
// at least 64 Ki keys).
constexpr std::size_t threaded_batch = std::size_t{4} << 16;

// How the tests call the backend: synchronously, no stream.
const call_options sync_call{"test", nullptr, false};

template <class Key>
key_batch batch_of(const std::vector<Key>& keys) {
  return key_batch{keys.data(), keys.size(), key_kind_of<Key>(), memory_space::host};
}

std::unique_ptr<bloom_backend> make(const layout& l, cpu_simd simd, unsigned threads) {
  return make_cpu_bloom(l, on_cpu(threads, simd), nullptr);
}

std::vector<std::uint32_t> words_of(const bloom_backend& b, const layout& l) {
  std::vector<std::uint32_t> words(l.num_words());
  b.read_words(words.data());
  return words;
}

// bool vectors cannot hand out bool*; results live in a plain array.
using answers = std::unique_ptr<bool[]>;

template <class Key>
answers contains_of(const bloom_backend& b, const std::vector<Key>& keys) {
  answers found = gbf::test::bools(keys.size());
  b.contains(batch_of(keys), found.get(), sync_call);
  return found;
}

template <class Key>
answers add_new_of(bloom_backend& b, const std::vector<Key>& keys) {
  answers is_new = gbf::test::bools(keys.size());
  b.add(batch_of(keys), is_new.get(), sync_call);
  return is_new;
}

template <class Key>
void add_to(bloom_backend& b, const std::vector<Key>& keys) {
  b.add(batch_of(keys), nullptr, sync_call);
}

template <class Key>
std::uint64_t count_of(const bloom_backend& b, const std::vector<Key>& keys) {
  return b.count(batch_of(keys), nullptr, sync_call);
}

/// The reference layout, written straight from layout.hpp's definitions: one
/// word at a time with word_mask, no blocks-as-arrays, no SIMD, no threads.
struct reference_filter {
  layout l;
  std::vector<std::uint32_t> words;

  explicit reference_filter(const layout& shape) : l(shape), words(shape.num_words(), 0) {}

  template <class Key>
  std::uint64_t first_word(Key key) const {
    return block_index(hash_key(key, l.seed), l.num_blocks) * l.words_per_block;
  }
  template <class Key>
  bool contains(Key key) const {
    const std::uint64_t h = hash_key(key, l.seed);
    const std::uint64_t first = first_word(key);
    for (std::uint32_t w = 0; w < l.words_per_block; ++w) {
      const std::uint32_t mask = word_mask(h, w, l.words_per_block, l.bits_per_key);
      if ((words[first + w] & mask) != mask) return false;
    }
    return true;
  }
  /// Adds `key`; returns whether it was new (the sequential add_new answer).
  template <class Key>
  bool add(Key key) {
    const bool was_new = !contains(key);
    const std::uint64_t h = hash_key(key, l.seed);
    const std::uint64_t first = first_word(key);
    for (std::uint32_t w = 0; w < l.words_per_block; ++w)
      words[first + w] |= word_mask(h, w, l.words_per_block, l.bits_per_key);
    return was_new;
  }
};

/// A batch with repeats inside it and keys from `earlier` (already added).
template <class Key>
std::vector<Key> batch_with_repeats(const std::vector<Key>& fresh, const std::vector<Key>& earlier,
                                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> batch;
  batch.reserve(fresh.size() * 2);
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    batch.push_back(fresh[i]);
    const std::uint64_t dice = rng() % 4;
    if (dice == 0) batch.push_back(fresh[rng() % (i + 1)]);  // a repeat within the batch
    if (dice == 1 && !earlier.empty()) batch.push_back(earlier[rng() % earlier.size()]);
  }
  return batch;
}

// ---------------------------------------------------------------------------

template <class Key>
void check_against_reference(const layout& l, cpu_simd simd) {
  SCOPED_TRACE(name_of(l) + (sizeof(Key) == 4 ? " u32" : " u64"));
  // A big filter only needs enough keys to hit blocks throughout it.
  const std::size_t n = l.num_blocks > 100000 ? 20000 : 2000;
  const auto keys = random_keys<Key>(n, 1 + l.num_blocks);
  const auto queries = random_keys<Key>(n, 2 + l.num_blocks);

  auto filter = make(l, simd, 1);
  reference_filter reference(l);
  add_to(*filter, keys);
  for (Key key : keys) reference.add(key);
  ASSERT_EQ(words_of(*filter, l), reference.words);

  const answers found = contains_of(*filter, keys);
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(found[i]) << "false negative for key " << i;
  EXPECT_EQ(count_of(*filter, keys), n);

  const answers maybe = contains_of(*filter, queries);
  std::uint64_t positives = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(maybe[i], reference.contains(queries[i])) << "query " << i;
    positives += maybe[i] ? 1 : 0;
  }
  EXPECT_EQ(count_of(*filter, queries), positives);
}

TEST(CpuBackend, WordsAndAnswersMatchReferenceForAllLayouts) {
  for (const layout& shape : all_geometries()) {
    for (std::uint64_t blocks : {1ull, 2ull, 3ull, 1000ull, (1ull << 20) + 7}) {
      const layout l = with_blocks(shape, blocks);
      check_against_reference<std::uint32_t>(l, cpu_simd::automatic);
      check_against_reference<std::uint64_t>(l, cpu_simd::automatic);
      if (blocks < 1000) {  // the scalar kernel alone, where it is not what automatic picks
        check_against_reference<std::uint32_t>(l, cpu_simd::scalar);
        check_against_reference<std::uint64_t>(l, cpu_simd::scalar);
      }
    }
  }
}

// Every operation of the `simd` kernel on `threads` threads against the scalar
// kernel on one: add_new with repeats (answers and bits), add, contains, count
// and select, over a batch of n keys.
template <class Key>
void check_matches_scalar(const layout& l, cpu_simd simd, std::size_t n, unsigned threads) {
  SCOPED_TRACE(name_of(l) + (sizeof(Key) == 4 ? " u32" : " u64") + " n=" + std::to_string(n) +
               " threads=" + std::to_string(threads));
  const auto earlier = random_keys<Key>(n / 2 + 1, 40 + n);
  const auto keys = batch_with_repeats(random_keys<Key>(n, 41 + n), earlier, 42 + n);
  const auto probes = random_keys<Key>(n, 43 + n);
  auto scalar = make(l, cpu_simd::scalar, 1);
  auto other = make(l, simd, threads);
  add_to(*scalar, earlier);
  add_to(*other, earlier);
  ASSERT_EQ(words_of(*scalar, l), words_of(*other, l));

  const answers scalar_new = add_new_of(*scalar, keys);
  const answers other_new = add_new_of(*other, keys);
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(scalar_new[i], other_new[i]) << "key " << i;
  ASSERT_EQ(words_of(*scalar, l), words_of(*other, l));
  add_to(*scalar, probes);  // plain add as well as add_new
  add_to(*other, probes);
  ASSERT_EQ(words_of(*scalar, l), words_of(*other, l));

  const auto queries = random_keys<Key>(n, 44 + n);
  const answers scalar_found = contains_of(*scalar, queries);
  const answers other_found = contains_of(*other, queries);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(scalar_found[i], other_found[i]) << "query " << i;
  EXPECT_EQ(count_of(*scalar, queries), count_of(*other, queries));
  std::vector<std::uint64_t> scalar_rows(n), other_rows(n);
  const std::uint64_t hits = scalar->select(batch_of(queries), scalar_rows.data(), nullptr, sync_call);
  ASSERT_EQ(other->select(batch_of(queries), other_rows.data(), nullptr, sync_call), hits);
  scalar_rows.resize(hits);
  other_rows.resize(hits);
  EXPECT_EQ(scalar_rows, other_rows);
}

TEST(CpuBackend, Avx2MatchesScalarBitForBit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2; only the scalar kernel can run";
  for (const layout& shape : all_geometries()) {
    for (std::uint64_t blocks : {1ull, 3ull, 1000ull, (1ull << 20) + 7}) {
      check_matches_scalar<std::uint32_t>(with_blocks(shape, blocks), cpu_simd::avx2, 3000, 1);
      check_matches_scalar<std::uint64_t>(with_blocks(shape, blocks), cpu_simd::avx2, 3000, 1);
    }
  }
}

TEST(CpuBackend, Avx512HashesEqualTheScalarHash) {
#if GBF_CPU_AVX512
  if (!cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 F and DQ; the AVX-512 hash cannot run";
  std::mt19937_64 rng(40);
  std::vector<std::uint64_t> keys64(4096);
  std::vector<std::uint32_t> keys32(4096);
  for (std::size_t i = 0; i < keys64.size(); ++i) {
    keys64[i] = rng();
    keys32[i] = static_cast<std::uint32_t>(rng());
  }
  keys64[0] = 0;  // the edges of the key space
  keys64[1] = ~std::uint64_t{0};
  keys32[0] = 0;
  keys32[1] = ~std::uint32_t{0};
  // Block counts at the edges of the multiply-shift (1, 2^32 - 1, 2^32) and between.
  const std::uint64_t block_counts[] = {1, 2, 3, 1000, (1ull << 20) + 7, (1ull << 32) - 1, 1ull << 32};
  for (std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1}, rng()}) {
    for (std::uint64_t num_blocks : block_counts) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(num_blocks) + " blocks");
      const cpu::key_hashes_x8<std::uint64_t> source64{keys64.data(), seed};
      const cpu::key_hashes_x8<std::uint32_t> source32{keys32.data(), seed};
      std::uint64_t hashes[8];
      std::uint64_t blocks[8];
      for (std::size_t i = 0; i < keys64.size(); i += 8) {
        source64.hash8(i, num_blocks, hashes, blocks);
        for (std::size_t lane = 0; lane < 8; ++lane) {
          const std::uint64_t h = hash_key(keys64[i + lane], seed);
          ASSERT_EQ(hashes[lane], h) << "u64 key " << i + lane;
          ASSERT_EQ(blocks[lane], block_index(h, num_blocks)) << "u64 key " << i + lane;
        }
        source32.hash8(i, num_blocks, hashes, blocks);
        for (std::size_t lane = 0; lane < 8; ++lane) {
          const std::uint64_t h = hash_key(keys32[i + lane], seed);
          ASSERT_EQ(hashes[lane], h) << "u32 key " << i + lane;
          ASSERT_EQ(blocks[lane], block_index(h, num_blocks)) << "u32 key " << i + lane;
        }
      }
    }
  }
#else
  GTEST_SKIP() << "not an x86 build; there is no AVX-512 kernel";
#endif
}

// Batch sizes around the tile (8 keys) and the prefetch ring (128 keys, for
// probes and adds alike; 64 and 65 stay from when the probes' ring was 64),
// so that every branch of the tiled walk runs:
// no full tile, tiles but no full ring, a ring filled exactly, a full ring
// with and without a tail of single keys; and threaded, so that ranges start
// at keys that are not multiples of 8.
TEST(CpuBackend, Avx512MatchesScalarBitForBit) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 F and DQ; the AVX-512 kernel cannot run";
  for (const layout& shape : all_geometries()) {
    if (shape.words_per_block < 8) continue;  // the AVX-512 kernel serves W = 8 and 16
    for (std::uint64_t blocks : {1ull, 3ull, 1000ull, (1ull << 16) + 7}) {
      const layout l = with_blocks(shape, blocks);
      for (std::size_t n : {0, 1, 7, 8, 9, 39, 63, 64, 65, 72, 127, 128, 129, 136, 3001}) {
        if (blocks > 1000 && n != 3001) continue;  // a 2-4 MiB filter: one size
        check_matches_scalar<std::uint32_t>(l, cpu_simd::avx512, n, 1);
        check_matches_scalar<std::uint64_t>(l, cpu_simd::avx512, n, 1);
      }
      if (blocks == 1000) {
        check_matches_scalar<std::uint32_t>(l, cpu_simd::avx512, threaded_batch + 13, 3);
        check_matches_scalar<std::uint64_t>(l, cpu_simd::avx512, threaded_batch + 13, 3);
      }
    }
  }
}

// for_each_key over a range with nulls (the ring of the last non-null keys)
// against the plain list: every non-null key visited once, in batch order, with
// its hash and block. Ranges that start mid-batch, batch sizes around both ring
// distances (40 for probes, 96 for stored-hash writes), bitmaps from bit 0, 3
// and 8, and densities from no valid key to all of them.
TEST(CpuBackend, KeyLoopWithNullsVisitsEveryValidKeyOnceInBatchOrder) {
  const std::uint64_t num_blocks = 997;
  const std::uint64_t seed = 11;
  const auto keys = random_keys<std::uint64_t>(3000, 70);
  std::vector<std::uint64_t> hashes(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) hashes[i] = hash_key(keys[i], seed);
  const std::vector<std::uint32_t> words(num_blocks * 8);
  const auto address_of = [&words](std::uint64_t block) { return words.data() + block * 8; };
  std::vector<std::vector<std::uint8_t>> bitmaps = {std::vector<std::uint8_t>(400, 0x00),
                                                    std::vector<std::uint8_t>(400, 0xff),
                                                    gbf::test::random_validity(3200, 71)};
  std::vector<std::uint8_t> sparse(400, 0);  // about one key in 64 valid
  for (std::size_t byte = 0; byte < sparse.size(); byte += 8) sparse[byte] = 0x10;
  bitmaps.push_back(sparse);
  using visit_record = std::pair<std::size_t, std::uint64_t>;
  for (const auto& bitmap : bitmaps) {
    for (const std::size_t first_bit : {0, 3, 8}) {
      for (const std::size_t begin : {0, 5}) {
        for (const std::size_t n : {0, 1, 39, 40, 41, 95, 96, 97, 200, 2990}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " begin " + std::to_string(begin) + " bit " +
                       std::to_string(first_bit) + " first byte " + std::to_string(bitmap[0]));
          std::vector<visit_record> expected;
          for (std::size_t i = begin; i < begin + n; ++i)
            if (key_valid(bitmap.data(), first_bit, i)) expected.push_back({i, hashes[i]});
          std::vector<visit_record> read_seen, write_seen;
          const cpu::key_range<cpu::key_hashes<std::uint64_t>> keyed{
              {keys.data(), seed}, begin, begin + n, num_blocks, bitmap.data(), first_bit};
          cpu::for_each_key(keyed, address_of,
                            [&](std::size_t i, std::uint64_t h, const std::uint32_t* block) {
                              EXPECT_EQ(block, address_of(block_index(h, num_blocks)));
                              read_seen.push_back({i, h});
                            });
          const cpu::key_range<cpu::stored_hashes> stored{
              {hashes.data()}, begin, begin + n, num_blocks, bitmap.data(), first_bit};
          cpu::for_each_key<cpu::block_access::write>(
              stored, address_of,
              [&](std::size_t i, std::uint64_t h, const std::uint32_t*) { write_seen.push_back({i, h}); });
          ASSERT_EQ(read_seen, expected);
          ASSERT_EQ(write_seen, expected);
        }
      }
    }
  }
}

// The owned walk (a thread that reads the whole batch and visits only the keys
// of its block span) against the plain list of those keys: every kept key
// visited once, in batch order, with its hash and block; nulls skipped. Batch
// sizes around the tile (8), the group between rounds of visits (128 keys),
// the prefetch distance (128 kept keys) and many times the ring (512), spans
// keeping every key, about half, a sliver, and none, and validity bitmaps
// starting at bits 0, 3 and 8.
TEST(CpuBackend, OwnedWalkVisitsExactlyTheKeysOfItsBlocksInBatchOrder) {
#if GBF_CPU_AVX512
  if (!cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 F and DQ; the owned walk cannot run";
  const std::uint64_t num_blocks = 1000;
  const std::uint64_t seed = 7;
  const auto keys = random_keys<std::uint64_t>(5003, 60);
  const std::vector<std::uint8_t> validity = gbf::test::random_validity(keys.size() + 8, 61);
  const cpu::block_span spans[] = {{0, num_blocks}, {0, 500}, {500, 500}, {997, 3}, {0, 0}};
  const std::vector<std::uint32_t> words(num_blocks * 8);
  struct visit_record {
    std::size_t index;
    std::uint64_t hash;
    std::uint64_t block;
    bool operator==(const visit_record& o) const {
      return index == o.index && hash == o.hash && block == o.block;
    }
  };
  for (const std::size_t n : {0, 1, 7, 8, 9, 127, 128, 129, 135, 136, 255, 256, 257, 640, 5003}) {
    for (const cpu::block_span span : spans) {
      for (const int first_bit : {-1, 0, 3, 8}) {  // -1: no bitmap
        SCOPED_TRACE("n=" + std::to_string(n) + " span [" + std::to_string(span.first) + ", +" +
                     std::to_string(span.count) + ") validity bit " + std::to_string(first_bit));
        const std::uint8_t* const bits = first_bit < 0 ? nullptr : validity.data();
        const std::size_t bit0 = first_bit < 0 ? 0 : static_cast<std::size_t>(first_bit);
        std::vector<visit_record> expected;
        for (std::size_t i = 0; i < n; ++i) {
          if (!key_valid(bits, bit0, i)) continue;
          const std::uint64_t h = hash_key(keys[i], seed);
          const std::uint64_t block = block_index(h, num_blocks);
          if (block >= span.first && block < span.first + span.count) expected.push_back({i, h, block});
        }
        // Blocks of 8 words; the visit recovers the block index from the address.
        const auto address_of = [&words](std::uint64_t block) { return words.data() + block * 8; };
        const auto block_at = [&words](const std::uint32_t* address) {
          return static_cast<std::uint64_t>(address - words.data()) / 8;
        };
        const cpu::key_range<cpu::key_hashes_x8<std::uint64_t>> range{
            {keys.data(), seed}, 0, n, num_blocks, bits, bit0};
        std::vector<visit_record> seen;
        cpu::for_each_owned_key(
            range, span, address_of,
            [&](std::size_t i, std::uint64_t h, const std::uint32_t* block) {
              seen.push_back({i, h, block_at(block)});
            });
        ASSERT_EQ(seen.size(), expected.size());
        ASSERT_TRUE(seen == expected);
        // Without an index (the visit add uses), the same hashes and blocks.
        std::vector<visit_record> unindexed;
        cpu::for_each_owned_key(
            range, span, address_of,
            [&](std::uint64_t h, const std::uint32_t* block) {
              unindexed.push_back({0, h, block_at(block)});
            });
        ASSERT_EQ(unindexed.size(), expected.size());
        for (std::size_t j = 0; j < expected.size(); ++j) {
          ASSERT_EQ(unindexed[j].hash, expected[j].hash) << "visit " << j;
          ASSERT_EQ(unindexed[j].block, expected[j].block) << "visit " << j;
        }
      }
    }
  }
#else
  GTEST_SKIP() << "not an x86 build; there is no owned walk";
#endif
}

// The owned walk tests a hash's high half against a span in hash space, not
// its block against the block span: the two must keep exactly the same hashes,
// for every block count (1 to 2^32, where b * 2^32 needs 128 bits) and for
// spans that split the blocks into 2 or 3 parts, at the spans' edges and at
// random.
TEST(CpuBackend, OwnedHighSpanHoldsExactlyTheHashesOfItsBlocks) {
  std::mt19937_64 rng(63);
  for (const std::uint64_t num_blocks :
       {1ull, 2ull, 3ull, 1000ull, (1ull << 20) + 7, (1ull << 32) - 1, 1ull << 32}) {
    for (const unsigned parts : {1u, 2u, 3u}) {
      for (unsigned part = 0; part < parts; ++part) {
        const std::uint64_t first = cpu::part_begin(num_blocks, parts, part);
        const cpu::block_span blocks{first, cpu::part_begin(num_blocks, parts, part + 1) - first};
        const cpu::high_span high = cpu::owned_high_span(blocks, num_blocks);
        SCOPED_TRACE(std::to_string(num_blocks) + " blocks, part " + std::to_string(part) + " of " +
                     std::to_string(parts));
        std::vector<std::uint64_t> highs = {0, 0xffffffffull, high.first, high.first + high.count};
        if (high.first > 0) highs.push_back(high.first - 1);
        for (int r = 0; r < 2000; ++r) highs.push_back(rng() >> 32);
        for (const std::uint64_t x : highs) {
          if (x > 0xffffffffull) continue;  // past the last span's end: no hash has it
          const std::uint64_t h = (x << 32) | (rng() & 0xffffffffull);
          const std::uint64_t block = block_index(h, num_blocks);
          const bool in_blocks = block - blocks.first < blocks.count;
          ASSERT_EQ((h >> 32) - high.first < high.count, in_blocks) << "high half " << x;
        }
      }
    }
  }
}

TEST(CpuBackend, ValidLanesAreTheEightValidityBitsFromAnyOffset) {
  const std::vector<std::uint8_t> validity = gbf::test::random_validity(64, 62);
  for (std::size_t first_bit = 0; first_bit + 8 <= 64; ++first_bit) {
    unsigned expected = 0;
    for (unsigned lane = 0; lane < 8; ++lane)
      expected |= (key_valid(validity.data(), first_bit, lane) ? 1u : 0u) << lane;
    EXPECT_EQ(cpu::key_loop_detail::valid_lanes(validity.data(), first_bit), expected)
        << "first bit " << first_bit;
  }
  EXPECT_EQ(cpu::key_loop_detail::valid_lanes(nullptr, 5), 0xffu);
}

// Two threads with AVX-512 add by owned walks (each thread reads the batch and
// writes half of the blocks): words and is_new answers must be the sequential
// loop's for both key widths, both AVX-512 block sizes, block counts that
// split evenly, unevenly and into single blocks, and batch sizes just past
// the threading threshold (2 x 2^16 keys) with every kind of tail. (Nulls on
// this road: the threaded add_new and plain-add tests below, whose automatic
// kernels take it where AVX-512 runs.)
TEST(CpuBackend, TwoThreadAddByOwnedWalksMatchesTheSequentialLoop) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 F and DQ; the owned walks cannot run";
  const std::size_t threshold = std::size_t{2} << 16;
  for (const layout& shape : all_geometries()) {
    if (shape.words_per_block < 8 || (shape.bits_per_key != shape.words_per_block && shape.bits_per_key != 32))
      continue;
    for (std::uint64_t blocks : {2ull, 3ull, 4093ull, 100000ull}) {
      const layout l = with_blocks(shape, blocks);
      for (std::size_t extra : {0, 1, 7, 129}) {
        check_matches_scalar<std::uint32_t>(l, cpu_simd::avx512, threshold + extra, 2);
        check_matches_scalar<std::uint64_t>(l, cpu_simd::avx512, threshold + extra, 2);
      }
    }
  }
}

TEST(CpuBackend, FourThreadsGiveTheSameBitsAsOne) {
  std::vector<cpu_simd> kernels = {cpu_has_avx2() ? cpu_simd::avx2 : cpu_simd::scalar};
  if (cpu_has_avx512()) kernels.push_back(cpu_simd::avx512);  // its partition hashes 8 keys at once
  for (const cpu_simd simd : kernels)
  for (const layout& shape : all_geometries()) {
    if (shape.bits_per_key != shape.words_per_block && shape.bits_per_key != 32) continue;
   // 50,000 blocks (1.6 MiB or more): the add partitions the batch by block
   // range; 1,000 blocks (at most 64 KiB): threads add into private copies.
   for (std::uint64_t blocks : {50000u, 1000u}) {
    const layout l = with_blocks(shape, blocks);
    SCOPED_TRACE(name_of(l) + (simd == cpu_simd::avx512 ? " avx512" : ""));
    const auto keys = random_keys<std::uint64_t>(threaded_batch, 20);
    auto one = make(l, simd, 1);
    auto four = make(l, simd, 4);
    add_to(*one, keys);
    add_to(*four, keys);
    ASSERT_EQ(words_of(*one, l), words_of(*four, l));

    const auto queries = random_keys<std::uint64_t>(threaded_batch, 21);
    const answers one_found = contains_of(*one, queries);
    const answers four_found = contains_of(*four, queries);
    for (std::size_t i = 0; i < queries.size(); ++i) ASSERT_EQ(one_found[i], four_found[i]);
    EXPECT_EQ(count_of(*one, queries), count_of(*four, queries));
    EXPECT_EQ(one->popcount(), four->popcount());
   }
  }
}

template <class Key>
void check_add_new_is_sequential(const layout& l, unsigned threads, std::size_t n) {
  SCOPED_TRACE(name_of(l) + " threads=" + std::to_string(threads) +
               (sizeof(Key) == 4 ? " u32" : " u64"));
  const auto earlier = random_keys<Key>(n / 4, 30);
  const auto batch = batch_with_repeats(random_keys<Key>(n, 31), earlier, 32);

  auto filter = make(l, cpu_simd::automatic, threads);
  reference_filter reference(l);
  add_to(*filter, earlier);
  for (Key key : earlier) reference.add(key);

  const answers is_new = add_new_of(*filter, batch);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (is_new[i] != reference.add(batch[i]) && ++mismatches <= 5)
      ADD_FAILURE() << "is_new[" << i << "] = " << is_new[i];
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(words_of(*filter, l), reference.words);
}

TEST(CpuBackend, AddNewAnswersLikeTheSequentialLoop) {
  for (const layout& shape : all_geometries()) {
    if (shape.bits_per_key != shape.words_per_block) continue;
    // Few blocks make repeats and collisions common; 3 blocks under 4 threads
    // leaves a thread without blocks.
    for (std::uint64_t blocks : {1ull, 3ull, 1000ull, 100000ull}) {
      const layout l = with_blocks(shape, blocks);
      check_add_new_is_sequential<std::uint64_t>(l, 1, 5000);
      check_add_new_is_sequential<std::uint32_t>(l, 4, threaded_batch);
    }
  }
  const layout l = with_blocks(all_geometries().back(), 1000);  // W = 16, k = 32
  check_add_new_is_sequential<std::uint64_t>(l, 4, threaded_batch);
}

// Threaded add with is_new partitions each chunk (at least 2^17 keys) by
// owner: up to 4 owners with one register cursor each, more by a counting
// sort. 2..6 threads cover both, a batch of several chunks covers the chunk
// loop, and an Arrow validity bitmap covers the null-skipping paths: the
// words and the is_new answers must be those of the sequential loop, and
// nulls must be answered false. Where AVX-512 runs, 2 threads take owned
// walks instead; the AVX2 kernels keep the 2-owner partition under test there.
TEST(CpuBackend, ThreadedAddWithNullsOverManyChunksAnswersLikeTheSequentialLoop) {
  const layout l = with_blocks(all_geometries().front(), 4093);  // few blocks: many repeats
  const std::size_t n = 600'001;                                 // 3 chunks
  const auto keys = random_keys<std::uint64_t>(n, 40);
  const std::vector<std::uint8_t> validity = gbf::test::random_validity(n + 3, 41);
  key_batch batch = batch_of(keys);
  batch.validity = validity.data();
  batch.validity_bit = 3;
  reference_filter reference(l);
  std::vector<bool> expected(n);
  for (std::size_t i = 0; i < n; ++i)
    expected[i] = key_valid(batch.validity, batch.validity_bit, i) && reference.add(keys[i]);
  std::vector<cpu_simd> kernels = {cpu_simd::automatic};
  if (cpu_has_avx512()) kernels.push_back(cpu_simd::avx2);
  for (const cpu_simd simd : kernels)
  for (const unsigned threads : {2u, 3u, 4u, 5u, 6u}) {
    SCOPED_TRACE("threads=" + std::to_string(threads) + (simd == cpu_simd::avx2 ? " avx2" : ""));
    auto filter = make(l, simd, threads);
    answers is_new = gbf::test::bools(n);
    filter->add(batch, is_new.get(), sync_call);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (is_new[i] != expected[i] && ++mismatches <= 5) ADD_FAILURE() << "is_new[" << i << "]";
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(words_of(*filter, l), reference.words);

    // add without is_new: this small filter takes the private-copy road.
    auto plain = make(l, simd, threads);
    plain->add(batch, nullptr, sync_call);
    EXPECT_EQ(words_of(*plain, l), reference.words);
    const answers found = contains_of(*plain, keys);
    for (std::size_t i = 0; i < n; ++i) {
      if (key_valid(batch.validity, batch.validity_bit, i)) {
        ASSERT_TRUE(found[i]) << "false negative " << i;
      }
    }
  }
}

// Two plain adds into one CPU filter of `filter_bytes` (plus one block, an odd
// count) of three layouts, on each of `thread_counts` threads: `n` random keys
// with nulls, then `second_n` more. After each, the words must be the
// sequential loop's.
template <class Key = std::uint64_t>
void expect_two_plain_adds_give_the_sequential_bits(std::uint64_t filter_bytes, std::size_t n,
                                                    std::size_t second_n, std::uint64_t seed,
                                                    std::initializer_list<unsigned> thread_counts) {
  SCOPED_TRACE(sizeof(Key) == 4 ? "u32 keys" : "u64 keys");
  const auto first = random_keys<Key>(n, seed);
  const auto second = random_keys<Key>(second_n, seed + 1);
  const std::vector<std::uint8_t> validity = gbf::test::random_validity(n + 5, seed + 2);
  key_batch batch = batch_of(first);
  batch.validity = validity.data();
  batch.validity_bit = 5;
  for (const layout& shape : {all_geometries().front(), layout{}, all_geometries().back()}) {
    const std::uint64_t block_bytes = std::uint64_t{4} * shape.words_per_block;
    const layout l = with_blocks(shape, filter_bytes / block_bytes + 1);
    SCOPED_TRACE(name_of(l));
    reference_filter reference(l);
    for (std::size_t i = 0; i < n; ++i)
      if (key_valid(batch.validity, batch.validity_bit, i)) reference.add(first[i]);
    const std::vector<std::uint32_t> after_first = reference.words;
    for (const Key key : second) reference.add(key);
    // Where AVX-512 runs, 2 threads take owned walks; AVX2 keeps the partition under test.
    std::vector<cpu_simd> kernels = {cpu_simd::automatic};
    if (cpu_has_avx512()) kernels.push_back(cpu_simd::avx2);
    for (const cpu_simd simd : kernels) {
      for (const unsigned threads : thread_counts) {
        SCOPED_TRACE("threads=" + std::to_string(threads) + (simd == cpu_simd::avx2 ? " avx2" : ""));
        auto filter = make(l, simd, threads);
        filter->add(batch, nullptr, sync_call);
        EXPECT_EQ(words_of(*filter, l), after_first);
        add_to(*filter, second);
        EXPECT_EQ(words_of(*filter, l), reference.words);
      }
    }
  }
}

// A plain add into a filter past private_copy_max_bytes (1 MiB), of a batch
// small against it (fewer keys than the copies' bytes / copy_bytes_per_key;
// here 3 MiB, so even one copy, 2 threads, has more than 4 bytes a key),
// partitions the batch: a team of threads applies chunk c while it partitions
// chunk c + 1 into the other scratch buffer, slices claimed by whichever
// thread is free. Several chunks (> 4 of 2^17 keys), nulls, 2..6 threads
// (register cursors up to 4 owners, a counting sort beyond), u64 and u32 keys,
// and a second batch into the same filter (the scratch is reused).
TEST(CpuBackend, PlainAddOfABatchSmallAgainstABigFilterGivesTheSequentialBits) {
  expect_two_plain_adds_give_the_sequential_bits(std::uint64_t{3} << 20, 700'001, 350'000, 50,
                                                 {2u, 3u, 4u, 5u, 6u});
  expect_two_plain_adds_give_the_sequential_bits<std::uint32_t>(std::uint64_t{3} << 20, 300'001,
                                                                150'000, 58, {2u, 3u});
}

// A plain add of a batch large against a filter past private_copy_max_bytes
// (a key per 2.2 bytes of a 1.5 MiB filter) takes private copies on 2 threads
// (owned walks where AVX-512 runs; the AVX2 pass keeps the copies) and the
// partition on 3 and 4 (their copies would be 3 and 4.5 MiB: fewer keys than
// one per 4 bytes); on every road, with nulls and a second batch into the
// same filter (the copies are reused, and zeroed again).
TEST(CpuBackend, PlainAddOfABatchLargeAgainstABigFilterGivesTheSequentialBits) {
  expect_two_plain_adds_give_the_sequential_bits(std::uint64_t{3} << 19, 700'001, 700'001, 53,
                                                 {2u, 3u, 4u});
}

// Private copies carry nothing from one call to the next: after an add on
// threads, a clear and a second add, the words are the second batch's alone,
// for a filter that always takes the copies (64 KiB) and one past 1 MiB that
// takes them for a batch this large (a key per 2.2 bytes) where owned walks
// do not run (AVX2 kernels).
TEST(CpuBackend, PrivateCopiesKeepNoBitsAcrossAClear) {
  const auto first = random_keys<std::uint64_t>(700'001, 56);
  const auto second = random_keys<std::uint64_t>(700'001, 57);
  const cpu_simd simd = cpu_has_avx2() ? cpu_simd::avx2 : cpu_simd::scalar;
  for (const std::uint64_t filter_bytes : {std::uint64_t{1} << 16, std::uint64_t{3} << 19}) {
    const layout l = with_blocks(layout{}, filter_bytes / 32 + 1);
    SCOPED_TRACE(name_of(l));
    reference_filter reference(l);
    for (std::uint64_t key : second) reference.add(key);
    auto filter = make(l, simd, 2);
    add_to(*filter, first);
    filter->clear();
    add_to(*filter, second);
    EXPECT_EQ(words_of(*filter, l), reference.words);
  }
}

// The partitioned add routes a key to a thread by its hash's high half
// (first_hash_high) instead of by its block (operator()); the two must agree
// on every hash, or one block would be written by two threads at once.
TEST(CpuBackend, BlockOwnerBoundsAgreeWithTheOwnerOfEveryBlock) {
  std::mt19937_64 rng(13);
  std::vector<std::uint64_t> block_counts = {1, 2, 3, 4, 5, 7, 8, 255, 256, 257, 1000003,
                                             (std::uint64_t{1} << 32) - 1, std::uint64_t{1} << 32};
  for (int i = 0; i < 40; ++i) block_counts.push_back(1 + rng() % (std::uint64_t{1} << 32));
  for (const std::uint64_t num_blocks : block_counts) {
    for (const unsigned parts : {1u, 2u, 3u, 4u, 5u, 16u, 256u}) {
      SCOPED_TRACE("num_blocks " + std::to_string(num_blocks) + ", parts " + std::to_string(parts));
      const cpu::block_owner owner_of(parts, num_blocks);
      // first_block(o) is the least block whose owner is o or later.
      EXPECT_EQ(owner_of.first_block(0, num_blocks), 0u);
      EXPECT_EQ(owner_of.first_block(parts, num_blocks), num_blocks);
      for (unsigned o = 1; o < parts; ++o) {
        const std::uint64_t first = owner_of.first_block(o, num_blocks);
        ASSERT_LE(owner_of.first_block(o - 1, num_blocks), first);
        if (first < num_blocks) {
          EXPECT_GE(owner_of(first), o);
        }
        if (first > 0) {
          EXPECT_LT(owner_of(first - 1), o);
        }
      }
      // The owner by the high half equals the owner of the block, at random
      // high halves and on both sides of every bound.
      std::vector<std::uint64_t> highs = {0, 0xffffffffu};
      for (unsigned o = 0; o <= parts; ++o) {
        const std::uint64_t bound = owner_of.first_hash_high(o, num_blocks);
        for (const std::uint64_t x : {bound - 1, bound, bound + 1})
          if (x <= 0xffffffffu) highs.push_back(x);
      }
      for (int i = 0; i < 200; ++i) highs.push_back(rng() >> 32);
      for (const std::uint64_t high : highs) {
        unsigned by_high = 0;
        while (by_high + 1 < parts && owner_of.first_hash_high(by_high + 1, num_blocks) <= high)
          ++by_high;
        const std::uint64_t h = (high << 32) | (rng() & 0xffffffffu);
        ASSERT_EQ(by_high, owner_of(block_index(h, num_blocks))) << "high half " << high;
      }
    }
  }
}

// combine_host takes a slice at a time (an operand on another backend comes
// over in steps): three slices give the whole array's AND.
TEST(CpuBackend, CombineIsWordwiseOrAndAnd) {
  const layout l = with_blocks(layout{}, 777);
  const auto a_keys = random_keys<std::uint64_t>(3000, 40);
  const auto b_keys = random_keys<std::uint64_t>(3000, 41);
  auto a = make(l, cpu_simd::automatic, 1);
  auto b = make(l, cpu_simd::automatic, 1);
  add_to(*a, a_keys);
  add_to(*b, b_keys);
  const auto a_words = words_of(*a, l);
  const auto b_words = words_of(*b, l);

  auto merged = make(l, cpu_simd::automatic, 1);
  merged->write_words(a_words.data());
  merged->combine(*b, set_op::union_or);
  auto intersected = make(l, cpu_simd::automatic, 1);
  intersected->write_words(a_words.data());
  const std::uint64_t cut1 = 4, cut2 = 1'000;
  intersected->combine_host(0, cut1, b_words.data(), set_op::intersect_and);
  intersected->combine_host(cut1, cut2 - cut1, b_words.data() + cut1, set_op::intersect_and);
  intersected->combine_host(cut2, l.num_words() - cut2, b_words.data() + cut2, set_op::intersect_and);

  const auto or_words = words_of(*merged, l);
  const auto and_words = words_of(*intersected, l);
  for (std::size_t i = 0; i < a_words.size(); ++i) {
    ASSERT_EQ(or_words[i], a_words[i] | b_words[i]) << "word " << i;
    ASSERT_EQ(and_words[i], a_words[i] & b_words[i]) << "word " << i;
  }
  EXPECT_EQ(count_of(*merged, a_keys), a_keys.size());
  EXPECT_EQ(count_of(*merged, b_keys), b_keys.size());
}

TEST(CpuBackend, PopcountClearAndWordRoundTrip) {
  // 2^22 words: big enough for popcount to split across the 4 threads.
  const layout l = with_blocks(layout{}, std::uint64_t{1} << 19);
  auto filter = make(l, cpu_simd::automatic, 4);
  EXPECT_EQ(filter->popcount(), 0u);

  std::mt19937_64 rng(50);
  std::vector<std::uint32_t> words(l.num_words());
  std::uint64_t expected_bits = 0;
  for (std::uint32_t& word : words) {
    word = static_cast<std::uint32_t>(rng()) & static_cast<std::uint32_t>(rng());
    expected_bits += static_cast<std::uint64_t>(__builtin_popcount(word));
  }
  filter->write_words(words.data());
  EXPECT_EQ(words_of(*filter, l), words);
  EXPECT_EQ(filter->popcount(), expected_bits);

  filter->clear();
  EXPECT_EQ(filter->popcount(), 0u);
  EXPECT_EQ(words_of(*filter, l), std::vector<std::uint32_t>(l.num_words(), 0));
}

TEST(CpuBackend, EmptyBatchesAreNoOps) {
  auto filter = make(with_blocks(layout{}, 10), cpu_simd::automatic, 4);
  const key_batch empty{nullptr, 0, key_kind::u64, memory_space::host};
  filter->add(empty, nullptr, sync_call);
  filter->contains(empty, nullptr, sync_call);
  EXPECT_EQ(filter->count(empty, nullptr, sync_call), 0u);
  EXPECT_EQ(filter->select(empty, nullptr, nullptr, sync_call), 0u);
  EXPECT_EQ(filter->popcount(), 0u);
}

TEST(CpuBackend, RejectsKeysInDeviceMemory) {
  auto filter = make(with_blocks(layout{}, 10), cpu_simd::automatic, 1);
  const std::uint64_t key = 1;
  bool result = false;
  const key_batch on_device{&key, 1, key_kind::u64, memory_space::device};
  std::uint64_t row = 0;
  EXPECT_THROW(filter->add(on_device, nullptr, sync_call), gbf::invalid_argument);
  EXPECT_THROW(filter->add(on_device, &result, sync_call), gbf::invalid_argument);
  EXPECT_THROW(filter->contains(on_device, &result, sync_call), gbf::invalid_argument);
  EXPECT_THROW(filter->count(on_device, nullptr, sync_call), gbf::invalid_argument);
  EXPECT_THROW(filter->select(on_device, &row, nullptr, sync_call), gbf::invalid_argument);
  EXPECT_EQ(filter->popcount(), 0u);
}

TEST(CpuBackend, AsyncCallsThrowWrongBackendNamingTheCallAndChangeNothing) {
  const layout l = with_blocks(layout{}, 10);
  auto filter = make(l, cpu_simd::automatic, 1);
  const std::vector<std::uint64_t> keys = random_keys(5, 3);
  const key_batch batch = batch_of(keys);
  bool results[5] = {};
  std::uint64_t rows[5] = {};
  std::uint64_t count = 0;
  const auto async_call = [](const char* what) { return call_options{what, nullptr, true}; };
  EXPECT_THROW(filter->add(batch, nullptr, async_call("add_async")), gbf::wrong_backend);
  EXPECT_THROW(filter->contains(batch, results, async_call("contains_async")), gbf::wrong_backend);
  EXPECT_THROW(filter->count(batch, &count, async_call("count_async")), gbf::wrong_backend);
  EXPECT_THROW(filter->select(batch, rows, &count, async_call("select_async")), gbf::wrong_backend);
  const std::string message = gbf::test::message_of(
      [&] { filter->count(batch, &count, async_call("count_async")); });
  EXPECT_NE(message.find("count_async needs the GPU backend"), std::string::npos) << message;
  EXPECT_EQ(filter->popcount(), 0u);
  EXPECT_EQ(filter->device_words(), nullptr);
  EXPECT_NO_THROW(filter->synchronize("synchronize"));  // nothing is ever deferred on the CPU
}

TEST(CpuBackend, RejectsInvalidLayouts) {
  layout bad_width = with_blocks(layout{}, 10);
  bad_width.words_per_block = 3;
  EXPECT_THROW(make(bad_width, cpu_simd::scalar, 1), gbf::invalid_argument);
  layout too_few_bits = with_blocks(layout{}, 10);
  too_few_bits.bits_per_key = 4;
  EXPECT_THROW(make(too_few_bits, cpu_simd::scalar, 1), gbf::invalid_argument);
  EXPECT_THROW(make(with_blocks(layout{}, 0), cpu_simd::scalar, 1), gbf::invalid_argument);
}

TEST(CpuBackend, Avx2RequestThrowsWithoutAvx2) {
  if (cpu_has_avx2()) GTEST_SKIP() << "this CPU has AVX2, so an AVX2 request cannot fail here";
  EXPECT_THROW(make(layout{}, cpu_simd::avx2, 1), gbf::invalid_argument);
}

TEST(CpuBackend, Avx512RequestThrowsWithoutAvx512) {
  if (cpu_has_avx512()) GTEST_SKIP() << "this CPU has AVX-512, so an AVX-512 request cannot fail here";
  EXPECT_THROW(make(layout{}, cpu_simd::avx512, 1), gbf::invalid_argument);
}

TEST(CpuBackend, DescriptionNamesKernelAndThreads) {
  std::string description;
  auto filter = make_cpu_bloom(layout{}, on_cpu(1, cpu_simd::scalar), &description);
  EXPECT_EQ(description, "cpu (scalar, 1 thread)");
  EXPECT_EQ(filter->kind(), backend::cpu);

  make_cpu_bloom(layout{}, on_cpu(3), &description);
  EXPECT_EQ(description, cpu_has_avx512() ? "cpu (avx512, 3 threads)"
                         : cpu_has_avx2() ? "cpu (avx2, 3 threads)"
                                          : "cpu (scalar, 3 threads)");
  if (cpu_has_avx512()) {  // AVX2 can still be asked for
    make_cpu_bloom(layout{}, on_cpu(2, cpu_simd::avx2), &description);
    EXPECT_EQ(description, "cpu (avx2, 2 threads)");
  }

  layout narrow;  // AVX2 kernels serve 8- and 16-word blocks only
  narrow.words_per_block = 4;
  make_cpu_bloom(narrow, on_cpu(2), &description);
  EXPECT_EQ(description, "cpu (scalar, 2 threads)");
}

TEST(CpuBackend, MeasuredFprMatchesExpected) {
  const std::size_t num_queries = 400000;
  for (const auto& [words_per_block, bits_per_key] :
       std::vector<std::pair<std::uint32_t, std::uint32_t>>{{8, 8}, {1, 1}, {4, 8}, {16, 16}}) {
    layout l;
    l.words_per_block = words_per_block;
    l.bits_per_key = bits_per_key;
    // ~10 bits per key: FPRs between a fraction of a percent and a few percent.
    const std::size_t n = 50000;
    l.num_blocks = n * 10 / l.num_bits();
    SCOPED_TRACE(name_of(l));

    auto filter = make(l, cpu_simd::automatic, 2);
    add_to(*filter, random_keys<std::uint64_t>(n, 60));
    // Fresh keys: a different seed; collisions with the added keys are negligible.
    const auto queries = random_keys<std::uint64_t>(num_queries, 61);
    const double measured =
        static_cast<double>(count_of(*filter, queries)) / static_cast<double>(num_queries);
    const double expected = expected_fpr(l, static_cast<double>(n));
    // 5 binomial sigmas over the queries, plus 10% of the FPR for the spread
    // between filters (the filter itself is one random draw).
    const double sigma = std::sqrt(expected * (1 - expected) / static_cast<double>(num_queries));
    EXPECT_NEAR(measured, expected, 5 * sigma + 0.1 * expected)
        << "measured " << measured << ", expected " << expected;
  }
}

TEST(CpuBackend, HugePageArraysBehaveLikeHeapArraysAroundThe2MiBBoundary) {
  // Sizes just under, at and over 2 MiB and over 4 MiB, with a block count that
  // is not a multiple of anything: the mapped path (huge_pages) and the heap
  // path must hold the same bits through add, combine, clear and copies.
  layout base;
  for (const std::uint64_t bytes : {(std::uint64_t{2} << 20) - 32, std::uint64_t{2} << 20,
                                    (std::uint64_t{2} << 20) + 32, (std::uint64_t{4} << 20) + 7 * 32}) {
    const layout l = with_blocks(base, bytes / (base.words_per_block * 4));
    options huge_pages = on_cpu(2);
    huge_pages.cpu_huge_pages = true;
    options heap_pages = on_cpu(2);
    heap_pages.cpu_huge_pages = false;
    auto mapped = make_cpu_bloom(l, huge_pages, nullptr);
    auto heap = make_cpu_bloom(l, heap_pages, nullptr);
    EXPECT_EQ(mapped->popcount(), 0u) << name_of(l);  // zeroed
    const auto keys = random_keys(300000, bytes);
    add_to(*mapped, keys);
    add_to(*heap, keys);
    ASSERT_EQ(words_of(*mapped, l), words_of(*heap, l)) << name_of(l);
    const auto found = contains_of(*mapped, keys);
    EXPECT_TRUE(std::all_of(found.get(), found.get() + keys.size(), [](bool b) { return b; }));
    // The last word is writable and readable (the mapping covers the whole array).
    std::vector<std::uint32_t> words = words_of(*heap, l);
    words.back() = 0xffffffffu;
    mapped->write_words(words.data());
    heap->combine_host(0, words.size(), words.data(), set_op::union_or);
    EXPECT_EQ(words_of(*mapped, l), words_of(*heap, l)) << name_of(l);
    EXPECT_EQ(mapped->popcount(), heap->popcount());
    mapped->clear();
    EXPECT_EQ(mapped->popcount(), 0u);
  }
}

}  // namespace
}  // namespace gbf::detail
