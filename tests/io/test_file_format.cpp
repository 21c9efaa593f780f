// The gbf native file format and Parquet SBBF import/export (gbf/io.hpp):
// byte-exact headers, Parquet known answers, round trips (on the GPU:
// tests/gpu/test_gpu_io.cpp),
// rejection of every kind of corruption, and atomic saves.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/io/io_support.hpp"
#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/io.hpp"
#include "gbf/layout.hpp"

namespace {

using gbf::test::bytes;
using gbf::test::filled_filter;
using gbf::test::layout_of;
using gbf::test::random_keys;
using gbf::test::read_all;
using gbf::test::temp_dir;
using gbf::test::write_all;

namespace fs = std::filesystem;

// Offsets of the native v1 header (docs/file-format.md).
constexpr std::size_t header_size = 80;
constexpr std::size_t off_version = 8, off_header_length = 12, off_words_per_block = 16,
                      off_bits_per_key = 20, off_hash = 24, off_reserved = 28, off_seed = 32,
                      off_num_blocks = 40, off_capacity = 48, off_fpp = 56, off_keys = 64,
                      off_payload_bytes = 72;

gbf::options cpu_options() { return gbf::test::on_cpu(2); }

std::uint64_t get_le(const bytes& b, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= static_cast<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}
void put_le(bytes& b, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Recomputes the trailing checksum, so a test reaches the check it targets
// rather than the checksum comparison.
void reseal(bytes& file) {
  put_le(file, file.size() - 8, gbf::xxh64(file.data(), file.size() - 8, 0), 8);
}

bytes le_bytes(const std::vector<std::uint32_t>& words) {
  bytes out(words.size() * 4);
  for (std::size_t i = 0; i < words.size(); ++i) put_le(out, 4 * i, words[i], 4);
  return out;
}

// The message of the format_error that deserialize throws, or a note saying why there is none.
std::string load_error(const bytes& file) {
  try {
    gbf::deserialize(file.data(), file.size(), cpu_options());
  } catch (const gbf::format_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a format_error: ") + e.what() + ">";
  }
  return "<accepted>";
}

std::string parquet_error(const bytes& data, bool with_header) {
  try {
    gbf::from_parquet_sbbf(data.data(), data.size(), with_header, cpu_options());
  } catch (const gbf::format_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a format_error: ") + e.what() + ">";
  }
  return "<accepted>";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

// The Parquet SBBF of string keys, built straight from the layout functions
// (independently of the filter's own string path).
std::vector<std::uint32_t> sbbf_of_strings(const std::vector<std::string>& keys,
                                           std::uint64_t num_blocks) {
  std::vector<std::uint32_t> words(num_blocks * 8, 0);
  for (const std::string& key : keys) {
    const std::uint64_t h = gbf::xxh64(key.data(), key.size(), 0);
    std::uint32_t masks[8];
    gbf::block_masks<8>(h, 8, masks);
    const std::uint64_t block = gbf::block_index(h, num_blocks);
    for (int w = 0; w < 8; ++w) words[block * 8 + w] |= masks[w];
  }
  return words;
}

// ---------------------------------------------------------------------------
// Native format: exact bytes and round trips
// ---------------------------------------------------------------------------

TEST(FileFormat, HeaderIsLittleEndianFieldByField) {
  const gbf::layout l = layout_of(4, 5, 3, 0x0102030405060708ULL);
  gbf::filter f(l, cpu_options(), 1234);
  const auto keys = random_keys(7, 1);
  f.add(keys.data(), keys.size());
  const bytes file = gbf::serialize(f, 0.01);

  ASSERT_EQ(file.size(), header_size + 48 + 8);
  EXPECT_EQ(std::string(file.begin(), file.begin() + 8), "GBFBLOOM");
  EXPECT_EQ(get_le(file, off_version, 4), 1u);
  EXPECT_EQ(get_le(file, off_header_length, 4), header_size);
  EXPECT_EQ(get_le(file, off_words_per_block, 4), 4u);
  EXPECT_EQ(get_le(file, off_bits_per_key, 4), 5u);
  EXPECT_EQ(get_le(file, off_hash, 4), 1u);
  EXPECT_EQ(get_le(file, off_reserved, 4), 0u);
  const bytes seed_bytes(file.begin() + off_seed, file.begin() + off_seed + 8);
  EXPECT_EQ(seed_bytes, (bytes{8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(get_le(file, off_num_blocks, 8), 3u);
  EXPECT_EQ(get_le(file, off_capacity, 8), 1234u);
  double fpp;
  const std::uint64_t fpp_bits = get_le(file, off_fpp, 8);
  std::memcpy(&fpp, &fpp_bits, 8);
  EXPECT_EQ(fpp, 0.01);
  EXPECT_EQ(get_le(file, off_keys, 8), 7u);
  EXPECT_EQ(get_le(file, off_payload_bytes, 8), 48u);
  EXPECT_EQ(bytes(file.begin() + header_size, file.end() - 8), le_bytes(f.words()));
  EXPECT_EQ(get_le(file, file.size() - 8, 8), gbf::xxh64(file.data(), file.size() - 8, 0));
}

TEST(FileFormat, RoundTripEveryShapeOnCpu) {
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    for (std::uint32_t k : {w, std::min(32u, 2 * w + 1)}) {
      for (std::uint64_t blocks : {std::uint64_t{1}, std::uint64_t{37}}) {
        SCOPED_TRACE("W=" + std::to_string(w) + " k=" + std::to_string(k) +
                     " blocks=" + std::to_string(blocks));
        const gbf::layout l = layout_of(w, k, blocks, w == 8 ? 0 : 99);
        const gbf::filter f = filled_filter(l);
        const bytes file = gbf::serialize(f, 0.02);
        gbf::file_metadata meta;
        const gbf::filter g = gbf::deserialize(file.data(), file.size(), cpu_options(), &meta);
        EXPECT_EQ(g.layout(), l);
        EXPECT_EQ(meta.l, l);
        EXPECT_EQ(g.capacity(), 1000u);
        EXPECT_EQ(meta.capacity, 1000u);
        EXPECT_EQ(meta.fpp, 0.02);
        EXPECT_EQ(meta.keys_inserted, 300u);
        EXPECT_EQ(g.words(), f.words());
        const auto keys = random_keys(300, w * 131 + k);
        EXPECT_EQ(g.count(keys.data(), keys.size()), keys.size());  // no false negatives
      }
    }
  }
}

TEST(FileFormat, UnknownFppIsStoredAsZeroAndBadFppIsRefused) {
  const gbf::filter f = filled_filter(layout_of(8, 8, 2));
  const bytes file = gbf::serialize(f);
  EXPECT_EQ(get_le(file, off_fpp, 8), 0u);
  EXPECT_THROW(gbf::serialize(f, 1.0), gbf::invalid_argument);
  EXPECT_THROW(gbf::serialize(f, -0.1), gbf::invalid_argument);
  EXPECT_THROW(gbf::serialize(f, std::nan("")), gbf::invalid_argument);
}

TEST(FileFormat, ARefusedFppIsNamedWithItsSignificantDigits) {
  // std::to_string printed every |fpp| under 5e-7 as "0.000000" (or
  // "-0.000000"), which reads as the valid 0.
  const gbf::filter f = filled_filter(layout_of(8, 8, 2));
  try {
    (void)gbf::serialize(f, -1e-9);
    FAIL() << "a negative fpp was recorded";
  } catch (const gbf::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("got -1e-09"), std::string::npos) << e.what();
  }
}

TEST(FileFormat, SaveAndLoadFileRoundTripOnCpu) {
  temp_dir dir;
  const std::string path = dir.file("f.gbf");
  const gbf::filter f = filled_filter(layout_of(8, 8, 64));
  gbf::save(f, path, 0.01);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.gbf"});  // no temporary left behind
  EXPECT_EQ(read_all(path), gbf::serialize(f, 0.01));

  gbf::file_metadata meta;
  const gbf::filter g = gbf::load(path, cpu_options(), &meta);
  EXPECT_EQ(g.words(), f.words());
  EXPECT_EQ(g.layout(), f.layout());
  EXPECT_EQ(g.capacity(), f.capacity());
  EXPECT_EQ(meta.keys_inserted, 300u);
  EXPECT_EQ(g.stats().keys_added, 300u);  // the loaded filter keeps counting from there

  const gbf::file_metadata header = gbf::read_metadata(path);
  EXPECT_EQ(header.l, f.layout());
  EXPECT_EQ(header.capacity, 1000u);
  EXPECT_EQ(header.fpp, 0.01);
  EXPECT_EQ(header.keys_inserted, 300u);
}

TEST(FileFormat, LargeFileStreamsAcrossChunkBoundaries) {
  // 70001 blocks of 32 bytes: ~2.1 MiB, not a multiple of the 256 KiB payload
  // chunk or the 1 MiB read buffer, so the streaming checksum and the reader
  // see every kind of boundary.
  temp_dir dir;
  const std::string path = dir.file("big.gbf");
  gbf::filter f(layout_of(8, 8, 70001), cpu_options());
  const auto keys = random_keys(100000, 5);
  f.add(keys.data(), keys.size());
  gbf::save(f, path);
  const bytes file = read_all(path);
  ASSERT_EQ(file.size(), header_size + 70001u * 32 + 8);
  EXPECT_EQ(get_le(file, file.size() - 8, 8), gbf::xxh64(file.data(), file.size() - 8, 0));
  EXPECT_EQ(gbf::load(path, cpu_options()).words(), f.words());
  EXPECT_EQ(gbf::deserialize(file.data(), file.size(), cpu_options()).words(), f.words());
}

TEST(FileFormat, ReadMetadataReadsTheHeaderButNotThePayload) {
  temp_dir dir;
  const std::string path = dir.file("m.gbf");
  bytes file = gbf::serialize(filled_filter(layout_of(8, 8, 4)), 0.05);
  file[header_size + 3] ^= 0x10;  // payload damage: only a full load notices
  write_all(path, file);
  EXPECT_EQ(gbf::read_metadata(path).l.num_blocks, 4u);
  try {
    gbf::load(path, cpu_options());
    ADD_FAILURE() << "load accepted a damaged payload";
  } catch (const gbf::format_error& e) {
    EXPECT_HAS(e.what(), "checksum mismatch");
    EXPECT_HAS(e.what(), path);
  }
  file.pop_back();  // size problems are header-level: read_metadata sees them
  write_all(path, file);
  try {
    gbf::read_metadata(path);
    ADD_FAILURE() << "read_metadata accepted a truncated file";
  } catch (const gbf::format_error& e) {
    EXPECT_HAS(e.what(), "truncated file: the checksum has 7 of 8 bytes");
  }
}

TEST(FileFormat, LoadErrorsNameThePathAndTheOsError) {
  temp_dir dir;
  const std::string missing = dir.file("missing.gbf");
  try {
    gbf::load(missing);
    ADD_FAILURE() << "loaded a missing file";
  } catch (const gbf::io_error& e) {
    EXPECT_HAS(e.what(), missing);
    EXPECT_HAS(e.what(), std::strerror(ENOENT));
    EXPECT_EQ(e.os_error(), ENOENT);
  }
  try {
    gbf::read_metadata(dir.file(""));
    ADD_FAILURE() << "read a directory";
  } catch (const gbf::io_error& e) {
    EXPECT_HAS(e.what(), "not a regular file");
  }
}

// ---------------------------------------------------------------------------
// Native format: corruption
// ---------------------------------------------------------------------------

// A small valid file: W = 8, 2 blocks, so the payload is 64 bytes at [80, 144)
// and the checksum is at [144, 152).
bytes small_file() { return gbf::serialize(filled_filter(layout_of(8, 8, 2)), 0.01); }

TEST(FileFormatCorruption, FlippedByteInEveryRegionIsRejectedWithItsProblem) {
  const bytes good = small_file();
  ASSERT_EQ(good.size(), 152u);
  ASSERT_EQ(load_error(good), "<accepted>");
  const struct {
    std::size_t offset;
    const char* region;
    const char* expected;
  } cases[] = {
      {0, "magic", "not a gbf filter file"},
      {7, "magic", "not a gbf filter file"},
      {off_version, "version", "unsupported gbf format version 254"},
      {off_header_length, "header length", "header length is 175 bytes"},
      {off_words_per_block, "words_per_block", "impossible layout: words_per_block"},
      {off_bits_per_key, "bits_per_key", "impossible layout: bits_per_key must be at most 32"},
      {off_hash, "hash id", "impossible layout: unknown hash id"},
      {off_reserved, "reserved", "reserved header field is 255"},
      {off_seed, "seed", "checksum mismatch"},
      {off_num_blocks, "num_blocks", "payload size 64 bytes does not match the layout"},
      {off_num_blocks + 7, "num_blocks", "impossible layout: num_blocks must be at most 2^32"},
      {off_capacity, "capacity", "checksum mismatch"},
      {off_fpp, "fpp (mantissa)", "checksum mismatch"},
      {off_fpp + 7, "fpp (sign, exponent)", "target fpp"},
      {off_keys, "keys inserted", "checksum mismatch"},
      {off_payload_bytes, "payload byte count", "payload size 191 bytes does not match"},
      {header_size, "payload (first byte)", "checksum mismatch"},
      {good.size() - 9, "payload (last byte)", "checksum mismatch"},
      {good.size() - 8, "checksum (first byte)", "checksum mismatch"},
      {good.size() - 1, "checksum (last byte)", "checksum mismatch"},
  };
  for (const auto& c : cases) {
    bytes bad = good;
    bad[c.offset] ^= 0xFF;
    const std::string message = load_error(bad);
    EXPECT_HAS(message, c.expected) << " flipping byte " << c.offset << " (" << c.region << ")";
    EXPECT_HAS(message, "gbf data: ");
  }
}

TEST(FileFormatCorruption, TruncationAnywhereNamesTheRegion) {
  const bytes good = small_file();
  for (std::size_t len = 0; len < good.size(); ++len) {
    const bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len));
    const std::string message = load_error(cut);
    const std::string expected =
        len < header_size
            ? "truncated file: the header has " + std::to_string(len) + " of 80 bytes"
        : len < header_size + 64
            ? "truncated file: the payload has " + std::to_string(len - header_size) + " of 64 bytes"
            : "truncated file: the checksum has " + std::to_string(len - header_size - 64) +
                  " of 8 bytes";
    EXPECT_HAS(message, expected) << " at length " << len;
  }
}

TEST(FileFormatCorruption, TruncatedFileOnDiskIsRejected) {
  temp_dir dir;
  const std::string path = dir.file("cut.gbf");
  const bytes good = small_file();
  write_all(path, bytes(good.begin(), good.begin() + 100));
  try {
    gbf::load(path);
    ADD_FAILURE() << "loaded a truncated file";
  } catch (const gbf::format_error& e) {
    EXPECT_HAS(e.what(), "'" + path + "': truncated file: the payload has 20 of 64 bytes");
  }
}

TEST(FileFormatCorruption, WrongVersionIsRejectedEvenWithValidChecksum) {
  for (std::uint32_t version : {0u, 3u, 0xFFFFFFFFu}) {
    bytes bad = small_file();
    put_le(bad, off_version, version, 4);
    reseal(bad);
    EXPECT_HAS(load_error(bad), "unsupported gbf format version " + std::to_string(version) +
                                    " (this library reads versions 1 and 2)");
  }
  // A future version with a longer header is "unsupported", not "truncated".
  bytes future = small_file();
  put_le(future, off_version, 3, 4);
  future.resize(20);
  EXPECT_HAS(load_error(future), "unsupported gbf format version 3");
  // Version 2 is the container of the other filter kinds: its kind field
  // (offset 16, here the old words_per_block 8) is read and, unknown, named.
  bytes container = small_file();
  put_le(container, off_version, 2, 4);
  reseal(container);
  EXPECT_HAS(load_error(container), "unknown filter kind 8");
}

TEST(FileFormatCorruption, ImpossibleLayoutIsRejectedEvenWithValidChecksum) {
  const struct {
    std::size_t offset;
    int width;
    std::uint64_t value;
    const char* expected;
  } cases[] = {
      {off_words_per_block, 4, 3, "words_per_block must be one of 1, 2, 4, 8, 16"},
      {off_bits_per_key, 4, 4, "bits_per_key must be at least words_per_block"},
      {off_bits_per_key, 4, 33, "bits_per_key must be at most 32"},
      {off_num_blocks, 8, 0, "num_blocks must be at least 1"},
      {off_num_blocks, 8, (std::uint64_t{1} << 32) + 1, "num_blocks must be at most 2^32"},
      {off_hash, 4, 2, "unknown hash id"},
  };
  for (const auto& c : cases) {
    bytes bad = small_file();
    put_le(bad, c.offset, c.value, c.width);
    reseal(bad);
    const std::string message = load_error(bad);
    EXPECT_HAS(message, "impossible layout: ");
    EXPECT_HAS(message, c.expected);
  }
}

TEST(FileFormatCorruption, PayloadSizeMustMatchTheLayout) {
  bytes bad = small_file();
  put_le(bad, off_payload_bytes, 68, 8);
  reseal(bad);
  EXPECT_HAS(load_error(bad),
             "payload size 68 bytes does not match the layout (num_blocks * words_per_block * 4 = 64)");
  // Both fields consistent but the data has the old size: truncation/trailing.
  bytes bigger = small_file();
  put_le(bigger, off_num_blocks, 3, 8);
  put_le(bigger, off_payload_bytes, 96, 8);
  reseal(bigger);
  EXPECT_HAS(load_error(bigger), "truncated file: the payload has 72 of 96 bytes");
}

TEST(FileFormatCorruption, TrailingBytesAreRejected) {
  bytes bad = small_file();
  bad.push_back(0);
  EXPECT_HAS(load_error(bad), "trailing bytes: 1 bytes after the checksum");
  bad.insert(bad.end(), 100, 0xAB);
  EXPECT_HAS(load_error(bad), "trailing bytes: 101 bytes after the checksum");
}

TEST(FileFormatCorruption, OtherFilesAreNotGbfFiles) {
  const std::string text = "hello, world: definitely not a filter";
  EXPECT_HAS(load_error(bytes(text.begin(), text.end())), "not a gbf filter file");
  const bytes parquet = gbf::to_parquet_sbbf(filled_filter(layout_of(8, 8, 4)));
  EXPECT_HAS(load_error(parquet), "not a gbf filter file");
  EXPECT_HAS(load_error(bytes{}), "truncated file: the header has 0 of 80 bytes");
  EXPECT_THROW(gbf::deserialize(nullptr, 5), gbf::invalid_argument);
}

TEST(FileFormatCorruption, ReservedFieldAndFppAreChecked) {
  bytes bad = small_file();
  put_le(bad, off_reserved, 1, 4);
  reseal(bad);
  EXPECT_HAS(load_error(bad), "reserved header field is 1, must be 0");
  bytes bad_fpp = small_file();
  const double two = 2.0;
  std::uint64_t bits;
  std::memcpy(&bits, &two, 8);
  put_le(bad_fpp, off_fpp, bits, 8);
  reseal(bad_fpp);
  EXPECT_HAS(load_error(bad_fpp), "target fpp 2 is neither 0 (unknown) nor in (0, 1)");
}

// ---------------------------------------------------------------------------
// Atomic saves
// ---------------------------------------------------------------------------

TEST(FileSave, MissingDirectoryThrowsAndCreatesNothing) {
  temp_dir dir;
  const std::string path = dir.file("no/such/dir/f.gbf");
  try {
    gbf::save(filled_filter(layout_of(8, 8, 1)), path);
    ADD_FAILURE() << "saved into a missing directory";
  } catch (const gbf::io_error& e) {
    EXPECT_HAS(e.what(), path);
    EXPECT_HAS(e.what(), std::strerror(ENOENT));
    EXPECT_EQ(e.os_error(), ENOENT);
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(FileSave, DirectoryThatIsAFileThrowsAndLeavesTheFileAlone) {
  temp_dir dir;
  const std::string blocker = dir.file("plain_file");
  write_all(blocker, bytes{1, 2, 3});
  try {
    gbf::save(filled_filter(layout_of(8, 8, 1)), blocker + "/f.gbf");
    ADD_FAILURE() << "saved below a regular file";
  } catch (const gbf::io_error& e) {
    EXPECT_EQ(e.os_error(), ENOTDIR);
    EXPECT_HAS(e.what(), std::strerror(ENOTDIR));
  }
  EXPECT_EQ(read_all(blocker), (bytes{1, 2, 3}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"plain_file"});
}

TEST(FileSave, FailedRenameLeavesTheTargetUntouchedAndNoTemporary) {
  // The target name is a non-empty directory: the data is written and synced,
  // then rename() fails (EISDIR), which must remove the temporary file.
  temp_dir dir;
  const std::string target = dir.file("target.gbf");
  fs::create_directory(target);
  write_all(target + "/keep", bytes{42});
  EXPECT_THROW(gbf::save(filled_filter(layout_of(8, 8, 8)), target), gbf::io_error);
  EXPECT_TRUE(fs::is_directory(target));
  EXPECT_EQ(read_all(target + "/keep"), bytes{42});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"target.gbf"});
}

TEST(FileSave, FailedWriteLeavesTheOldFileUntouchedAndNoTemporary) {
  // RLIMIT_FSIZE makes write(2) fail with EFBIG part way through the payload
  // (root included), the way a full disk would.
  temp_dir dir;
  const std::string target = dir.file("old.gbf");
  const gbf::filter old_filter = filled_filter(layout_of(8, 8, 2));
  gbf::save(old_filter, target);
  const bytes old_bytes = read_all(target);

  const gbf::filter big = filled_filter(layout_of(8, 8, 4096));  // 128 KiB
  rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit limited = saved;
  limited.rlim_cur = 16384;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  int os_error = 0;
  try {
    gbf::save(big, target);
  } catch (const gbf::io_error& e) {
    message = e.what();
    os_error = e.os_error();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(os_error, EFBIG) << message;
  EXPECT_HAS(message, "cannot write");
  EXPECT_EQ(read_all(target), old_bytes);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"old.gbf"});
}

TEST(FileSave, OverwritesAnExistingFileWhole) {
  temp_dir dir;
  const std::string path = dir.file("f.gbf");
  write_all(path, bytes(5000, 0xEE));
  const gbf::filter f = filled_filter(layout_of(4, 4, 5, 3));
  gbf::save(f, path);
  EXPECT_EQ(read_all(path), gbf::serialize(f));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.gbf"});
}

TEST(FileSave, BadFppIsRefusedBeforeTouchingTheDisk) {
  temp_dir dir;
  EXPECT_THROW(gbf::save(filled_filter(layout_of(8, 8, 1)), dir.file("f.gbf"), 1.5),
               gbf::invalid_argument);
  EXPECT_TRUE(dir.entries().empty());
}

// ---------------------------------------------------------------------------
// Parquet SBBF
// ---------------------------------------------------------------------------

// BloomFilterHeader{numBytes = 32, BLOCK, XXHASH, UNCOMPRESSED} in the Thrift
// compact protocol, as arrow-rs's test_bloom_filter_header_size_assumption has it.
const bytes header_32 = {21, 64, 28, 28, 0, 0, 28, 28, 0, 0, 28, 28, 0, 0, 0};

// The 32-byte SBBF parquet-mr wrote for "a0".."a9".
const bytes a0_to_a9 = gbf::test::parquet_a0_to_a9();

gbf::filter a0_to_a9_filter() {
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("a" + std::to_string(i));
  const std::vector<std::uint32_t> words = sbbf_of_strings(keys, 1);
  return gbf::filter::from_words(layout_of(8, 8, 1), words.data(), cpu_options());
}

TEST(ParquetIo, ThirtyTwoByteFilterExportsArrowsHeaderAndImportsBack) {
  const gbf::filter f = a0_to_a9_filter();
  bytes expected = header_32;
  expected.insert(expected.end(), a0_to_a9.begin(), a0_to_a9.end());
  EXPECT_EQ(gbf::to_parquet_sbbf(f, true), expected);
  EXPECT_EQ(gbf::to_parquet_sbbf(f, false), a0_to_a9);

  const gbf::filter with = gbf::from_parquet_sbbf(expected.data(), expected.size(), true, cpu_options());
  EXPECT_EQ(with.layout(), f.layout());
  EXPECT_EQ(with.words(), f.words());
  const gbf::filter raw = gbf::from_parquet_sbbf(a0_to_a9.data(), a0_to_a9.size(), false, cpu_options());
  EXPECT_EQ(raw.words(), f.words());
}

// apache/parquet-testing data/bloom_filter.xxhash.bin (commit 1a2a751): the
// strings "hello", "parquet", "bloom", "filter" in a 1024-byte SBBF after a
// 16-byte Thrift header. Its 32 set bits, as (byte offset in the bitset, value);
// every other byte is zero.
const bytes xxhash_bin_header = {21, 128, 16, 28, 28, 0, 0, 28, 28, 0, 0, 28, 28, 0, 0, 0};
const std::pair<int, std::uint8_t> xxhash_bin_bits[] = {
    {130, 0x10}, {133, 0x02}, {137, 0x04}, {140, 0x80}, {145, 0x02}, {151, 0x80}, {155, 0x10},
    {159, 0x08}, {162, 0x80}, {167, 0x10}, {168, 0x01}, {175, 0x10}, {176, 0x20}, {182, 0x20},
    {187, 0x40}, {190, 0x08}, {224, 0x04}, {230, 0x40}, {234, 0x40}, {238, 0x08}, {243, 0x04},
    {245, 0x20}, {248, 0x10}, {252, 0x02}, {322, 0x20}, {325, 0x08}, {329, 0x01}, {335, 0x20},
    {338, 0x80}, {343, 0x08}, {345, 0x01}, {349, 0x10}};

bytes xxhash_bin() {
  bytes file = xxhash_bin_header;
  file.resize(16 + 1024, 0);
  for (const auto& [offset, value] : xxhash_bin_bits) file[16 + offset] = value;
  return file;
}

TEST(ParquetIo, ParquetTestingXxhashFileKnownAnswer) {
  const std::vector<std::uint32_t> words =
      sbbf_of_strings({"hello", "parquet", "bloom", "filter"}, 1024 / 32);
  const gbf::filter f = gbf::filter::from_words(layout_of(8, 8, 32), words.data(), cpu_options());
  EXPECT_EQ(gbf::to_parquet_sbbf(f, true), xxhash_bin());

  const bytes upstream = xxhash_bin();
  const gbf::filter g = gbf::from_parquet_sbbf(upstream.data(), upstream.size(), true, cpu_options());
  EXPECT_EQ(g.layout(), layout_of(8, 8, 32));
  EXPECT_EQ(g.words(), words);
}

TEST(ParquetIo, ExportRefusesNonParquetLayoutsNamingEachCondition) {
  const struct {
    gbf::layout l;
    const char* expected;
  } cases[] = {
      {layout_of(16, 16, 1), "words_per_block is 16, Parquet needs 8"},
      {layout_of(8, 9, 1), "bits_per_key is 9, Parquet needs 8"},
      {layout_of(8, 8, 1, 5), "seed is 5, Parquet needs 0"},
      {layout_of(8, 8, 3), "size 96 bytes is not a power of two"},
  };
  for (const auto& c : cases) {
    const gbf::filter f(c.l, cpu_options());
    try {
      gbf::to_parquet_sbbf(f);
      ADD_FAILURE() << "exported " << gbf::to_string(c.l);
    } catch (const gbf::invalid_argument& e) {
      EXPECT_HAS(e.what(), c.expected);
      EXPECT_HAS(e.what(), "cannot export as a Parquet SBBF");
    }
    temp_dir dir;
    EXPECT_THROW(gbf::save_parquet_sbbf(f, dir.file("p.bin")), gbf::invalid_argument);
    EXPECT_TRUE(dir.entries().empty());
  }
  // Several failures are all named; sizes are checked without allocating.
  EXPECT_EQ(gbf::parquet_problem(layout_of(4, 4, 1, 1)),
            "words_per_block is 4, Parquet needs 8; bits_per_key is 4, Parquet needs 8; "
            "seed is 1, Parquet needs 0; size 16 bytes is below Parquet's 32-byte minimum");
  EXPECT_HAS(gbf::parquet_problem(layout_of(8, 8, std::uint64_t{1} << 23)),
             "size 268435456 bytes exceeds Parquet's 128 MiB maximum");
  EXPECT_EQ(gbf::parquet_problem(layout_of(8, 8, std::uint64_t{1} << 22)), "");
  EXPECT_EQ(gbf::parquet_problem(layout_of(8, 8, 1)), "");
}

TEST(ParquetIo, CompatibleLayoutIsThePowerOfTwoAtOrAboveSizeFor) {
  EXPECT_EQ(gbf::parquet_compatible_layout(1, 0.5).size_bytes(), 32u);
  for (const auto& [capacity, fpp] :
       {std::pair<std::uint64_t, double>{1000, 0.01}, {1'000'000, 0.01}, {3'000'000, 0.001}}) {
    const gbf::layout l = gbf::parquet_compatible_layout(capacity, fpp);
    const gbf::layout minimal = gbf::size_for(capacity, fpp);
    EXPECT_EQ(gbf::parquet_problem(l), "");
    EXPECT_GE(l.size_bytes(), minimal.size_bytes());
    EXPECT_LT(l.size_bytes(), 2 * minimal.size_bytes());
    EXPECT_LE(gbf::expected_fpr(l, static_cast<double>(capacity)), fpp);
  }
  try {
    gbf::parquet_compatible_layout(1'000'000'000, 1e-6);
    ADD_FAILURE() << "sized a filter beyond Parquet's maximum";
  } catch (const gbf::invalid_argument& e) {
    EXPECT_HAS(e.what(), "more than Parquet's 128 MiB maximum");
  }
  EXPECT_THROW(gbf::parquet_compatible_layout(0, 0.01), gbf::invalid_argument);
}

TEST(ParquetIo, ReaderSkipsUnknownFieldsInAnyOrder) {
  // Fields 4, 3, 2 in long form (type byte, then the zigzag id), unknown
  // fields of every type before, between and inside, then numBytes last.
  const bytes unknown_then_known = {
      0x0C, 0x10,                          // long form: struct, id 8 (zigzag 16): unknown
      0x15, 0x02, 0x00,                    //   { 1: i32 1 } stop
      0x19, 0x35, 0x02, 0x04, 0x06,        // field 9 list<i32> [1, 2, 3]
      0x1B, 0x01, 0x55, 0x02, 0x04,        // field 10 map<i32,i32> {1: 2}
      0x11,                                // field 11 bool true (value in the type)
      0x13, 0x7F,                          // field 12 byte
      0x17, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F,  // field 13 double 1.0
      0x18, 0x03, 'a', 'b', 'c',           // field 14 binary "abc"
      0x0C, 0x08,                          // long form: struct, id 4: compression
      0x1C, 0x00, 0x00,                    //   UNCOMPRESSED {} }
      0x0C, 0x06,                          // id 3: hash
      0x1C, 0x26, 0x02, 0x00, 0x00,        //   XXHASH { 2: i64 1 (unknown) } }
      0x0C, 0x04,                          // id 2: algorithm
      0x1C, 0x00, 0x00,                    //   BLOCK {} }
      0x05, 0x02, 0x40,                    // long form: i32, id 1: numBytes = 32
      0x00};
  bytes data = unknown_then_known;
  data.insert(data.end(), a0_to_a9.begin(), a0_to_a9.end());
  EXPECT_EQ(parquet_error(data, true), "<accepted>");
  const gbf::filter f = gbf::from_parquet_sbbf(data.data(), data.size(), true, cpu_options());
  EXPECT_EQ(f.words(), a0_to_a9_filter().words());
}

TEST(ParquetIo, MalformedHeadersAreFormatErrorsNamingTheProblem) {
  const auto with_bitset = [](bytes header, std::size_t bitset_bytes = 32) {
    header.resize(header.size() + bitset_bytes, 0);
    return header;
  };
  const struct {
    bytes data;
    const char* expected;
  } cases[] = {
      {{}, "truncated Parquet Thrift header"},
      {{0x15}, "truncated Parquet Thrift header"},
      {{0x15, 0x40, 0x1C}, "truncated Parquet Thrift header"},
      {{0x15, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
       "varint does not fit in 64 bits"},
      {{0x15, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02},
       "varint does not fit in 64 bits"},
      {{0x15, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00}, "i32 varint out of range"},
      {with_bitset({0x15, 0x40, 0x1C, 0x1C, 0, 0, 0x2C, 0x1C, 0, 0, 0}),
       "required field hash (3) is missing"},
      {with_bitset({0x2C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "required field numBytes (1) is missing"},
      {with_bitset({0x15, 0x42, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}, 33),
       "numBytes = 33; it must be a positive multiple of 32"},
      {with_bitset({0x15, 0x3F, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}, 0),
       "numBytes = -32; it must be a positive multiple of 32"},
      {with_bitset({0x16, 0x40, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "numBytes has Thrift type 6, expected i32 (5)"},
      {with_bitset({0x15, 0x40, 0x1C, 0x2C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "unsupported Bloom filter algorithm (union member 2; gbf reads BLOCK = 1)"},
      {with_bitset({0x15, 0x40, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x2C, 0, 0, 0}),
       "unsupported Bloom filter compression (union member 2; gbf reads UNCOMPRESSED = 1)"},
      {with_bitset({0x15, 0x40, 0x1C, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "algorithm union has 0 members set"},
      {with_bitset({0x15, 0x40, 0x1C, 0x15, 0x02, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "algorithm member BLOCK has Thrift type 5, expected struct (12)"},
      {with_bitset({0x15, 0x40, 0x15, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "algorithm has Thrift type 5, expected struct (12)"},
      {with_bitset({0x15, 0x40, 0x1E, 0}), "unknown field type 14"},
      {{0x15, 0x40, 0x59, 0xF5, 0xFF, 0xFF, 0xFF, 0x0F, 0x00}, "truncated Parquet Thrift header"},
      {{0x15, 0x40, 0x59, 0x1E, 0x00}, "unknown element type 14"},
      {{0x15, 0x40, 0x58, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 'x', 0}, "truncated Parquet Thrift header"},
      {with_bitset({0x15, 0x80, 0x01, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}),
       "the Parquet header says numBytes = 64 but 32 bytes of bitset follow it"},
      {with_bitset({0x15, 0x40, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0x1C, 0x1C, 0, 0, 0}, 33),
       "the Parquet header says numBytes = 32 but 33 bytes of bitset follow it"},
  };
  for (const auto& c : cases) {
    const std::string message = parquet_error(c.data, true);
    EXPECT_HAS(message, c.expected);
    EXPECT_HAS(message, "Parquet SBBF data: ");
  }
  // Structs nested past the depth limit are refused, not recursed into without end.
  bytes deep = {0x15, 0x40};
  deep.insert(deep.end(), 200, 0x1C);
  EXPECT_HAS(parquet_error(deep, true), "nesting deeper than 64");
  bytes deep_lists = {0x15, 0x40, 0x59};  // field 6: a list of lists of ...
  for (int i = 0; i < 200; ++i) deep_lists.push_back(0x19);
  EXPECT_HAS(parquet_error(deep_lists, true), "nesting deeper than 64");
}

TEST(ParquetIo, RawBitsetMustBeAPositiveMultipleOf32Bytes) {
  for (std::size_t size : {0u, 1u, 31u, 33u, 100u}) {
    EXPECT_HAS(parquet_error(bytes(size, 0xFF), false),
               "bitset size " + std::to_string(size) +
                   " bytes is not a positive multiple of 32 (the SBBF block size)");
  }
  // Import accepts any number of blocks, power of two or not (gbf can hold it),
  // but such a filter cannot be exported again.
  const gbf::filter f = gbf::from_parquet_sbbf(bytes(96, 1).data(), 96, false, cpu_options());
  EXPECT_EQ(f.layout().num_blocks, 3u);
  EXPECT_THROW(gbf::to_parquet_sbbf(f), gbf::invalid_argument);
}

TEST(ParquetIo, AGbfFileReadAsAnSbbfIsNamedForWhatItIs) {
  // Padded to a multiple of 32 bytes, a gbf file read without a header loaded its
  // container as bits; with one, the Thrift parser named a field it failed on.
  const gbf::filter f = filled_filter(layout_of(8, 8, 64));
  bytes file = gbf::serialize(f, 0.01);
  for (const std::size_t size : {file.size(), (file.size() + 31) / 32 * 32}) {
    file.resize(size, 0);
    for (bool with_header : {true, false})
      EXPECT_HAS(parquet_error(file, with_header), "this is a gbf filter file (it starts with \"GBFBLOOM\")");
  }
  // A bitset is read whole after the bytes looked at first, header or none.
  const bytes bitset = gbf::to_parquet_sbbf(f, false);
  EXPECT_EQ(gbf::from_parquet_sbbf(bitset.data(), bitset.size(), false, cpu_options()).words(), f.words());
  const bytes short_bitset(32, 0x5A);
  EXPECT_EQ(gbf::from_parquet_sbbf(short_bitset.data(), 32, false, cpu_options()).words(),
            std::vector<std::uint32_t>(8, 0x5A5A5A5Au));
}

TEST(ParquetIo, AWholeParquetFileReadAsAnSbbfIsNamedForWhatItIs) {
  // A Parquet data file begins and ends with "PAR1". Without a header one whose
  // size is a multiple of 32 loaded as bits; with one, the Thrift header failed
  // with no word of what the file was.
  bytes file(960, 0x11);
  std::memcpy(file.data(), "PAR1", 4);
  std::memcpy(file.data() + file.size() - 4, "PAR1", 4);
  for (bool with_header : {true, false})
    EXPECT_HAS(parquet_error(file, with_header),
               "this is a Parquet data file (it begins and ends with \"PAR1\"), not a Parquet SBBF");
  // Bits that only begin with the magic are bits (2^-32 odds for a filter's first word).
  file.back() = 'X';
  EXPECT_EQ(gbf::from_parquet_sbbf(file.data(), file.size(), false, cpu_options()).layout().num_blocks, 30u);
}

TEST(ParquetIo, FileRoundTripWithAndWithoutHeader) {
  temp_dir dir;
  // 1 MiB + header crosses the reader's 1 MiB buffer.
  const gbf::filter f = filled_filter(layout_of(8, 8, std::uint64_t{1} << 15));
  for (bool with_header : {true, false}) {
    const std::string path = dir.file(with_header ? "h.sbbf" : "raw.sbbf");
    gbf::save_parquet_sbbf(f, path, with_header);
    EXPECT_EQ(read_all(path), gbf::to_parquet_sbbf(f, with_header));
    const gbf::filter g = gbf::load_parquet_sbbf(path, with_header, cpu_options());
    EXPECT_EQ(g.layout(), f.layout());
    EXPECT_EQ(g.words(), f.words());
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"h.sbbf", "raw.sbbf"}));
  // A gbf native file is not a Parquet bitset with a header.
  const std::string native = dir.file("f.gbf");
  gbf::save(f, native);
  EXPECT_THROW(gbf::load_parquet_sbbf(native, true), gbf::format_error);
}

}  // namespace
