// gbf::parquet: the footer reader on hand-built files (tests/io/parquet_builder.hpp)
// and row-group pruning against a brute-force reference. Files DuckDB writes are
// checked against DuckDB itself by tests/parquet/check_duckdb.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/parquet.hpp"
#include "tests/io/parquet_builder.hpp"
#include "tests/support.hpp"

namespace {

namespace pq = gbf::parquet;
using namespace gbf::test::parquet;

constexpr int INT32 = 1, INT64 = 2, DOUBLE = 5, BYTE_ARRAY = 6, FLBA = 7;

pq::column_filter_set read(const std::vector<std::uint8_t>& file, const std::string& column,
                           bool allow_missing = false) {
  pq::read_options opts;
  opts.allow_missing = allow_missing;
  return pq::column_filters(file.data(), file.size(), column, opts, "test.parquet");
}

/// The message of the gbf::error `fn` throws (fails the test when it throws none or another type).
template <class Error, class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

std::vector<schema_node> flat_schema() {
  return {group("schema", 3), leaf("a", INT32), leaf("b", INT64), leaf("s", BYTE_ARRAY)};
}

/// Three row groups of the flat schema; row group g's filters hold keys g*100 .. g*100+99
/// (int32 for a, int64 for b, "v<key>" for s).
file_spec flat_file() {
  file_spec spec;
  spec.schema = flat_schema();
  for (int g = 0; g < 3; ++g) {
    std::vector<std::int32_t> a;
    std::vector<std::int64_t> b;
    for (int i = 0; i < 100; ++i) {
      a.push_back(g * 100 + i);
      b.push_back((std::int64_t{g} * 100 + i) << 33);
    }
    row_group_spec rg;
    rg.num_rows = 1000 + g;
    rg.chunks.push_back(chunk(sbbf_with(a, 32)));
    rg.chunks.push_back(chunk(sbbf_with(b, 64)));
    rg.chunks.push_back(chunk(sbbf_with(a, 16)));  // the string column's filter is unused below
    rg.chunks[0].compressed_bytes = 5000 + g;
    spec.row_groups.push_back(rg);
  }
  return spec;
}

// ---------------------------------------------------------------------------
// The footer
// ---------------------------------------------------------------------------

TEST(ParquetFooter, ReadsEveryRowGroupsFilterOfTheColumn) {
  const file_spec spec = flat_file();
  const std::vector<std::uint8_t> file = build(spec);
  const pq::column_filter_set set = read(file, "a");
  EXPECT_EQ(set.file, "test.parquet");
  EXPECT_EQ(set.column.path, "a");
  EXPECT_EQ(set.column.type, pq::physical_type::int32);
  EXPECT_FALSE(set.column.is_unsigned);
  ASSERT_EQ(set.row_groups.size(), 3u);
  for (std::size_t g = 0; g < 3; ++g) {
    const pq::row_group_filter& rg = set.row_groups[g];
    EXPECT_EQ(rg.row_group, g);
    EXPECT_EQ(rg.num_rows, 1000 + g);
    EXPECT_EQ(rg.column_bytes, 5000 + g);
    ASSERT_TRUE(rg.bloom.has_value());
    EXPECT_EQ(rg.bloom->layout().num_blocks, 32u);
    // The bits are the ones written: the file's bitset, word for word.
    EXPECT_EQ(gbf::to_parquet_sbbf(*rg.bloom, true), *spec.row_groups[g].chunks[0].filter);
    std::vector<std::int32_t> keys;
    for (int i = 0; i < 100; ++i) keys.push_back(static_cast<std::int32_t>(g * 100 + i));
    EXPECT_EQ(rg.bloom->count(keys.data(), keys.size()), 100u) << "false negatives";
  }
  EXPECT_EQ(read(file, "b").row_groups[2].bloom->layout().num_blocks, 64u);
}

TEST(ParquetFooter, FilterWithoutItsLengthIsSizedByItsHeader) {
  file_spec spec = flat_file();
  for (row_group_spec& g : spec.row_groups)
    for (chunk_spec& c : g.chunks) c.write_length = false;
  const std::vector<std::uint8_t> file = build(spec);
  const pq::column_filter_set set = read(file, "b");
  for (std::size_t g = 0; g < 3; ++g)
    EXPECT_EQ(gbf::to_parquet_sbbf(*set.row_groups[g].bloom, true), *spec.row_groups[g].chunks[1].filter);
}

TEST(ParquetFooter, NestedSchemaResolvesDottedPathsToTheirLeaf) {
  file_spec spec;
  // schema { user { id INT64; name { first BYTE_ARRAY } }; score INT32 }
  spec.schema = {group("schema", 2), group("user", 2),         leaf("id", INT64),
                 group("name", 1),   leaf("first", BYTE_ARRAY), leaf("score", INT32)};
  row_group_spec rg;
  rg.chunks.push_back(chunk(sbbf_with(std::vector<std::int64_t>{1, 2, 3}, 1)));
  rg.chunks.push_back(chunk(sbbf_with(std::vector<std::int64_t>{}, 2)));
  rg.chunks.push_back(chunk(sbbf_with(std::vector<std::int32_t>{7}, 4)));
  spec.row_groups = {rg, rg};
  const std::vector<std::uint8_t> file = build(spec);
  EXPECT_EQ(read(file, "user.id").row_groups[1].bloom->layout().num_blocks, 1u);
  EXPECT_EQ(read(file, "user.name.first").row_groups[0].bloom->layout().num_blocks, 2u);
  EXPECT_EQ(read(file, "user.name.first").column.type, pq::physical_type::byte_array);
  EXPECT_EQ(read(file, "score").row_groups[0].bloom->layout().num_blocks, 4u);
  // A group is no column, nor is a leaf's bare name below the top level.
  for (const char* bad : {"user", "id", "user.name", "schema.score", ""}) {
    const std::string message = error_of<gbf::invalid_argument>([&] { read(file, bad); });
    EXPECT_CONTAINS(message, std::string("no column '") + bad + "'");
    EXPECT_CONTAINS(message, "the columns are: user.id (INT64), user.name.first (BYTE_ARRAY), score (INT32)");
  }
}

TEST(ParquetFooter, UnsignedAnnotationsAreRead) {
  file_spec spec;
  spec.schema = {group("schema", 4), leaf("plain", INT32), leaf("converted", INT32, 13 /* UINT_32 */),
                 leaf("logical", INT64), leaf("signed_logical", INT64)};
  spec.schema[3].logical_int_signed = false;
  spec.schema[4].logical_int_signed = true;
  row_group_spec rg;
  for (int c = 0; c < 4; ++c) rg.chunks.push_back(chunk(sbbf_with(std::vector<std::int64_t>{}, 1)));
  spec.row_groups = {rg};
  const std::vector<std::uint8_t> file = build(spec);
  EXPECT_FALSE(read(file, "plain").column.is_unsigned);
  EXPECT_TRUE(read(file, "converted").column.is_unsigned);
  EXPECT_TRUE(read(file, "logical").column.is_unsigned);
  EXPECT_FALSE(read(file, "signed_logical").column.is_unsigned);
}

TEST(ParquetFooter, MissingFiltersNameTheRowGroupsOrAreKeptOnRequest) {
  file_spec spec = flat_file();
  spec.row_groups[1].chunks[0].filter.reset();
  std::vector<std::uint8_t> file = build(spec);
  std::string message = error_of<gbf::invalid_argument>([&] { read(file, "a"); });
  EXPECT_CONTAINS(message, "'test.parquet': column 'a' has no Bloom filter in 1 of its 3 row groups (1)");
  const pq::column_filter_set kept = read(file, "a", /*allow_missing=*/true);
  ASSERT_EQ(kept.row_groups.size(), 3u);
  EXPECT_TRUE(kept.row_groups[0].bloom.has_value());
  EXPECT_FALSE(kept.row_groups[1].bloom.has_value());
  EXPECT_EQ(kept.row_groups[1].num_rows, 1001u);
  EXPECT_TRUE(read(file, "b").row_groups[1].bloom.has_value());  // other columns unaffected

  for (row_group_spec& g : spec.row_groups) g.chunks[0].filter.reset();
  file = build(spec);
  message = error_of<gbf::invalid_argument>([&] { read(file, "a"); });
  EXPECT_CONTAINS(message, "has no Bloom filter in any of its 3 row groups");
}

TEST(ParquetFooter, TypesGbfCannotHashAreRefused) {
  file_spec spec;
  spec.schema = {group("schema", 2), leaf("x", DOUBLE), leaf("id", FLBA, -1, 16)};
  row_group_spec rg;
  rg.chunks = {chunk(sbbf_with(std::vector<std::int64_t>{}, 1)), chunk(sbbf_with(std::vector<std::int64_t>{}, 1))};
  spec.row_groups = {rg};
  const std::vector<std::uint8_t> file = build(spec);
  EXPECT_CONTAINS(error_of<gbf::invalid_argument>([&] { read(file, "x"); }),
                  "column 'x' is DOUBLE; gbf hashes INT32, INT64, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY");
  const pq::column_filter_set id = read(file, "id");
  EXPECT_EQ(id.column.type, pq::physical_type::fixed_len_byte_array);
  EXPECT_EQ(id.column.type_length, 16u);
}

TEST(ParquetFooter, EncryptedFilesAreRefused) {
  file_spec spec = flat_file();
  std::vector<std::uint8_t> file = build(spec);
  // Encrypted footer: the file ends (and starts) with "PARE".
  std::vector<std::uint8_t> pare = file;
  for (std::size_t at : {std::size_t{0}, pare.size() - 4}) pare[at + 3] = 'E';
  EXPECT_CONTAINS(error_of<gbf::format_error>([&] { read(pare, "a"); }),
                  "'test.parquet': encrypted Parquet file (encrypted footer, magic \"PARE\")");
  // Plaintext footer with an encryption algorithm.
  spec.encryption_algorithm = true;
  file = build(spec);
  EXPECT_CONTAINS(error_of<gbf::format_error>([&] { read(file, "a"); }),
                  "encrypted Parquet file (plaintext footer");
  // An encrypted column chunk.
  spec.encryption_algorithm = false;
  spec.row_groups[2].chunks[1].crypto_metadata = true;
  file = build(spec);
  EXPECT_CONTAINS(error_of<gbf::format_error>([&] { read(file, "b"); }),
                  "column 'b', row group 2: the column chunk is encrypted");
  EXPECT_NO_THROW(read(file, "a"));
}

TEST(ParquetFooter, MalformedFilesAreFormatErrorsNamingTheProblem) {
  const file_spec spec = flat_file();
  const std::vector<std::uint8_t> good = build(spec);
  const auto message = [](const std::vector<std::uint8_t>& file) {
    return error_of<gbf::format_error>([&] { read(file, "a"); });
  };
  EXPECT_CONTAINS(message({'P', 'A', 'R', '1'}), "not a Parquet file (4 bytes");
  std::vector<std::uint8_t> file = good;
  file.back() = 'X';
  EXPECT_CONTAINS(message(file), "the last 4 bytes are not the magic \"PAR1\"");
  file = good;
  file[0] = 'X';
  EXPECT_CONTAINS(message(file), "the first 4 bytes are not the magic");
  file = good;
  file[file.size() - 5] = 0x7F;  // footer length ~2 GiB in a file of a few KiB
  EXPECT_CONTAINS(message(file), "malformed Parquet footer: the footer length is");
  EXPECT_CONTAINS(message(file), "bytes lie between the magics");

  // Filter locations outside the data, and lengths that disagree with the header.
  file_spec bad = spec;
  bad.row_groups[0].chunks[0].offset_override = 1 << 30;
  EXPECT_CONTAINS(message(build(bad)), "column 'a', row group 0: Bloom filter offset 1073741824 lies outside the data");
  bad = spec;
  bad.row_groups[0].chunks[0].length_override = 1 << 30;
  EXPECT_CONTAINS(message(build(bad)), "runs past the data into the footer");
  bad = spec;
  bad.row_groups[1].chunks[0].length_override = static_cast<std::int32_t>(bad.row_groups[1].chunks[0].filter->size() - 32);
  EXPECT_CONTAINS(message(build(bad)), "column 'a', row group 1: Bloom filter at byte");
  bad = spec;
  bad.row_groups[1].chunks[0].filter->at(0) = 0x16;  // numBytes typed i64
  EXPECT_CONTAINS(message(build(bad)), "numBytes has Thrift type 6, expected i32 (5)");
  // Row groups sharing one filter: a footer of N row groups naming one large
  // filter would have it read N times (memory N times the file).
  bad = spec;
  bad.row_groups[2].chunks[0].offset_override = 4;  // row group 0's filter, right after "PAR1"
  EXPECT_CONTAINS(message(build(bad)), "column 'a', row group 2: Bloom filter at bytes [4, ");
  EXPECT_CONTAINS(message(build(bad)), ") overlaps the column's filter at [4, ");
  bad = spec;
  bad.row_groups[0].chunks[0].type_override = INT64;
  EXPECT_CONTAINS(message(build(bad)), "the chunk's type 2 differs from the schema's 1");
  bad = spec;
  bad.row_groups[2].chunks.pop_back();
  EXPECT_CONTAINS(message(build(bad)), "row group 2 has 2 column chunks but the schema has 3 columns");
  bad = spec;
  bad.schema[0].num_children = 4;
  EXPECT_CONTAINS(message(build(bad)), "the schema ends inside a group");
  bad = spec;
  bad.schema[0].num_children = 2;
  bad.row_groups.clear();
  EXPECT_CONTAINS(message(build(bad)), "1 schema elements follow the root's last child");
}

// Each leaf keeps its ancestors' names, so a small footer nesting long-named
// groups over many leaves once asked for memory quadratic in its size (a crafted
// 100 KB footer: 1.5 GB). Here 20 groups of 20,000-byte names over 100 leaves: a
// 400 KB footer whose leaves would hold 80 MB of names, past the 64 MiB bound.
TEST(ParquetFooter, LeafPathsPastTheirBoundAreAFormatErrorNotQuadraticMemory) {
  constexpr int depth = 20, leaves = 100;
  file_spec spec;
  spec.schema.push_back(group("schema", 1));
  for (int d = 0; d < depth; ++d) spec.schema.push_back(group(std::string(20'000, 'g'), d + 1 < depth ? 1 : leaves));
  for (int i = 0; i < leaves; ++i) spec.schema.push_back(leaf("x" + std::to_string(i), INT32));
  const std::vector<std::uint8_t> file = build(spec);
  const std::string message = error_of<gbf::format_error>([&] { read(file, "x0"); });
  EXPECT_CONTAINS(message, "malformed Parquet footer: the leaf columns' paths");
  EXPECT_CONTAINS(message, "pass 64 MiB by leaf");
  // Under the bound the same nesting reads: 5 leaves. The list of columns in the error
  // shows each 400 KB path by its two ends (it was one 2 MB line).
  spec.schema.resize(1 + depth + 5);
  spec.schema[depth].num_children = 5;
  const std::string no_column = error_of<gbf::invalid_argument>([&] { read(build(spec), "x0"); });
  EXPECT_CONTAINS(no_column, "no column 'x0'");
  EXPECT_CONTAINS(no_column, "ggg...ggg");
  EXPECT_CONTAINS(no_column, "ggg.x4 (INT32)");
  EXPECT_LT(no_column.size(), 1000u);
}

TEST(ParquetFooter, EveryTruncationAndByteFlipIsAnErrorOrAConsistentAnswer) {
  const std::vector<std::uint8_t> good = build(flat_file());
  // Cut the file anywhere: the end magic moves, so every cut is rejected.
  for (std::size_t size = 0; size < good.size(); ++size) {
    const std::vector<std::uint8_t> cut(good.begin(), good.begin() + size);
    EXPECT_THROW(read(cut, "a"), gbf::format_error) << "size " << size;
  }
  // Flip every byte of the footer to a few values: a gbf::error or a result, never a crash.
  std::mt19937_64 rng(7);
  const std::size_t footer_length = good[good.size() - 8] | good[good.size() - 7] << 8;
  for (std::size_t at = good.size() - 8 - footer_length; at < good.size(); ++at) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<std::uint8_t> file = good;
      file[at] = static_cast<std::uint8_t>(rng());
      try {
        const pq::column_filter_set set = read(file, "a", true);
        EXPECT_LE(set.row_groups.size(), 64u);
      } catch (const gbf::error&) {
      }
    }
  }
}

TEST(ParquetFooter, ColumnsListsTheLeaves) {
  const std::vector<std::uint8_t> file = build(flat_file());
  const std::string path = ::testing::TempDir() + "gbf_parquet_columns.parquet";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(file.data(), 1, file.size(), f);
    std::fclose(f);
  }
  const std::vector<pq::column_info> columns = pq::columns(path);
  ASSERT_EQ(columns.size(), 3u);
  EXPECT_EQ(columns[2].path, "s");
  EXPECT_EQ(columns[2].type, pq::physical_type::byte_array);
  EXPECT_EQ(pq::column_filters(path, "b").file, path);
  EXPECT_THROW(pq::columns(path + ".missing"), gbf::io_error);
  std::remove(path.c_str());

  // The file's bytes give the same columns; a cut file is an error naming the buffer.
  const std::vector<pq::column_info> in_memory = pq::columns(file.data(), file.size(), "flat");
  ASSERT_EQ(in_memory.size(), columns.size());
  for (std::size_t i = 0; i < columns.size(); ++i) {
    EXPECT_EQ(in_memory[i].path, columns[i].path);
    EXPECT_EQ(in_memory[i].type, columns[i].type);
    EXPECT_EQ(in_memory[i].is_unsigned, columns[i].is_unsigned);
  }
  try {
    pq::columns(file.data(), file.size() - 3, "flat");
    ADD_FAILURE() << "a cut file was read";
  } catch (const gbf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("'flat'"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------

/// A column's value as Parquet encodes it for the hash, or nothing when the column cannot hold it.
struct encoded {
  bool representable;
  std::vector<unsigned char> bytes;
};

encoded encode_value(const pq::column_info& c, bool negative, std::uint64_t magnitude) {
  // The value is -magnitude or +magnitude; magnitude <= 2^64 - 1.
  const auto le = [](std::uint64_t v, int n) {
    std::vector<unsigned char> out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
    return out;
  };
  if (c.type == pq::physical_type::int32) {
    if (c.is_unsigned) return {(!negative || magnitude == 0) && magnitude <= 0xFFFFFFFFull, le(magnitude, 4)};
    if (negative) return {magnitude <= 0x80000000ull, le(~magnitude + 1, 4)};
    return {magnitude <= 0x7FFFFFFFull, le(magnitude, 4)};
  }
  if (c.is_unsigned) return {!negative || magnitude == 0, le(magnitude, 8)};
  if (negative) return {magnitude <= 0x8000000000000000ull, le(~magnitude + 1, 8)};
  return {magnitude <= 0x7FFFFFFFFFFFFFFFull, le(magnitude, 8)};
}

/// Brute force: may key (its encoded bytes) be in each row group of `sets`?
std::vector<std::vector<std::uint32_t>> brute_force(const std::vector<pq::column_filter_set>& sets,
                                                    const std::vector<encoded>& keys) {
  std::vector<std::vector<std::uint32_t>> answer(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!keys[i].representable) continue;
    std::uint32_t g = 0;
    for (const pq::column_filter_set& set : sets)
      for (const pq::row_group_filter& rg : set.row_groups) {
        bool hit = true;
        if (rg.bloom.has_value()) {
          // The filter's own contains over the bytes, as one string key.
          const std::int64_t offsets[2] = {0, static_cast<std::int64_t>(keys[i].bytes.size())};
          gbf::string_keys<std::int64_t> one{keys[i].bytes.data(), keys[i].bytes.size(), offsets, 1, nullptr};
          bool found = false;
          rg.bloom->contains(one, &found);
          hit = found;
        }
        if (hit) answer[i].push_back(g);
        ++g;
      }
  }
  return answer;
}

/// `files` files of random row groups (some without a filter) of a column of type `c`,
/// each filter holding `per_group` of `values` (encoded bytes).
std::vector<pq::column_filter_set> random_sets(const pq::column_info& c, std::size_t files,
                                               const std::vector<encoded>& values,
                                               std::size_t per_group, std::mt19937_64& rng) {
  std::vector<pq::column_filter_set> sets;
  for (std::size_t f = 0; f < files; ++f) {
    pq::column_filter_set set;
    set.file = "file" + std::to_string(f);
    set.column = c;
    const std::size_t groups = 1 + rng() % 9;
    for (std::size_t g = 0; g < groups; ++g) {
      pq::row_group_filter rg;
      rg.row_group = g;
      rg.num_rows = rng() % 100000;
      rg.column_bytes = rng() % 1000000;
      if (rng() % 8 != 0) {
        gbf::layout l;
        l.num_blocks = std::uint64_t{1} << (rng() % 6);  // 1 .. 32 blocks: plenty of false positives
        gbf::options o;
        o.where = gbf::backend::cpu;
        o.cpu_threads = 1;
        gbf::filter bloom(l, o);
        for (std::size_t k = 0; k < per_group && !values.empty(); ++k) {
          const encoded& v = values[rng() % values.size()];
          if (!v.representable) continue;
          const std::int64_t offsets[2] = {0, static_cast<std::int64_t>(v.bytes.size())};
          bloom.add(gbf::string_keys<std::int64_t>{v.bytes.data(), v.bytes.size(), offsets, 1, nullptr});
        }
        rg.bloom = std::move(bloom);
      }
      set.row_groups.push_back(std::move(rg));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

std::vector<pq::column_filter_set> copy_sets(const std::vector<pq::column_filter_set>& sets) {
  std::vector<pq::column_filter_set> out;
  for (const pq::column_filter_set& s : sets) {
    pq::column_filter_set c;
    c.file = s.file;
    c.column = s.column;
    for (const pq::row_group_filter& rg : s.row_groups) {
      pq::row_group_filter r;
      r.row_group = rg.row_group;
      r.num_rows = rg.num_rows;
      r.column_bytes = rg.column_bytes;
      if (rg.bloom) r.bloom = rg.bloom->copy_to(gbf::backend::cpu);
      c.row_groups.push_back(std::move(r));
    }
    out.push_back(std::move(c));
  }
  return out;
}

void expect_matches(const pq::prune_result& r, const std::vector<std::vector<std::uint32_t>>& want,
                    std::size_t groups, bool per_key, const std::string& what) {
  std::vector<std::uint8_t> may_hold(groups, 0);
  for (const auto& list : want)
    for (std::uint32_t g : list) may_hold[g] = 1;
  EXPECT_EQ(r.may_hold, may_hold) << what;
  if (!per_key) {
    EXPECT_TRUE(r.key_offsets.empty() && r.row_groups.empty()) << what;
    return;
  }
  ASSERT_EQ(r.key_offsets.size(), want.size() + 1) << what;
  EXPECT_EQ(r.key_offsets[0], 0u);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::vector<std::uint32_t> got(r.row_groups.begin() + static_cast<std::ptrdiff_t>(r.key_offsets[i]),
                                         r.row_groups.begin() + static_cast<std::ptrdiff_t>(r.key_offsets[i + 1]));
    if (got != want[i] && ++mismatches <= 5) ADD_FAILURE() << what << ": key " << i;
  }
  EXPECT_EQ(mismatches, 0u) << what;
  EXPECT_EQ(r.key_offsets.back(), r.row_groups.size()) << what;
}

std::vector<gbf::options> cpu_variants() {
  std::vector<gbf::options> out;
  for (unsigned threads : {1u, 3u})
    for (gbf::cpu_simd simd : {gbf::cpu_simd::scalar, gbf::cpu_simd::avx2}) {
      if (simd == gbf::cpu_simd::avx2 && !gbf::cpu_has_avx2()) continue;
      gbf::options o;
      o.where = gbf::backend::cpu;
      o.cpu_threads = threads;
      o.simd = simd;
      out.push_back(o);
    }
  return out;
}

std::string describe(const gbf::options& o) {
  return std::to_string(o.cpu_threads) + " threads, " +
         (o.simd == gbf::cpu_simd::avx2 ? "avx2" : "scalar");
}

/// Integer keys of every width and sign against INT32 / INT64 columns, signed and
/// unsigned: the pruner's answers equal the brute force over Parquet's encoding,
/// whichever threads and kernel.
template <class Key>
void check_integer_keys(const pq::column_info& c, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (Key& k : keys) {
    // Small values (in every column's range, often in the filters), boundaries, and anything.
    switch (rng() % 4) {
      case 0: k = static_cast<Key>(static_cast<std::int64_t>(rng() % 200) - 100); break;
      case 1: {
        const std::int64_t edges[] = {0, -1, 1, INT32_MIN, INT32_MAX, std::int64_t{INT32_MAX} + 1,
                                      std::int64_t{INT32_MIN} - 1, std::int64_t{UINT32_MAX},
                                      std::int64_t{UINT32_MAX} + 1, INT64_MIN, INT64_MAX};
        k = static_cast<Key>(edges[rng() % 11]);
        break;
      }
      default: k = static_cast<Key>(rng());
    }
  }
  std::vector<encoded> values;
  for (Key k : keys) {
    const bool negative = std::is_signed_v<Key> && k < 0;
    const std::uint64_t magnitude = negative ? ~static_cast<std::uint64_t>(static_cast<std::int64_t>(k)) + 1
                                             : static_cast<std::uint64_t>(k);
    values.push_back(encode_value(c, negative, magnitude));
  }
  const std::vector<pq::column_filter_set> sets = random_sets(c, 3, values, 40, rng);
  const auto want = brute_force(sets, values);
  std::size_t groups = 0;
  for (const auto& s : sets) groups += s.row_groups.size();
  const std::string what = std::string(pq::to_string(c.type)) + (c.is_unsigned ? " unsigned" : "") +
                           ", " + (std::is_signed_v<Key> ? "int" : "uint") + std::to_string(8 * sizeof(Key)) +
                           " keys, n = " + std::to_string(n);
  for (const gbf::options& o : cpu_variants()) {
    const pq::pruner index(copy_sets(sets), o);
    EXPECT_EQ(index.where(), gbf::backend::cpu);
    for (bool per_key : {false, true})
      expect_matches(index.prune(keys.data(), keys.size(), per_key), want, groups, per_key,
                     what + ", " + describe(o) + (per_key ? ", per key" : ""));
  }
}

TEST(ParquetPrune, IntegerKeysMatchBruteForceOverParquetsEncoding) {
  for (pq::physical_type type : {pq::physical_type::int32, pq::physical_type::int64})
    for (bool is_unsigned : {false, true}) {
      pq::column_info c;
      c.path = "x";
      c.type = type;
      c.is_unsigned = is_unsigned;
      std::uint64_t seed = 11;
      for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{40000}}) {
        check_integer_keys<std::int32_t>(c, n, ++seed);
        check_integer_keys<std::uint32_t>(c, n, ++seed);
        check_integer_keys<std::int64_t>(c, n, ++seed);
        check_integer_keys<std::uint64_t>(c, n, ++seed);
      }
    }
}

TEST(ParquetPrune, StringKeysMatchBruteForceWithNullsAndFixedLengths) {
  for (bool fixed : {false, true}) {
    pq::column_info c;
    c.path = "s";
    c.type = fixed ? pq::physical_type::fixed_len_byte_array : pq::physical_type::byte_array;
    c.type_length = fixed ? 6 : 0;
    std::mt19937_64 rng(fixed ? 5 : 6);
    const std::size_t n = 37000;
    std::string data;
    std::vector<std::int64_t> offsets{0};
    std::vector<std::uint8_t> validity((n + 7) / 8);
    std::vector<encoded> values;
    for (std::size_t i = 0; i < n; ++i) {
      std::string key = "k" + std::to_string(rng() % 5000);
      if (rng() % 5 == 0) key += "-long-tail-" + std::string(rng() % 300, 'x');
      const bool valid = rng() % 10 != 0;
      if (valid) validity[i / 8] |= static_cast<std::uint8_t>(1u << (i % 8));
      data += key;
      offsets.push_back(static_cast<std::int64_t>(data.size()));
      const bool fits = !fixed || key.size() == c.type_length;
      values.push_back({valid && fits, std::vector<unsigned char>(key.begin(), key.end())});
    }
    const std::vector<pq::column_filter_set> sets = random_sets(c, 2, values, 300, rng);
    const auto want = brute_force(sets, values);
    std::size_t groups = 0;
    for (const auto& s : sets) groups += s.row_groups.size();
    const gbf::string_keys<std::int64_t> keys{data.data(), data.size(), offsets.data(), n, validity.data()};
    for (const gbf::options& o : cpu_variants()) {
      const pq::pruner index(copy_sets(sets), o);
      for (bool per_key : {false, true})
        expect_matches(index.prune(keys, per_key), want, groups, per_key,
                       std::string(fixed ? "FLBA(6)" : "BYTE_ARRAY") + ", " + describe(o));
    }
  }
}

TEST(ParquetPrune, PresentKeysAlwaysFindTheirRowGroups) {
  // Row group g of file f holds keys f*1e6 + g*1000 + [0, 500): no false negatives,
  // and with large filters almost no false positives.
  std::vector<pq::column_filter_set> sets;
  for (int f = 0; f < 3; ++f) {
    pq::column_filter_set set;
    set.file = "f" + std::to_string(f);
    set.column.type = pq::physical_type::int64;
    for (int g = 0; g < 20; ++g) {
      std::vector<std::int64_t> keys;
      for (int i = 0; i < 500; ++i) keys.push_back(f * 1000000 + g * 1000 + i);
      gbf::layout l;
      l.num_blocks = 1024;
      gbf::options o;
      o.where = gbf::backend::cpu;
      gbf::filter bloom(l, o);
      bloom.add(keys.data(), keys.size());
      set.row_groups.push_back({static_cast<std::size_t>(g), 500, 4000, std::move(bloom)});
    }
    sets.push_back(std::move(set));
  }
  gbf::options o;
  o.where = gbf::backend::cpu;
  const pq::pruner index(std::move(sets), o);
  ASSERT_EQ(index.num_row_groups(), 60u);
  EXPECT_EQ(index.row_group(47).file, 2u);
  EXPECT_EQ(index.row_group(47).row_group, 7u);
  EXPECT_THROW(index.row_group(60), gbf::invalid_argument);
  std::vector<std::int64_t> keys;
  for (int f = 0; f < 3; ++f)
    for (int g = 0; g < 20; g += 3) keys.push_back(f * 1000000 + g * 1000 + 17);
  const pq::prune_result r = index.prune(keys.data(), keys.size(), true);
  std::size_t extra = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::uint32_t want = static_cast<std::uint32_t>(keys[i] / 1000000 * 20 + keys[i] % 1000000 / 1000);
    const auto first = r.row_groups.begin() + static_cast<std::ptrdiff_t>(r.key_offsets[i]);
    const auto last = r.row_groups.begin() + static_cast<std::ptrdiff_t>(r.key_offsets[i + 1]);
    EXPECT_NE(std::find(first, last, want), last) << "key " << keys[i] << " lost its row group";
    extra += static_cast<std::size_t>(last - first) - 1;
  }
  EXPECT_LE(extra, 3u);  // 500 keys in 32 KiB: FPR ~ 1e-4 per (key, row group)
  std::size_t kept = 0;
  for (std::uint8_t m : r.may_hold) kept += m;
  EXPECT_GE(kept, keys.size());
  EXPECT_LE(kept, keys.size() + 3);
}

TEST(ParquetPrune, KeysTheColumnCannotHoldFindNothing) {
  pq::column_filter_set set;
  set.file = "f";
  set.column.type = pq::physical_type::int32;
  gbf::layout l;
  l.num_blocks = 64;
  gbf::filter bloom(l, [] { gbf::options o; o.where = gbf::backend::cpu; return o; }());
  const std::vector<std::int32_t> stored = {-1, 5, INT32_MIN, INT32_MAX};
  bloom.add(stored.data(), stored.size());
  set.row_groups.push_back({0, 4, 100, std::move(bloom)});
  std::vector<pq::column_filter_set> sets;
  sets.push_back(std::move(set));
  const pq::pruner index(std::move(sets), [] { gbf::options o; o.where = gbf::backend::cpu; return o; }());
  // Every stored value, as any key type that holds it, is found.
  const std::vector<std::int64_t> as64 = {-1, 5, INT32_MIN, INT32_MAX};
  EXPECT_EQ(index.prune(as64.data(), as64.size(), true).key_offsets.back(), 4u);
  const std::vector<std::uint32_t> as_u32 = {5, static_cast<std::uint32_t>(INT32_MAX)};
  EXPECT_EQ(index.prune(as_u32.data(), as_u32.size(), true).key_offsets.back(), 2u);
  // Values outside INT32 do not alias their low 32 bits.
  const std::vector<std::int64_t> outside = {(std::int64_t{1} << 32) - 1, (std::int64_t{1} << 32) + 5,
                                             std::int64_t{INT32_MIN} - 1, std::int64_t{INT32_MAX} + 1};
  EXPECT_EQ(index.prune(outside.data(), outside.size(), true).key_offsets.back(), 0u);
  const std::vector<std::uint32_t> big = {0xFFFFFFFFu, 0x80000000u};  // not INT32 values (unsigned keys)
  EXPECT_EQ(index.prune(big.data(), big.size(), true).key_offsets.back(), 0u);
  // Null keys find nothing.
  const std::uint8_t none = 0;
  EXPECT_EQ(index.prune(as64.data(), as64.size(), &none, true).key_offsets.back(), 0u);
  EXPECT_EQ(index.prune(as64.data(), 0, true).key_offsets, std::vector<std::uint64_t>{0});
}

TEST(ParquetPrune, WrongKeyKindsAndMixedColumnsAreRefused) {
  const auto set_of = [](pq::physical_type type, bool is_unsigned, const char* file) {
    pq::column_filter_set set;
    set.file = file;
    set.column.path = "c";
    set.column.type = type;
    set.column.is_unsigned = is_unsigned;
    set.row_groups.push_back({0, 1, 1, std::nullopt});
    return set;
  };
  gbf::options cpu;
  cpu.where = gbf::backend::cpu;
  std::vector<pq::column_filter_set> sets;
  sets.push_back(set_of(pq::physical_type::int32, false, "a.parquet"));
  sets.push_back(set_of(pq::physical_type::int64, false, "b.parquet"));
  EXPECT_CONTAINS(error_of<gbf::invalid_argument>([&] { pq::pruner(std::move(sets), cpu); }),
                  "column 'c' is INT64 in 'b.parquet' but 'c' is INT32 in 'a.parquet'");
  sets.clear();
  sets.push_back(set_of(pq::physical_type::int32, false, "a.parquet"));
  const pq::pruner ints(std::move(sets), cpu);
  const char text[] = "abc";
  const std::int32_t offsets[] = {0, 3};
  EXPECT_CONTAINS(error_of<gbf::invalid_argument>([&] {
                    ints.prune(gbf::string_keys<std::int32_t>{text, 3, offsets, 1, nullptr});
                  }),
                  "column 'c' is INT32: probe it with integer keys");
  sets.clear();
  sets.push_back(set_of(pq::physical_type::byte_array, false, "a.parquet"));
  const pq::pruner strings(std::move(sets), cpu);
  const std::uint64_t key = 1;
  EXPECT_CONTAINS(error_of<gbf::invalid_argument>([&] { strings.prune(&key, 1); }),
                  "column 'c' is BYTE_ARRAY: probe it with byte-string keys");
  // A row group without a filter may hold every non-null key.
  const pq::prune_result r = strings.prune(gbf::string_keys<std::int32_t>{text, 3, offsets, 1, nullptr}, true);
  EXPECT_EQ(r.may_hold, std::vector<std::uint8_t>{1});
  EXPECT_EQ(r.row_groups, std::vector<std::uint32_t>{0});
  EXPECT_THROW(pq::pruner({}, cpu), gbf::invalid_argument);
}

TEST(ParquetPrune, GpuAnswersEqualCpuAnswers) {
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  std::mt19937_64 rng(3);
  pq::column_info c;
  c.type = pq::physical_type::int64;
  const std::vector<std::int64_t> keys = gbf::test::random_keys<std::int64_t>(200000, 9);
  std::vector<encoded> values;
  for (std::int64_t k : keys) values.push_back(encode_value(c, k < 0, k < 0 ? ~static_cast<std::uint64_t>(k) + 1 : static_cast<std::uint64_t>(k)));
  const std::vector<pq::column_filter_set> sets = random_sets(c, 4, values, 5000, rng);
  const auto want = brute_force(sets, values);
  std::size_t groups = 0;
  for (const auto& s : sets) groups += s.row_groups.size();
  gbf::options o;
  o.where = gbf::backend::gpu;
  const pq::pruner index(copy_sets(sets), o);
  EXPECT_EQ(index.where(), gbf::backend::gpu);
  for (bool per_key : {false, true})
    expect_matches(index.prune(keys.data(), keys.size(), per_key), want, groups, per_key, "gpu");
  // Strings, long ones included (the warp-cooperative hash).
  c.type = pq::physical_type::byte_array;
  std::string data;
  std::vector<std::int64_t> offsets{0};
  values.clear();
  for (std::size_t i = 0; i < 50000; ++i) {
    std::string key = "k" + std::to_string(rng() % 3000) + std::string(rng() % 4 == 0 ? 1000 : 0, 'y');
    data += key;
    offsets.push_back(static_cast<std::int64_t>(data.size()));
    values.push_back({true, std::vector<unsigned char>(key.begin(), key.end())});
  }
  const std::vector<pq::column_filter_set> string_sets = random_sets(c, 2, values, 2000, rng);
  const auto string_want = brute_force(string_sets, values);
  groups = 0;
  for (const auto& s : string_sets) groups += s.row_groups.size();
  const pq::pruner string_index(copy_sets(string_sets), o);
  const gbf::string_keys<std::int64_t> string_keys{data.data(), data.size(), offsets.data(), 50000, nullptr};
  for (bool per_key : {false, true})
    expect_matches(string_index.prune(string_keys, per_key), string_want, groups, per_key, "gpu strings");
}

}  // namespace
