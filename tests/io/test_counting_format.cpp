// Counting filter files (host/io/counting_format.cpp): round trips keep the
// counters, layout, width and key counts; every corrupt, truncated or foreign
// file fails with a format_error naming the problem; a plain-filter reader
// refuses a counting file by name and the counting reader a plain one.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/io/io_support.hpp"
#include "tests/support.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/io.hpp"

namespace gbf {
namespace {

using test::bytes;

counting_filter filled_counting(const layout& l, std::uint32_t counter_bits) {
  counting_filter f(l, test::on_cpu(1), 1000, counter_bits);
  const auto keys = test::random_keys(300, l.words_per_block * 131 + l.bits_per_key);
  f.add(keys.data(), keys.size());
  f.add(keys.data(), 100);
  f.remove(keys.data() + 200, 50);
  return f;
}

std::string load_error(const bytes& file) {
  try {
    deserialize_counting(file.data(), file.size(), test::on_cpu(1));
  } catch (const format_error& e) {
    return e.what();
  }
  return "(no error)";
}

/// The file with its checksum recomputed, so that a field change reaches the field checks.
void reseal(bytes& file) {
  const std::size_t body = file.size() - 8;
  const std::uint64_t sum = xxh64(file.data(), body, 0);
  for (int i = 0; i < 8; ++i) file[body + i] = static_cast<std::uint8_t>(sum >> (8 * i));
}

void put_u32(bytes& file, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) file[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

TEST(CountingFormat, RoundTripKeepsEverythingOnEveryGeometryAndWidth) {
  test::temp_dir dir;
  for (const layout& g : test::all_geometries()) {
    for (std::uint32_t c : {4u, 8u}) {
      const counting_filter f = filled_counting(test::with_blocks(g, 37), c);
      const bytes data = serialize(f, 0.02);
      counting_file_metadata m;
      const counting_filter g2 = deserialize_counting(data.data(), data.size(), test::on_cpu(1), &m);
      ASSERT_EQ(g2.counters(), f.counters()) << test::name_of(f.layout()) << " c=" << c;
      EXPECT_EQ(g2.layout(), f.layout());
      EXPECT_EQ(g2.counter_bits(), c);
      EXPECT_EQ(m.counter_bits, c);
      EXPECT_EQ(m.capacity, 1000u);
      EXPECT_EQ(m.fpp, 0.02);
      EXPECT_EQ(m.keys_added, 400u);
      EXPECT_EQ(m.keys_removed, f.stats().keys_removed);
      EXPECT_EQ(g2.stats().keys_removed, f.stats().keys_removed);
      EXPECT_EQ(data.size(), 96 + counter_bytes(f.layout(), c) + 8);
      // The same bytes through a file, and the kind and metadata without the payload.
      const std::string path = dir.file("f.gbf");
      save(f, path, 0.02);
      EXPECT_EQ(test::read_all(path), data);
      EXPECT_EQ(read_file_kind(path), file_kind::counting);
      EXPECT_EQ(read_counting_metadata(path).l, f.layout());
      EXPECT_EQ(load_counting(path, test::on_cpu(1)).counters(), f.counters());
    }
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.gbf"}) << "a temporary file was left";
}

TEST(CountingFormat, EveryFlippedByteIsCaught) {
  const bytes good = serialize(filled_counting(test::layout_of(2, 3, 5), 4));
  for (std::size_t i = 0; i < good.size(); ++i) {
    bytes bad = good;
    bad[i] ^= 0x10;
    EXPECT_NE(load_error(bad), "(no error)") << "flipped byte " << i;
  }
}

TEST(CountingFormat, TruncatedAndExtendedFilesAreNamed) {
  const bytes good = serialize(filled_counting(test::layout_of(8, 8, 9), 4));
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, std::size_t{40}, std::size_t{96},
                          good.size() - 9, good.size() - 1}) {
    const bytes bad(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_NE(load_error(bad), "(no error)") << "cut at " << cut;
  }
  bytes longer = good;
  longer.push_back(0);
  EXPECT_NE(load_error(longer), "(no error)");
}

TEST(CountingFormat, ImpossibleFieldsAreNamedEvenWithAValidChecksum) {
  const bytes good = serialize(filled_counting(test::layout_of(8, 8, 9), 4));
  bytes width = good;
  put_u32(width, 44, 5);  // counter_bits
  reseal(width);
  EXPECT_NE(load_error(width).find("counter_bits must be 4 or 8"), std::string::npos)
      << load_error(width);
  bytes geometry = good;
  put_u32(geometry, 32, 3);  // words_per_block
  reseal(geometry);
  EXPECT_NE(load_error(geometry).find("impossible counting filter layout"), std::string::npos)
      << load_error(geometry);
  bytes wider = good;
  put_u32(wider, 44, 8);  // a valid width whose payload would be twice as large
  reseal(wider);
  EXPECT_NE(load_error(wider).find("does not match the layout"), std::string::npos)
      << load_error(wider);
  bytes revision = good;
  put_u32(revision, 20, 2);  // the fields of a revision this library does not know
  reseal(revision);
  EXPECT_NE(load_error(revision).find("counting filter fields of revision 2 (this library reads revision 1)"),
            std::string::npos)
      << load_error(revision);
  bytes fpp = good;
  const std::uint64_t one_and_a_half = 0x3ff8000000000000ull;  // 1.5
  put_u32(fpp, 72, static_cast<std::uint32_t>(one_and_a_half));
  put_u32(fpp, 76, static_cast<std::uint32_t>(one_and_a_half >> 32));
  reseal(fpp);
  EXPECT_NE(load_error(fpp).find("target fpp 1.5 is neither 0 (unknown) nor in (0, 1)"), std::string::npos)
      << load_error(fpp);
}

TEST(CountingFormat, PlainAndCountingReadersRefuseEachOthersFilesByName) {
  const bytes counting = serialize(filled_counting(test::layout_of(8, 8, 9), 4));
  try {
    deserialize(counting.data(), counting.size(), test::on_cpu(1));
    ADD_FAILURE() << "a counting file loaded as a plain filter";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds a counting Bloom filter, not a plain Bloom filter"),
              std::string::npos)
        << e.what();
  }
  const bytes plain = serialize(test::filled_filter(test::layout_of(8, 8, 9)));
  EXPECT_NE(load_error(plain).find("holds a plain Bloom filter, not a counting Bloom filter"),
            std::string::npos)
      << load_error(plain);
}

TEST(CountingFormat, ASaveThatFailsLeavesTheOldFile) {
  test::temp_dir dir;
  const std::string path = dir.file("f.gbf");
  const counting_filter f = filled_counting(test::layout_of(8, 8, 9), 4);
  save(f, path);
  const bytes before = test::read_all(path);
  EXPECT_THROW(save(f, path, 1.5), invalid_argument);
  EXPECT_THROW(save(f, dir.file("missing/f.gbf")), io_error);
  EXPECT_EQ(test::read_all(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.gbf"});
}

}  // namespace
}  // namespace gbf
