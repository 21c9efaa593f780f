// Hand-built Parquet files for the tests and the fuzz driver: a Thrift compact
// writer and a builder that lays out "PAR1", Bloom filters, a FileMetaData
// footer, its length and "PAR1", with every field under the test's control
// (nested schemas, missing filters, missing lengths, encryption markers).
// No data pages: gbf reads only the footer and the filters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gbf/filter.hpp"
#include "gbf/io.hpp"

namespace gbf::test::parquet {

/// Thrift compact protocol, written field by field (parquet.thrift's encoding).
class thrift_writer {
 public:
  enum type : std::uint8_t { bool_true = 1, bool_false = 2, i8 = 3, i32 = 5, i64 = 6, binary = 8,
                             list = 9, structure = 12 };

  void field(int id, std::uint8_t t) {
    const int delta = id - last_;
    if (delta > 0 && delta <= 15) {
      out.push_back(static_cast<std::uint8_t>(delta << 4 | t));
    } else {
      out.push_back(t);
      varint(zigzag(id));
    }
    last_ = id;
  }
  void field_i32(int id, std::int32_t v) { field(id, i32); varint(zigzag(v)); }
  void field_i64(int id, std::int64_t v) { field(id, i64); varint(zigzag(v)); }
  void field_bool(int id, bool v) { field(id, v ? bool_true : bool_false); }
  void field_binary(int id, const std::string& s) { field(id, binary); string_value(s); }
  void begin_struct_field(int id) { field(id, structure); begin_struct(); }
  /// A struct as a list element (no field header).
  void begin_struct() { stack_.push_back(last_); last_ = 0; }
  void end_struct() {
    out.push_back(0);
    last_ = stack_.back();
    stack_.pop_back();
  }
  void begin_list_field(int id, std::uint8_t element, std::size_t size) {
    field(id, list);
    if (size < 15) {
      out.push_back(static_cast<std::uint8_t>(size << 4 | element));
    } else {
      out.push_back(static_cast<std::uint8_t>(0xF0 | element));
      varint(size);
    }
  }
  void string_value(const std::string& s) {
    varint(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }

  std::vector<std::uint8_t> out;

 private:
  static std::uint64_t zigzag(std::int64_t v) {
    return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
  }
  void varint(std::uint64_t v) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<std::uint8_t>(v | 0x80));
    out.push_back(static_cast<std::uint8_t>(v));
  }

  int last_ = 0;
  std::vector<int> stack_;
};

/// A SchemaElement, depth-first as Parquet stores them.
struct schema_node {
  std::string name;
  int type = -1;  ///< Physical type (leaves), -1 for a group.
  int num_children = 0;
  int converted_type = -1;
  int type_length = 0;
  /// LogicalType INTEGER(bitWidth, isSigned) when set.
  std::optional<bool> logical_int_signed;
};

inline schema_node group(std::string name, int children) {
  schema_node n;
  n.name = std::move(name);
  n.num_children = children;
  return n;
}
inline schema_node leaf(std::string name, int type, int converted_type = -1, int type_length = 0) {
  schema_node n;
  n.name = std::move(name);
  n.type = type;
  n.converted_type = converted_type;
  n.type_length = type_length;
  return n;
}

struct chunk_spec {
  /// Header + bitset, as Parquet stores a filter; none: no Bloom filter.
  std::optional<std::vector<std::uint8_t>> filter;
  bool write_length = true;    ///< bloom_filter_length (15); writers before 2.10 omit it.
  bool crypto_metadata = false;
  std::int64_t compressed_bytes = 1000;
  /// Overrides of what the builder computes (to build inconsistent footers).
  std::optional<std::int64_t> offset_override;
  std::optional<std::int32_t> length_override;
  std::optional<int> type_override;
};

/// A column chunk whose Bloom filter is `filter` (header + bitset).
inline chunk_spec chunk(std::vector<std::uint8_t> filter) {
  chunk_spec c;
  c.filter = std::move(filter);
  return c;
}

struct row_group_spec {
  std::int64_t num_rows = 100;
  std::vector<chunk_spec> chunks;  ///< One per leaf column, in schema order.
};

struct file_spec {
  std::vector<schema_node> schema;  ///< schema[0] is the root.
  std::vector<row_group_spec> row_groups;
  bool encryption_algorithm = false;  ///< Plaintext-footer encryption marker (field 8).
};

/// The leaves' paths and types, depth-first.
inline void leaves_of(const std::vector<schema_node>& schema, std::size_t& index,
                      std::vector<std::string>& path,
                      std::vector<std::pair<std::vector<std::string>, int>>& out) {
  if (index >= schema.size()) return;  // a malformed spec: num_children past the end
  const schema_node& node = schema[index++];
  path.push_back(node.name);
  if (node.num_children == 0) out.emplace_back(path, node.type);
  for (int c = 0; c < node.num_children; ++c) leaves_of(schema, index, path, out);
  path.pop_back();
}

inline std::vector<std::pair<std::vector<std::string>, int>> leaves(
    const std::vector<schema_node>& schema) {
  std::vector<std::pair<std::vector<std::string>, int>> out;
  std::vector<std::string> path;
  std::size_t index = 1;  // below the root
  for (int c = 0; c < schema[0].num_children; ++c) leaves_of(schema, index, path, out);
  return out;
}

/// The FileMetaData of `spec`, with the filters at the offsets `offsets` (per row group, per chunk).
inline std::vector<std::uint8_t> footer(const file_spec& spec,
                                        const std::vector<std::vector<std::int64_t>>& offsets) {
  auto columns = leaves(spec.schema);
  for (const row_group_spec& g : spec.row_groups)  // a malformed spec: more chunks than leaves
    while (columns.size() < g.chunks.size()) columns.push_back({{"extra"}, 1});
  thrift_writer w;
  w.field_i32(1, 2);  // version
  w.begin_list_field(2, thrift_writer::structure, spec.schema.size());
  for (const schema_node& n : spec.schema) {
    w.begin_struct();
    if (n.type >= 0) w.field_i32(1, n.type);
    if (n.type_length > 0) w.field_i32(2, n.type_length);
    w.field_i32(3, 1);  // OPTIONAL
    w.field_binary(4, n.name);
    if (n.num_children > 0) w.field_i32(5, n.num_children);
    if (n.converted_type >= 0) w.field_i32(6, n.converted_type);
    if (n.logical_int_signed.has_value()) {
      w.begin_struct_field(10);     // LogicalType
      w.begin_struct_field(10);     // INTEGER: IntType
      w.field(1, thrift_writer::i8);
      w.out.push_back(32);          // bitWidth
      w.field_bool(2, *n.logical_int_signed);
      w.end_struct();
      w.end_struct();
    }
    w.end_struct();
  }
  std::int64_t rows = 0;
  for (const row_group_spec& g : spec.row_groups) rows += g.num_rows;
  w.field_i64(3, rows);
  w.begin_list_field(4, thrift_writer::structure, spec.row_groups.size());
  for (std::size_t g = 0; g < spec.row_groups.size(); ++g) {
    const row_group_spec& rg = spec.row_groups[g];
    w.begin_struct();
    w.begin_list_field(1, thrift_writer::structure, rg.chunks.size());
    for (std::size_t c = 0; c < rg.chunks.size(); ++c) {
      const chunk_spec& chunk = rg.chunks[c];
      w.begin_struct();
      w.field_i64(2, 4);  // file_offset (deprecated)
      w.begin_struct_field(3);  // ColumnMetaData
      w.field_i32(1, chunk.type_override.value_or(columns[c].second));
      w.begin_list_field(2, thrift_writer::i32, 1);
      w.out.push_back(0);  // encodings: PLAIN (zigzag 0)
      w.begin_list_field(3, thrift_writer::binary, columns[c].first.size());
      for (const std::string& part : columns[c].first) w.string_value(part);
      w.field_i32(4, 0);  // codec
      w.field_i64(5, rg.num_rows);
      w.field_i64(6, chunk.compressed_bytes);
      w.field_i64(7, chunk.compressed_bytes);
      w.field_i64(9, 4);  // data_page_offset
      if (chunk.filter.has_value() || chunk.offset_override.has_value()) {
        w.field_i64(14, chunk.offset_override.value_or(offsets[g][c]));
        if (chunk.write_length || chunk.length_override.has_value())
          w.field_i32(15, chunk.length_override.value_or(
                              chunk.filter ? static_cast<std::int32_t>(chunk.filter->size()) : 0));
      }
      w.end_struct();
      if (chunk.crypto_metadata) {
        w.begin_struct_field(8);  // ColumnCryptoMetaData: union, member 1 (ENCRYPTION_WITH_FOOTER_KEY)
        w.begin_struct_field(1);
        w.end_struct();
        w.end_struct();
      }
      w.end_struct();
    }
    w.field_i64(2, rg.num_rows * 8);
    w.field_i64(3, rg.num_rows);
    w.end_struct();
  }
  w.field_binary(6, "gbf test builder");
  if (spec.encryption_algorithm) {
    w.begin_struct_field(8);  // EncryptionAlgorithm: union, member 1 (AES_GCM_V1 {})
    w.begin_struct_field(1);
    w.end_struct();
    w.end_struct();
  }
  w.out.push_back(0);  // end of FileMetaData
  return w.out;
}

/// The whole file: "PAR1", the filters, the footer, its length, "PAR1".
inline std::vector<std::uint8_t> build(const file_spec& spec) {
  std::vector<std::uint8_t> file = {'P', 'A', 'R', '1'};
  std::vector<std::vector<std::int64_t>> offsets;
  for (const row_group_spec& g : spec.row_groups) {
    offsets.emplace_back();
    for (const chunk_spec& c : g.chunks) {
      offsets.back().push_back(static_cast<std::int64_t>(file.size()));
      if (c.filter) file.insert(file.end(), c.filter->begin(), c.filter->end());
    }
  }
  const std::vector<std::uint8_t> meta = footer(spec, offsets);
  file.insert(file.end(), meta.begin(), meta.end());
  const auto length = static_cast<std::uint32_t>(meta.size());
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<std::uint8_t>(length >> (8 * i)));
  for (char c : std::string("PAR1")) file.push_back(static_cast<std::uint8_t>(c));
  return file;
}

/// A Parquet SBBF (header + bitset) of `num_blocks` blocks holding the given keys.
template <class Key>
std::vector<std::uint8_t> sbbf_with(const std::vector<Key>& keys, std::uint64_t num_blocks) {
  layout l;
  l.num_blocks = num_blocks;
  options o;
  o.where = backend::cpu;
  o.cpu_threads = 1;
  filter f(l, o);
  if (!keys.empty()) f.add(keys.data(), keys.size());
  return to_parquet_sbbf(f, true);
}

}  // namespace gbf::test::parquet
