// Byte I/O shared by gbf's file formats: little-endian integers, a streaming
// xxh64, byte sources (a buffer, or a file read in chunks) and the word payload
// both the native format and Parquet's SBBF store. remaining() of a source is
// known up front (the buffer's size, the file's size), so lengths in a header
// are checked against the data before anything that large is allocated.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "host/io/atomic_file.hpp"
#include "host/word_range.hpp"

namespace gbf {
class filter;
}

namespace gbf::detail {

// ---------------------------------------------------------------------------
// Little-endian integers
// ---------------------------------------------------------------------------

inline void put_le32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void put_le64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint32_t get_le32(const std::uint8_t* p) { return load_le32(p); }
inline std::uint64_t get_le64(const std::uint8_t* p) { return load_le64(p); }

inline std::uint64_t double_bits(double d) {
  std::uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}
inline double bits_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

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
// Sources: where read bytes come from
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

  /// Throws format_error "<name>: <problem>".
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

// A regular file read through a 1 MiB buffer (the Thrift reader asks for one
// byte at a time; the payload reader asks for whole chunks, which bypass it).
// Throws io_error when the path cannot be opened or is not a regular file.
class file_source final : public byte_source {
 public:
  explicit file_source(const std::string& path);
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;
  ~file_source() override;

  std::size_t read(std::uint8_t* dst, std::size_t n) override;
  std::uint64_t remaining() const override { return size_ > consumed_ ? size_ - consumed_ : 0; }

 private:
  std::size_t read_some(std::uint8_t* dst, std::size_t n);
  [[noreturn]] void fail_os(const char* what);

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t consumed_ = 0;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(std::size_t{1} << 20);
  std::size_t buffer_pos_ = 0;
  std::size_t buffer_len_ = 0;
};

// ---------------------------------------------------------------------------
// Words <-> little-endian bytes, in chunks (the payload of every format)
// ---------------------------------------------------------------------------

/// Words per step of the payload loops: 256 KiB.
inline constexpr std::size_t payload_chunk_words = std::size_t{1} << 16;

/// Writes `n` words as little-endian bytes to `out`, feeding them to `hash` when not
/// null, taken a chunk at a time from read(first, count, words) (a filter's
/// copy_words): a save holds 256 KiB of an array, not a second copy of all of it.
template <class Read>
void write_words_from(std::uint64_t n, Read&& read, byte_sink& out, xxh64_stream* hash) {
  const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, payload_chunk_words));
  std::vector<std::uint32_t> words(chunk);
  std::vector<std::uint8_t> bytes(chunk * bytes_per_word);
  for (std::uint64_t first = 0; first < n; first += payload_chunk_words) {
    const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(payload_chunk_words, n - first));
    read(first, count, words.data());
    for (std::size_t i = 0; i < count; ++i) put_le32(&bytes[bytes_per_word * i], words[i]);
    if (hash != nullptr) hash->update(bytes.data(), bytes_per_word * count);
    out.write(bytes.data(), bytes_per_word * count);
  }
}
/// Reads `n` little-endian words from `in`, feeding their bytes to `hash` when not
/// null, and hands them to write(first, count, words) a staging_words step at a
/// time: a load streams the file into the filter it allocated, rather than
/// holding a second copy of the array. The caller has checked that `in` holds them.
template <class Write>
void read_words_to(std::uint64_t n, byte_source& in, xxh64_stream* hash, Write&& write) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(std::min<std::uint64_t>(n, payload_chunk_words)) *
                                  bytes_per_word);
  copy_in_steps(
      n,
      [&](std::uint64_t, std::uint64_t step, std::uint32_t* staging) {
        for (std::uint64_t done = 0; done < step; done += payload_chunk_words) {
          const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(payload_chunk_words, step - done));
          if (in.read(bytes.data(), bytes_per_word * count) != bytes_per_word * count)
            in.fail("truncated file: the payload ended early (the file shrank while being read)");
          if (hash != nullptr) hash->update(bytes.data(), bytes_per_word * count);
          for (std::size_t i = 0; i < count; ++i) staging[done + i] = get_le32(&bytes[bytes_per_word * i]);
        }
      },
      write);
}

/// read_words_to of a plain filter's f.layout().num_words() words, into `f`.
void read_words_into(filter& f, byte_source& in, xxh64_stream* hash);

/// write_words_from of a filter's bit array (filter::copy_words).
void write_words(const filter& f, byte_sink& out, xxh64_stream* hash);

/// Whether a gbf file may record fpp as its target: 0 (unknown) or in (0, 1).
bool recordable_fpp(double fpp);

/// Throws invalid_argument "<what>: fpp must be 0 (unknown) or in (0, 1), got X" unless recordable_fpp(fpp).
void check_recordable_fpp(const char* what, double fpp);

/// Throws invalid_argument "<what>: data is null but size = N" for a null buffer of nonzero size.
void check_buffer(const char* what, const std::uint8_t* data, std::size_t size);

}  // namespace gbf::detail
