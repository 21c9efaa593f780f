// The chunker that cuts every host batch on its way to the GPU: pinned here,
// without a GPU, by reassembling random batches from their staged chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/chunker.hpp"
#include "host/keys.hpp"

namespace gbf::detail {
namespace {

/// A random Arrow string batch: lengths mostly short, a few long ones, some
/// empty; offsets starting at `base` (a slice), and a random validity bitmap
/// whose key 0 sits at bit `first_bit`.
struct string_batch_fixture {
  std::vector<unsigned char> data;
  std::vector<std::int64_t> offsets;
  std::vector<std::uint8_t> validity;
  key_batch batch;

  string_batch_fixture(std::size_t n, std::int64_t base, std::size_t first_bit,
                       std::size_t long_bytes, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    offsets.push_back(base);
    data.resize(static_cast<std::size_t>(base));
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t kind = rng() % 100;
      const std::size_t len = kind < 5 ? 0 : kind < 97 ? rng() % 40 : long_bytes + rng() % 64;
      for (std::size_t b = 0; b < len; ++b) data.push_back(static_cast<unsigned char>(rng()));
      offsets.push_back(static_cast<std::int64_t>(data.size()));
    }
    validity.resize((first_bit + n + 7) / 8);
    for (auto& byte : validity) byte = static_cast<std::uint8_t>(rng());
    batch.data = data.data();
    batch.data_bytes = data.size();
    batch.offsets = offsets.data();
    batch.count = n;
    batch.kind = key_kind::str64;
    batch.validity = validity.data();
    batch.validity_bit = first_bit;
  }
};

std::string key_bytes_of(const key_batch& keys, std::size_t i) {
  const auto begin = static_cast<std::size_t>(offset_at(keys, i));
  const auto end = static_cast<std::size_t>(offset_at(keys, i + 1));
  return std::string(static_cast<const char*>(keys.data) + begin, end - begin);
}

TEST(Chunker, StagedStringChunksReassembleTheBatchAndRespectTheirLimits) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const std::size_t n = 1 + seed * 37 % 500;
    const std::size_t max_keys = 1 + seed % 64;
    const std::size_t max_bytes = 64 + seed * 13 % 300;
    const string_batch_fixture fixture(n, static_cast<std::int64_t>(seed % 7), seed % 8,
                                       max_bytes + 1, seed);
    const key_batch& keys = fixture.batch;
    chunker chunks(keys, max_keys, max_bytes);
    key_chunk chunk;
    std::size_t next = 0;
    std::vector<std::int64_t> staged_offsets(max_keys + 1);
    std::vector<unsigned char> staged_data;
    std::vector<std::uint8_t> staged_validity(staged_validity_bytes(max_keys));
    while (chunks.next(chunk)) {
      ASSERT_EQ(chunk.first, next) << "seed " << seed;
      ASSERT_GE(chunk.count, 1u);
      ASSERT_LE(chunk.count, max_keys);
      // Over the byte limit only as a single string that is longer on its own.
      if (chunk.bytes > max_bytes) {
        ASSERT_EQ(chunk.count, 1u) << "seed " << seed;
      }
      staged_data.assign(chunk.bytes, 0);
      const key_batch staged =
          stage_chunk(keys, chunk, staged_offsets.data(), staged_data.data(), staged_validity.data());
      ASSERT_EQ(staged.count, chunk.count);
      ASSERT_EQ(offset_at(staged, 0), 0) << "staged offsets start at the chunk's first byte";
      ASSERT_EQ(staged.data_bytes, chunk.bytes);
      for (std::size_t j = 0; j < chunk.count; ++j) {
        EXPECT_EQ(key_bytes_of(staged, j), key_bytes_of(keys, chunk.first + j));
        EXPECT_EQ(key_valid(staged.validity, staged.validity_bit, j),
                  key_valid(keys.validity, keys.validity_bit, chunk.first + j));
      }
      const key_batch view = chunk_view(keys, chunk);
      for (std::size_t j = 0; j < chunk.count; ++j) {
        EXPECT_EQ(key_bytes_of(view, j), key_bytes_of(keys, chunk.first + j));
        EXPECT_EQ(key_valid(view.validity, view.validity_bit, j),
                  key_valid(keys.validity, keys.validity_bit, chunk.first + j));
      }
      next += chunk.count;
    }
    EXPECT_EQ(next, n) << "every key is handed out exactly once";
  }
}

TEST(Chunker, IntegerChunksAreSlicesOfAtMostMaxKeys) {
  std::vector<std::uint32_t> keys(1000);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<std::uint32_t>(i * 7919);
  key_batch batch;
  batch.data = keys.data();
  batch.count = keys.size();
  batch.kind = key_kind::u32;
  for (std::size_t max_keys : {1u, 3u, 64u, 999u, 1000u, 5000u}) {
    chunker chunks(batch, max_keys, 0);
    key_chunk chunk;
    std::size_t next = 0;
    std::vector<std::uint32_t> staged(std::min<std::size_t>(max_keys, keys.size()));
    while (chunks.next(chunk)) {
      ASSERT_EQ(chunk.first, next);
      ASSERT_EQ(chunk.count, std::min(max_keys, keys.size() - next));
      const key_batch out = stage_chunk(batch, chunk, staged.data(), nullptr, nullptr);
      EXPECT_EQ(std::memcmp(out.data, keys.data() + next, chunk.count * 4), 0);
      EXPECT_EQ(out.validity, nullptr);
      next += chunk.count;
    }
    EXPECT_EQ(next, keys.size());
  }
}

TEST(Chunker, AnEmptyBatchHasNoChunks) {
  key_batch batch;
  batch.kind = key_kind::u64;
  chunker chunks(batch, 16, 0);
  key_chunk chunk;
  EXPECT_FALSE(chunks.next(chunk));
}

}  // namespace
}  // namespace gbf::detail
