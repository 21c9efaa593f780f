// The gbf native file format, version 1 (docs/file-format.md): header,
// little-endian words, xxh64 checksum. One writer and one reader, over a byte
// sink (a vector, or an atomically renamed file) and a byte source (a buffer,
// or a file read in chunks), so the in-memory variants the tests and the
// fuzzer use run exactly the code that files do.
#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "gbf/io.hpp"
#include "host/filter_access.hpp"
#include "host/io/atomic_file.hpp"
#include "host/io/byte_io.hpp"
#include "host/io/container.hpp"
#include "host/number_text.hpp"

namespace gbf {
namespace {

using detail::atomic_file_sink;
using detail::byte_sink;
using detail::byte_source;
using detail::file_source;
using detail::get_le32;
using detail::get_le64;
using detail::memory_source;
using detail::put_le32;
using detail::put_le64;
using detail::vector_sink;
using detail::xxh64_stream;

constexpr std::size_t header_bytes = 80;
constexpr std::size_t checksum_bytes = 8;

namespace offset {
constexpr std::size_t version = 8;
constexpr std::size_t header_length = 12;
constexpr std::size_t words_per_block = 16;
constexpr std::size_t bits_per_key = 20;
constexpr std::size_t hash = 24;
constexpr std::size_t reserved = 28;
constexpr std::size_t seed = 32;
constexpr std::size_t num_blocks = 40;
constexpr std::size_t capacity = 48;
constexpr std::size_t fpp = 56;
constexpr std::size_t keys_inserted = 64;
constexpr std::size_t payload_bytes = 72;
}  // namespace offset

std::array<std::uint8_t, header_bytes> encode_header(const file_metadata& m) {
  std::array<std::uint8_t, header_bytes> h{};
  std::copy(std::begin(detail::container_magic), std::end(detail::container_magic), h.begin());
  put_le32(&h[offset::version], file_format_version);
  put_le32(&h[offset::header_length], static_cast<std::uint32_t>(header_bytes));
  put_le32(&h[offset::words_per_block], m.l.words_per_block);
  put_le32(&h[offset::bits_per_key], m.l.bits_per_key);
  put_le32(&h[offset::hash], static_cast<std::uint32_t>(m.l.hash));
  put_le32(&h[offset::reserved], 0);
  put_le64(&h[offset::seed], m.l.seed);
  put_le64(&h[offset::num_blocks], m.l.num_blocks);
  put_le64(&h[offset::capacity], m.capacity);
  put_le64(&h[offset::fpp], detail::double_bits(m.fpp));
  put_le64(&h[offset::keys_inserted], m.keys_inserted);
  put_le64(&h[offset::payload_bytes], m.l.size_bytes());
  return h;
}

void write_native(const filter& f, double fpp, byte_sink& out) {
  const file_metadata meta{f.layout(), f.capacity(), fpp, detail::filter_access::keys_added(f)};
  xxh64_stream hash;
  const auto header = encode_header(meta);
  hash.update(header.data(), header.size());
  out.write(header.data(), header.size());
  detail::write_words(f, out, &hash);
  std::uint8_t checksum[checksum_bytes];
  put_le64(checksum, hash.digest());
  out.write(checksum, sizeof checksum);
}

std::size_t native_size(const filter& f) {
  f.where();  // a moved-from filter throws invalid_argument, as its other calls do, not a stale size
  return header_bytes + f.layout().size_bytes() + checksum_bytes;
}

// Reads and checks the header, and that the source holds exactly the payload
// and the checksum after it; feeds the header to `hash`.
file_metadata read_native_header(byte_source& in, xxh64_stream& hash) {
  std::array<std::uint8_t, header_bytes> h{};
  const std::size_t got = in.read(h.data(), h.size());
  // Magic and version first: a short file of another kind is "not a gbf
  // file", and a newer version may have a longer header, not a truncated one.
  if (!std::equal(h.begin(), h.begin() + std::min(got, sizeof detail::container_magic),
                  detail::container_magic))
    in.fail(detail::bad_magic_problem);
  if (got >= offset::version + 4 && get_le32(&h[offset::version]) != file_format_version) {
    // Another kind's container (version 2) says what it holds; any other
    // version is unsupported (peek_kind throws naming it).
    const detail::filter_kind found = detail::peek_kind(h.data(), got, in);
    in.fail(found == detail::filter_kind::bloom
                ? std::string("a plain Bloom filter in a version-2 container, which gbf does not "
                              "write (plain filters are version 1)")
                : detail::wrong_kind_message(found, detail::filter_kind::bloom));
  }
  if (got < header_bytes)
    in.fail("truncated file: the header has " + std::to_string(got) + " of " +
            std::to_string(header_bytes) + " bytes");

  const std::uint32_t header_length = get_le32(&h[offset::header_length]);
  if (header_length != header_bytes)
    in.fail("header length is " + std::to_string(header_length) + " bytes; version 1 headers are " +
            std::to_string(header_bytes));
  if (const std::uint32_t reserved = get_le32(&h[offset::reserved]); reserved != 0)
    in.fail("reserved header field is " + std::to_string(reserved) + ", must be 0");

  file_metadata m;
  m.l.words_per_block = get_le32(&h[offset::words_per_block]);
  m.l.bits_per_key = get_le32(&h[offset::bits_per_key]);
  m.l.hash = static_cast<hash_id>(get_le32(&h[offset::hash]));
  m.l.seed = get_le64(&h[offset::seed]);
  m.l.num_blocks = get_le64(&h[offset::num_blocks]);
  m.capacity = get_le64(&h[offset::capacity]);
  m.fpp = detail::bits_double(get_le64(&h[offset::fpp]));
  m.keys_inserted = get_le64(&h[offset::keys_inserted]);
  if (const char* problem = layout_problem(m.l))
    in.fail(std::string("impossible layout: ") + problem);
  if (!detail::recordable_fpp(m.fpp))
    in.fail("target fpp " + detail::number_text(m.fpp) + " is neither 0 (unknown) nor in (0, 1)");

  // The layout is valid, so size_bytes() <= 2^32 * 16 * 4 cannot overflow.
  const std::uint64_t payload = get_le64(&h[offset::payload_bytes]);
  if (payload != m.l.size_bytes())
    in.fail("payload size " + std::to_string(payload) +
            " bytes does not match the layout (num_blocks * words_per_block * 4 = " +
            std::to_string(m.l.size_bytes()) + ")");
  const std::uint64_t rest = in.remaining();
  if (rest < payload)
    in.fail("truncated file: the payload has " + std::to_string(rest) + " of " +
            std::to_string(payload) + " bytes");
  if (rest < payload + checksum_bytes)
    in.fail("truncated file: the checksum has " + std::to_string(rest - payload) + " of 8 bytes");
  if (rest > payload + checksum_bytes)
    in.fail("trailing bytes: " + std::to_string(rest - payload - checksum_bytes) +
            " bytes after the checksum");
  hash.update(h.data(), h.size());
  return m;
}

filter read_native(byte_source& in, const options& opts, file_metadata* metadata) {
  xxh64_stream hash;
  const file_metadata m = read_native_header(in, hash);
  filter f(m.l, opts, m.capacity);  // the checked allocation, before the payload is read
  detail::read_words_into(f, in, &hash);
  std::uint8_t stored[checksum_bytes];
  if (in.read(stored, sizeof stored) != sizeof stored)
    in.fail("truncated file: the checksum ended early (the file shrank while being read)");
  const std::uint64_t expected = get_le64(stored);
  const std::uint64_t actual = hash.digest();
  if (expected != actual) {
    char text[96];
    std::snprintf(text, sizeof text, "checksum mismatch (stored 0x%016llx, computed 0x%016llx)",
                  static_cast<unsigned long long>(expected),
                  static_cast<unsigned long long>(actual));
    in.fail(text);
  }
  detail::filter_access::set_keys_added(f, m.keys_inserted);
  if (metadata != nullptr) *metadata = m;
  return f;
}
}  // namespace

std::uint64_t serialized_size(const filter& f) { return native_size(f); }

std::vector<std::uint8_t> serialize(const filter& f, double fpp) {
  detail::check_recordable_fpp("serialize", fpp);
  vector_sink out(native_size(f));
  write_native(f, fpp, out);
  return out.take();
}

void serialize_into(const filter& f, std::uint8_t* out, std::size_t size, double fpp) {
  detail::check_recordable_fpp("serialize_into", fpp);
  detail::check_serialize_buffer("serialize_into", out, size, native_size(f));
  detail::span_sink sink(out, size);
  write_native(f, fpp, sink);
}

filter deserialize(const std::uint8_t* data, std::size_t size, const options& opts,
                   file_metadata* metadata) {
  detail::check_buffer("deserialize", data, size);
  memory_source in("gbf data", data, size);
  return read_native(in, opts, metadata);
}

void save(const filter& f, const std::string& path, double fpp) {
  detail::check_recordable_fpp("save", fpp);
  atomic_file_sink out(path);
  write_native(f, fpp, out);
  out.commit();
}

filter load(const std::string& path, const options& opts, file_metadata* metadata) {
  file_source in(path);
  return read_native(in, opts, metadata);
}

file_kind read_file_kind(const std::string& path) {
  file_source in(path);
  std::uint8_t first[20] = {};
  const std::size_t got = in.read(first, sizeof first);
  return detail::peek_kind(first, got, in);
}

file_metadata read_metadata(const std::string& path) {
  file_source in(path);
  xxh64_stream unused;
  return read_native_header(in, unused);
}

}  // namespace gbf
