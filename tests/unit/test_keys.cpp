// The key plumbing every filter kind shares (gbf/keys.hpp, host/keys.hpp):
// erasing a caller's batch into a key_batch, the validity bit, the one rule
// for string offsets and the messages naming the first bad one, check_batch's
// pointer and memory-space checks, the result-array check, and the host-side
// helpers (count_valid, keys_to_count, host_copy, answers_on_host). None of
// it needs a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/keys.hpp"
#include "host/bloom_backend.hpp"
#include "host/keys.hpp"

namespace gbf::detail {
namespace {

using gbf::test::message_of;
using gbf::test::random_validity;

// ---------------------------------------------------------------------------
// key_batch: what the public templates hand below the API
// ---------------------------------------------------------------------------

TEST(KeyBatch, EraseRecordsTheKeyKindCountAndPointers) {
  const std::uint32_t u32[3] = {1, 2, 3};
  const std::int64_t i64[2] = {-1, 5};
  const std::uint8_t validity = 0x5;
  const key_batch a = erase(u32, 3);
  EXPECT_EQ(a.data, u32);
  EXPECT_EQ(a.count, 3u);
  EXPECT_EQ(a.kind, key_kind::u32);
  EXPECT_EQ(a.validity, nullptr);
  EXPECT_FALSE(a.is_string());
  const key_batch b = erase(i64, 2, &validity);
  EXPECT_EQ(b.kind, key_kind::u64);  // signed keys hash the same bytes as unsigned ones
  EXPECT_EQ(b.validity, &validity);
  EXPECT_EQ(b.validity_bit, 0u);

  const char bytes[] = "hello";
  const std::int32_t offsets32[] = {1, 3, 5};
  const std::int64_t offsets64[] = {0, 5};
  const key_batch s32 = erase(string_keys<std::int32_t>{bytes, 5, offsets32, 2, &validity});
  EXPECT_EQ(s32.kind, key_kind::str32);
  EXPECT_TRUE(s32.is_string());
  EXPECT_EQ(s32.data, bytes);
  EXPECT_EQ(s32.data_bytes, 5u);
  EXPECT_EQ(s32.offsets, offsets32);
  EXPECT_EQ(s32.count, 2u);
  EXPECT_EQ(s32.validity, &validity);
  const key_batch s64 = erase(string_keys<std::int64_t>{bytes, 5, offsets64, 1, nullptr});
  EXPECT_EQ(s64.kind, key_kind::str64);

  EXPECT_EQ(key_bytes(key_kind::u32), 4u);
  EXPECT_EQ(key_bytes(key_kind::u64), 8u);
  EXPECT_EQ(offset_bytes(key_kind::str32), 4u);
  EXPECT_EQ(offset_bytes(key_kind::str64), 8u);
}

TEST(KeyBatch, KeyValidReadsBitFirstBitPlusILsbFirst) {
  const std::vector<std::uint8_t> bits = random_validity(200, 1);
  for (std::size_t first_bit : {0u, 1u, 7u, 8u, 13u}) {
    for (std::size_t i = 0; i + first_bit < 200; ++i) {
      const std::size_t bit = first_bit + i;
      ASSERT_EQ(key_valid(bits.data(), first_bit, i), ((bits[bit / 8] >> (bit % 8)) & 1) == 1)
          << "first_bit " << first_bit << " key " << i;
    }
  }
  EXPECT_TRUE(key_valid(nullptr, 3, 1000)) << "no bitmap: every key is valid";
}

// ---------------------------------------------------------------------------
// The offsets rule (shared with the GPU validation kernel)
// ---------------------------------------------------------------------------

TEST(OffsetRule, AnOffsetIsBadWhenNegativeFirstDecreasingOrPastTheData) {
  // index, value, previous, data_bytes -> bad
  EXPECT_TRUE(offset_is_bad(0, -1, 0, 10));
  EXPECT_FALSE(offset_is_bad(0, 0, 0, 10));
  EXPECT_FALSE(offset_is_bad(0, 4, 0, 10));  // a slice may start past 0
  EXPECT_TRUE(offset_is_bad(0, 11, 0, 10));
  EXPECT_FALSE(offset_is_bad(3, 10, 10, 10));  // equal offsets: an empty string
  EXPECT_FALSE(offset_is_bad(3, 10, 4, 10));   // ending exactly at the data's end
  EXPECT_TRUE(offset_is_bad(3, 11, 4, 10));
  EXPECT_TRUE(offset_is_bad(3, 3, 4, 10));
  EXPECT_FALSE(offset_is_bad(1, 0, 0, 0));  // only empty strings, no data at all
  EXPECT_TRUE(offset_is_bad(1, std::int64_t{1} << 40, 0, 10));
}

TEST(OffsetRule, MessagesNameTheIndexBothOffsetsAndTheLimit) {
  EXPECT_EQ(bad_offset_message(0, -1, 0, 10), "string keys: offsets[0] = -1 is negative");
  EXPECT_EQ(bad_offset_message(17, 40, 48, 100),
            "string keys: offsets[17] = 40 < offsets[16] = 48 (offsets must not decrease)");
  EXPECT_EQ(bad_offset_message(17, 51, 48, 50),
            "string keys: offsets[17] = 51 is past the end of the data (data_bytes = 50)");
}

// Offsets of `n` random strings over `data_bytes` bytes, starting at `base`.
template <class Offset>
std::vector<Offset> good_offsets(std::mt19937_64& rng, std::size_t n, std::int64_t base,
                                 std::size_t data_bytes) {
  std::vector<Offset> offsets(n + 1);
  offsets[0] = static_cast<Offset>(base);
  for (std::size_t i = 1; i <= n; ++i) {
    const std::int64_t room = static_cast<std::int64_t>(data_bytes) - offsets[i - 1];
    const std::int64_t length = std::min<std::int64_t>(static_cast<std::int64_t>(rng() % 8), room);
    offsets[i] = static_cast<Offset>(offsets[i - 1] + length);
  }
  return offsets;
}

template <class Offset>
void check_first_bad_offset_is_reported() {
  std::mt19937_64 rng(sizeof(Offset));
  const std::string data(300, 'x');
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 60;
    std::vector<Offset> offsets = good_offsets<Offset>(rng, n, static_cast<std::int64_t>(rng() % 5), data.size());
    // Corrupt 0 to 3 random offsets with values that may or may not break the rule.
    const int corruptions = static_cast<int>(rng() % 4);
    for (int c = 0; c < corruptions; ++c) {
      const std::size_t at = rng() % (n + 1);
      offsets[at] = static_cast<Offset>(static_cast<std::int64_t>(rng() % 320) - 10);
    }
    // The first bad index by the rule, scanning as a reader of the docs would.
    std::size_t first_bad = n + 1;
    for (std::size_t i = 0; i <= n && first_bad > n; ++i) {
      const std::int64_t value = offsets[i];
      const bool bad = (i == 0 && value < 0) || (i > 0 && value < offsets[i - 1]) ||
                       value > static_cast<std::int64_t>(data.size());
      if (bad) first_bad = i;
    }
    string_keys<Offset> keys{data.data(), data.size(), offsets.data(), n, nullptr};
    const std::string message = message_of([&] { check_batch("count", erase(keys)); });
    if (first_bad > n) {
      EXPECT_EQ(message, "(no error)") << "trial " << trial;
    } else {
      const std::int64_t previous = first_bad == 0 ? 0 : offsets[first_bad - 1];
      EXPECT_EQ(message, "count: " + bad_offset_message(first_bad, offsets[first_bad], previous,
                                                        data.size()))
          << "trial " << trial;
    }
  }
}

TEST(CheckBatch, HostStringOffsetsAreCheckedAndTheFirstBadOneIsNamedInt32) {
  check_first_bad_offset_is_reported<std::int32_t>();
}
TEST(CheckBatch, HostStringOffsetsAreCheckedAndTheFirstBadOneIsNamedInt64) {
  check_first_bad_offset_is_reported<std::int64_t>();
}

// ---------------------------------------------------------------------------
// check_batch and check_results
// ---------------------------------------------------------------------------

TEST(CheckBatch, NullPointersAreNamedWithTheOperation) {
  const std::uint64_t* no_keys = nullptr;
  EXPECT_EQ(message_of([&] { check_batch("add", erase(no_keys, 5)); }), "add: keys is null but n = 5");
  string_keys<std::int32_t> no_offsets{"ab", 2, nullptr, 2, nullptr};
  EXPECT_EQ(message_of([&] { check_batch("contains", erase(no_offsets)); }),
            "contains: string keys: offsets is null but count = 2");
  const std::int32_t offsets[] = {0, 1, 3};
  string_keys<std::int32_t> no_data{nullptr, 3, offsets, 2, nullptr};
  EXPECT_EQ(message_of([&] { check_batch("add_new", erase(no_data)); }),
            "add_new: string keys: data is null but data_bytes = 3");
}

TEST(CheckBatch, EmptyBatchesAndEmptyStringsNeedNoPointers) {
  const std::uint64_t* no_keys = nullptr;
  EXPECT_NO_THROW(check_batch("add", erase(no_keys, 0)));
  EXPECT_NO_THROW(check_batch("add", erase(string_keys<std::int64_t>{})));
  const std::int32_t zeros[] = {0, 0, 0};
  string_keys<std::int32_t> blanks{nullptr, 0, zeros, 2, nullptr};  // two empty strings
  EXPECT_NO_THROW(check_batch("add", erase(blanks)));
}

TEST(CheckBatch, FillsInTheMemorySpaceOfHostBatches) {
  const std::vector<std::uint64_t> keys = gbf::test::random_keys(10, 1);
  key_batch batch = erase(keys.data(), keys.size());
  batch.space = memory_space::device;  // whatever the caller's value, check_batch decides
  const key_batch checked = check_batch("add", batch);
  EXPECT_EQ(checked.space, memory_space::host);
  EXPECT_EQ(checked.data, keys.data());
  EXPECT_EQ(checked.count, keys.size());
  EXPECT_EQ(locate(keys.data()), memory_space::host);
  int on_stack = 0;
  EXPECT_EQ(locate(&on_stack), memory_space::host);
}

TEST(CheckResults, ResultsMustBeNonNullUnlessTheBatchIsEmpty) {
  const std::uint64_t keys[2] = {1, 2};
  const key_batch batch = check_batch("contains", erase(keys, 2));
  EXPECT_EQ(message_of([&] { check_results("contains", batch, nullptr); }),
            "contains: result array is null");
  bool results[2];
  EXPECT_NO_THROW(check_results("contains", batch, results));
  EXPECT_NO_THROW(check_results("contains", check_batch("contains", erase(keys, 0)), nullptr));
}

// ---------------------------------------------------------------------------
// Reading host batches
// ---------------------------------------------------------------------------

TEST(HostBatch, OffsetAtReadsEitherWidthAsInt64) {
  const std::int32_t o32[] = {0, 7, 2147483647};
  const std::int64_t o64[] = {0, std::int64_t{1} << 40};
  key_batch a = erase(string_keys<std::int32_t>{"", 0, o32, 2, nullptr});
  key_batch b = erase(string_keys<std::int64_t>{"", 0, o64, 1, nullptr});
  EXPECT_EQ(offset_at(a, 1), 7);
  EXPECT_EQ(offset_at(a, 2), 2147483647);
  EXPECT_EQ(offset_at(b, 1), std::int64_t{1} << 40);
}

TEST(HostBatch, CountValidAndKeysToCountSkipNullsFromTheFirstBit) {
  const std::vector<std::uint8_t> bits = random_validity(100, 2);
  const std::vector<std::uint64_t> keys = gbf::test::random_keys(90, 3);
  for (std::size_t first_bit : {0u, 3u, 9u}) {
    key_batch batch = check_batch("add", erase(keys.data(), keys.size(), bits.data()));
    batch.validity_bit = first_bit;
    std::uint64_t expected = 0;
    for (std::size_t i = 0; i < keys.size(); ++i)
      expected += (bits[(first_bit + i) / 8] >> ((first_bit + i) % 8)) & 1;
    EXPECT_EQ(count_valid(batch), expected) << "first_bit " << first_bit;
    EXPECT_EQ(keys_to_count(batch), expected) << "first_bit " << first_bit;
  }
  const key_batch no_bitmap = check_batch("add", erase(keys.data(), keys.size()));
  EXPECT_EQ(count_valid(no_bitmap), keys.size());
  EXPECT_EQ(keys_to_count(no_bitmap), keys.size());
}

TEST(HostBatch, AHostCopyOfAHostBatchIsTheBatchItself) {
  const char bytes[] = "abcdef";
  const std::int32_t offsets[] = {0, 2, 6};
  const std::uint8_t validity = 0x3;
  const key_batch batch =
      check_batch("verify_contains", erase(string_keys<std::int32_t>{bytes, 6, offsets, 2, &validity}));
  const host_copy copy(batch);
  EXPECT_EQ(copy.batch.data, batch.data);
  EXPECT_EQ(copy.batch.offsets, batch.offsets);
  EXPECT_EQ(copy.batch.validity, batch.validity);
  EXPECT_EQ(copy.batch.space, memory_space::host);
}

TEST(HostBatch, AnswersOnHostCopiesHostAnswersAsBytes) {
  const bool answers[4] = {true, false, false, true};
  EXPECT_EQ(answers_on_host(answers, 4, memory_space::host),
            (std::vector<unsigned char>{1, 0, 0, 1}));
  EXPECT_TRUE(answers_on_host(nullptr, 0, memory_space::device).empty());
}

}  // namespace
}  // namespace gbf::detail
