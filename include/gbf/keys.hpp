// Keys as gbf takes them: 32- or 64-bit integers, or byte strings in the
// Apache Arrow layout, in host or device memory.
//
// Integer keys hash their little-endian bytes; string keys hash their bytes
// with no length prefix, as Parquet hashes BYTE_ARRAY values (gbf/hash.hpp).
// Every filter kind's public templates erase a batch into one
// detail::key_batch, the only batch type below the public API: the key
// plumbing (checks, chunking, transfers) is written once against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gbf/detail/config.hpp"

namespace gbf {

/// Byte-string keys in the Apache Arrow layout: key i is bytes [offsets[i], offsets[i+1]) of data.
///
/// Offsets need not start at 0 (a sliced Arrow array); they must be >= 0, must not
/// decrease and must not pass data_bytes, else every operation throws
/// invalid_argument naming the first bad index and leaves the filter unchanged.
/// Null keys (validity bit 0) are never added, never found (found / is_new false)
/// and never counted.
template <class Offset>  // std::int32_t (Arrow String) or std::int64_t (LargeString)
struct string_keys {
  const void* data = nullptr;              ///< Concatenated key bytes (host or device memory).
  std::size_t data_bytes = 0;              ///< Bytes at data; an offset past it is an error.
  const Offset* offsets = nullptr;         ///< count + 1 non-decreasing offsets, in data's memory space.
  std::size_t count = 0;                   ///< Number of keys.
  const std::uint8_t* validity = nullptr;  ///< Optional Arrow validity bitmap (bit i, LSB first; 0 = null).
};

namespace detail {

/// u32/u64: integer keys; str32/str64: string keys with int32/int64 offsets.
enum class key_kind { u32, u64, str32, str64 };

/// Where a caller's key or result array lives.
enum class memory_space { host, device };

/// Any batch of keys with its key type as a runtime value.
///
/// Integer keys: `data` holds `count` keys. String keys: key i is bytes
/// [offsets[i], offsets[i+1]) of `data` (`data_bytes` long), offsets of the
/// width `kind` says. `validity` (may be null) is an Arrow bitmap whose bit
/// validity_bit + i is key i's (0 = null: skipped). `space` is where data,
/// offsets, validity and the call's result arrays live; it is filled in by the
/// checks below the public API (host/keys.hpp), never by copying.
struct key_batch {
  const void* data = nullptr;
  std::size_t count = 0;
  key_kind kind = key_kind::u64;
  memory_space space = memory_space::host;
  const void* offsets = nullptr;  ///< String keys only.
  std::size_t data_bytes = 0;     ///< String keys only.
  const std::uint8_t* validity = nullptr;
  std::size_t validity_bit = 0;

  GBF_HD bool is_string() const noexcept {
    return kind == key_kind::str32 || kind == key_kind::str64;
  }
};

/// Bytes of one integer key of `kind` (u32: 4, u64: 8).
GBF_HD constexpr std::size_t key_bytes(key_kind kind) { return kind == key_kind::u32 ? 4 : 8; }
/// Bytes of one offset of a string `kind` (str32: 4, str64: 8).
GBF_HD constexpr std::size_t offset_bytes(key_kind kind) { return kind == key_kind::str32 ? 4 : 8; }

/// Whether key i is non-null under an Arrow bitmap whose bit `first_bit` is key 0's
/// (no bitmap: every key is valid).
GBF_HD GBF_FORCEINLINE bool key_valid(const std::uint8_t* validity, std::size_t first_bit,
                                      std::size_t i) {
  if (validity == nullptr) return true;
  const std::size_t bit = first_bit + i;
  return ((validity[bit >> 3] >> (bit & 7)) & 1u) != 0;
}

/// The one rule for string offsets, shared by the host check and the GPU
/// validation kernel: offsets[index] = `value` is bad when it is past the data,
/// or index 0 is negative, or it is below offsets[index - 1] = `previous`.
GBF_HD constexpr bool offset_is_bad(std::size_t index, std::int64_t value, std::int64_t previous,
                                    std::uint64_t data_bytes) {
  return (index == 0 && value < 0) || (index > 0 && value < previous) ||
         (value > 0 && static_cast<std::uint64_t>(value) > data_bytes);
}

template <class Key>
constexpr key_kind key_kind_of() {
  static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                "gbf keys are 32- or 64-bit integers");
  return sizeof(Key) == 4 ? key_kind::u32 : key_kind::u64;
}

/// `n` integer keys (and an optional validity bitmap) as a key_batch.
template <class Key>
key_batch erase(const Key* keys, std::size_t n, const std::uint8_t* validity = nullptr) {
  key_batch batch;
  batch.data = keys;
  batch.count = n;
  batch.kind = key_kind_of<Key>();
  batch.validity = validity;
  return batch;
}

/// Arrow string keys as a key_batch.
template <class Offset>
key_batch erase(const string_keys<Offset>& keys) {
  static_assert(std::is_same_v<Offset, std::int32_t> || std::is_same_v<Offset, std::int64_t>,
                "string_keys offsets are std::int32_t (Arrow String) or std::int64_t (LargeString)");
  key_batch batch;
  batch.data = keys.data;
  batch.count = keys.count;
  batch.kind = std::is_same_v<Offset, std::int32_t> ? key_kind::str32 : key_kind::str64;
  batch.offsets = keys.offsets;
  batch.data_bytes = keys.data_bytes;
  batch.validity = keys.validity;
  return batch;
}

}  // namespace detail
}  // namespace gbf
