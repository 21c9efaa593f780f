// A column's Bloom filters out of a Parquet file (gbf/parquet.hpp): the footer
// (host/io/parquet_footer.hpp) says where each row group's filter lies; each is
// read as the Thrift BloomFilterHeader plus bitset that from_parquet_sbbf takes.
#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gbf/io.hpp"
#include "gbf/parquet.hpp"
#include "host/io/parquet_footer.hpp"
#include "host/io/thrift.hpp"

namespace gbf::parquet {

const char* to_string(physical_type t) {
  switch (t) {
    case physical_type::boolean: return "BOOLEAN";
    case physical_type::int32: return "INT32";
    case physical_type::int64: return "INT64";
    case physical_type::int96: return "INT96";
    case physical_type::float32: return "FLOAT";
    case physical_type::float64: return "DOUBLE";
    case physical_type::byte_array: return "BYTE_ARRAY";
    case physical_type::fixed_len_byte_array: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "unknown";
}

namespace {

namespace pq = gbf::detail::parquet;
using pq::random_access;

/// The physical type of a schema leaf, or format_error for a value parquet.thrift does not define.
physical_type physical_of(const random_access& file, const pq::leaf_column& leaf,
                          std::int32_t type) {
  if (type < 0 || type > 7)
    file.fail("malformed Parquet footer: column '" + leaf.dotted + "' has physical type " +
              std::to_string(type) + " (parquet.thrift defines 0..7)");
  return static_cast<physical_type>(type);
}

column_info describe(const random_access& file, const pq::file_metadata& meta,
                     const pq::leaf_column& leaf) {
  const pq::schema_element& e = meta.schema[leaf.schema_index];
  column_info info;
  info.path = leaf.dotted;
  info.type = physical_of(file, leaf, *e.type);
  // ConvertedType UINT_8 .. UINT_64 are 11 .. 14; LogicalType INTEGER is member 10.
  info.is_unsigned = (e.converted_type >= 11 && e.converted_type <= 14) ||
                     (e.logical_type == 10 && !e.logical_int_signed);
  if (info.type == physical_type::fixed_len_byte_array) {
    if (e.type_length <= 0)
      file.fail("malformed Parquet footer: FIXED_LEN_BYTE_ARRAY column '" + leaf.dotted +
                "' has type_length " + std::to_string(e.type_length));
    info.type_length = static_cast<std::uint32_t>(e.type_length);
  }
  return info;
}

std::string column_list(const random_access& file, const pq::file_metadata& meta,
                        const std::vector<pq::leaf_column>& leaves) {
  constexpr std::size_t shown = 40;
  // A path deep in nested groups can run to many kilobytes: its two ends say which it is.
  constexpr std::size_t longest = 120;
  const auto shortened = [](const std::string& path) {
    if (path.size() <= longest) return path;
    return path.substr(0, longest / 2 - 3) + "..." + path.substr(path.size() - longest / 2);
  };
  std::string text;
  for (std::size_t i = 0; i < leaves.size() && i < shown; ++i)
    text += (i == 0 ? "" : ", ") + shortened(leaves[i].dotted) + " (" +
            to_string(describe(file, meta, leaves[i]).type) + ")";
  if (leaves.size() > shown) text += ", ... (" + std::to_string(leaves.size()) + " in all)";
  return text.empty() ? "none" : text;
}

const pq::leaf_column& find_column(const random_access& file, const pq::file_metadata& meta,
                                   const std::vector<pq::leaf_column>& leaves,
                                   const std::string& column) {
  std::vector<const pq::leaf_column*> matches;
  for (const pq::leaf_column& leaf : leaves)
    if (leaf.dotted == column) matches.push_back(&leaf);
  if (matches.size() == 1) return *matches.front();
  if (matches.size() > 1)
    throw invalid_argument(file.name() + ": column '" + column + "' is ambiguous: " +
                           std::to_string(matches.size()) +
                           " leaf columns have that dotted path (a name containing '.')");
  throw invalid_argument(file.name() + ": no column '" + column +
                         "' (name or dotted path of a leaf column); the columns are: " +
                         column_list(file, meta, leaves));
}

/// The problem an error names, without the "<source>: " its message starts with.
std::string problem_of(const format_error& e, const std::string& source) {
  const std::string text = e.what();
  const std::string prefix = source + ": ";
  return text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : text;
}

bool gbf_can_hash(const column_info& c) {
  return c.type == physical_type::int32 || c.type == physical_type::int64 ||
         c.type == physical_type::byte_array || c.type == physical_type::fixed_len_byte_array;
}

std::string row_group_list(const std::vector<std::size_t>& ids) {
  constexpr std::size_t shown = 20;
  std::string text;
  for (std::size_t i = 0; i < ids.size() && i < shown; ++i)
    text += (i == 0 ? "" : ", ") + std::to_string(ids[i]);
  if (ids.size() > shown) text += ", ...";
  return text;
}

/// The Thrift header plus bitset of the filter at `offset`, which must end by
/// `data_end` (the footer's start). Without bloom_filter_length (writers before
/// parquet-format 2.10) the header is parsed to learn the size. `taken` maps
/// the begin of each filter the column has read so far to its end: a column's
/// filters must not overlap, so together they fit in the data, and a footer
/// whose row groups all name one large filter cannot make gbf read it once
/// per group (memory many times the file's size).
std::vector<std::uint8_t> filter_bytes(const random_access& file, std::uint64_t data_end,
                                       const pq::column_meta& m, const std::string& where,
                                       std::map<std::uint64_t, std::uint64_t>& taken) {
  const std::int64_t offset = *m.bloom_filter_offset;
  constexpr std::int64_t data_begin = 4;  // after the leading "PAR1"
  if (offset < data_begin || static_cast<std::uint64_t>(offset) >= data_end)
    file.fail(where + ": Bloom filter offset " + std::to_string(offset) +
              " lies outside the data (bytes 4 to " + std::to_string(data_end) + ")");
  const auto begin = static_cast<std::uint64_t>(offset);
  std::uint64_t length = 0;
  if (m.bloom_filter_length.has_value()) {
    if (*m.bloom_filter_length <= 0)
      file.fail(where + ": Bloom filter length is " + std::to_string(*m.bloom_filter_length));
    length = static_cast<std::uint64_t>(*m.bloom_filter_length);
  } else {
    pq::range_source in(file, begin, data_end);
    const std::uint64_t before = in.remaining();
    try {
      const std::uint64_t num_bytes = detail::thrift::read_bloom_filter_header(in);
      length = before - in.remaining() + num_bytes;
    } catch (const format_error& e) {
      file.fail(where + ": Bloom filter at byte " + std::to_string(begin) + ": " +
                problem_of(e, file.name()));
    }
  }
  if (length > data_end - begin)
    file.fail(where + ": Bloom filter at bytes [" + std::to_string(begin) + ", " +
              std::to_string(begin + length) + ") runs past the data into the footer (byte " +
              std::to_string(data_end) + ")");
  const std::uint64_t end = begin + length;
  auto next = taken.lower_bound(begin);  // the first filter that begins at or after this one
  const bool overlaps_next = next != taken.end() && next->first < end;
  const bool overlaps_previous = next != taken.begin() && std::prev(next)->second > begin;
  if (overlaps_next || overlaps_previous) {
    const auto& other = overlaps_next ? *next : *std::prev(next);
    file.fail(where + ": Bloom filter at bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
              ") overlaps the column's filter at [" + std::to_string(other.first) + ", " +
              std::to_string(other.second) + ") of another row group (each chunk has its own filter)");
  }
  taken.emplace(begin, end);
  return file.read_range(begin, length, "Bloom filter");
}

std::vector<column_info> leaf_column_infos(const random_access& file) {
  const pq::file_metadata meta = pq::read_file_metadata(file);
  std::vector<column_info> out;
  for (const pq::leaf_column& leaf : pq::leaf_columns(meta, file.name()))
    out.push_back(describe(file, meta, leaf));
  return out;
}

column_filter_set read_column_filters(const random_access& file, const std::string& display_name,
                                      const std::string& column, const read_options& opts) {
  pq::footer_location footer;
  const pq::file_metadata meta = pq::read_file_metadata(file, &footer);
  const std::vector<pq::leaf_column> leaves = pq::leaf_columns(meta, file.name());
  const pq::leaf_column& leaf = find_column(file, meta, leaves, column);

  column_filter_set set;
  set.file = display_name;
  set.column = describe(file, meta, leaf);
  if (!gbf_can_hash(set.column))
    throw invalid_argument(file.name() + ": column '" + leaf.dotted + "' is " +
                           to_string(set.column.type) +
                           "; gbf hashes INT32, INT64, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY "
                           "values as Parquet does, not this type");

  std::vector<std::size_t> missing;
  std::map<std::uint64_t, std::uint64_t> filters_read;  // begin -> end, for filter_bytes
  for (std::size_t g = 0; g < meta.row_groups.size(); ++g) {
    const pq::row_group& rg = meta.row_groups[g];
    const std::string where = "column '" + leaf.dotted + "', row group " + std::to_string(g);
    if (rg.columns.size() != leaves.size())
      file.fail("malformed Parquet footer: row group " + std::to_string(g) + " has " +
                std::to_string(rg.columns.size()) + " column chunks but the schema has " +
                std::to_string(leaves.size()) + " columns");
    const pq::column_chunk& chunk = rg.columns[leaf.leaf_index];
    if (chunk.encrypted)
      file.fail(where + ": the column chunk is encrypted; gbf does not read encrypted Parquet files");
    if (!chunk.file_path.empty())
      file.fail(where + ": the column chunk lives in another file ('" + chunk.file_path +
                "'); gbf reads single-file Parquet only");
    if (!chunk.meta.has_value())
      file.fail("malformed Parquet footer: " + where + ": the column chunk has no metadata");
    const pq::column_meta& m = *chunk.meta;
    if (m.type != *meta.schema[leaf.schema_index].type)
      file.fail("malformed Parquet footer: " + where + ": the chunk's type " +
                std::to_string(m.type) + " differs from the schema's " +
                std::to_string(*meta.schema[leaf.schema_index].type));
    if (m.path_in_schema != leaf.path)
      file.fail("malformed Parquet footer: " + where +
                ": the chunk's path_in_schema differs from the schema's path");

    row_group_filter entry;
    entry.row_group = g;
    entry.num_rows = static_cast<std::uint64_t>(rg.num_rows);
    entry.column_bytes = static_cast<std::uint64_t>(m.total_compressed_size);
    if (!m.bloom_filter_offset.has_value()) {
      missing.push_back(g);
    } else {
      const std::vector<std::uint8_t> bytes = filter_bytes(file, footer.offset, m, where, filters_read);
      try {
        entry.bloom = from_parquet_sbbf(bytes.data(), bytes.size(), /*with_header=*/true,
                                        opts.filters);
      } catch (const format_error& e) {
        file.fail(where + ": Bloom filter at byte " + std::to_string(*m.bloom_filter_offset) +
                  ": " + problem_of(e, "Parquet SBBF data"));
      }
    }
    set.row_groups.push_back(std::move(entry));
  }
  if (!missing.empty() && !opts.allow_missing) {
    const bool all = missing.size() == meta.row_groups.size();
    throw invalid_argument(
        file.name() + ": column '" + leaf.dotted + "' has no Bloom filter in " +
        (all ? "any of its " + std::to_string(missing.size()) + " row groups"
             : std::to_string(missing.size()) + " of its " +
                   std::to_string(meta.row_groups.size()) + " row groups (" +
                   row_group_list(missing) + ")") +
        " (writers store filters only where asked or, like DuckDB, for dictionary-encoded "
        "chunks); allowing missing filters (--allow-missing, allow_missing=True in Python, "
        "read_options::allow_missing in C++) keeps such row groups, unpruned");
  }
  return set;
}

}  // namespace

std::vector<column_info> columns(const std::string& path) {
  return leaf_column_infos(pq::random_access_file(path));
}

std::vector<column_info> columns(const std::uint8_t* data, std::size_t size, const std::string& name) {
  detail::check_buffer("parquet::columns", data, size);
  return leaf_column_infos(pq::random_access_memory("'" + name + "'", data, size));
}

column_filter_set column_filters(const std::string& path, const std::string& column,
                                 const read_options& opts) {
  const pq::random_access_file file(path);
  return read_column_filters(file, path, column, opts);
}

column_filter_set column_filters(const std::uint8_t* data, std::size_t size,
                                 const std::string& column, const read_options& opts,
                                 const std::string& name) {
  detail::check_buffer("parquet::column_filters", data, size);
  const pq::random_access_memory file("'" + name + "'", data, size);
  return read_column_filters(file, name, column, opts);
}

}  // namespace gbf::parquet
