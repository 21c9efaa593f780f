// The scaling chain's file (host/io/scaling_format.cpp): a round trip keeps the
// config, every level and every bit for every layout; every flipped byte,
// truncation and field that breaks the chain's rule is a format_error naming
// the problem; the kind check works both ways; a save is atomic.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gbf/hash.hpp"
#include "gbf/io.hpp"
#include "gbf/scaling_filter.hpp"
#include "tests/io/io_support.hpp"
#include "tests/support.hpp"

namespace gbf {
namespace {

using test::bytes;
using test::message_of;
using test::on_cpu;
using test::random_keys;

scaling_filter grown_chain(std::uint64_t initial, std::size_t keys, const shape& s = {},
                           std::uint32_t expansion = 2, double tightening = 0.5) {
  scaling_policy p;
  p.expansion = expansion;
  p.tightening = tightening;
  scaling_filter f = scaling_filter::create(initial, 0.01, p, on_cpu(2), s);
  const auto k = random_keys(keys, initial + keys);
  f.add(k.data(), k.size());
  return f;
}

void expect_same(const scaling_filter& a, const scaling_filter& b, const std::string& what) {
  EXPECT_EQ(a.config().initial_capacity, b.config().initial_capacity) << what;
  EXPECT_EQ(a.config().fpp, b.config().fpp) << what;
  EXPECT_EQ(a.config().policy.expansion, b.config().policy.expansion) << what;
  EXPECT_EQ(a.config().policy.tightening, b.config().policy.tightening) << what;
  EXPECT_EQ(a.config().policy.non_scaling, b.config().policy.non_scaling) << what;
  ASSERT_EQ(a.levels().size(), b.levels().size()) << what;
  for (std::size_t i = 0; i < a.levels().size(); ++i) {
    EXPECT_EQ(a.levels()[i].l, b.levels()[i].l) << what << " level " << i;
    EXPECT_EQ(a.levels()[i].capacity, b.levels()[i].capacity) << what << " level " << i;
    EXPECT_EQ(a.levels()[i].fpp, b.levels()[i].fpp) << what << " level " << i;
    EXPECT_EQ(a.levels()[i].keys, b.levels()[i].keys) << what << " level " << i;
    EXPECT_TRUE(a.level_words(i) == b.level_words(i)) << what << " level " << i << " bits";
  }
}

TEST(ScalingFile, RoundTripKeepsConfigLevelsAndBitsForEveryLayout) {
  const test::temp_dir dir;
  for (const layout& g : test::all_geometries()) {
    const shape s{g.words_per_block, g.bits_per_key, g.seed};
    const scaling_filter f = grown_chain(200, 3'000, s, 3, 0.7);
    ASSERT_GE(f.levels().size(), 3u);
    const std::string path = dir.file("chain.gbf");
    save(f, path);
    EXPECT_EQ(read_file_kind(path), file_kind::scaling);
    const scaling_filter back = load_scaling_filter(path, on_cpu(1));
    expect_same(f, back, test::short_name(g));
    const bytes image = serialize(f);
    EXPECT_EQ(image, test::read_all(path)) << "save writes serialize's bytes";
    expect_same(f, deserialize_scaling_filter(image.data(), image.size(), on_cpu(1)),
                test::short_name(g) + " from memory");
    // The loaded chain keeps growing exactly as the original would.
    scaling_filter grown = load_scaling_filter(path, on_cpu(2));
    scaling_filter original = f.copy_to(backend::cpu, on_cpu(2));
    const auto more = random_keys(5'000, 99);
    grown.add(more.data(), more.size());
    original.add(more.data(), more.size());
    expect_same(original, grown, test::short_name(g) + " grown after load");
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"chain.gbf"}) << "a temporary file was left";
}

TEST(ScalingFile, NonScalingChainsRoundTrip) {
  scaling_policy p;
  p.non_scaling = true;
  scaling_filter f = scaling_filter::create(1'000, 0.02, p, on_cpu(1));
  const auto k = random_keys(700, 5);
  f.add(k.data(), k.size());
  const bytes image = serialize(f);
  const scaling_filter back = deserialize_scaling_filter(image.data(), image.size(), on_cpu(1));
  expect_same(f, back, "non-scaling");
  EXPECT_EQ(back.count(k.data(), k.size()), k.size());
}

TEST(ScalingFile, EveryFlippedByteIsAFormatError) {
  const scaling_filter f = grown_chain(16, 100, {2, 4, 7});
  const bytes image = serialize(f);
  ASSERT_LT(image.size(), 4'000u) << "keep this exhaustive test small";
  for (std::size_t i = 0; i < image.size(); ++i) {
    bytes bad = image;
    bad[i] ^= 0x20;
    EXPECT_THROW(deserialize_scaling_filter(bad.data(), bad.size(), on_cpu(1)), format_error)
        << "byte " << i << " of " << image.size();
  }
}

TEST(ScalingFile, TruncationsAndTrailingBytesAreFormatErrors) {
  const scaling_filter f = grown_chain(16, 100);
  const bytes image = serialize(f);
  for (std::size_t size : {std::size_t{0}, std::size_t{7}, std::size_t{31}, std::size_t{100},
                           image.size() / 2, image.size() - 8, image.size() - 1}) {
    EXPECT_THROW(deserialize_scaling_filter(image.data(), size, on_cpu(1)), format_error)
        << size << " of " << image.size() << " bytes";
  }
  bytes longer = image;
  longer.push_back(0);
  EXPECT_THROW(deserialize_scaling_filter(longer.data(), longer.size(), on_cpu(1)), format_error);
}

TEST(ScalingFile, KindsAreCheckedBothWays) {
  const test::temp_dir dir;
  const std::string chain_path = dir.file("chain.gbf");
  const std::string plain_path = dir.file("plain.gbf");
  save(grown_chain(100, 500), chain_path);
  save(filter::create(100, 0.01, on_cpu(1)), plain_path);
  EXPECT_EQ(read_file_kind(plain_path), file_kind::bloom);
  const std::string loading_plain = message_of([&] { load_scaling_filter(plain_path, on_cpu(1)); });
  EXPECT_NE(loading_plain.find("plain Bloom"), std::string::npos) << loading_plain;
  const std::string loading_chain = message_of([&] { load(chain_path, on_cpu(1)); });
  EXPECT_NE(loading_chain.find("scaling Bloom"), std::string::npos) << loading_chain;
}

// Rewrites the kind's field at `offset` (from the start of the fields, which
// begin at byte 32) and recomputes the checksum, so that only the field check
// can catch it.
bytes with_field(bytes image, std::size_t offset, const void* value, std::size_t size) {
  std::memcpy(image.data() + 32 + offset, value, size);
  const std::size_t body = image.size() - 8;
  const std::uint64_t sum = xxh64(image.data(), body, 0);
  for (int b = 0; b < 8; ++b) image[body + b] = static_cast<std::uint8_t>(sum >> (8 * b));
  return image;
}

TEST(ScalingFile, FieldsThatBreakTheChainsRuleAreNamed) {
  const scaling_filter f = grown_chain(16, 100);
  ASSERT_GE(f.levels().size(), 3u);
  const bytes image = serialize(f);
  const auto says = [&](const bytes& bad, const char* what) {
    const std::string m =
        message_of([&] { deserialize_scaling_filter(bad.data(), bad.size(), on_cpu(1)); });
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  // Field offsets: capacity 0, fpp 8, expansion 16, tightening 20, flags 28,
  // W 32, k 36, seed 40, hash 48, levels 52, then 32 bytes per level from 56.
  const std::uint32_t expansion = 5;
  says(with_field(image, 16, &expansion, 4), "not a valid chain");
  const std::uint32_t flags = 6;
  says(with_field(image, 28, &flags, 4), "unknown flags");
  const std::uint32_t hash = 9;
  says(with_field(image, 48, &hash, 4), "unknown hash id");
  const std::uint32_t none = 0;
  says(with_field(image, 52, &none, 4), "levels; a chain has 1 to 64");
  const std::uint64_t keys_over = f.levels()[0].capacity + 1;
  says(with_field(image, 56 + 24, &keys_over, 8), "exceed its capacity");
  const std::uint64_t blocks = f.levels()[0].l.num_blocks + 1;
  says(with_field(image, 56, &blocks, 8), "bytes but the payload has");
}

TEST(ScalingFile, FieldBytesAfterTheLastLevelAreNamed) {
  const scaling_filter f = grown_chain(16, 100);
  const bytes image = serialize(f);
  const std::size_t fields_end = 32 + 56 + 32 * f.levels().size();
  std::uint32_t header_length = 0;
  std::memcpy(&header_length, image.data() + 12, 4);
  ASSERT_EQ(header_length, fields_end);
  for (const std::uint32_t extra : {8u, 16u}) {
    // The header grown by `extra` zero bytes after the last level, checksum recomputed.
    bytes bad(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(fields_end));
    bad.insert(bad.end(), extra, 0);
    bad.insert(bad.end(), image.begin() + static_cast<std::ptrdiff_t>(fields_end), image.end() - 8);
    const std::uint32_t grown = header_length + extra;
    std::memcpy(bad.data() + 12, &grown, 4);
    const std::uint64_t sum = xxh64(bad.data(), bad.size(), 0);
    for (int b = 0; b < 8; ++b) bad.push_back(static_cast<std::uint8_t>(sum >> (8 * b)));
    const std::string m = message_of([&] { deserialize_scaling_filter(bad.data(), bad.size(), on_cpu(1)); });
    EXPECT_NE(m.find(std::to_string(extra) + " bytes after the last level's fields"), std::string::npos) << m;
  }
}

TEST(ScalingFile, AMissingFileIsAnIoError) {
  EXPECT_THROW(load_scaling_filter("/nonexistent/dir/chain.gbf", on_cpu(1)), io_error);
}

}  // namespace
}  // namespace gbf
