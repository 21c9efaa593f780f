// Fuzz target for the loaders: every input goes to deserialize() (gbf native
// format), to from_parquet_sbbf() with and without the Thrift header, and to
// parquet::column_filters() twice: as a whole Parquet file, and as a footer
// (FileMetaData) wrapped into the smallest file around it ("PAR1", the input,
// its length, "PAR1"), so that arbitrary bytes reach the footer parser; and to
// deserialize_scaling_filter() (scaling chains, docs/scaling.md).
// Rejection must be a gbf::error; anything else escaping (another exception, a
// crash, a sanitizer report) is a bug. An input that is accepted must hold
// exactly the bits the filter now has: the words, little-endian, are the
// input's payload bytes.
//
// Built two ways (tests/CMakeLists.txt): with libFuzzer under Clang
// (GBF_LIBFUZZER), and with tests/fuzz_driver.cpp as a bounded run under CTest.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"
#include "gbf/parquet.hpp"
#include "gbf/scaling_filter.hpp"

namespace {

// One CPU thread: inputs are tiny, and the target must not depend on a GPU.
gbf::options fuzz_options() {
  gbf::options opts;
  opts.where = gbf::backend::cpu;
  opts.cpu_threads = 1;
  return opts;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_load: %s\n", what);
    std::abort();
  }
}

// True when the filter's words, little-endian, equal the `size` bytes at `bytes`.
bool words_equal(const gbf::filter& f, const std::uint8_t* bytes, std::size_t size) {
  const std::vector<std::uint32_t> words = f.words();
  if (words.size() * 4 != size) return false;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::uint32_t w = static_cast<std::uint32_t>(bytes[4 * i]) |
                            static_cast<std::uint32_t>(bytes[4 * i + 1]) << 8 |
                            static_cast<std::uint32_t>(bytes[4 * i + 2]) << 16 |
                            static_cast<std::uint32_t>(bytes[4 * i + 3]) << 24;
    if (words[i] != w) return false;
  }
  return true;
}

/// Column names the driver's Parquet seeds (tests/io/parquet_builder.hpp) use.
const char* const parquet_columns[] = {"a", "s", "user.id"};

/// Reads a seed column (which one varies with the input, to keep each input
/// cheap) of a Parquet file in `file`; a rejection must be a gbf::error, an
/// accepted read must be consistent with the input.
void read_parquet_column(const std::vector<std::uint8_t>& file) {
  gbf::parquet::read_options opts;
  opts.allow_missing = true;
  opts.filters = fuzz_options();
  const char* column = parquet_columns[file.size() % 3];
  {
    try {
      const gbf::parquet::column_filter_set set =
          gbf::parquet::column_filters(file.data(), file.size(), column, opts, "fuzz");
      require(set.column.path == column, "Parquet column path differs");
      for (std::size_t g = 0; g < set.row_groups.size(); ++g) {
        const gbf::parquet::row_group_filter& rg = set.row_groups[g];
        require(rg.row_group == g, "Parquet row groups out of order");
        require(!rg.bloom || rg.bloom->layout().size_bytes() < file.size(),
                "a Parquet filter larger than its file");
      }
    } catch (const gbf::error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const gbf::options opts = fuzz_options();
  constexpr std::size_t header_bytes = 80;  // native v1 header
  constexpr std::size_t checksum_bytes = 8;

  try {
    gbf::file_metadata meta;
    const gbf::filter f = gbf::deserialize(data, size, opts, &meta);
    require(size == header_bytes + meta.l.size_bytes() + checksum_bytes, "accepted a wrong size");
    require(f.layout() == meta.l && f.capacity() == meta.capacity, "metadata differs");
    require(words_equal(f, data + header_bytes, meta.l.size_bytes()), "native words differ");
  } catch (const gbf::error&) {
  }

  try {
    const gbf::filter f = gbf::from_parquet_sbbf(data, size, /*with_header=*/true, opts);
    const std::size_t bitset = f.layout().size_bytes();
    require(bitset <= size && words_equal(f, data + (size - bitset), bitset),
            "Parquet words (with header) differ");
  } catch (const gbf::error&) {
  }

  try {
    const gbf::filter f = gbf::from_parquet_sbbf(data, size, /*with_header=*/false, opts);
    require(words_equal(f, data, size), "Parquet words (no header) differ");
  } catch (const gbf::error&) {
  }

  read_parquet_column(std::vector<std::uint8_t>(data, data + size));
  std::vector<std::uint8_t> wrapped = {'P', 'A', 'R', '1'};
  wrapped.insert(wrapped.end(), data, data + size);
  for (int i = 0; i < 4; ++i) wrapped.push_back(static_cast<std::uint8_t>(size >> (8 * i)));
  for (char c : {'P', 'A', 'R', '1'}) wrapped.push_back(static_cast<std::uint8_t>(c));
  read_parquet_column(wrapped);
  try {
    // An accepted chain holds the payload's words, level after level, just
    // before the checksum, and every level follows the growth rule.
    const gbf::scaling_filter f = gbf::deserialize_scaling_filter(data, size, opts);
    std::uint64_t payload = 0;
    for (const gbf::scaling_level& level : f.levels()) {
      require(level.keys <= level.capacity, "a chain level holds more keys than its capacity");
      payload += level.l.size_bytes();
    }
    require(payload + checksum_bytes <= size, "accepted a chain larger than its file");
    std::size_t at = size - checksum_bytes - payload;
    for (std::size_t i = 0; i < f.levels().size(); ++i) {
      const std::vector<std::uint32_t> words = f.level_words(i);
      for (std::size_t w = 0; w < words.size(); ++w, at += 4) {
        const std::uint32_t x = static_cast<std::uint32_t>(data[at]) |
                                static_cast<std::uint32_t>(data[at + 1]) << 8 |
                                static_cast<std::uint32_t>(data[at + 2]) << 16 |
                                static_cast<std::uint32_t>(data[at + 3]) << 24;
        require(words[w] == x, "chain words differ");
      }
    }
  } catch (const gbf::error&) {
  }
  return 0;
}
