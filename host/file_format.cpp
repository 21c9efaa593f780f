// The gbf native file format and the Parquet SBBF bitset (docs/file-format.md).
//
// Both formats go through one writer and one reader each, over a byte sink
// (a vector, or an atomically renamed file) and a byte source (a buffer, or a
// file read in chunks), so the in-memory variants the tests and the fuzzer use
// run exactly the code that files do. Every integer is assembled byte by byte,
// so the files are little-endian on any host.
#include "gbf/io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gbf/hash.hpp"
#include "gbf/sizing.hpp"
#include "host/atomic_file.hpp"

namespace gbf {
namespace {

// ---------------------------------------------------------------------------
// Little-endian integers
// ---------------------------------------------------------------------------

void put_le32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_le64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_le32(const std::uint8_t* p) { return detail::load_le32(p); }
std::uint64_t get_le64(const std::uint8_t* p) { return detail::load_le64(p); }

std::uint64_t double_bits(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}
double bits_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

bool valid_fpp(double fpp) { return fpp == 0 || (fpp > 0 && fpp < 1); }

std::string os_message(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------
// xxh64 over data that arrives in pieces: the same function as gbf::xxh64 of
// the concatenation (32-byte stripes feed the four lanes; the last < 32 bytes
// wait in a buffer for the tail steps).
// ---------------------------------------------------------------------------

class xxh64_stream {
 public:
  void update(const std::uint8_t* p, std::size_t n) {
    total_ += n;
    while (n > 0) {
      if (buffered_ == 0 && n >= stripe) {  // whole stripes straight from the input
        consume_stripe(p);
        p += stripe;
        n -= stripe;
        continue;
      }
      const std::size_t take = std::min(n, stripe - buffered_);
      std::memcpy(buffer_.data() + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ == stripe) {
        consume_stripe(buffer_.data());
        buffered_ = 0;
      }
    }
  }

  std::uint64_t digest() const {
    using namespace detail;
    const std::uint64_t h = total_ >= stripe ? xxh64_converge(lanes_) : xxh_prime64_5;  // seed 0
    return xxh64_finish(h + total_, buffer_.data(), buffered_);
  }

 private:
  static constexpr std::size_t stripe = 32;

  void consume_stripe(const std::uint8_t* p) { detail::xxh64_consume_stripe(lanes_, p); }

  detail::xxh64_lanes lanes_ = detail::xxh64_init_lanes(0);
  std::array<std::uint8_t, stripe> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

// ---------------------------------------------------------------------------
// Sinks: where written bytes go
// ---------------------------------------------------------------------------

using detail::atomic_file_sink;
using detail::byte_sink;
using detail::vector_sink;

// ---------------------------------------------------------------------------
// Sources: where read bytes come from. remaining() is known up front (the
// buffer's size, the file's size), so lengths in a header are checked against
// the data before anything that large is allocated.
// ---------------------------------------------------------------------------

class byte_source {
 public:
  explicit byte_source(std::string name) : name_(std::move(name)) {}
  virtual ~byte_source() = default;
  /// Copies up to n bytes to dst; returns fewer only at the end of the data.
  virtual std::size_t read(std::uint8_t* dst, std::size_t n) = 0;
  /// Bytes not yet read.
  virtual std::uint64_t remaining() const = 0;
  /// The path in quotes, or a description of the buffer, for error messages.
  const std::string& name() const { return name_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw format_error(name_ + ": " + problem);
  }

 private:
  std::string name_;
};

class memory_source final : public byte_source {
 public:
  memory_source(std::string name, const std::uint8_t* data, std::size_t size)
      : byte_source(std::move(name)), data_(data), size_(size) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    n = std::min(n, size_ - position_);
    if (n > 0) std::memcpy(dst, data_ + position_, n);
    position_ += n;
    return n;
  }
  std::uint64_t remaining() const override { return size_ - position_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

// A regular file read through a 1 MiB buffer (the Thrift reader asks for one
// byte at a time; the payload reader asks for whole chunks, which bypass it).
class file_source final : public byte_source {
 public:
  explicit file_source(const std::string& path) : byte_source("'" + path + "'") {
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the
    // regular-file check could refuse it. Reads of a regular file never block.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) fail_os("cannot open");
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail_os("cannot stat");
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw io_error(name() + ": not a regular file" + (S_ISFIFO(st.st_mode) ? " (a FIFO)" : ""),
                     S_ISDIR(st.st_mode) ? EISDIR : EINVAL);
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;
  ~file_source() override { ::close(fd_); }

  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    std::size_t done = 0;
    while (done < n) {
      if (buffer_pos_ == buffer_len_) {
        if (n - done >= buffer_.size()) {  // large request: straight into dst
          const std::size_t got = read_some(dst + done, n - done);
          if (got == 0) break;
          done += got;
          continue;
        }
        buffer_len_ = read_some(buffer_.data(), buffer_.size());
        buffer_pos_ = 0;
        if (buffer_len_ == 0) break;
      }
      const std::size_t take = std::min(buffer_len_ - buffer_pos_, n - done);
      std::memcpy(dst + done, buffer_.data() + buffer_pos_, take);
      buffer_pos_ += take;
      done += take;
    }
    consumed_ += done;
    return done;
  }
  std::uint64_t remaining() const override { return size_ > consumed_ ? size_ - consumed_ : 0; }

 private:
  // One read(2), retried on EINTR; 0 at end of file.
  std::size_t read_some(std::uint8_t* dst, std::size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) fail_os("cannot read");
    }
  }
  [[noreturn]] void fail_os(const char* what) {
    const int err = errno;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw io_error(std::string(what) + " " + name() + ": " + os_message(err), err);
  }

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t consumed_ = 0;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(std::size_t{1} << 20);
  std::size_t buffer_pos_ = 0;
  std::size_t buffer_len_ = 0;
};

// ---------------------------------------------------------------------------
// Words <-> little-endian bytes, in chunks (the payload of both formats)
// ---------------------------------------------------------------------------

constexpr std::size_t chunk_words = std::size_t{1} << 16;  // 256 KiB of payload per step

void write_words(const std::vector<std::uint32_t>& words, byte_sink& out, xxh64_stream* hash) {
  std::vector<std::uint8_t> chunk(chunk_words * bytes_per_word);
  for (std::size_t first = 0; first < words.size(); first += chunk_words) {
    const std::size_t count = std::min(chunk_words, words.size() - first);
    for (std::size_t i = 0; i < count; ++i) put_le32(&chunk[4 * i], words[first + i]);
    if (hash != nullptr) hash->update(chunk.data(), 4 * count);
    out.write(chunk.data(), 4 * count);
  }
}

// Reads l.num_words() words; the caller has checked that the source holds them.
std::vector<std::uint32_t> read_words(const layout& l, byte_source& in, xxh64_stream* hash) {
  std::vector<std::uint32_t> words(l.num_words());
  std::vector<std::uint8_t> chunk(chunk_words * bytes_per_word);
  for (std::size_t first = 0; first < words.size(); first += chunk_words) {
    const std::size_t count = std::min(chunk_words, words.size() - first);
    if (in.read(chunk.data(), 4 * count) != 4 * count)
      in.fail("truncated file: the payload ended early (the file shrank while being read)");
    if (hash != nullptr) hash->update(chunk.data(), 4 * count);
    for (std::size_t i = 0; i < count; ++i) words[first + i] = get_le32(&chunk[4 * i]);
  }
  return words;
}

// ---------------------------------------------------------------------------
// The gbf native format, version 1 (offsets in docs/file-format.md)
// ---------------------------------------------------------------------------

constexpr std::array<std::uint8_t, 8> magic = {'G', 'B', 'F', 'B', 'L', 'O', 'O', 'M'};
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
  std::copy(magic.begin(), magic.end(), h.begin());
  put_le32(&h[offset::version], file_format_version);
  put_le32(&h[offset::header_length], static_cast<std::uint32_t>(header_bytes));
  put_le32(&h[offset::words_per_block], m.l.words_per_block);
  put_le32(&h[offset::bits_per_key], m.l.bits_per_key);
  put_le32(&h[offset::hash], static_cast<std::uint32_t>(m.l.hash));
  put_le32(&h[offset::reserved], 0);
  put_le64(&h[offset::seed], m.l.seed);
  put_le64(&h[offset::num_blocks], m.l.num_blocks);
  put_le64(&h[offset::capacity], m.capacity);
  put_le64(&h[offset::fpp], double_bits(m.fpp));
  put_le64(&h[offset::keys_inserted], m.keys_inserted);
  put_le64(&h[offset::payload_bytes], m.l.size_bytes());
  return h;
}

void check_save_fpp(const char* what, double fpp) {
  if (!valid_fpp(fpp))
    throw invalid_argument(std::string(what) + ": fpp must be 0 (unknown) or in (0, 1), got " +
                           std::to_string(fpp));
}

void write_native(const filter& f, double fpp, byte_sink& out) {
  const file_metadata meta{f.get_layout(), f.capacity(), fpp, f.stats().keys_added};
  const std::vector<std::uint32_t> words = f.words();
  xxh64_stream hash;
  const auto header = encode_header(meta);
  hash.update(header.data(), header.size());
  out.write(header.data(), header.size());
  write_words(words, out, &hash);
  std::uint8_t checksum[checksum_bytes];
  put_le64(checksum, hash.digest());
  out.write(checksum, sizeof checksum);
}

std::size_t native_size(const filter& f) {
  return header_bytes + f.get_layout().size_bytes() + checksum_bytes;
}

// Reads and checks the header, and that the source holds exactly the payload
// and the checksum after it; feeds the header to `hash`.
file_metadata read_native_header(byte_source& in, xxh64_stream& hash) {
  std::array<std::uint8_t, header_bytes> h{};
  const std::size_t got = in.read(h.data(), h.size());
  // Magic and version first: a short file of another kind is "not a gbf
  // file", and a newer version may have a longer header, not a truncated one.
  if (!std::equal(h.begin(), h.begin() + std::min(got, magic.size()), magic.begin()))
    in.fail("not a gbf filter file (bad magic; expected \"GBFBLOOM\")");
  if (got >= offset::version + 4 && get_le32(&h[offset::version]) != file_format_version)
    in.fail("unsupported gbf format version " + std::to_string(get_le32(&h[offset::version])) +
            " (this library reads version " + std::to_string(file_format_version) + ")");
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
  m.fpp = bits_double(get_le64(&h[offset::fpp]));
  m.keys_inserted = get_le64(&h[offset::keys_inserted]);
  if (const char* problem = layout_problem(m.l))
    in.fail(std::string("impossible layout: ") + problem);
  if (!valid_fpp(m.fpp))
    in.fail("target fpp " + std::to_string(m.fpp) + " is neither 0 (unknown) nor in (0, 1)");

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
  const std::vector<std::uint32_t> words = read_words(m.l, in, &hash);
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
  filter f = filter::from_words(m.l, words.data(), opts, m.capacity, m.keys_inserted);
  if (metadata != nullptr) *metadata = m;
  return f;
}

// ---------------------------------------------------------------------------
// Thrift compact protocol, just enough for Parquet's BloomFilterHeader:
//   struct BloomFilterHeader {
//     1: required i32 numBytes;
//     2: required BloomFilterAlgorithm algorithm;      union { 1: SplitBlockAlgorithm BLOCK }
//     3: required BloomFilterHash hash;                union { 1: XxHash XXHASH }
//     4: required BloomFilterCompression compression;  union { 1: Uncompressed UNCOMPRESSED }
//   }
// with the member structs empty. A field header byte is (id delta << 4) | type
// when the delta to the previous id is 1..15, else the type alone followed by
// the id as a zigzag varint; 0 ends a struct. i32 values are zigzag varints.
// ---------------------------------------------------------------------------

namespace thrift {

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

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<std::uint8_t>(v | 0x80));
  out.push_back(static_cast<std::uint8_t>(v));
}

// Compact-protocol BloomFilterHeader for a bitset of num_bytes (0 < num_bytes < 2^31),
// field by field as parquet-mr and Arrow write it.
std::vector<std::uint8_t> bloom_filter_header(std::uint32_t num_bytes) {
  std::vector<std::uint8_t> out;
  out.push_back(0x10 | i32);  // field 1 (delta 1): numBytes
  put_varint(out, std::uint64_t{num_bytes} << 1);  // zigzag of a non-negative i32
  // Fields 2, 3, 4 (delta 1 each): a union whose member 1 (delta 1) is an empty
  // struct; the member's stop byte, then the union's.
  for (int field = 2; field <= 4; ++field) {
    out.push_back(0x10 | structure);
    out.push_back(0x10 | structure);
    out.push_back(0);
    out.push_back(0);
  }
  out.push_back(0);  // end of BloomFilterHeader
  return out;
}

class reader {
 public:
  explicit reader(byte_source& in) : in_(in) {}

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
    in_.fail("malformed Parquet Thrift header: " + what);
  }

 private:
  std::uint8_t byte() {
    std::uint8_t b;
    if (in_.read(&b, 1) != 1) in_.fail("truncated Parquet Thrift header");
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
    if (n > in_.remaining()) in_.fail("truncated Parquet Thrift header");
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
    if (count > in_.remaining()) in_.fail("truncated Parquet Thrift header");
  }

  std::uint8_t checked_element(int t) const {
    if (t < bool_true || t > uuid) malformed("unknown element type " + std::to_string(t));
    return static_cast<std::uint8_t>(t);
  }

  byte_source& in_;
};

// Reads one of the header's unions, which must hold exactly one member: id 1,
// a struct (the empty BLOCK / XXHASH / UNCOMPRESSED struct, whose unknown
// fields are skipped). Any other member is an algorithm gbf does not implement.
void read_union(reader& r, const char* name, const char* member_name) {
  int members = 0;
  std::int64_t last_id = 0;
  for (auto f = r.next_field(last_id); f.type != 0; f = r.next_field(last_id)) {
    ++members;
    if (f.id != 1)
      r.malformed(std::string("unsupported Bloom filter ") + name + " (union member " +
                  std::to_string(f.id) + "; gbf reads " + member_name + " = 1)");
    if (f.type != structure)
      r.malformed(std::string(name) + " member " + member_name + " has Thrift type " +
                  std::to_string(f.type) + ", expected struct (12)");
    r.skip_struct(2);
  }
  if (members != 1)
    r.malformed(std::string(name) + " union has " + std::to_string(members) +
                " members set; exactly one is required");
}

// Parses a BloomFilterHeader and returns numBytes (checked: a positive multiple of 32).
std::uint64_t read_bloom_filter_header(byte_source& in) {
  reader r(in);
  bool seen[5] = {};
  std::int32_t num_bytes = 0;
  std::int64_t last_id = 0;
  for (auto f = r.next_field(last_id); f.type != 0; f = r.next_field(last_id)) {
    switch (f.id) {
      case 1:
        if (f.type != i32)
          r.malformed("numBytes has Thrift type " + std::to_string(f.type) + ", expected i32 (5)");
        num_bytes = r.read_i32();
        break;
      case 2:
      case 3:
      case 4: {
        static const char* const names[][2] = {
            {"algorithm", "BLOCK"}, {"hash", "XXHASH"}, {"compression", "UNCOMPRESSED"}};
        const auto& [name, member] = names[f.id - 2];
        if (f.type != structure)
          r.malformed(std::string(name) + " has Thrift type " + std::to_string(f.type) +
                      ", expected struct (12)");
        read_union(r, name, member);
        break;
      }
      default: r.skip(f.type, 1, false); continue;
    }
    seen[f.id] = true;
  }
  static const char* const required[] = {"", "numBytes (1)", "algorithm (2)", "hash (3)",
                                         "compression (4)"};
  for (int id = 1; id <= 4; ++id)
    if (!seen[id]) r.malformed(std::string("required field ") + required[id] + " is missing");
  if (num_bytes <= 0 || num_bytes % 32 != 0)
    in.fail("Parquet header says numBytes = " + std::to_string(num_bytes) +
            "; it must be a positive multiple of 32 (the block size)");
  return static_cast<std::uint64_t>(num_bytes);
}

}  // namespace thrift

// ---------------------------------------------------------------------------
// Parquet SBBF
// ---------------------------------------------------------------------------

bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_parquet_exportable(const char* what, const layout& l) {
  const std::string problem = parquet_problem(l);
  if (!problem.empty())
    throw invalid_argument(std::string(what) + ": cannot export as a Parquet SBBF: " + problem);
}

void write_parquet(const filter& f, bool with_header, byte_sink& out) {
  const layout& l = f.get_layout();
  if (with_header) {
    const auto header = thrift::bloom_filter_header(static_cast<std::uint32_t>(l.size_bytes()));
    out.write(header.data(), header.size());
  }
  write_words(f.words(), out, nullptr);
}

filter read_parquet(byte_source& in, bool with_header, const options& opts) {
  const std::uint64_t available = [&] {
    if (!with_header) return in.remaining();
    const std::uint64_t num_bytes = thrift::read_bloom_filter_header(in);
    if (in.remaining() != num_bytes)
      in.fail("the Parquet header says numBytes = " + std::to_string(num_bytes) + " but " +
              std::to_string(in.remaining()) + " bytes of bitset follow it");
    return num_bytes;
  }();
  if (available == 0 || available % 32 != 0)
    in.fail("bitset size " + std::to_string(available) +
            " bytes is not a positive multiple of 32 (the SBBF block size)");
  layout l;  // the default layout is Parquet's: W = 8, k = 8, xxh64, seed 0
  l.num_blocks = available / 32;
  if (const char* problem = layout_problem(l)) in.fail(std::string("impossible layout: ") + problem);
  const std::vector<std::uint32_t> words = read_words(l, in, nullptr);
  return filter::from_words(l, words.data(), opts);
}

void check_buffer(const char* what, const std::uint8_t* data, std::size_t size) {
  if (data == nullptr && size > 0)
    throw invalid_argument(std::string(what) + ": data is null but size = " + std::to_string(size));
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

std::vector<std::uint8_t> serialize(const filter& f, double fpp) {
  check_save_fpp("serialize", fpp);
  vector_sink out(native_size(f));
  write_native(f, fpp, out);
  return out.take();
}

filter deserialize(const std::uint8_t* data, std::size_t size, const options& opts,
                   file_metadata* metadata) {
  check_buffer("deserialize", data, size);
  memory_source in("gbf data", data, size);
  return read_native(in, opts, metadata);
}

void save(const filter& f, const std::string& path, double fpp) {
  check_save_fpp("save", fpp);
  atomic_file_sink out(path);
  write_native(f, fpp, out);
  out.commit();
}

filter load(const std::string& path, const options& opts, file_metadata* metadata) {
  file_source in(path);
  return read_native(in, opts, metadata);
}

file_metadata read_metadata(const std::string& path) {
  file_source in(path);
  xxh64_stream unused;
  return read_native_header(in, unused);
}

std::string parquet_problem(const layout& l) {
  if (const char* problem = layout_problem(l)) return std::string("invalid layout: ") + problem;
  std::vector<std::string> problems;
  if (l.words_per_block != 8)
    problems.push_back("words_per_block is " + std::to_string(l.words_per_block) +
                       ", Parquet needs 8");
  if (l.bits_per_key != 8)
    problems.push_back("bits_per_key is " + std::to_string(l.bits_per_key) + ", Parquet needs 8");
  if (l.seed != 0) problems.push_back("seed is " + std::to_string(l.seed) + ", Parquet needs 0");
  const std::uint64_t bytes = l.size_bytes();
  if (!is_power_of_two(bytes))
    problems.push_back("size " + std::to_string(bytes) + " bytes is not a power of two");
  if (bytes < parquet_min_bytes)
    problems.push_back("size " + std::to_string(bytes) + " bytes is below Parquet's 32-byte minimum");
  if (bytes > parquet_max_bytes)
    problems.push_back("size " + std::to_string(bytes) +
                       " bytes exceeds Parquet's 128 MiB maximum (134217728 bytes)");
  std::string joined;
  for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
  return joined;
}

layout parquet_compatible_layout(std::uint64_t capacity, double fpp) {
  layout l = size_for(capacity, fpp);  // the default shape is Parquet's
  const std::uint64_t needed = l.size_bytes();
  if (needed > parquet_max_bytes)
    throw invalid_argument("parquet_compatible_layout: " + std::to_string(capacity) +
                           " keys at fpp " + std::to_string(fpp) + " need " +
                           std::to_string(needed) +
                           " bytes, more than Parquet's 128 MiB maximum (134217728 bytes)");
  std::uint64_t bytes = parquet_min_bytes;
  while (bytes < needed) bytes <<= 1;
  l.num_blocks = bytes / 32;
  return l;
}

std::vector<std::uint8_t> to_parquet_sbbf(const filter& f, bool with_header) {
  check_parquet_exportable("to_parquet_sbbf", f.get_layout());
  vector_sink out(f.get_layout().size_bytes() + (with_header ? 32 : 0));
  write_parquet(f, with_header, out);
  return out.take();
}

filter from_parquet_sbbf(const std::uint8_t* data, std::size_t size, bool with_header,
                         const options& opts) {
  check_buffer("from_parquet_sbbf", data, size);
  memory_source in("Parquet SBBF data", data, size);
  return read_parquet(in, with_header, opts);
}

void save_parquet_sbbf(const filter& f, const std::string& path, bool with_header) {
  check_parquet_exportable("save_parquet_sbbf", f.get_layout());
  atomic_file_sink out(path);
  write_parquet(f, with_header, out);
  out.commit();
}

filter load_parquet_sbbf(const std::string& path, bool with_header, const options& opts) {
  file_source in(path);
  return read_parquet(in, with_header, opts);
}

}  // namespace gbf
