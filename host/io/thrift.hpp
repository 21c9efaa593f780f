// Thrift compact protocol, the encoding of Parquet's metadata: a reader that
// walks fields, reads the scalar, binary and list values Parquet's structs hold
// and skips what it does not know; and Parquet's BloomFilterHeader in both
// directions. (The file footer, FileMetaData, is read with this same reader in
// host/io/parquet_footer.cpp.)
//
//   struct BloomFilterHeader {
//     1: required i32 numBytes;
//     2: required BloomFilterAlgorithm algorithm;      union { 1: SplitBlockAlgorithm BLOCK }
//     3: required BloomFilterHash hash;                union { 1: XxHash XXHASH }
//     4: required BloomFilterCompression compression;  union { 1: Uncompressed UNCOMPRESSED }
//   }
// with the member structs empty. A field header byte is (id delta << 4) | type
// when the delta to the previous id is 1..15, else the type alone followed by
// the id as a zigzag varint; 0 ends a struct. i32 values are zigzag varints.
//
// Every malformed input is a format_error naming the source and the problem
// (never a crash, never unbounded work or memory: every count and length is
// checked against the bytes left before anything that size is read or
// allocated, and each element of a container takes at least one byte).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/io/byte_io.hpp"

namespace gbf::detail::thrift {

enum type : std::uint8_t {
  bool_true = 1,
  bool_false = 2,
  i8 = 3,
  i16 = 4,
  i32 = 5,
  i64 = 6,
  dbl = 7,
  binary = 8,
  list = 9,
  set = 10,
  map = 11,
  structure = 12,
  uuid = 13,
};

constexpr int max_depth = 64;

inline void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<std::uint8_t>(v | 0x80));
  out.push_back(static_cast<std::uint8_t>(v));
}

// Compact-protocol BloomFilterHeader for a bitset of num_bytes (0 < num_bytes < 2^31),
// field by field as parquet-mr and Arrow write it.
std::vector<std::uint8_t> bloom_filter_header(std::uint32_t num_bytes);

class reader {
 public:
  /// `subject` names what is read in error messages ("malformed <subject>: ...",
  /// "truncated <subject>").
  explicit reader(byte_source& in, const char* subject = "Parquet Thrift header")
      : in_(in), subject_(subject) {}

  struct field {
    std::uint8_t type = 0;  // 0: the struct's stop byte
    std::int64_t id = 0;
  };

  // The next field header of the current struct; last_id carries the delta base.
  field next_field(std::int64_t& last_id) {
    const std::uint8_t b = byte();
    if (b == 0) return {};
    field f;
    f.type = b & 0x0F;
    const int delta = b >> 4;
    f.id = delta != 0 ? last_id + delta : zigzag(varint());
    if (f.type == 0 || f.type > uuid) malformed("unknown field type " + std::to_string(f.type));
    last_id = f.id;
    return f;
  }

  std::int32_t read_i32() {
    const std::uint64_t raw = varint();
    if (raw > 0xFFFFFFFFu) malformed("i32 varint out of range");
    return static_cast<std::int32_t>(zigzag(raw));
  }

  std::int64_t read_i64() { return zigzag(varint()); }

  /// An i8 field or element: one byte, two's complement.
  std::int8_t read_i8() { return static_cast<std::int8_t>(byte()); }

  /// A bool field's value, which lives in its header's type nibble.
  static bool bool_value(const field& f) { return f.type == bool_true; }

  /// A binary / string value: a varint length, then that many bytes (checked
  /// against the bytes left before anything is allocated).
  std::string read_binary() {
    const std::uint64_t length = varint();
    if (length > in_.remaining()) truncated();
    std::string value(static_cast<std::size_t>(length), '\0');
    if (length > 0 && in_.read(reinterpret_cast<std::uint8_t*>(value.data()), value.size()) != length)
      truncated();
    return value;
  }

  /// A list or set header: the element type and the element count, the count
  /// checked against the bytes left (every element takes at least one byte).
  struct list_header {
    std::uint8_t element = 0;
    std::uint64_t size = 0;
  };
  list_header read_list_header() {
    const std::uint8_t h = byte();
    list_header list;
    list.element = checked_element(h & 0x0F);
    list.size = (h >> 4) == 15 ? varint() : h >> 4;
    check_count(list.size);
    return list;
  }

  /// Throws "<name> has Thrift type T, expected <expected name> (E)" unless f.type is `expected`
  /// (either bool type matches bool_true).
  void expect(const field& f, std::uint8_t expected, const char* name) const {
    const bool is_bool = f.type == bool_true || f.type == bool_false;
    if (f.type == expected || (expected == bool_true && is_bool)) return;
    malformed(std::string(name) + " has Thrift type " + std::to_string(f.type) + ", expected " +
              type_name(expected) + " (" + std::to_string(expected) + ")");
  }
  /// Throws unless a list's elements are of type `expected`.
  void expect_elements(const list_header& list, std::uint8_t expected, const char* name) const {
    const bool is_bool = list.element == bool_true || list.element == bool_false;
    if (list.element == expected || (expected == bool_true && is_bool)) return;
    malformed(std::string(name) + " has elements of Thrift type " + std::to_string(list.element) +
              ", expected " + type_name(expected) + " (" + std::to_string(expected) + ")");
  }

  static const char* type_name(std::uint8_t t) {
    switch (t) {
      case bool_true:
      case bool_false: return "bool";
      case i8: return "i8";
      case i16: return "i16";
      case i32: return "i32";
      case i64: return "i64";
      case dbl: return "double";
      case binary: return "binary";
      case list: return "list";
      case set: return "set";
      case map: return "map";
      case structure: return "struct";
      case uuid: return "uuid";
      default: return "unknown";
    }
  }

  // Skips the rest of a struct whose fields are all unknown to us.
  void skip_struct(int depth) {
    if (depth > max_depth) malformed("nesting deeper than " + std::to_string(max_depth));
    std::int64_t last_id = 0;
    for (field f = next_field(last_id); f.type != 0; f = next_field(last_id))
      skip(f.type, depth, /*in_container=*/false);
  }

  // Skips one value of `t`. A field's bool lives in its type nibble; a
  // container's bool elements take one byte each.
  void skip(std::uint8_t t, int depth, bool in_container) {
    switch (t) {
      case bool_true:
      case bool_false:
        if (in_container) byte();
        return;
      case i8: skip_bytes(1); return;
      case i16:
      case i32:
      case i64: varint(); return;
      case dbl: skip_bytes(8); return;
      case uuid: skip_bytes(16); return;
      case binary: skip_bytes(varint()); return;
      case list:
      case set: {
        if (depth >= max_depth) malformed("nesting deeper than " + std::to_string(max_depth));
        const std::uint8_t h = byte();
        const std::uint8_t elem = h & 0x0F;
        const std::uint64_t size = (h >> 4) == 15 ? varint() : h >> 4;
        check_count(size);
        for (std::uint64_t i = 0; i < size; ++i) skip(checked_element(elem), depth + 1, true);
        return;
      }
      case map: {
        if (depth >= max_depth) malformed("nesting deeper than " + std::to_string(max_depth));
        const std::uint64_t size = varint();
        if (size == 0) return;
        const std::uint8_t kinds = byte();
        check_count(size);
        for (std::uint64_t i = 0; i < size; ++i) {
          skip(checked_element(kinds >> 4), depth + 1, true);
          skip(checked_element(kinds & 0x0F), depth + 1, true);
        }
        return;
      }
      case structure: skip_struct(depth + 1); return;
      default: malformed("unknown type " + std::to_string(t));
    }
  }

  [[noreturn]] void malformed(const std::string& what) const {
    in_.fail("malformed " + std::string(subject_) + ": " + what);
  }
  [[noreturn]] void truncated() const { in_.fail("truncated " + std::string(subject_)); }

 private:
  std::uint8_t byte() {
    std::uint8_t b;
    if (in_.read(&b, 1) != 1) truncated();
    return b;
  }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const std::uint8_t b = byte();
      // The 10th byte holds bit 63 alone and ends the varint.
      if (shift == 63 && b > 1) malformed("varint does not fit in 64 bits");
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
  }

  static std::int64_t zigzag(std::uint64_t v) {
    return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
  }

  void skip_bytes(std::uint64_t n) {
    if (n > in_.remaining()) truncated();
    std::uint8_t sink[256];
    while (n > 0) {
      const std::size_t step = static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof sink));
      in_.read(sink, step);
      n -= step;
    }
  }

  // Every container element takes at least one byte, so a count beyond the
  // remaining input is a lie; rejecting it up front keeps skipping O(input).
  void check_count(std::uint64_t count) const {
    if (count > in_.remaining()) truncated();
  }

  std::uint8_t checked_element(int t) const {
    if (t < bool_true || t > uuid) malformed("unknown element type " + std::to_string(t));
    return static_cast<std::uint8_t>(t);
  }

  byte_source& in_;
  const char* subject_;
};

/// Parses a BloomFilterHeader and returns numBytes (checked: a positive multiple of 32).
std::uint64_t read_bloom_filter_header(byte_source& in);

}  // namespace gbf::detail::thrift
