// Saving and loading filters: the gbf native file format and Apache Parquet's
// split-block Bloom filter (SBBF) bitset, byte for byte as docs/file-format.md
// specifies.
//
//   gbf::save(f, "users.gbf", 0.01);                    // atomic: temp file, fsync, rename
//   gbf::file_metadata meta;
//   gbf::filter g = gbf::load("users.gbf", {}, &meta);  // meta.keys_inserted, meta.fpp
//
// Native files hold the layout, capacity, target fpp, keys inserted, the words
// (little-endian) and an xxh64 checksum; loading verifies all of it and throws
// format_error naming the problem. Parquet export needs the default layout
// (W = 8, k = 8, seed 0) at a power-of-two size of 32 B .. 128 MiB.
//
// Errors: format_error (corrupt, truncated or unsupported data), io_error (the
// OS refused a file operation; names the path and strerror), invalid_argument
// (a filter that cannot be exported as asked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/layout.hpp"

namespace gbf {

/// What a gbf file records besides the bits.
struct file_metadata {
  layout l;                         ///< Geometry, hash and seed.
  std::uint64_t capacity = 0;       ///< Keys the filter was sized for, 0 = unknown.
  double fpp = 0;                   ///< Target false-positive probability, 0 = unknown.
  std::uint64_t keys_inserted = 0;  ///< Keys added when saved (duplicates included).
};

/// The gbf native format version of plain Bloom filters (other kinds use the
/// version-2 container, docs/file-format.md).
inline constexpr std::uint32_t file_format_version = 1;

/// What a gbf file holds.
enum class file_kind : std::uint32_t { bloom = 1, counting = 2, scaling = 3, cuckoo = 4 };

/// The kind of filter in the gbf file at `path`, from its first bytes; format_error
/// for a file that is not a gbf filter, io_error when it cannot be read.
file_kind read_file_kind(const std::string& path);
/// "plain Bloom", "counting Bloom", "scaling Bloom" or "cuckoo".
std::string to_string(file_kind kind);

/// `f` in the gbf native format (header, words, checksum); `fpp` (0 = unknown) is recorded;
/// invalid_argument for an fpp neither 0 nor in (0, 1).
std::vector<std::uint8_t> serialize(const filter& f, double fpp = 0);
/// Bytes serialize(f) makes.
std::uint64_t serialized_size(const filter& f);
/// serialize(f, fpp) written into `out`, a caller's buffer of exactly serialized_size(f)
/// bytes (no vector made and copied); invalid_argument for another size, a null `out` or
/// an fpp neither 0 nor in (0, 1).
void serialize_into(const filter& f, std::uint8_t* out, std::size_t size, double fpp = 0);
/// Parses `size` bytes of the native format; throws format_error (invalid_argument for a null
/// `data` with `size` > 0); fills `metadata` if non-null.
filter deserialize(const std::uint8_t* data, std::size_t size, const options& opts = {},
                   file_metadata* metadata = nullptr);

/// Writes `f` to `path` atomically (temp file in the same directory, fsync, rename); io_error,
/// invalid_argument for an fpp neither 0 nor in (0, 1) (nothing is written).
void save(const filter& f, const std::string& path, double fpp = 0);
/// Reads and verifies the file at `path`, streaming the payload; format_error, io_error,
/// allocation_error (the filter is made before its words are read), no_gpu for opts.where gpu.
filter load(const std::string& path, const options& opts = {},
            file_metadata* metadata = nullptr);
/// The header of the file at `path` plus a file-size check, without reading the
/// payload (the checksum is not verified; load() verifies it); format_error, io_error.
file_metadata read_metadata(const std::string& path);

/// Parquet's limits on an SBBF bitset, in bytes (Arrow C++ rejects anything outside).
inline constexpr std::uint64_t parquet_min_bytes = 32;
inline constexpr std::uint64_t parquet_max_bytes = std::uint64_t{128} << 20;

/// Empty when `l` can be exported as a Parquet SBBF, else every failing condition
/// ("words_per_block is 16, Parquet needs 8; size 96 bytes is not a power of two").
std::string parquet_problem(const layout& l);
/// Default-layout size_for(capacity, fpp) rounded up to a power-of-two byte size in
/// [32 B, 128 MiB]; invalid_argument when it needs more than 128 MiB or the arguments are bad.
layout parquet_compatible_layout(std::uint64_t capacity, double fpp);

/// The SBBF bitset of `f` (little-endian words), preceded by Parquet's Thrift
/// BloomFilterHeader when `with_header`; invalid_argument naming what parquet_problem finds.
std::vector<std::uint8_t> to_parquet_sbbf(const filter& f, bool with_header = true);
/// A filter from an SBBF bitset of `size` bytes (a positive multiple of 32), after a Thrift
/// BloomFilterHeader when `with_header`; format_error for malformed or unsupported input,
/// invalid_argument for a null `data` with `size` > 0.
filter from_parquet_sbbf(const std::uint8_t* data, std::size_t size, bool with_header = true,
                         const options& opts = {});
/// to_parquet_sbbf written to `path` atomically, like save(); invalid_argument, io_error.
void save_parquet_sbbf(const filter& f, const std::string& path, bool with_header = true);
/// from_parquet_sbbf of the file at `path`, streaming the bitset; format_error, io_error.
filter load_parquet_sbbf(const std::string& path, bool with_header = true,
                         const options& opts = {});

}  // namespace gbf
