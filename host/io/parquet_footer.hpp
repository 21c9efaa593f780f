// A Parquet file's footer: what gbf needs of FileMetaData (the schema, the row
// groups, each column chunk's Bloom filter location), read with the Thrift
// compact reader of host/io/thrift.hpp, and the file's bytes read at offsets.
//
// File layout (parquet-format, "File format"):
//
//   "PAR1" | column chunks, Bloom filters, indexes ... | FileMetaData | u32 LE length | "PAR1"
//
// A file whose footer is encrypted ends (and starts) with "PARE"; a file in
// plaintext-footer encryption mode carries FileMetaData.encryption_algorithm.
// Both are refused: gbf reads no encrypted Parquet.
//
// The structs below hold only the fields gbf uses (field ids from
// parquet.thrift); every other field is skipped, whatever its type. Every
// malformed footer is a format_error "<file>: <problem>": the footer length is
// checked against the file size before the footer is read, and the Thrift
// reader checks every count and length against the footer's bytes, so memory
// stays proportional to the footer's real size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/io/byte_io.hpp"

namespace gbf::detail::parquet {

/// parquet.thrift `Type`: the physical type of a column's values.
enum physical : std::int32_t {
  boolean = 0,
  int32 = 1,
  int64 = 2,
  int96 = 3,
  float32 = 4,
  float64 = 5,
  byte_array = 6,
  fixed_len_byte_array = 7,
};

/// SchemaElement: a node of the schema tree, stored depth-first.
struct schema_element {
  std::string name;                   ///< 4
  std::optional<std::int32_t> type;   ///< 1: physical type (leaves only)
  std::int32_t type_length = 0;       ///< 2: FIXED_LEN_BYTE_ARRAY width in bytes
  std::int32_t repetition = -1;       ///< 3: 0 required, 1 optional, 2 repeated; -1 absent
  std::int32_t num_children = 0;      ///< 5: > 0 for a group
  std::int32_t converted_type = -1;   ///< 6: ConvertedType, -1 absent (11..14: UINT_8..UINT_64)
  std::int32_t logical_type = -1;     ///< 10: the LogicalType union member set, -1 absent
  bool logical_int_signed = true;     ///< LogicalType INTEGER (member 10): IntType.isSigned
};

/// ColumnMetaData: one column chunk's description.
struct column_meta {
  std::int32_t type = -1;                      ///< 1
  std::vector<std::string> path_in_schema;     ///< 3
  std::int64_t total_compressed_size = 0;      ///< 7
  std::optional<std::int64_t> bloom_filter_offset;  ///< 14
  std::optional<std::int32_t> bloom_filter_length;  ///< 15: header and bitset, in bytes
};

/// ColumnChunk.
struct column_chunk {
  std::optional<column_meta> meta;  ///< 3 (absent when the chunk's metadata is encrypted)
  bool encrypted = false;           ///< 8 crypto_metadata or 9 encrypted_column_metadata present
  std::string file_path;            ///< 1: the chunk lives in another file (not supported)
};

/// RowGroup.
struct row_group {
  std::vector<column_chunk> columns;  ///< 1
  std::int64_t total_byte_size = 0;   ///< 2
  std::int64_t num_rows = 0;          ///< 3
};

/// FileMetaData.
struct file_metadata {
  std::int32_t version = 0;                ///< 1
  std::vector<schema_element> schema;      ///< 2
  std::int64_t num_rows = 0;               ///< 3
  std::vector<row_group> row_groups;       ///< 4
  bool encrypted = false;                  ///< 8 encryption_algorithm present (plaintext footer mode)
  std::string created_by;                  ///< 6
};

/// A leaf of the schema tree: a column that row groups hold chunks of.
struct leaf_column {
  std::vector<std::string> path;  ///< Names from the root's child down to the leaf.
  std::string dotted;             ///< path joined with '.'
  std::size_t schema_index = 0;   ///< Its SchemaElement.
  std::size_t leaf_index = 0;     ///< Its position among the leaves = among a row group's chunks.
};

/// Parses FileMetaData (Thrift compact) from `in`; format_error naming the problem.
file_metadata parse_file_metadata(byte_source& in);

/// The schema's leaves in depth-first order; format_error when the tree is
/// inconsistent (num_children past the end, a leaf without a type, elements left over).
/// `name` (the file) starts the error message.
std::vector<leaf_column> leaf_columns(const file_metadata& meta, const std::string& name);

/// A file's bytes read at offsets: a file (pread) or a caller's buffer.
class random_access {
 public:
  explicit random_access(std::string name) : name_(std::move(name)) {}
  virtual ~random_access() = default;
  /// Total bytes.
  virtual std::uint64_t size() const = 0;
  /// Copies bytes [offset, offset + n) to dst; the caller has checked offset + n <= size().
  virtual void read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const = 0;
  /// The path in quotes, or a description of the buffer.
  const std::string& name() const { return name_; }
  /// Throws format_error "<name>: <problem>".
  [[noreturn]] void fail(const std::string& problem) const {
    throw format_error(name_ + ": " + problem);
  }

  /// Bytes [offset, offset + n) as a vector; format_error when they are not all in the file.
  std::vector<std::uint8_t> read_range(std::uint64_t offset, std::uint64_t n, const char* what) const;

 private:
  std::string name_;
};

/// A regular file read with pread; io_error when it cannot be opened or is not a regular file.
class random_access_file final : public random_access {
 public:
  explicit random_access_file(const std::string& path);
  random_access_file(const random_access_file&) = delete;
  random_access_file& operator=(const random_access_file&) = delete;
  ~random_access_file() override;
  std::uint64_t size() const override { return size_; }
  void read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const override;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// A caller's buffer (not copied: it must outlive the object).
class random_access_memory final : public random_access {
 public:
  random_access_memory(std::string name, const std::uint8_t* data, std::size_t size)
      : random_access(std::move(name)), data_(data), size_(size) {}
  std::uint64_t size() const override { return size_; }
  void read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const override;

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};

/// Bytes [begin, end) of a random_access read as a stream (a Thrift header whose
/// length is not known up front), through a small buffer.
class range_source final : public byte_source {
 public:
  /// The caller has checked begin <= end <= file.size().
  range_source(const random_access& file, std::uint64_t begin, std::uint64_t end)
      : byte_source(file.name()), file_(file), position_(begin), end_(end) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override;
  std::uint64_t remaining() const override { return end_ - position_ + (length_ - used_); }

 private:
  const random_access& file_;
  std::uint64_t position_;  // next byte of the file not yet in the buffer
  std::uint64_t end_;
  std::uint8_t buffer_[256];
  std::size_t length_ = 0;  // bytes in the buffer
  std::size_t used_ = 0;    // of which already read
};

/// Where the footer lies: bytes [offset, offset + length) of the file.
struct footer_location {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

/// Checks the magic at both ends and the footer length against the file size;
/// refuses encrypted footers ("PARE"). format_error naming the problem.
footer_location locate_footer(const random_access& file);

/// locate_footer, then parse_file_metadata of the footer's bytes; refuses a
/// plaintext-footer encrypted file. format_error naming the file and the problem.
/// `where` (may be null) receives the footer's location.
file_metadata read_file_metadata(const random_access& file, footer_location* where = nullptr);

}  // namespace gbf::detail::parquet
