// The version-2 gbf container (host/io/container.hpp).
#include "host/io/container.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

namespace gbf::detail {
namespace {

constexpr std::uint32_t container_version = 2;
constexpr std::size_t checksum_bytes = 8;

namespace offset {
constexpr std::size_t version = 8;
constexpr std::size_t header_length = 12;
constexpr std::size_t kind = 16;
constexpr std::size_t revision = 20;
constexpr std::size_t payload_bytes = 24;
}  // namespace offset

bool known_kind(std::uint32_t kind) { return kind >= 1 && kind <= 4; }

std::size_t padded(std::size_t bytes) { return (bytes + 7) / 8 * 8; }

}  // namespace

std::string kind_name(std::uint32_t kind) {
  switch (kind) {
    case 1: return "plain Bloom";
    case 2: return "counting Bloom";
    case 3: return "scaling Bloom";
    case 4: return "cuckoo";
    default: return "unknown (" + std::to_string(kind) + ")";
  }
}

void field_writer::u32(std::uint32_t v) {
  const std::size_t at = bytes_.size();
  bytes_.resize(at + 4);
  put_le32(&bytes_[at], v);
}

void field_writer::u64(std::uint64_t v) {
  const std::size_t at = bytes_.size();
  bytes_.resize(at + 8);
  put_le64(&bytes_[at], v);
}

void field_writer::f64(double v) { u64(double_bits(v)); }

const std::uint8_t* field_reader::take(std::size_t n, const char* name) {
  if (bytes_.size() - position_ < n)
    source_.fail(std::string("the header ends before its field ") + name);
  const std::uint8_t* p = bytes_.data() + position_;
  position_ += n;
  return p;
}

std::uint32_t field_reader::u32(const char* name) { return get_le32(take(4, name)); }
std::uint64_t field_reader::u64(const char* name) { return get_le64(take(8, name)); }
double field_reader::f64(const char* name) { return bits_double(u64(name)); }

std::uint64_t container_file_bytes(const std::vector<std::uint8_t>& fields, std::uint64_t payload_bytes) {
  return container_fixed_bytes + padded(fields.size()) + payload_bytes + checksum_bytes;
}

void check_serialize_buffer(const char* what, const std::uint8_t* out, std::size_t size,
                            std::uint64_t expected) {
  if (size != expected)
    throw invalid_argument(std::string(what) + ": out holds " + std::to_string(size) +
                           " bytes, the filter serializes to " + std::to_string(expected) +
                           " (serialized_size)");
  if (out == nullptr && size > 0) throw invalid_argument(std::string(what) + ": out is null");
}

container_writer::container_writer(byte_sink& out, filter_kind kind, std::uint32_t revision,
                                   const std::vector<std::uint8_t>& fields,
                                   std::uint64_t payload_bytes)
    : out_(out), payload_bytes_(payload_bytes) {
  const std::size_t header_length = container_fixed_bytes + padded(fields.size());
  std::vector<std::uint8_t> header(header_length, 0);
  std::memcpy(header.data(), container_magic, sizeof container_magic);
  put_le32(&header[offset::version], container_version);
  put_le32(&header[offset::header_length], static_cast<std::uint32_t>(header_length));
  put_le32(&header[offset::kind], static_cast<std::uint32_t>(kind));
  put_le32(&header[offset::revision], revision);
  put_le64(&header[offset::payload_bytes], payload_bytes);
  std::copy(fields.begin(), fields.end(), header.begin() + container_fixed_bytes);
  hash_.update(header.data(), header.size());
  out_.write(header.data(), header.size());
}

void container_writer::finish() {
  if (written_ != payload_bytes_)
    throw invalid_argument("gbf container: wrote " + std::to_string(written_) +
                           " payload bytes, the header announced " +
                           std::to_string(payload_bytes_));
  std::uint8_t checksum[checksum_bytes];
  put_le64(checksum, hash_.digest());
  out_.write(checksum, sizeof checksum);
}

std::string wrong_kind_message(filter_kind found, filter_kind expected) {
  return "holds a " + kind_name(static_cast<std::uint32_t>(found)) + " filter, not a " +
         kind_name(static_cast<std::uint32_t>(expected)) +
         " filter: load it as what it is (`gbf info FILE` names the kind of any gbf file)";
}

container_reader::container_reader(byte_source& in, filter_kind expected) : in_(in) {
  std::array<std::uint8_t, container_fixed_bytes> fixed{};
  const std::size_t got = in.read(fixed.data(), fixed.size());
  if (!std::equal(fixed.begin(), fixed.begin() + std::min(got, sizeof container_magic),
                  container_magic))
    in.fail(bad_magic_problem);
  if (got >= offset::kind + 4) {
    const filter_kind found = peek_kind(fixed.data(), got, in);
    if (found != expected) in.fail(wrong_kind_message(found, expected));
  } else if (got >= offset::version + 4) {
    peek_kind(fixed.data(), got, in);  // throws for a version it does not read
  }
  if (got >= offset::version + 4 && get_le32(&fixed[offset::version]) != container_version)
    in.fail("a gbf format version " + std::to_string(get_le32(&fixed[offset::version])) +
            " file, where a version-2 container was expected");
  if (got < container_fixed_bytes)
    in.fail("truncated file: the header has " + std::to_string(got) + " of " +
            std::to_string(container_fixed_bytes) + " bytes");
  const std::uint32_t header_length = get_le32(&fixed[offset::header_length]);
  kind_ = get_le32(&fixed[offset::kind]);
  revision_ = get_le32(&fixed[offset::revision]);
  payload_bytes_ = get_le64(&fixed[offset::payload_bytes]);
  if (!known_kind(kind_)) in.fail("unknown filter kind " + std::to_string(kind_));
  if (header_length < container_fixed_bytes || header_length % 8 != 0 ||
      header_length > container_max_header_bytes)
    in.fail("header length " + std::to_string(header_length) +
            " is not a multiple of 8 between 32 and " + std::to_string(container_max_header_bytes));
  const std::uint64_t field_bytes = header_length - container_fixed_bytes;
  if (in.remaining() < field_bytes)
    in.fail("truncated file: the header has " + std::to_string(container_fixed_bytes + in.remaining()) +
            " of " + std::to_string(header_length) + " bytes");
  fields_.resize(field_bytes);
  in.read(fields_.data(), fields_.size());
  if (payload_bytes_ % 4 != 0)
    in.fail("payload size " + std::to_string(payload_bytes_) + " bytes is not a whole number of words");
  const std::uint64_t rest = in.remaining();
  if (rest < payload_bytes_)
    in.fail("truncated file: the payload has " + std::to_string(rest) + " of " +
            std::to_string(payload_bytes_) + " bytes");
  if (rest < payload_bytes_ + checksum_bytes)
    in.fail("truncated file: the checksum has " + std::to_string(rest - payload_bytes_) +
            " of 8 bytes");
  if (rest > payload_bytes_ + checksum_bytes)
    in.fail("trailing bytes: " + std::to_string(rest - payload_bytes_ - checksum_bytes) +
            " bytes after the checksum");
  hash_.update(fixed.data(), fixed.size());
  hash_.update(fields_.data(), fields_.size());
}

void container_reader::finish() {
  if (read_ != payload_bytes_)
    in_.fail("the payload holds " + std::to_string(payload_bytes_) +
             " bytes but the header's fields describe " + std::to_string(read_));
  std::uint8_t stored[checksum_bytes];
  if (in_.read(stored, sizeof stored) != sizeof stored)
    in_.fail("truncated file: the checksum ended early (the file shrank while being read)");
  const std::uint64_t expected = get_le64(stored);
  const std::uint64_t actual = hash_.digest();
  if (expected != actual) {
    char text[96];
    std::snprintf(text, sizeof text, "checksum mismatch (stored 0x%016llx, computed 0x%016llx)",
                  static_cast<unsigned long long>(expected),
                  static_cast<unsigned long long>(actual));
    in_.fail(text);
  }
}

filter_kind peek_kind(const std::uint8_t* first_bytes, std::size_t size, const byte_source& in) {
  if (size < sizeof container_magic ||
      !std::equal(first_bytes, first_bytes + sizeof container_magic, container_magic))
    in.fail(bad_magic_problem);
  if (size < offset::version + 4) in.fail("truncated file: no format version");
  const std::uint32_t version = get_le32(first_bytes + offset::version);
  if (version == 1) return filter_kind::bloom;
  if (version != container_version)
    in.fail("unsupported gbf format version " + std::to_string(version) +
            " (this library reads versions 1 and 2)");
  if (size < offset::kind + 4)
    in.fail("truncated file: the header has " + std::to_string(size) + " of " +
            std::to_string(container_fixed_bytes) + " bytes");
  const std::uint32_t kind = get_le32(first_bytes + offset::kind);
  if (!known_kind(kind)) in.fail("unknown filter kind " + std::to_string(kind));
  return static_cast<filter_kind>(kind);
}

}  // namespace gbf::detail

namespace gbf {
std::string to_string(file_kind kind) { return detail::kind_name(static_cast<std::uint32_t>(kind)); }
}  // namespace gbf
