// The gbf file container every filter kind shares (docs/file-format.md,
// "Version 2: the container of every filter kind"):
//
//   offset  size  field
//   0       8     magic "GBFBLOOM"
//   8       4     version = 2
//   12      4     header length H: bytes from offset 0 to the payload, a multiple of 8
//   16      4     kind (filter_kind)
//   20      4     the kind's revision of its fields (each kind's reader says which it reads)
//   24      8     payload bytes P
//   32      H-32  the kind's fields, little-endian, zero-padded to H
//   H       P     payload: 32-bit words, little-endian
//   H+P     8     checksum: xxh64, seed 0, of bytes [0, H+P)
//
// Version 1 is the plain Bloom filter's own 80-byte header (native_format.cpp),
// which plain filters still write, so that every reader of version 1 keeps
// reading them; the other kinds write version 2. A reader of one kind handed
// a file of another says which kind it holds instead of misreading it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gbf/io.hpp"
#include "host/io/byte_io.hpp"

namespace gbf::detail {

/// What a gbf file holds (the container's kind field).
using filter_kind = file_kind;

/// "plain Bloom", "counting Bloom", "scaling Bloom", "cuckoo", or "unknown (N)".
std::string kind_name(std::uint32_t kind);

/// The first bytes every gbf file starts with.
inline constexpr char container_magic[8] = {'G', 'B', 'F', 'B', 'L', 'O', 'O', 'M'};
/// The problem a reader names for input without them: the likeliest other filter a user
/// has is a Parquet SBBF, which has no magic of its own to recognise it by.
inline constexpr const char* bad_magic_problem =
    "not a gbf filter file (bad magic; expected \"GBFBLOOM\"); a Parquet SBBF is read as one "
    "(load_parquet_sbbf, gbf.load(format=\"parquet-sbbf\"), the CLI's --format parquet-sbbf, or "
    "--input-format parquet-sbbf for the inputs of merge, intersect and xor)";
/// Bytes of the fixed part of a version-2 header (before the kind's fields).
inline constexpr std::size_t container_fixed_bytes = 32;
/// Largest version-2 header a reader accepts (a bound on what a corrupt file makes it allocate).
inline constexpr std::size_t container_max_header_bytes = std::size_t{1} << 20;

/// The kind's fields, written little-endian one after another.
class field_writer {
 public:
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void f64(double v);
  const std::vector<std::uint8_t>& bytes() const noexcept { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

/// Reads the kind's fields back; a field past the end is a format_error from `source`.
class field_reader {
 public:
  field_reader(const std::vector<std::uint8_t>& bytes, const byte_source& source)
      : bytes_(bytes), source_(source) {}
  std::uint32_t u32(const char* name);
  std::uint64_t u64(const char* name);
  double f64(const char* name);
  /// Bytes not read yet.
  std::size_t remaining() const noexcept { return bytes_.size() - position_; }

 private:
  const std::uint8_t* take(std::size_t n, const char* name);

  const std::vector<std::uint8_t>& bytes_;
  const byte_source& source_;
  std::size_t position_ = 0;
};

/// Writes one version-2 file to `out`: the header at construction, then the
/// payload through write_words_from, then finish() adds the checksum.
class container_writer {
 public:
  container_writer(byte_sink& out, filter_kind kind, std::uint32_t revision,
                   const std::vector<std::uint8_t>& fields, std::uint64_t payload_bytes);
  /// Appends `n` words read a slice at a time by read(first, count, out) (a filter's
  /// copy_words): a save holds 256 KiB of them, not a copy of the whole array.
  template <class Read>
  void write_words_from(std::uint64_t n, Read&& read) {
    detail::write_words_from(n, read, out_, &hash_);
    written_ += std::uint64_t{bytes_per_word} * n;
  }
  /// Writes the checksum; throws invalid_argument when the payload written is
  /// not the size the header announced (a bug, never a user error).
  void finish();

 private:
  byte_sink& out_;
  xxh64_stream hash_;
  std::uint64_t payload_bytes_;
  std::uint64_t written_ = 0;
};

/// Bytes of a version-2 file with these fields and payload: header, payload, checksum.
std::uint64_t container_file_bytes(const std::vector<std::uint8_t>& fields, std::uint64_t payload_bytes);

/// serialize_into's check of the caller's buffer against the serialized size:
/// invalid_argument "<what>: out holds N bytes, the filter serializes to M
/// (serialized_size)" or "<what>: out is null".
void check_serialize_buffer(const char* what, const std::uint8_t* out, std::size_t size,
                            std::uint64_t expected);

/// Reads one version-2 file: the header (checked against the source's size
/// before anything is allocated), the payload words, the checksum.
class container_reader {
 public:
  /// Reads and checks the header of a file that should hold `expected`; throws
  /// format_error naming the source and the problem (bad magic, another
  /// version, another kind, a header or payload that does not fit the file,
  /// trailing bytes).
  container_reader(byte_source& in, filter_kind expected);

  filter_kind kind() const noexcept { return static_cast<filter_kind>(kind_); }
  std::uint32_t revision() const noexcept { return revision_; }
  std::uint64_t payload_bytes() const noexcept { return payload_bytes_; }
  /// The kind's fields (H - 32 bytes, padding included).
  const std::vector<std::uint8_t>& fields() const noexcept { return fields_; }
  const byte_source& source() const noexcept { return in_; }

  /// Reads the next `n` payload words into write(first, count, words), a slice at a
  /// time (detail::read_words_to); the caller reads exactly P / 4 in all.
  template <class Write>
  void read_words_to(std::uint64_t n, Write&& write) {
    if (n > (payload_bytes_ - read_) / bytes_per_word)
      in_.fail("the header's fields describe more data than its payload of " +
               std::to_string(payload_bytes_) + " bytes holds");
    detail::read_words_to(n, in_, &hash_, write);
    read_ += n * bytes_per_word;
  }
  /// Reads the checksum and verifies it; throws format_error on a mismatch.
  void finish();

 private:
  byte_source& in_;
  xxh64_stream hash_;
  std::uint32_t kind_ = 0;
  std::uint32_t revision_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t read_ = 0;
  std::vector<std::uint8_t> fields_;
};

/// The kind of a gbf file from its first `size` bytes (version 1: bloom; 20
/// bytes suffice); format_error from `in` for a file that is not gbf's.
filter_kind peek_kind(const std::uint8_t* first_bytes, std::size_t size, const byte_source& in);

/// The format_error sentence for a file of kind `found` read as `expected`,
/// e.g. "holds a counting Bloom filter, not a plain Bloom filter: load it as what it is (...)".
std::string wrong_kind_message(filter_kind found, filter_kind expected);

}  // namespace gbf::detail
