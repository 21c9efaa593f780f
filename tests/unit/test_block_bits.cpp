// gbf::block_bits: the bits of a batch held as the blocks it touches, and
// filter::merge of them. The property pinned everywhere: the blocks and words
// are exactly the nonzero blocks of a filter of the same layout that added the
// same keys, for every geometry, key kind and batch split.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gbf/block_bits.hpp"
#include "gbf/filter.hpp"
#include "tests/support.hpp"

namespace {

using gbf::block_bits;
using gbf::layout;
using gbf::test::message_of;
using gbf::test::name_of;
using gbf::test::on_cpu;
using gbf::test::random_keys;
using gbf::test::with_blocks;

/// The nonzero blocks of `words` (a filter's words of layout `l`), as block_bits holds them.
struct sparse {
  std::vector<std::uint32_t> blocks;
  std::vector<std::uint32_t> words;
};

sparse nonzero_blocks(const layout& l, const std::vector<std::uint32_t>& words) {
  sparse out;
  const std::uint32_t w = l.words_per_block;
  for (std::uint64_t b = 0; b < l.num_blocks; ++b) {
    const auto row = words.begin() + static_cast<std::ptrdiff_t>(b * w);
    if (std::any_of(row, row + w, [](std::uint32_t x) { return x != 0; })) {
      out.blocks.push_back(static_cast<std::uint32_t>(b));
      out.words.insert(out.words.end(), row, row + w);
    }
  }
  return out;
}

void expect_same_bits(const block_bits& bits, const gbf::filter& f) {
  const sparse expected = nonzero_blocks(f.layout(), f.words());
  EXPECT_EQ(bits.blocks(), expected.blocks) << name_of(f.layout());
  EXPECT_EQ(bits.words(), expected.words) << name_of(f.layout());
  EXPECT_EQ(bits.size_bytes(), (bits.blocks().size() + bits.words().size()) * 4);
}

/// One add of all of `keys`: what every split of them, and every merge of the parts, must equal.
block_bits added_at_once(const layout& l, const std::vector<std::uint64_t>& keys) {
  block_bits whole(l);
  whole.add(keys.data(), keys.size());
  return whole;
}

/// Block counts for zero, one and two radix passes of 11 bits (the next test takes three).
const std::uint64_t block_counts[] = {1, 2, 7, 1000, 2049, 70001};

TEST(BlockBits, HoldsExactlyTheNonzeroBlocksOfAFilterThatAddedTheSameIntegerKeys) {
  std::uint64_t seed = 1;
  for (layout geometry : gbf::test::all_geometries()) {
    for (std::uint64_t num_blocks : block_counts) {
      const layout l = with_blocks(geometry, num_blocks);
      // Few keys in many blocks (sparse) and many keys in few (every block hit repeatedly).
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3000}}) {
        const auto keys64 = random_keys(n, ++seed);
        const auto keys32 = random_keys<std::uint32_t>(n, ++seed);
        block_bits bits(l);
        bits.add(keys64.data(), keys64.size());
        bits.add(keys32.data(), keys32.size());
        gbf::filter f(l, on_cpu(1));
        f.add(keys64.data(), keys64.size());
        f.add(keys32.data(), keys32.size());
        expect_same_bits(bits, f);
        EXPECT_EQ(bits.keys_added(), 2 * n);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(BlockBits, SortsBlockIndicesOfMoreThan22BitsInThreePasses) {
  // A third of these 3 x 2^21 + 1 blocks have bit 22 set, so the third pass orders
  // many keys; one word per block keeps the filter at 24 MiB.
  const layout l = gbf::test::layout_of(1, 3, (std::uint64_t{3} << 21) + 1, 4);
  const auto keys = random_keys(50000, 21);
  block_bits bits(l);
  bits.add(keys.data(), keys.size());
  gbf::filter f(l, on_cpu(1));
  f.add(keys.data(), keys.size());
  expect_same_bits(bits, f);
}

TEST(BlockBits, HoldsTheBitsOfNonNullStringKeysAsAFilterDoes) {
  for (const std::uint64_t num_blocks : {std::uint64_t{5}, std::uint64_t{100000}}) {
    const layout l = gbf::test::layout_of(8, 8, num_blocks, 77);
    auto batch = gbf::test::mixed_batch<std::int32_t>(2000, 3, false);
    for (std::size_t i = 0; i < batch.size(); i += 3) batch.set_null(i);
    auto large = gbf::test::mixed_batch<std::int64_t>(500, 4, false);
    block_bits bits(l);
    bits.add(batch.keys());
    bits.add(large.keys());
    gbf::filter f(l, on_cpu(1));
    f.add(batch.keys());
    f.add(large.keys());
    expect_same_bits(bits, f);
    EXPECT_EQ(bits.keys_added(), f.stats().keys_added);
  }
}

TEST(BlockBits, AddingInPiecesOrMergingPartsEqualsOneAddOfTheWholeBatch) {
  const layout l = gbf::test::layout_of(8, 8, 5000, 9);
  const auto keys = random_keys(20000, 5);
  const block_bits whole = added_at_once(l, keys);

  block_bits pieces(l);
  std::vector<block_bits> parts;
  for (std::size_t first = 0; first < keys.size(); first += 3000) {
    const std::size_t n = std::min<std::size_t>(3000, keys.size() - first);
    pieces.add(keys.data() + first, n);
    parts.emplace_back(l);
    parts.back().add(keys.data() + first, n);
  }
  EXPECT_EQ(pieces.blocks(), whole.blocks());
  EXPECT_EQ(pieces.words(), whole.words());

  // Merged in reverse order: a union does not depend on the order.
  block_bits merged(l);
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) merged.merge(*part);
  EXPECT_EQ(merged.blocks(), whole.blocks());
  EXPECT_EQ(merged.words(), whole.words());
  EXPECT_EQ(merged.keys_added(), keys.size());

  merged.merge(merged);  // x | x = x, and the count stays
  EXPECT_EQ(merged.words(), whole.words());
  EXPECT_EQ(merged.keys_added(), keys.size());
}

TEST(BlockBits, ManyOneKeyAddsWithReadsBetweenEqualOneAddInTimeLinearInTheKeys) {
  // 2^17 adds of one key each into 2^20 blocks. Merging every add into the
  // blocks held would copy ~2^16 blocks of 36 bytes per add, 3 x 10^11 bytes in
  // all (minutes); waiting until the pending hashes match the blocks held
  // merges ~17 times. Reads between adds (blocks(), size_bytes(), a copy) must
  // see every key added so far.
  const layout l = gbf::test::layout_of(8, 8, std::uint64_t{1} << 20);
  const auto keys = random_keys(std::size_t{1} << 17, 12);
  block_bits one_by_one(l);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    one_by_one.add(keys.data() + i, 1);
    if (i == 9 || i == 5000 || i == 77777) {
      block_bits so_far(l);
      so_far.add(keys.data(), i + 1);
      const block_bits copy = one_by_one;
      EXPECT_EQ(copy.blocks(), so_far.blocks()) << "after " << i + 1 << " keys";
      EXPECT_EQ(one_by_one.words(), so_far.words()) << "after " << i + 1 << " keys";
      EXPECT_EQ(one_by_one.size_bytes(), so_far.size_bytes());
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const block_bits whole = added_at_once(l, keys);
  EXPECT_EQ(one_by_one.blocks(), whole.blocks());
  EXPECT_EQ(one_by_one.words(), whole.words());
  EXPECT_EQ(one_by_one.keys_added(), keys.size());
  EXPECT_LT(seconds, 20.0) << "one-key adds took " << seconds << " s: each add merged everything held";
}

TEST(BlockBits, AMovedFromObjectIsEmptyAndUsableAndACopyIsIndependent) {
  const layout l = gbf::test::layout_of(4, 8, 3000, 2);
  const auto keys = random_keys(2000, 13);
  block_bits bits(l);
  bits.add(keys.data(), 1000);
  bits.add(keys.data() + 1000, 10);  // pending hashes travel with the move

  block_bits moved(std::move(bits));
  EXPECT_EQ(moved.keys_added(), 1010u);
  EXPECT_EQ(bits.keys_added(), 0u);  // NOLINT(bugprone-use-after-move): the state a move leaves is pinned
  EXPECT_TRUE(bits.blocks().empty());
  EXPECT_TRUE(bits.words().empty());
  EXPECT_EQ(bits.layout(), l);
  bits.add(keys.data() + 1010, 990);  // usable again, as new bits of the same layout
  moved.merge(bits);

  block_bits assigned(gbf::test::layout_of(1, 4, 5));
  assigned = std::move(moved);
  EXPECT_EQ(moved.keys_added(), 0u);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(moved.blocks().empty());
  const block_bits whole = added_at_once(l, keys);
  EXPECT_EQ(assigned.layout(), l);
  EXPECT_EQ(assigned.blocks(), whole.blocks());
  EXPECT_EQ(assigned.words(), whole.words());
  EXPECT_EQ(assigned.keys_added(), 2000u);

  block_bits copy = assigned;
  copy.add(keys.data(), 5);
  EXPECT_EQ(copy.keys_added(), 2005u);
  EXPECT_EQ(assigned.keys_added(), 2000u);
  copy = assigned;
  EXPECT_EQ(copy.words(), whole.words());
  EXPECT_EQ(copy.keys_added(), 2000u);
}

TEST(BlockBits, MergingBitsWhoseLastKeysStillWaitAsHashesMergesThoseKeysToo) {
  const layout l = gbf::test::layout_of(4, 8, 3000, 2);
  const auto keys = random_keys(2000, 14);
  const block_bits whole = added_at_once(l, keys);
  block_bits waiting(l);
  waiting.add(keys.data(), 1500);
  waiting.add(keys.data() + 1500, 500);  // 500 hashes, fewer than the blocks held: pending
  block_bits into(l);
  into.merge(waiting);
  EXPECT_EQ(into.blocks(), whole.blocks());
  EXPECT_EQ(into.words(), whole.words());
  gbf::filter f(l, on_cpu(1));
  f.merge(waiting);
  EXPECT_EQ(nonzero_blocks(l, f.words()).words, whole.words());
}

TEST(BlockBits, MergingIntoAFilterOrsTheBitsAndAddsTheCount) {
  for (layout geometry : gbf::test::all_geometries()) {
    const layout l = with_blocks(geometry, 3001);
    const auto mine = random_keys(4000, 11);
    const auto theirs = random_keys(700, 12);
    gbf::filter f(l, on_cpu(1));
    f.add(mine.data(), mine.size());
    block_bits bits(l);
    bits.add(theirs.data(), theirs.size());
    f.merge(bits);

    gbf::filter expected(l, on_cpu(1));
    expected.add(mine.data(), mine.size());
    expected.add(theirs.data(), theirs.size());
    EXPECT_EQ(f.words(), expected.words()) << name_of(l);
    EXPECT_EQ(f.stats().keys_added, mine.size() + theirs.size());
    EXPECT_EQ(f.count(theirs.data(), theirs.size()), theirs.size());
  }
}

TEST(BlockBits, FromBlocksRebuildsWhatBlocksAndWordsGaveAndSaysWhichEntryBreaksARule) {
  const layout l = gbf::test::layout_of(4, 8, 100, 1);
  const auto keys = random_keys(60, 2);
  block_bits bits(l);
  bits.add(keys.data(), keys.size());
  const block_bits copy = block_bits::from_blocks(l, bits.blocks(), bits.words(), bits.keys_added());
  EXPECT_EQ(copy.blocks(), bits.blocks());
  EXPECT_EQ(copy.words(), bits.words());
  EXPECT_EQ(copy.keys_added(), 60u);

  const auto refusal = [&](std::vector<std::uint32_t> blocks, std::vector<std::uint32_t> words) {
    return message_of([&] { block_bits::from_blocks(l, blocks, words); });
  };
  const std::vector<std::uint32_t> row = {1, 0, 0, 0};
  const std::vector<std::uint32_t> two_rows = {1, 0, 0, 0, 0, 2, 0, 0};
  EXPECT_NE(refusal({3}, {1, 2, 3}).find("3 words for 1 blocks of 4 words (4 expected)"),
            std::string::npos);
  EXPECT_NE(refusal({100}, row).find("blocks[0] = 100 is past the filter's 100 blocks"),
            std::string::npos);
  EXPECT_NE(refusal({5, 5}, two_rows).find("blocks[1] = 5 does not follow blocks[0] = 5"),
            std::string::npos);
  EXPECT_NE(refusal({6, 5}, two_rows).find("blocks[1] = 5 does not follow"), std::string::npos);
  EXPECT_NE(refusal({2, 9}, {1, 0, 0, 0, 0, 0, 0, 0}).find("blocks[1] = 9 has no bit set"),
            std::string::npos);
  EXPECT_EQ(refusal({}, {}), "(no error)");
  EXPECT_THROW(block_bits::from_blocks(gbf::test::layout_of(3, 8, 100), {}, {}),
               gbf::invalid_argument);
}

TEST(BlockBits, RefusesAnotherLayoutAndBadKeysAndKeepsWhatItHeld) {
  const layout l = gbf::test::layout_of(8, 8, 1000);
  const auto keys = random_keys(500, 3);
  block_bits bits(l);
  bits.add(keys.data(), keys.size());
  const auto blocks = bits.blocks();
  const auto words = bits.words();

  block_bits other(with_blocks(l, 999));
  EXPECT_NE(message_of([&] { bits.merge(other); }).find("num_blocks 1000 vs 999"), std::string::npos);
  EXPECT_THROW(bits.merge(other), gbf::layout_mismatch);
  gbf::filter f(with_blocks(l, 999), on_cpu(1));
  EXPECT_THROW(f.merge(bits), gbf::layout_mismatch);
  EXPECT_EQ(f.bits_set(), 0u);

  EXPECT_THROW(bits.add(static_cast<const std::uint64_t*>(nullptr), 3), gbf::invalid_argument);
  gbf::test::string_batch<std::int32_t> bad;
  bad.push("abc");
  bad.push("de");
  bad.offsets[1] = 7;  // past the 5 bytes of data
  EXPECT_NE(message_of([&] { bits.add(bad.keys()); }).find("offsets[1] = 7 is past the end"),
            std::string::npos);
  EXPECT_EQ(bits.blocks(), blocks);
  EXPECT_EQ(bits.words(), words);
  EXPECT_EQ(bits.keys_added(), 500u);

  EXPECT_THROW(block_bits(gbf::test::layout_of(8, 4, 10)), gbf::invalid_argument);  // k < W
}

TEST(BlockBits, CostsItsTouchedBlocksNotTheFilter) {
  // 1000 keys in a 2^22-block (128 MiB) layout: at most 1000 blocks of 36 bytes.
  const layout l = gbf::test::layout_of(8, 8, std::uint64_t{1} << 22);
  const auto keys = random_keys(1000, 8);
  block_bits bits(l);
  bits.add(keys.data(), keys.size());
  EXPECT_LE(bits.blocks().size(), 1000u);
  EXPECT_GE(bits.blocks().size(), 990u);  // collisions among 1000 of 4 M blocks are rare
  EXPECT_EQ(bits.size_bytes(), bits.blocks().size() * 36);
}

}  // namespace
