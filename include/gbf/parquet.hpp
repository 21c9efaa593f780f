// Parquet datasets: the split-block Bloom filters that Parquet writers (DuckDB,
// Spark, Arrow, Impala) store per column chunk, read straight out of .parquet
// files, and row-group pruning for a batch of keys over many files.
//
//   namespace pq = gbf::parquet;
//   std::vector<pq::column_filter_set> files;
//   for (const std::string& path : paths) files.push_back(pq::column_filters(path, "user_id"));
//   pq::pruner index(std::move(files));                       // GPU if present, else CPU
//   pq::prune_result r = index.prune(ids.data(), ids.size(), /*per_key=*/true);
//   // r.may_hold[g]: some key may be in row group g (index.row_group(g): file, row group, rows, bytes);
//   // key i may be in row groups r.row_groups[r.key_offsets[i] .. r.key_offsets[i + 1]).
//
// Hashing. Parquet hashes a value's PLAIN encoding with xxh64, seed 0: INT32 as
// its 4 little-endian bytes, INT64 as 8, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY as
// their bytes (no length prefix). gbf's default layout is that filter, and the
// pruner converts keys to the column's encoding: an integer key probing an
// INT32 column is hashed as 4 bytes, and one the column cannot hold (outside
// [-2^31, 2^31) for INT32, [0, 2^32) for an unsigned INT32, negative for an
// unsigned INT64, a string of the wrong length for FIXED_LEN_BYTE_ARRAY) is in
// no row group. Integer keys are taken by value: int32_t -1 and int64_t -1 are
// the same key. Columns of other types (BOOLEAN, INT96, FLOAT, DOUBLE) are
// refused: gbf hashes integers and byte strings only.
//
// Errors: io_error (the OS refused the file), format_error (not Parquet, a
// malformed footer or Bloom filter, an encrypted file: each names the file and
// the problem), invalid_argument (no such column, listing the file's columns;
// a column without Bloom filters, naming the row groups; a column type gbf
// cannot hash; keys of the wrong kind for the column).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/filter.hpp"
#include "gbf/keys.hpp"

namespace gbf::detail {
struct pruner_state;
}  // namespace gbf::detail

namespace gbf::parquet {

/// Parquet's physical types (parquet.thrift `Type`, same numbering).
enum class physical_type {
  boolean = 0,
  int32 = 1,
  int64 = 2,
  int96 = 3,
  float32 = 4,
  float64 = 5,
  byte_array = 6,
  fixed_len_byte_array = 7,
};

/// Parquet's name of `t`: "INT32", "BYTE_ARRAY", ...
const char* to_string(physical_type t);

/// A leaf column of a file's schema.
struct column_info {
  std::string path;               ///< Dotted path from the root, e.g. "user.id" (a top-level column: its name).
  physical_type type = physical_type::int64;
  bool is_unsigned = false;       ///< Annotated UINT_8..UINT_64 or INTEGER(isSigned = false).
  std::uint32_t type_length = 0;  ///< Width in bytes of a FIXED_LEN_BYTE_ARRAY column, else 0.
};

/// The leaf columns of the Parquet file at `path`, in schema order; io_error, format_error.
std::vector<column_info> columns(const std::string& path);
/// The same, for a whole Parquet file held in memory (`size` bytes at `data`); errors
/// name the file `name`.
std::vector<column_info> columns(const std::uint8_t* data, std::size_t size,
                                 const std::string& name = "Parquet data");

/// One row group's Bloom filter for a column.
struct row_group_filter {
  std::size_t row_group = 0;        ///< Index of the row group in its file.
  std::uint64_t num_rows = 0;       ///< Rows in the row group.
  std::uint64_t column_bytes = 0;   ///< The column chunk's total_compressed_size: data a reader skips.
  std::optional<filter> bloom;      ///< The SBBF (default layout); empty only under allow_missing.
};

/// A column's filters in one file: one entry per row group, in file order.
struct column_filter_set {
  std::string file;                 ///< The path (or buffer name) it was read from.
  column_info column;
  std::vector<row_group_filter> row_groups;
};

/// How column_filters reads.
struct read_options {
  /// false: a row group without a Bloom filter for the column is an invalid_argument
  /// naming it. true: it is returned without a filter, and pruning never skips it.
  bool allow_missing = false;
  /// Where each filter lives (default: the CPU; the pruner packs them for either backend).
  options filters = [] {
    options o;
    o.where = backend::cpu;
    return o;
  }();
};

/// The Bloom filters of `column` (a name or dotted path) in every row group of the
/// Parquet file at `path`. Throws io_error, format_error, invalid_argument (see the top).
column_filter_set column_filters(const std::string& path, const std::string& column,
                                 const read_options& opts = {});
/// The same, for a whole Parquet file held in memory (`size` bytes at `data`, which
/// need not outlive the call); errors name the file `name`.
column_filter_set column_filters(const std::uint8_t* data, std::size_t size,
                                 const std::string& column, const read_options& opts = {},
                                 const std::string& name = "Parquet data");

/// What prune() found. Row groups are numbered across files: pruner::row_group(g).
struct prune_result {
  /// Per row group: 1 when some non-null key may be in it (a row group without a
  /// filter may hold any key), 0 when none is: the row group can be skipped.
  std::vector<std::uint8_t> may_hold;
  /// per_key only: key i may be in row groups row_groups[key_offsets[i] .. key_offsets[i + 1]),
  /// ascending (key_offsets has n + 1 entries; a null key has none).
  std::vector<std::uint64_t> key_offsets;
  std::vector<std::uint32_t> row_groups;
};

/// A row group as the pruner numbers it.
struct row_group_ref {
  std::size_t file = 0;            ///< Index into the files the pruner was made from.
  std::size_t row_group = 0;       ///< Index in that file.
  std::uint64_t num_rows = 0;
  std::uint64_t column_bytes = 0;
  bool has_filter = true;          ///< false: no Bloom filter, so it may hold any key.
};

/// The filters of one column over many row groups (any number of files), packed
/// end to end for probing: on the CPU (threads over keys, AVX2 where present) or
/// the GPU (one launch over all (key, filter) pairs, filters in device memory).
/// Both give the same answers. Not thread-safe: drive one pruner from one thread.
class pruner {
 public:
  /// Packs `files` (all of the same column: same physical type and annotations,
  /// else invalid_argument naming two that differ). `where` picks the backend
  /// (automatic: the GPU if present and its memory holds the filters, else the CPU),
  /// cpu_threads and simd the CPU's kernel.
  explicit pruner(std::vector<column_filter_set> files, const options& where = {});
  pruner(pruner&&) noexcept;
  pruner& operator=(pruner&&) noexcept;
  pruner(const pruner&) = delete;
  pruner& operator=(const pruner&) = delete;
  ~pruner();

  /// Row groups over all files.
  std::size_t num_row_groups() const;
  /// Row group `g`; invalid_argument unless 0 <= g < num_row_groups().
  const row_group_ref& row_group(std::size_t g) const;
  /// The files, in the order given.
  const std::vector<std::string>& files() const;
  /// The column (as the first file describes it).
  const column_info& column() const;
  /// The backend that probes: cpu or gpu.
  backend where() const;

  /// Prunes for `n` integer keys in host memory (by value; see the top for
  /// conversions). per_key also lists each key's row groups. invalid_argument for
  /// a byte-array column.
  template <class Key>
  prune_result prune(const Key* keys, std::size_t n, bool per_key = false) const {
    static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                  "integer keys are 32- or 64-bit");
    return prune_keys(gbf::detail::erase(keys, n), std::is_signed_v<Key>, per_key);
  }
  /// The same for integer keys with an Arrow validity bitmap (bit i of key i, LSB
  /// first, host memory; null = all valid): null keys are in no row group.
  template <class Key>
  prune_result prune(const Key* keys, std::size_t n, const std::uint8_t* validity,
                     bool per_key) const {
    static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                  "integer keys are 32- or 64-bit");
    return prune_keys(gbf::detail::erase(keys, n, validity), std::is_signed_v<Key>, per_key);
  }
  /// Prunes for byte-string keys in host memory (null keys are in no row group).
  /// invalid_argument for an integer column.
  template <class Offset>
  prune_result prune(const string_keys<Offset>& keys, bool per_key = false) const {
    return prune_keys(gbf::detail::erase(keys), false, per_key);
  }

 private:
  prune_result prune_keys(const gbf::detail::key_batch& keys, bool is_signed, bool per_key) const;
  std::unique_ptr<gbf::detail::pruner_state> state_;
};

}  // namespace gbf::parquet
