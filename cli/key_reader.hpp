// Reading keys from files in bounded chunks: raw little-endian uint32/uint64
// arrays, text with one key per line, and NumPy .npy arrays of integers.
//
// A file is never read whole: next() fills a key_chunk with at most
// `max_keys` keys (and, for text, about 64 MiB of key bytes and offsets),
// reusing the chunk's storage. "-" reads standard input.
//
// Text: every line is a key, its bytes without the line ending ("\n" or
// "\r\n"); an empty line is the empty key; a final newline does not make an
// extra empty key. Keys hash as byte strings (no length prefix). Lines are
// streamed through a small buffer straight into the chunk, never held whole
// elsewhere, and a line longer than max_text_key_bytes is an error.
//
// Every failure is an error naming the file and the position (byte offset,
// and line or key number): an I/O error, an allocation failure (io_error with
// ENOMEM), a malformed or truncated file. None is taken for the end of input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gbf::cli {

/// The longest text key (line without its ending) the reader accepts: 16 MiB.
constexpr std::size_t max_text_key_bytes = std::size_t{16} << 20;

/// How a key file is read: automatic (by magic and extension), raw little-endian
/// u32 / u64 arrays, text (each line's bytes a key), int_text (each line a decimal
/// integer, an 8-byte key as a Python int or Parquet INT64 gives), .npy.
enum class key_format { automatic, u32, u64, text, int_text, npy };

/// What a chunk holds.
enum class key_type { u32, u64, text };

/// A batch of keys of one type; only the members of that type are used.
struct key_chunk {
  key_type type = key_type::u64;
  bool is_signed = false;              ///< Integers from a signed .npy dtype (printing only).
  /// Integers from a raw .u32 / .u64 file, whose bytes say nothing of a sign:
  /// `gbf parquet` reads them as a column of their width holds them.
  bool sign_unknown = false;
  std::vector<std::uint32_t> u32;
  std::vector<std::uint64_t> u64;
  std::string text_data;               ///< Text keys' bytes, back to back.
  std::vector<std::int64_t> offsets;   ///< Text key i is text_data[offsets[i], offsets[i + 1]).

  std::size_t size() const;
  /// Key i as printed by `query --select`: decimal for integers, the bytes for text.
  std::string key_string(std::size_t i) const;
  /// Appends key_string(i) to `out` (no allocation of its own).
  void append_key(std::size_t i, std::string& out) const;
};

/// `query --select`'s lines for the keys of `c` whose `found` is true: the key
/// (key_string), or with `row_numbers` its 0-based row, first_row + i. Written to
/// stdout 64 KiB at a time (a printf or fwrite per key took 5x the query).
void print_selected(const key_chunk& c, const bool* found, std::uint64_t first_row, bool row_numbers);

/// Closes a std::FILE* it owns (never stdin).
struct file_closer {
  void operator()(std::FILE* f) const;
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

/// Opens `path` ("-" = stdin) for reading; io_error naming the file when it cannot.
file_ptr open_for_reading(const std::string& path, const char* what);

class key_reader {
 public:
  /// Opens the key file `path` as `format`. automatic: "-" is text; a regular file
  /// starting with the .npy magic is npy (pipes and FIFOs are not sniffed: that
  /// would consume their first bytes); extensions .u32 and .u64 are raw arrays of that width;
  /// .bin, .raw and .dat are refused (the key width is unknown: pass --keys-format);
  /// anything else is text. Throws io_error / format_error naming the file.
  static std::unique_ptr<key_reader> open(const std::string& path, key_format format);

  virtual ~key_reader() = default;
  /// Fills `chunk` with the next keys (at most max_keys); false when none are left.
  virtual bool next(key_chunk& chunk, std::size_t max_keys) = 0;
  /// Keys in the file when known without reading it (raw and .npy files), else nullopt.
  virtual std::optional<std::uint64_t> known_count() const = 0;
  /// Counts the keys, reading the file if need be (text: counts lines); the reader
  /// then starts again from the first key. Throws for standard input, which cannot be re-read.
  virtual std::uint64_t count_keys() = 0;
  /// The type of the keys this reader yields.
  virtual key_type type() const = 0;

  const std::string& path() const { return path_; }

 protected:
  explicit key_reader(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace gbf::cli
