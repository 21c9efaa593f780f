// Chunked key readers: raw arrays, .npy arrays (both "binary": fixed-width
// little-endian integers after an optional header) and text lines.
#include "cli/key_reader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cli/text.hpp"
#include "gbf/error.hpp"

namespace gbf::cli {
namespace {

constexpr std::size_t max_text_chunk_bytes = std::size_t{64} << 20;
constexpr char npy_magic[] = "\x93NUMPY";
constexpr std::size_t npy_magic_size = 6;

[[noreturn]] void fail_format(const std::string& path, const std::string& what) {
  throw format_error("'" + path + "': " + what);
}

[[noreturn]] void fail_io(const std::string& path, const std::string& what) {
  const int err = errno;
  throw io_error("'" + path + "': " + what + ": " + std::strerror(err), err);
}

[[noreturn]] void fail_memory(const std::string& path, const std::string& where) {
  throw io_error("'" + path + "': out of memory " + where + ": " + std::strerror(ENOMEM), ENOMEM);
}

/// "byte 1,234 (line 5)" and the like: where in a key file something happened.
std::string at_byte(std::uint64_t byte, const char* unit, std::uint64_t index) {
  return "byte " + with_commas(byte) + " (" + unit + " " + with_commas(index) + ")";
}

/// Size of the regular file behind `f`, nullopt for pipes, terminals and the like.
std::optional<std::uint64_t> regular_file_size(std::FILE* f) {
  struct stat st {};
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_size);
}

std::string extension_of(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

bool starts_with_npy_magic(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  file_ptr f = open_for_reading(path, "keys file");
  char head[npy_magic_size] = {};
  return std::fread(head, 1, npy_magic_size, f.get()) == npy_magic_size &&
         std::memcmp(head, npy_magic, npy_magic_size) == 0;
}

// ---------------------------------------------------------------------------
// Fixed-width integers: raw arrays and the payload of .npy files
// ---------------------------------------------------------------------------

struct binary_spec {
  unsigned width = 8;                    ///< Bytes per key: 4 or 8.
  bool is_signed = false;
  bool sign_unknown = false;             ///< A raw array: no dtype says whether it is signed.
  std::optional<std::uint64_t> count;    ///< Keys in the file, when known.
  std::uint64_t data_offset = 0;         ///< Bytes before the first key (the .npy header).
};

class binary_reader final : public key_reader {
 public:
  binary_reader(std::string path, file_ptr file, const binary_spec& spec)
      : key_reader(std::move(path)), file_(std::move(file)), spec_(spec) {}

  bool next(key_chunk& chunk, std::size_t max_keys) override {
    chunk.type = type();
    chunk.is_signed = spec_.is_signed;
    chunk.sign_unknown = spec_.sign_unknown;
    if (spec_.count) {
      max_keys = static_cast<std::size_t>(std::min<std::uint64_t>(max_keys, *spec_.count - read_));
      if (max_keys == 0) {
        check_at_end();
        chunk.u32.clear();
        chunk.u64.clear();
        return false;
      }
    }
    const std::size_t keys = spec_.width == 4 ? read_into(chunk.u32, max_keys) : read_into(chunk.u64, max_keys);
    read_ += keys;
    return keys > 0;
  }

  std::optional<std::uint64_t> known_count() const override { return spec_.count; }

  std::uint64_t count_keys() override {
    if (!spec_.count) fail_format(path_, "cannot count the keys of a stream before reading it; pass --capacity");
    return *spec_.count;
  }

  key_type type() const override { return spec_.width == 4 ? key_type::u32 : key_type::u64; }

 private:
  /// Byte offset of key `key` in the file.
  std::uint64_t byte_of(std::uint64_t key) const { return spec_.data_offset + key * spec_.width; }

  // The size said how many keys there are; a file that still has bytes after
  // them (a /proc file reporting size 0, a file growing while read) would
  // otherwise lose them silently.
  void check_at_end() {
    if (checked_end_) return;
    checked_end_ = true;
    char extra = 0;
    const std::size_t got = std::fread(&extra, 1, 1, file_.get());
    if (std::ferror(file_.get())) fail_io(path_, "read failed at " + at_byte(byte_of(read_), "key", read_));
    if (got != 0)
      fail_format(path_, "holds more bytes than its size said (" + with_commas(byte_of(read_)) +
                             "); it changed while being read, or is not a regular file");
  }

  template <class Word>
  std::size_t read_into(std::vector<Word>& out, std::size_t max_keys) {
    const auto room_for = [&](std::size_t keys) {
      try {
        out.resize(keys);
      } catch (const std::bad_alloc&) {
        fail_memory(path_, "for a chunk of " + with_commas(keys) + " keys (" +
                               with_commas(static_cast<std::uint64_t>(keys) * sizeof(Word)) + " bytes) at " +
                               at_byte(byte_of(read_), "key", read_));
      }
    };
    // A file of known size fills its chunk at once. A stream's chunk grows as its
    // data arrives (doubling from 64 Ki keys): a large --chunk-keys must not cost
    // its whole size for a pipe that brings a few keys.
    std::size_t bytes = 0;
    if (spec_.count) {
      room_for(max_keys);
      bytes = std::fread(out.data(), 1, max_keys * sizeof(Word), file_.get());
    } else {
      std::size_t room = std::min<std::size_t>(max_keys, std::size_t{1} << 16);
      for (;;) {
        room_for(room);
        const std::size_t want = room * sizeof(Word) - bytes;
        const std::size_t got = std::fread(reinterpret_cast<char*>(out.data()) + bytes, 1, want, file_.get());
        bytes += got;
        if (got < want || room == max_keys) break;  // the end of the stream (or an error), or a full chunk
        room = room > max_keys / 2 ? max_keys : 2 * room;
      }
    }
    if (std::ferror(file_.get()))
      fail_io(path_, "read failed at byte " + with_commas(byte_of(read_) + bytes) + " (key " +
                         with_commas(read_ + bytes / sizeof(Word)) + ")");
    if (bytes % sizeof(Word) != 0)
      fail_format(path_, "ends with a partial key at " +
                             at_byte(byte_of(read_ + bytes / sizeof(Word)), "key", read_ + bytes / sizeof(Word)) +
                             " (" + std::to_string(bytes % sizeof(Word)) + " trailing bytes; keys are " +
                             std::to_string(sizeof(Word)) + " bytes)");
    out.resize(bytes / sizeof(Word));
    if (spec_.count && out.size() < max_keys)
      fail_format(path_, "truncated: " + std::to_string(read_ + out.size()) + " of " +
                             std::to_string(*spec_.count) + " keys present");
    return out.size();
  }

  file_ptr file_;
  binary_spec spec_;
  std::uint64_t read_ = 0;
  bool checked_end_ = false;
};

binary_spec raw_spec(const std::string& path, std::FILE* f, unsigned width) {
  binary_spec spec;
  spec.width = width;
  spec.sign_unknown = true;
  if (const auto size = regular_file_size(f)) {
    if (*size % width != 0)
      fail_format(path, "size " + std::to_string(*size) + " bytes is not a multiple of " +
                            std::to_string(width) + " (u" + std::to_string(width * 8) + " keys)");
    spec.count = *size / width;
  }
  return spec;
}

// .npy: magic, major and minor version bytes, header length (u16 in v1, u32 in
// v2/v3), then a Python dict literal such as
//   {'descr': '<i8', 'fortran_order': False, 'shape': (1000,), }
// padded with spaces and a newline. The data follows in C order.

std::string read_exact(std::FILE* f, const std::string& path, std::size_t n, const char* what) {
  std::string bytes(n, '\0');
  if (std::fread(bytes.data(), 1, n, f) != n) {
    if (std::ferror(f)) fail_io(path, "read failed");
    fail_format(path, std::string("truncated .npy file: ") + what + " is incomplete");
  }
  return bytes;
}

/// The value after "'key':" in a .npy header dict, up to the next ',' or '}' outside
/// parentheses and quotes, with surrounding spaces removed.
std::string npy_header_value(const std::string& header, const std::string& key,
                             const std::string& path) {
  const std::size_t at = header.find("'" + key + "'");
  const std::size_t colon = at == std::string::npos ? at : header.find(':', at);
  if (colon == std::string::npos) fail_format(path, ".npy header has no '" + key + "' entry");
  std::size_t end = colon + 1;
  int depth = 0;
  bool quoted = false;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '\'' || c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string value = header.substr(colon + 1, end - colon - 1);
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  value.erase(value.begin(), std::find_if(value.begin(), value.end(), not_space));
  value.erase(std::find_if(value.rbegin(), value.rend(), not_space).base(), value.end());
  return value;
}

void parse_npy_dtype(std::string descr, const std::string& path, binary_spec& spec) {
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"'))
    descr = descr.substr(1, descr.size() - 2);
  static const char* const supported = "<i4, <u4, <i8 or <u8";
  if (descr == "<i4" || descr == "<u4" || descr == "<i8" || descr == "<u8") {
    spec.width = descr[2] == '4' ? 4 : 8;
    spec.is_signed = descr[1] == 'i';
    return;
  }
  const char kind = descr.size() >= 2 ? descr[1] : '?';
  std::string why;
  if (kind == 'f' || kind == 'c')
    why = "a floating-point dtype; keys must be integers";
  else if (descr[0] == '>' && (kind == 'i' || kind == 'u'))
    why = "big-endian; convert with a.astype(a.dtype.newbyteorder('<'))";
  else if ((kind == 'i' || kind == 'u') && descr.size() == 3 && (descr[2] == '4' || descr[2] == '8'))
    why = std::string("byte order '") + descr[0] + "' where a 4- or 8-byte integer needs '<' (little-endian)";
  else if (kind == 'i' || kind == 'u')
    why = "gbf keys are 32- or 64-bit integers; convert with a.astype('<i8')";
  else
    why = "not an integer dtype";
  fail_format(path, ".npy dtype '" + descr + "' is not supported (" + why + "); gbf reads " + supported);
}

std::uint64_t parse_npy_shape(const std::string& shape, const std::string& path) {
  // A 1-D shape is "(N,)"; anything else (scalars "()", "(N, M)") is refused.
  const bool one_d = shape.size() >= 3 && shape.front() == '(' && shape.back() == ')' &&
                     std::count(shape.begin(), shape.end(), ',') == 1 &&
                     shape.find_first_not_of(" ", shape.find(',') + 1) == shape.size() - 1;
  if (!one_d) fail_format(path, ".npy array of shape " + shape + " is not 1-D");
  const std::string digits = shape.substr(1, shape.find(',') - 1);
  // Digits only: strtoull alone takes "-1" for 2^64 - 1 (then "too large").
  const bool all_digits = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = all_digits ? std::strtoull(digits.c_str(), &end, 10) : 0;
  if (!all_digits || errno != 0 || *end != '\0')
    fail_format(path, ".npy shape " + shape + " is not a valid length");
  return n;
}

binary_spec npy_spec(const std::string& path, std::FILE* f) {
  const std::string preamble = read_exact(f, path, npy_magic_size + 2, "the preamble");
  if (preamble.compare(0, npy_magic_size, npy_magic, npy_magic_size) != 0)
    fail_format(path, "not a .npy file (bad magic; expected \\x93NUMPY)");
  const unsigned major = static_cast<unsigned char>(preamble[npy_magic_size]);
  if (major < 1 || major > 3)
    fail_format(path, "unsupported .npy format version " + std::to_string(major) + " (reads 1, 2, 3)");
  const std::string len_bytes = read_exact(f, path, major == 1 ? 2 : 4, "the header length");
  std::uint64_t header_len = 0;
  for (std::size_t i = len_bytes.size(); i-- > 0;)
    header_len = header_len << 8 | static_cast<unsigned char>(len_bytes[i]);
  if (header_len > (1u << 20)) fail_format(path, ".npy header of " + std::to_string(header_len) + " bytes is implausible");
  const std::string header = read_exact(f, path, static_cast<std::size_t>(header_len), "the header");

  binary_spec spec;
  parse_npy_dtype(npy_header_value(header, "descr", path), path, spec);
  if (npy_header_value(header, "fortran_order", path) != "False")
    fail_format(path, ".npy array is in Fortran order; gbf reads C-order 1-D arrays");
  const std::string shape = npy_header_value(header, "shape", path);
  spec.count = parse_npy_shape(shape, path);
  const std::uint64_t data_offset = preamble.size() + len_bytes.size() + header_len;
  spec.data_offset = data_offset;
  if (*spec.count > (UINT64_MAX - data_offset) / spec.width)
    fail_format(path, ".npy shape " + shape + " is too large: " + std::to_string(*spec.count) + " keys of " +
                          std::to_string(spec.width) + " bytes exceed 64-bit byte counts");
  if (const auto size = regular_file_size(f)) {
    if (*size != data_offset + *spec.count * spec.width)
      fail_format(path, ".npy data is " + std::to_string(*size - data_offset) + " bytes, the header says " +
                            std::to_string(*spec.count * spec.width) + " (" +
                            std::to_string(*spec.count) + " keys)");
  }
  return spec;
}

// ---------------------------------------------------------------------------
// Text: one key per line
// ---------------------------------------------------------------------------

/// Bit i set where block[i] is '\n', for the 64 bytes at `block`.
inline std::uint64_t newline_bits(const char* block) {
#if defined(__SSE2__)
  const __m128i newline = _mm_set1_epi8('\n');
  std::uint64_t bits = 0;
  for (int i = 0; i < 4; ++i) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i));
    bits |= std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, newline)))} << (16 * i);
  }
  return bits;
#else
  // Eight bytes at a time: the high bit of each byte equal to '\n' (exactly: no
  // carry crosses a byte), then those 8 bits gathered into the top byte by a multiply.
  constexpr std::uint64_t ones = 0x0101010101010101, high = 0x8080808080808080, low = ~high;
  std::uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) {
    std::uint64_t word;
    std::memcpy(&word, block + 8 * i, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    word = __builtin_bswap64(word);  // byte 0 in the low bits
#endif
    const std::uint64_t x = word ^ (ones * '\n');
    const std::uint64_t found = ~(((x & low) + low) | x) & high;
    bits |= ((found >> 7) * 0x0102040810204080 >> 56) << (8 * i);
  }
  return bits;
#endif
}

/// The low `n` bits set (all 64 from n = 64 on).
inline std::uint64_t low_bits(std::size_t n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1; }

/// Bytes past the end that copy_overrunning may read and write.
constexpr std::size_t copy_overrun = 32;

/// Copies `n` bytes in 32-byte steps, so reads and writes up to 32 bytes past the
/// ends (the bytes written past are overwritten by the next key or cut off).
inline void copy_overrunning(char* to, const char* from, std::size_t n) {
  std::memcpy(to, from, copy_overrun);
  for (std::size_t i = copy_overrun; i < n; i += copy_overrun) std::memcpy(to + i, from + i, copy_overrun);
}

/// Copies the keys of the lines whole in a read buffer to a chunk's text_data.
struct line_scan {
  const char* line;       ///< The next line's first byte.
  const char* end;        ///< The end of the bytes read; 64 bytes past it may be read.
  const char* last_line;  ///< The last line copied.
  const char* text;       ///< text_data's first byte: offsets count from it.
  char* to;               ///< Where the next key goes.
  const char* text_end;   ///< The end of text_data: a key and its overrun must end before.
  std::ptrdiff_t left;    ///< Key and offset bytes the chunk may still take (has_room).

  /// Copies at most `most` keys while `left` is positive, writing where each ends
  /// to `offsets`; stops before a line with no '\n' before `end` or with no room
  /// before `text_end`. Returns how many.
  std::size_t copy_lines(std::int64_t* offsets, std::size_t most) {
    // In locals: the key bytes stored through `to` could alias the members.
    const char* next = line;
    const char* previous = last_line;
    char* key = to;
    std::ptrdiff_t room = left;
    std::size_t taken = 0;
    const char* block = next;  // newline bits of 64 bytes from here, those not yet passed
    std::uint64_t newlines = newline_bits(block) & low_bits(static_cast<std::size_t>(end - block));
    while (taken < most && room > 0) {
      while (newlines == 0 && block + 64 < end) {
        block += 64;
        newlines = newline_bits(block) & low_bits(static_cast<std::size_t>(end - block));
      }
      if (newlines == 0) break;  // the rest of the buffer is part of a line
      const char* const newline = block + __builtin_ctzll(newlines);
      newlines &= newlines - 1;
      std::size_t n = static_cast<std::size_t>(newline - next);
      if (static_cast<std::size_t>(text_end - key) < n + copy_overrun) break;
      copy_overrunning(key, next, n);
      if (n > 0 && next[n - 1] == '\r') --n;  // a '\r' before the '\n' is not part of the key
      key += n;
      offsets[taken++] = key - text;
      room -= static_cast<std::ptrdiff_t>(n + sizeof(std::int64_t));
      previous = next;
      next = newline + 1;
    }
    line = next;
    last_line = previous;
    to = key;
    left = room;
    return taken;
  }
};

// Lines are cut from a fixed read buffer and copied straight into the chunk:
// memory is the chunk (at most about max_text_chunk_bytes plus one key of at
// most max_text_key_bytes) and the buffer, whatever the lines' lengths.
//
// The lines whole in the buffer go in bulk (take_lines: the newlines of 64 bytes
// at a time as a bit mask, each key copied in 32-byte steps, the offsets written
// in batches), about 2x faster than a memchr, string append and push_back per
// line for 8-24 byte keys. Only into the capacity the chunk has: the line that
// needs more, and a line crossing the buffer's end, go one by one through
// append_line and push_back, which grow the chunk as they always did (the same
// capacities, the same allocation failures).
class text_reader final : public key_reader {
 public:
  text_reader(std::string path, file_ptr file)
      : key_reader(std::move(path)), file_(std::move(file)), fd_(fileno(file_.get())) {}

  bool next(key_chunk& chunk, std::size_t max_keys) override {
    chunk.type = key_type::text;
    chunk.text_data.clear();
    chunk.offsets.assign(1, 0);
    try {
      while (has_room(chunk, max_keys)) {
        take_lines(chunk, max_keys);
        if (!has_room(chunk, max_keys) || !append_line(chunk.text_data)) break;
        chunk.offsets.push_back(static_cast<std::int64_t>(chunk.text_data.size()));
      }
    } catch (const std::bad_alloc&) {
      fail_memory(path_, "at " + at_byte(line_start_, "line", line_) + " while reading a chunk of " +
                             with_commas(chunk.offsets.size() - 1) + " keys and " +
                             with_commas(chunk.text_data.size()) + " key bytes");
    }
    return chunk.offsets.size() > 1;
  }

  std::optional<std::uint64_t> known_count() const override { return std::nullopt; }

  std::uint64_t count_keys() override {
    if (path_ == "-") fail_format(path_, "cannot count the lines of standard input before reading it");
    // A pipe or FIFO cannot be read twice: refuse before consuming any of it.
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))
      fail_format(path_, "cannot count the lines of a stream (a pipe or FIFO) before reading it; "
                         "pass --capacity");
    std::uint64_t lines = 0;
    char last = '\n';
    while (fill()) {
      lines += static_cast<std::uint64_t>(std::count(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(length_), '\n'));
      last = buffer_[length_ - 1];
    }
    if (::lseek(fd_, 0, SEEK_SET) != 0) fail_io(path_, "seek failed");
    buffer_start_ = line_start_ = line_ = 0;
    position_ = length_ = 0;
    return lines + (last != '\n' ? 1 : 0);
  }

  key_type type() const override { return key_type::text; }

 private:
  /// Whether `chunk` takes another key: fewer than max_keys, and its key bytes and
  /// offsets under max_text_chunk_bytes.
  static bool has_room(const key_chunk& chunk, std::size_t max_keys) {
    return chunk.offsets.size() <= max_keys &&
           chunk.text_data.size() + chunk.offsets.size() * sizeof(std::int64_t) < max_text_chunk_bytes;
  }

  /// Appends the lines whole in the buffer (their '\n' read) to `chunk`, as
  /// append_line and push_back would one by one, while it has room and capacity;
  /// allocates nothing. (A line in the buffer is never too long.)
  void take_lines(key_chunk& chunk, std::size_t max_keys) {
    static_assert(buffer_bytes < max_text_key_bytes, "a line in the buffer is never too long");
    const std::size_t region = length_ - position_;
    const std::size_t first = chunk.offsets.size();  // offsets[first] ends the first key taken
    const std::size_t data = chunk.text_data.size();
    // Every line taken has its '\n' in the region: at most `region` lines, and
    // fewer key bytes than `region`.
    const std::size_t most = std::min({region, max_keys + 1 - first, chunk.offsets.capacity() - first});
    const std::size_t text_size = std::min(chunk.text_data.capacity(), data + region + copy_overrun);
    if (most == 0 || text_size < data + copy_overrun) return;
    chunk.text_data.resize(text_size);  // within the capacity, as the offsets below
    line_scan scan;
    scan.line = scan.last_line = buffer_.data() + position_;
    scan.end = scan.line + region;
    scan.text = chunk.text_data.data();
    scan.to = chunk.text_data.data() + data;
    scan.text_end = chunk.text_data.data() + text_size;
    scan.left = static_cast<std::ptrdiff_t>(max_text_chunk_bytes - data - first * sizeof(std::int64_t));
    std::size_t taken = 0;
    while (taken < most) {
      const std::size_t batch = std::min(offsets_batch, most - taken);
      chunk.offsets.resize(first + taken + batch);  // zero-fills what copy_lines overwrites
      const std::size_t got = scan.copy_lines(chunk.offsets.data() + first + taken, batch);
      taken += got;
      if (got < batch) break;
    }
    chunk.offsets.resize(first + taken);
    chunk.text_data.resize(static_cast<std::size_t>(scan.to - scan.text));
    position_ = static_cast<std::size_t>(scan.line - buffer_.data());
    line_ += taken;
    if (taken > 0) line_start_ = buffer_start_ + static_cast<std::uint64_t>(scan.last_line - buffer_.data());
  }

  /// Appends the next line's key to `out`; false at the end of the file.
  bool append_line(std::string& out) {
    const std::size_t start = out.size();
    line_start_ = buffer_start_ + position_;
    ++line_;
    bool any = false;
    for (;;) {
      if (position_ == length_ && !fill()) break;
      any = true;
      const char* begin = buffer_.data() + position_;
      const auto* newline = static_cast<const char*>(std::memchr(begin, '\n', length_ - position_));
      const std::size_t n = newline ? static_cast<std::size_t>(newline - begin) : length_ - position_;
      // + 1: a '\r' before the '\n' is not part of the key.
      if (out.size() - start + n > max_text_key_bytes + 1) fail_too_long();
      out.append(begin, n);
      position_ += n + (newline ? 1 : 0);
      if (newline) break;
    }
    if (!any) {
      --line_;
      return false;
    }
    if (out.size() > start && out.back() == '\r') out.pop_back();
    if (out.size() - start > max_text_key_bytes) fail_too_long();
    return true;
  }

  /// Reads the next block into the buffer; false at the end of the file.
  bool fill() {
    buffer_start_ += length_;
    position_ = length_ = 0;
    for (;;) {
      const ssize_t got = ::read(fd_, buffer_.data(), buffer_bytes);
      if (got >= 0) {
        length_ = static_cast<std::size_t>(got);
        return got > 0;
      }
      if (errno != EINTR)
        fail_io(path_, "read failed at byte " + with_commas(buffer_start_) +
                           (line_ > 0 ? " (line " + with_commas(line_) + ")" : std::string()));
    }
  }

  [[noreturn]] void fail_too_long() const {
    fail_format(path_, "line " + with_commas(line_) + " (starting at byte " + with_commas(line_start_) +
                           ") is longer than the maximum key length of " +
                           with_commas(max_text_key_bytes) + " bytes (16 MiB)");
  }

  static constexpr std::size_t buffer_bytes = std::size_t{1} << 18;
  /// Bytes past the data read that take_lines may read: a 64-byte newline block.
  static constexpr std::size_t buffer_slack = 64;
  static constexpr std::size_t offsets_batch = 1024;

  file_ptr file_;
  int fd_;
  std::vector<char> buffer_ = std::vector<char>(buffer_bytes + buffer_slack);
  std::uint64_t buffer_start_ = 0;  ///< File offset of buffer_[0].
  std::size_t position_ = 0;        ///< Next unread byte in buffer_.
  std::size_t length_ = 0;          ///< Valid bytes in buffer_.
  std::uint64_t line_ = 0;          ///< 1-based number of the line being (or last) read.
  std::uint64_t line_start_ = 0;    ///< Its file offset.
};

// Text with one decimal integer per line, read as 8-byte integer keys: the keys a
// Python int, a NumPy int64 / uint64 array and a Parquet INT64 column give. (Text
// keys are a line's bytes, so the line "42" read as text is not the key 42.) As in
// Python, a key is its value as an int64 when it fits, else as a uint64, so one
// file cannot hold both negative keys and keys of 2^63 or more.
class decimal_reader final : public key_reader {
 public:
  decimal_reader(const std::string& path, file_ptr file)
      : key_reader(path), lines_(path, std::move(file)) {}

  bool next(key_chunk& chunk, std::size_t max_keys) override {
    if (!lines_.next(text_, max_keys)) return false;
    const std::size_t n = text_.size();
    chunk.type = key_type::u64;
    chunk.u64.resize(n);
    for (std::size_t i = 0; i < n; ++i) chunk.u64[i] = parse(i);
    lines_read_ += n;
    chunk.is_signed = any_negative_;  // for printing: no key is 2^63 or more then
    return true;
  }

  std::optional<std::uint64_t> known_count() const override { return std::nullopt; }

  std::uint64_t count_keys() override {
    const std::uint64_t lines = lines_.count_keys();
    lines_read_ = 0;
    any_negative_ = any_past_int64_ = false;
    return lines;
  }

  key_type type() const override { return key_type::u64; }

 private:
  /// Line i of the current chunk as a key's 8 bytes; format_error naming the line.
  std::uint64_t parse(std::size_t i) {
    const auto begin = static_cast<std::size_t>(text_.offsets[i]);
    const auto length = static_cast<std::size_t>(text_.offsets[i + 1]) - begin;
    const char* first = text_.text_data.data() + begin;
    const char* const last = first + length;
    const bool negative = length > 0 && *first == '-';
    if (length > 0 && (*first == '-' || *first == '+')) ++first;
    unsigned long long magnitude = 0;
    const std::from_chars_result r = std::from_chars(first, last, magnitude);
    const std::uint64_t line = lines_read_ + i + 1;
    if (first == last || r.ec == std::errc::invalid_argument || r.ptr != last)
      fail(line, begin, length, "is not a decimal integer");
    constexpr std::uint64_t int64_limit = std::uint64_t{1} << 63;
    if (r.ec == std::errc::result_out_of_range || (negative && magnitude > int64_limit))
      fail(line, begin, length, "is outside the 64-bit keys, -2^63 to 2^64 - 1");
    any_negative_ |= negative && magnitude != 0;
    any_past_int64_ |= !negative && magnitude >= int64_limit;
    if (any_negative_ && any_past_int64_)
      fail(line, begin, length,
           "makes the keys mix negative integers and integers of 2^63 or more, which no one "
           "64-bit integer type holds (as a Python list refuses to)");
    return negative ? std::uint64_t{0} - magnitude : magnitude;
  }

  [[noreturn]] void fail(std::uint64_t line, std::size_t begin, std::size_t length, const char* why) const {
    const std::size_t shown = std::min<std::size_t>(length, 40);
    fail_format(path_, "line " + with_commas(line) + " ('" + printable(std::string_view(text_.text_data).substr(begin, shown)) +
                           (shown < length ? "...'" : "'") + ") " + why + " (--keys-format int)");
  }

  text_reader lines_;
  key_chunk text_;
  std::uint64_t lines_read_ = 0;  ///< Lines of the chunks before this one.
  bool any_negative_ = false;
  bool any_past_int64_ = false;
};

key_format detect_format(const std::string& path) {
  if (path == "-") return key_format::text;
  if (starts_with_npy_magic(path)) return key_format::npy;
  const std::string ext = extension_of(path);
  if (ext == ".npy") return key_format::npy;  // reports the bad magic
  if (ext == ".u32") return key_format::u32;
  if (ext == ".u64") return key_format::u64;
  if (ext == ".bin" || ext == ".raw" || ext == ".dat")
    fail_format(path, "raw binary keys of unknown width: pass --keys-format u32 or --keys-format u64");
  return key_format::text;
}

}  // namespace

std::size_t key_chunk::size() const {
  switch (type) {
    case key_type::u32: return u32.size();
    case key_type::u64: return u64.size();
    case key_type::text: return offsets.empty() ? 0 : offsets.size() - 1;
  }
  return 0;
}

std::string key_chunk::key_string(std::size_t i) const {
  std::string out;
  append_key(i, out);
  return out;
}

namespace {
template <class Integer>
void append_decimal(Integer value, std::string& out) {
  char digits[24];
  const std::to_chars_result end = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, end.ptr);
}
}  // namespace

void key_chunk::append_key(std::size_t i, std::string& out) const {
  switch (type) {
    case key_type::u32:
      if (is_signed) return append_decimal(static_cast<std::int32_t>(u32[i]), out);
      return append_decimal(u32[i], out);
    case key_type::u64:
      if (is_signed) return append_decimal(static_cast<std::int64_t>(u64[i]), out);
      return append_decimal(u64[i], out);
    case key_type::text:
      out.append(text_data, static_cast<std::size_t>(offsets[i]),
                 static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
      return;
  }
}

void print_selected(const key_chunk& c, const bool* found, std::uint64_t first_row, bool row_numbers) {
  constexpr std::size_t flush_at = std::size_t{1} << 16;
  std::string lines;
  lines.reserve(2 * flush_at);
  const std::size_t n = c.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (!found[i]) continue;
    if (row_numbers) {
      append_decimal(first_row + i, lines);
    } else {
      c.append_key(i, lines);
    }
    lines += '\n';
    if (lines.size() >= flush_at) {
      std::fwrite(lines.data(), 1, lines.size(), stdout);
      lines.clear();
    }
  }
  std::fwrite(lines.data(), 1, lines.size(), stdout);
}

void file_closer::operator()(std::FILE* f) const {
  if (f != stdin) std::fclose(f);
}

file_ptr open_for_reading(const std::string& path, const char* what) {
  if (path == "-") return file_ptr(stdin);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail_io(path, std::string("cannot open ") + what);
  struct stat st {};
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::fclose(f);
    errno = EISDIR;
    fail_io(path, std::string("cannot read ") + what);
  }
  return file_ptr(f);
}

std::unique_ptr<key_reader> key_reader::open(const std::string& path, key_format format) {
  if (format == key_format::automatic) format = detect_format(path);
  file_ptr file = open_for_reading(path, "keys file");
  switch (format) {
    case key_format::u32:
    case key_format::u64: {
      const binary_spec spec = raw_spec(path, file.get(), format == key_format::u32 ? 4 : 8);
      return std::make_unique<binary_reader>(path, std::move(file), spec);
    }
    case key_format::npy: {
      const binary_spec spec = npy_spec(path, file.get());
      return std::make_unique<binary_reader>(path, std::move(file), spec);
    }
    case key_format::int_text:
      return std::make_unique<decimal_reader>(path, std::move(file));
    case key_format::text:
    case key_format::automatic:
      break;
  }
  return std::make_unique<text_reader>(path, std::move(file));
}

}  // namespace gbf::cli
