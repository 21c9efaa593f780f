// The version-2 container every non-plain filter kind is saved in: a round
// trip, and each check a corrupt or foreign file must fail with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "host/io/atomic_file.hpp"
#include "host/io/container.hpp"

namespace gbf::detail {
namespace {

using bytes = std::vector<std::uint8_t>;

bytes make_file(filter_kind kind, const std::vector<std::uint32_t>& words,
                std::uint32_t revision = 1) {
  field_writer fields;
  fields.u32(7);
  fields.u64(0x0123456789abcdefULL);
  fields.f64(0.25);
  vector_sink out(0);
  container_writer writer(out, kind, revision, fields.bytes(), words.size() * 4);
  writer.write_words_from(words.size(), [&words](std::uint64_t first, std::uint64_t count,
                                                  std::uint32_t* slice) {
    std::copy_n(words.begin() + static_cast<std::ptrdiff_t>(first), count, slice);
  });
  writer.finish();
  return out.take();
}

/// The next `n` payload words, gathered from read_words_to's slices, which must
/// arrive in order and tile [0, n).
std::vector<std::uint32_t> read_all(container_reader& reader, std::uint64_t n) {
  std::vector<std::uint32_t> words;
  reader.read_words_to(n, [&words](std::uint64_t first, std::uint64_t count, const std::uint32_t* slice) {
    EXPECT_EQ(first, words.size()) << "slices out of order";
    EXPECT_GT(count, 0u);
    EXPECT_LE(count, staging_words);
    words.insert(words.end(), slice, slice + count);
  });
  EXPECT_EQ(words.size(), n);
  return words;
}

std::string read_error(const bytes& file, filter_kind expected) {
  try {
    memory_source in("test data", file.data(), file.size());
    container_reader reader(in, expected);
    field_reader fields(reader.fields(), reader.source());
    fields.u32("a");
    fields.u64("b");
    fields.f64("c");
    read_all(reader, reader.payload_bytes() / 4);
    reader.finish();
  } catch (const format_error& e) {
    return e.what();
  }
  return "";
}

void reseal(bytes& file) {
  const std::size_t body = file.size() - 8;
  const std::uint64_t sum = xxh64(file.data(), body, 0);
  put_le64(&file[body], sum);
}

TEST(Container, RoundTripKeepsKindRevisionFieldsAndWords) {
  const std::vector<std::uint32_t> words = {1, 0xffffffffu, 0x80000000u, 42, 0, 7};
  const bytes file = make_file(filter_kind::counting, words, 3);
  ASSERT_EQ(file.size() % 8, 0u);
  memory_source in("test data", file.data(), file.size());
  container_reader reader(in, filter_kind::counting);
  EXPECT_EQ(reader.kind(), filter_kind::counting);
  EXPECT_EQ(reader.revision(), 3u);
  field_reader fields(reader.fields(), reader.source());
  EXPECT_EQ(fields.u32("a"), 7u);
  EXPECT_EQ(fields.u64("b"), 0x0123456789abcdefULL);
  EXPECT_EQ(fields.f64("c"), 0.25);
  EXPECT_EQ(read_all(reader, words.size()), words);
  EXPECT_NO_THROW(reader.finish());
}

TEST(Container, APayloadOfManyStagingStepsRoundTripsInOrderedSlices) {
  // Two reads of one payload: a 4 MiB step and a 256 KiB chunk boundary each
  // fall inside both parts, and the total is a multiple of neither.
  const std::uint64_t n = staging_words + payload_chunk_words + 3;
  std::vector<std::uint32_t> words(n);
  for (std::uint64_t i = 0; i < n; ++i)
    words[i] = static_cast<std::uint32_t>((i * 0x9e3779b97f4a7c15ULL) >> 32);
  const bytes file = make_file(filter_kind::cuckoo, words);
  memory_source in("test data", file.data(), file.size());
  container_reader reader(in, filter_kind::cuckoo);
  field_reader fields(reader.fields(), reader.source());
  fields.u32("a");
  fields.u64("b");
  fields.f64("c");
  const std::uint64_t head = payload_chunk_words + 5;
  std::vector<std::uint32_t> back = read_all(reader, head);
  const std::vector<std::uint32_t> rest = read_all(reader, n - head);
  back.insert(back.end(), rest.begin(), rest.end());
  EXPECT_EQ(back, words);
  EXPECT_NO_THROW(reader.finish());
}

TEST(Container, ReadingMoreWordsThanThePayloadHoldsIsRefusedBeforeAnyIsRead) {
  const bytes file = make_file(filter_kind::counting, {1, 2, 3, 4});
  memory_source in("test data", file.data(), file.size());
  container_reader reader(in, filter_kind::counting);
  bool called = false;
  try {
    reader.read_words_to(5, [&called](std::uint64_t, std::uint64_t, const std::uint32_t*) { called = true; });
    ADD_FAILURE() << "5 words read from a payload of 4";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("more data than its payload of 16 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(called);
}

TEST(Container, EveryFlippedByteIsCaught) {
  const bytes good = make_file(filter_kind::scaling, {5, 6, 7, 8});
  for (std::size_t i = 0; i < good.size(); ++i) {
    bytes bad = good;
    bad[i] ^= 0x40;
    EXPECT_FALSE(read_error(bad, filter_kind::scaling).empty()) << "flipped byte " << i;
  }
}

TEST(Container, AFileOfAnotherKindSaysWhatItHolds) {
  const bytes file = make_file(filter_kind::cuckoo, {1, 2});
  EXPECT_NE(read_error(file, filter_kind::counting)
                .find("holds a cuckoo filter, not a counting Bloom filter"),
            std::string::npos);
}

TEST(Container, APlainFilterLoaderRefusesAnotherKindByName) {
  const bytes file = make_file(filter_kind::counting, {1, 2, 3, 4});
  try {
    gbf::deserialize(file.data(), file.size());
    ADD_FAILURE() << "a counting file loaded as a plain filter";
  } catch (const format_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds a counting Bloom filter, not a plain Bloom filter"),
              std::string::npos)
        << e.what();
  }
}

TEST(Container, APlainFilterFileReadAsAnotherKindSaysItIsPlain) {
  const gbf::filter plain(gbf::layout{}, gbf::options{gbf::backend::cpu});
  const bytes file = gbf::serialize(plain);
  EXPECT_NE(read_error(file, filter_kind::counting)
                .find("holds a plain Bloom filter, not a counting Bloom filter"),
            std::string::npos);
}

TEST(Container, TruncationsTrailingBytesAndBadLengthsAreNamed) {
  const bytes good = make_file(filter_kind::counting, {1, 2, 3, 4});
  bytes short_checksum(good.begin(), good.end() - 3);
  EXPECT_NE(read_error(short_checksum, filter_kind::counting).find("the checksum has 5 of 8 bytes"),
            std::string::npos);
  bytes trailing = good;
  trailing.push_back(0);
  EXPECT_NE(read_error(trailing, filter_kind::counting).find("trailing bytes: 1"), std::string::npos);
  bytes odd_header = good;
  put_le32(&odd_header[12], 36);
  reseal(odd_header);
  EXPECT_NE(read_error(odd_header, filter_kind::counting).find("header length 36"), std::string::npos);
  bytes huge_payload = good;
  put_le64(&huge_payload[24], std::uint64_t{1} << 40);
  reseal(huge_payload);
  EXPECT_NE(read_error(huge_payload, filter_kind::counting).find("truncated file: the payload has"),
            std::string::npos);
  bytes over_limit = good;  // the first length past the 1 MiB limit
  put_le32(&over_limit[12], static_cast<std::uint32_t>(container_max_header_bytes + 8));
  reseal(over_limit);
  EXPECT_NE(read_error(over_limit, filter_kind::counting)
                .find("header length " + std::to_string(container_max_header_bytes + 8) +
                      " is not a multiple of 8 between 32 and " + std::to_string(container_max_header_bytes)),
            std::string::npos)
      << read_error(over_limit, filter_kind::counting);
  for (const std::uint32_t kind : {0u, 5u, 8u}) {  // the kinds are 1 to 4
    bytes unknown = good;
    put_le32(&unknown[16], kind);
    reseal(unknown);
    const std::string why = read_error(unknown, filter_kind::counting);
    EXPECT_NE(why.find("unknown filter kind " + std::to_string(kind)), std::string::npos) << why;
  }
  bytes future = good;
  put_le32(&future[8], 3);
  reseal(future);
  EXPECT_NE(read_error(future, filter_kind::counting)
                .find("unsupported gbf format version 3 (this library reads versions 1 and 2)"),
            std::string::npos);
}

TEST(Container, FieldsPastTheHeaderAreAnErrorNotARead) {
  field_writer fields;
  fields.u32(1);
  vector_sink out(0);
  container_writer writer(out, filter_kind::counting, 1, fields.bytes(), 0);
  writer.finish();
  const bytes file = out.take();
  memory_source in("test data", file.data(), file.size());
  container_reader reader(in, filter_kind::counting);
  field_reader fields_back(reader.fields(), reader.source());
  fields_back.u32("first");
  fields_back.u32("padding");  // the header is padded to 8 bytes: zero
  EXPECT_THROW(fields_back.u64("past the end"), format_error);
}

}  // namespace
}  // namespace gbf::detail
