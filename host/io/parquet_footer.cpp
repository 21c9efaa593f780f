// Parquet's FileMetaData over the Thrift compact reader (host/io/parquet_footer.hpp).
#include "host/io/parquet_footer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "host/io/thrift.hpp"

namespace gbf::detail::parquet {
namespace {

using thrift::reader;
namespace tt = thrift;

constexpr const char* footer_subject = "Parquet footer";

/// Calls on_field(f) for each field of a struct; a field it does not take
/// (returns false) is skipped whatever its type.
template <class OnField>
void read_struct(reader& r, int depth, OnField&& on_field) {
  if (depth > tt::max_depth) r.malformed("nesting deeper than " + std::to_string(tt::max_depth));
  std::int64_t last_id = 0;
  for (auto f = r.next_field(last_id); f.type != 0; f = r.next_field(last_id))
    if (!on_field(f)) r.skip(f.type, depth, /*in_container=*/false);
}

/// Reads a list field of `element`-typed values, calling each() once per element.
template <class Each>
void read_list(reader& r, const reader::field& f, std::uint8_t element, const char* name,
               Each&& each) {
  r.expect(f, tt::list, name);
  const reader::list_header list = r.read_list_header();
  r.expect_elements(list, element, name);
  for (std::uint64_t i = 0; i < list.size; ++i) each();
}

std::int32_t read_i32_field(reader& r, const reader::field& f, const char* name) {
  r.expect(f, tt::i32, name);
  return r.read_i32();
}

std::int64_t read_i64_field(reader& r, const reader::field& f, const char* name) {
  r.expect(f, tt::i64, name);
  return r.read_i64();
}

void require(reader& r, bool seen, const char* what) {
  if (!seen) r.malformed(std::string("required field ") + what + " is missing");
}

// LogicalType is a union; gbf needs which member is set and, for INTEGER (10),
// IntType { 1: i8 bitWidth; 2: bool isSigned }.
void read_logical_type(reader& r, schema_element& e, int depth) {
  read_struct(r, depth, [&](const reader::field& f) {
    e.logical_type = static_cast<std::int32_t>(f.id);
    if (f.id != 10 || f.type != tt::structure) return false;
    read_struct(r, depth + 1, [&](const reader::field& g) {
      if (g.id != 2) return false;
      r.expect(g, tt::bool_true, "IntType.isSigned");
      e.logical_int_signed = reader::bool_value(g);
      return true;
    });
    return true;
  });
}

schema_element read_schema_element(reader& r, int depth) {
  schema_element e;
  bool has_name = false;
  read_struct(r, depth, [&](const reader::field& f) {
    switch (f.id) {
      case 1: e.type = read_i32_field(r, f, "SchemaElement.type"); return true;
      case 2: e.type_length = read_i32_field(r, f, "SchemaElement.type_length"); return true;
      case 3: e.repetition = read_i32_field(r, f, "SchemaElement.repetition_type"); return true;
      case 4:
        r.expect(f, tt::binary, "SchemaElement.name");
        e.name = r.read_binary();
        has_name = true;
        return true;
      case 5:
        e.num_children = read_i32_field(r, f, "SchemaElement.num_children");
        if (e.num_children < 0)
          r.malformed("SchemaElement '" + e.name + "' has num_children = " +
                      std::to_string(e.num_children));
        return true;
      case 6: e.converted_type = read_i32_field(r, f, "SchemaElement.converted_type"); return true;
      case 10:
        r.expect(f, tt::structure, "SchemaElement.logicalType");
        read_logical_type(r, e, depth + 1);
        return true;
      default: return false;
    }
  });
  require(r, has_name, "SchemaElement.name (4)");
  return e;
}

column_meta read_column_meta(reader& r, int depth) {
  column_meta m;
  bool seen_type = false, seen_path = false, seen_size = false;
  read_struct(r, depth, [&](const reader::field& f) {
    switch (f.id) {
      case 1:
        m.type = read_i32_field(r, f, "ColumnMetaData.type");
        seen_type = true;
        return true;
      case 3:
        read_list(r, f, tt::binary, "ColumnMetaData.path_in_schema",
                  [&] { m.path_in_schema.push_back(r.read_binary()); });
        seen_path = true;
        return true;
      case 7:
        m.total_compressed_size = read_i64_field(r, f, "ColumnMetaData.total_compressed_size");
        if (m.total_compressed_size < 0)
          r.malformed("ColumnMetaData.total_compressed_size is " +
                      std::to_string(m.total_compressed_size));
        seen_size = true;
        return true;
      case 14:
        m.bloom_filter_offset = read_i64_field(r, f, "ColumnMetaData.bloom_filter_offset");
        return true;
      case 15:
        m.bloom_filter_length = read_i32_field(r, f, "ColumnMetaData.bloom_filter_length");
        return true;
      default: return false;
    }
  });
  require(r, seen_type, "ColumnMetaData.type (1)");
  require(r, seen_path, "ColumnMetaData.path_in_schema (3)");
  require(r, seen_size, "ColumnMetaData.total_compressed_size (7)");
  return m;
}

column_chunk read_column_chunk(reader& r, int depth) {
  column_chunk c;
  read_struct(r, depth, [&](const reader::field& f) {
    switch (f.id) {
      case 1:
        r.expect(f, tt::binary, "ColumnChunk.file_path");
        c.file_path = r.read_binary();
        return true;
      case 3:
        r.expect(f, tt::structure, "ColumnChunk.meta_data");
        c.meta = read_column_meta(r, depth + 1);
        return true;
      case 8:  // crypto_metadata
      case 9:  // encrypted_column_metadata
        c.encrypted = true;
        return false;  // skipped
      default: return false;
    }
  });
  return c;
}

row_group read_row_group(reader& r, int depth) {
  row_group g;
  bool seen_columns = false, seen_rows = false;
  read_struct(r, depth, [&](const reader::field& f) {
    switch (f.id) {
      case 1:
        read_list(r, f, tt::structure, "RowGroup.columns",
                  [&] { g.columns.push_back(read_column_chunk(r, depth + 1)); });
        seen_columns = true;
        return true;
      case 2: g.total_byte_size = read_i64_field(r, f, "RowGroup.total_byte_size"); return true;
      case 3:
        g.num_rows = read_i64_field(r, f, "RowGroup.num_rows");
        if (g.num_rows < 0) r.malformed("RowGroup.num_rows is " + std::to_string(g.num_rows));
        seen_rows = true;
        return true;
      default: return false;
    }
  });
  require(r, seen_columns, "RowGroup.columns (1)");
  require(r, seen_rows, "RowGroup.num_rows (3)");
  return g;
}

}  // namespace

file_metadata parse_file_metadata(byte_source& in) {
  reader r(in, footer_subject);
  file_metadata meta;
  bool seen_schema = false, seen_row_groups = false;
  constexpr int depth = 1;
  read_struct(r, depth, [&](const reader::field& f) {
    switch (f.id) {
      case 1: meta.version = read_i32_field(r, f, "FileMetaData.version"); return true;
      case 2:
        read_list(r, f, tt::structure, "FileMetaData.schema",
                  [&] { meta.schema.push_back(read_schema_element(r, depth + 1)); });
        seen_schema = true;
        return true;
      case 3: meta.num_rows = read_i64_field(r, f, "FileMetaData.num_rows"); return true;
      case 4:
        read_list(r, f, tt::structure, "FileMetaData.row_groups",
                  [&] { meta.row_groups.push_back(read_row_group(r, depth + 1)); });
        seen_row_groups = true;
        return true;
      case 6:
        r.expect(f, tt::binary, "FileMetaData.created_by");
        meta.created_by = r.read_binary();
        return true;
      case 8: meta.encrypted = true; return false;  // encryption_algorithm, skipped
      default: return false;
    }
  });
  require(r, seen_schema, "FileMetaData.schema (2)");
  require(r, seen_row_groups, "FileMetaData.row_groups (4)");
  return meta;
}

std::vector<leaf_column> leaf_columns(const file_metadata& meta, const std::string& name) {
  const auto fail = [&name](const std::string& problem) {
    throw format_error(name + ": malformed Parquet footer: " + problem);
  };
  const std::vector<schema_element>& schema = meta.schema;
  if (schema.empty()) fail("the schema is empty (no root element)");
  // Depth-first with an explicit stack (a crafted schema nested a million deep
  // must not overflow the call stack): each frame counts the children of a
  // group still to come; frames beyond the root's carry the group's name in `path`.
  std::vector<std::int64_t> children_left{schema[0].num_children};
  std::vector<std::string> path;
  std::vector<leaf_column> leaves;
  // Each leaf keeps its ancestors' names, so a footer of n bytes nesting n/2
  // groups over n/2 leaves asks for n^2/4 names (a crafted 100 KB footer: over
  // 1.5 GB). Bound what the leaves hold: real schemas hold a few MB at most.
  constexpr std::uint64_t max_leaf_path_bytes = std::uint64_t{64} << 20;
  constexpr std::uint64_t bytes_per_name = sizeof(std::string);  // a name's own footprint
  std::uint64_t ancestors_bytes = 0;  // what a leaf's copy of `path` holds
  std::uint64_t leaf_path_bytes = 0;
  std::size_t index = 1;
  while (!children_left.empty()) {
    if (children_left.back() == 0) {
      children_left.pop_back();
      if (!children_left.empty()) {
        ancestors_bytes -= 2 * path.back().size() + 1 + bytes_per_name;
        path.pop_back();
      }
      continue;
    }
    --children_left.back();
    if (index >= schema.size())
      fail("the schema ends inside a group (" +
                 std::to_string(schema.size()) + " elements, but num_children promise more)");
    const schema_element& e = schema[index];
    if (e.num_children > 0) {
      path.push_back(e.name);
      ancestors_bytes += 2 * e.name.size() + 1 + bytes_per_name;  // the name, in the path and dotted
      children_left.push_back(e.num_children);
    } else if (e.type.has_value()) {
      leaf_path_bytes += ancestors_bytes + 2 * e.name.size() + bytes_per_name;
      if (leaf_path_bytes > max_leaf_path_bytes)
        fail("the leaf columns' paths (each leaf's ancestor group names) pass " +
             std::to_string(max_leaf_path_bytes >> 20) + " MiB by leaf " + std::to_string(leaves.size()) +
             ", nested " + std::to_string(path.size()) + " groups deep");
      leaf_column leaf;
      leaf.path = path;
      leaf.path.push_back(e.name);
      for (const std::string& part : leaf.path) leaf.dotted += (leaf.dotted.empty() ? "" : ".") + part;
      leaf.schema_index = index;
      leaf.leaf_index = leaves.size();
      leaves.push_back(std::move(leaf));
    }  // else an empty group: no column
    ++index;
  }
  if (index != schema.size())
    fail(std::to_string(schema.size() - index) +
               " schema elements follow the root's last child");
  return leaves;
}

// ---------------------------------------------------------------------------
// Random access
// ---------------------------------------------------------------------------

std::vector<std::uint8_t> random_access::read_range(std::uint64_t offset, std::uint64_t n,
                                                    const char* what) const {
  if (offset > size() || n > size() - offset)
    fail(std::string(what) + " at bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + n) + ") lies outside the file (" + std::to_string(size()) +
         " bytes)");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n));
  if (n > 0) read_at(offset, bytes.data(), bytes.size());
  return bytes;
}

random_access_file::random_access_file(const std::string& path) : random_access("'" + path + "'") {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the
  // regular-file check below could refuse it (file_source does the same).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const int err = errno;
    throw io_error("cannot open " + name() + ": " + std::strerror(err), err);
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw io_error("cannot stat " + name() + ": " + std::strerror(err), err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw io_error(name() + ": not a regular file" + (S_ISFIFO(st.st_mode) ? " (a FIFO)" : ""),
                   S_ISDIR(st.st_mode) ? EISDIR : EINVAL);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

random_access_file::~random_access_file() { ::close(fd_); }

void random_access_file::read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const {
  while (n > 0) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      throw io_error("cannot read " + name() + ": " + std::strerror(err), err);
    }
    if (got == 0) throw io_error(name() + ": the file shrank while it was read", EIO);
    dst += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

void random_access_memory::read_at(std::uint64_t offset, std::uint8_t* dst, std::size_t n) const {
  std::memcpy(dst, data_ + offset, n);
}

std::size_t range_source::read(std::uint8_t* dst, std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    if (used_ == length_) {
      if (position_ == end_) break;
      length_ = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buffer_, end_ - position_));
      file_.read_at(position_, buffer_, length_);
      position_ += length_;
      used_ = 0;
    }
    const std::size_t take = std::min(length_ - used_, n - done);
    std::memcpy(dst + done, buffer_ + used_, take);
    used_ += take;
    done += take;
  }
  return done;
}

// ---------------------------------------------------------------------------
// The footer
// ---------------------------------------------------------------------------

footer_location locate_footer(const random_access& file) {
  // "PAR1" + FileMetaData + length + "PAR1"; even an empty FileMetaData takes a byte.
  constexpr std::uint64_t magic_bytes = 4, length_bytes = 4;
  constexpr std::uint64_t smallest = 2 * magic_bytes + length_bytes + 1;
  const std::uint64_t size = file.size();
  if (size < smallest)
    file.fail("not a Parquet file (" + std::to_string(size) + " bytes; the smallest has " +
              std::to_string(smallest) + ": magic, footer, footer length, magic)");
  std::uint8_t tail[8];
  file.read_at(size - sizeof tail, tail, sizeof tail);
  std::uint8_t head[4];
  file.read_at(0, head, sizeof head);
  if (std::memcmp(tail + 4, "PARE", 4) == 0)
    file.fail("encrypted Parquet file (encrypted footer, magic \"PARE\"): gbf does not read "
              "encrypted Parquet files");
  if (std::memcmp(tail + 4, "PAR1", 4) != 0)
    file.fail("not a Parquet file (the last 4 bytes are not the magic \"PAR1\")");
  if (std::memcmp(head, "PAR1", 4) != 0)
    file.fail("not a Parquet file (the first 4 bytes are not the magic \"PAR1\")");
  const std::uint64_t length = get_le32(tail);
  const std::uint64_t room = size - 2 * magic_bytes - length_bytes;
  if (length == 0) file.fail("malformed Parquet footer: the footer length is 0");
  if (length > room)
    file.fail("malformed Parquet footer: the footer length is " + std::to_string(length) +
              " bytes, but only " + std::to_string(room) + " bytes lie between the magics");
  return {size - magic_bytes - length_bytes - length, length};
}

file_metadata read_file_metadata(const random_access& file, footer_location* where) {
  const footer_location footer_at = locate_footer(file);
  if (where != nullptr) *where = footer_at;
  const std::vector<std::uint8_t> footer =
      file.read_range(footer_at.offset, footer_at.length, "the footer");
  memory_source in(file.name(), footer.data(), footer.size());
  file_metadata meta = parse_file_metadata(in);
  if (meta.encrypted)
    file.fail("encrypted Parquet file (plaintext footer with an encryption algorithm): gbf does "
              "not read encrypted Parquet files");
  return meta;
}

}  // namespace gbf::detail::parquet
