// Chunks of host batches (host/chunker.hpp).
#include "host/chunker.hpp"

#include <algorithm>
#include <cstring>

#include "host/keys.hpp"

namespace gbf::detail {

chunker::chunker(const key_batch& keys, std::size_t max_keys, std::size_t max_bytes)
    : keys_(keys), max_keys_(std::max<std::size_t>(max_keys, 1)), max_bytes_(max_bytes) {}

bool chunker::next(key_chunk& chunk) {
  if (next_first_ >= keys_.count) return false;
  chunk = key_chunk{};
  chunk.first = next_first_;
  std::size_t n = std::min(max_keys_, keys_.count - chunk.first);
  if (keys_.is_string()) {
    chunk.byte_base = offset_at(keys_, chunk.first);
    const auto bytes_of = [&](std::size_t keys_in_chunk) {
      return static_cast<std::size_t>(offset_at(keys_, chunk.first + keys_in_chunk) -
                                      chunk.byte_base);
    };
    if (bytes_of(n) > max_bytes_) {
      // Offsets do not decrease, so bytes grow with n: binary-search the largest
      // m in [1, n] with bytes_of(m) <= max_bytes, or 1 for a string longer than that.
      std::size_t lo = 1, hi = n;
      while (lo < hi) {
        const std::size_t mid = lo + (hi - lo + 1) / 2;
        if (bytes_of(mid) <= max_bytes_) lo = mid; else hi = mid - 1;
      }
      n = lo;
    }
    chunk.bytes = bytes_of(n);
  }
  chunk.count = n;
  if (keys_.validity != nullptr) {
    const std::size_t bit = keys_.validity_bit + chunk.first;
    chunk.validity_bytes = (bit % 8 + n + 7) / 8;
  }
  next_first_ += n;
  return true;
}

std::size_t staged_key_bytes(key_kind kind, std::size_t max_keys) {
  if (kind == key_kind::str32 || kind == key_kind::str64)
    return (max_keys + 1) * offset_bytes(kind);
  return max_keys * key_bytes(kind);
}

std::size_t staged_validity_bytes(std::size_t max_keys) { return max_keys / 8 + 2; }

namespace {
template <class Offset>
void rebase(const Offset* in, std::size_t n, std::int64_t base, Offset* out) {
  for (std::size_t j = 0; j <= n; ++j) out[j] = static_cast<Offset>(in[j] - base);
}
}  // namespace

key_batch stage_chunk(const key_batch& keys, const key_chunk& chunk, void* keys_out,
                      void* data_out, std::uint8_t* validity_out) {
  key_batch staged;
  staged.kind = keys.kind;
  staged.count = chunk.count;
  staged.space = memory_space::host;
  if (keys.is_string()) {
    if (keys.kind == key_kind::str32) {
      rebase(static_cast<const std::int32_t*>(keys.offsets) + chunk.first, chunk.count,
             chunk.byte_base, static_cast<std::int32_t*>(keys_out));
    } else {
      rebase(static_cast<const std::int64_t*>(keys.offsets) + chunk.first, chunk.count,
             chunk.byte_base, static_cast<std::int64_t*>(keys_out));
    }
    if (chunk.bytes > 0)
      std::memcpy(data_out, static_cast<const unsigned char*>(keys.data) + chunk.byte_base,
                  chunk.bytes);
    staged.offsets = keys_out;
    staged.data = data_out;
    staged.data_bytes = chunk.bytes;
  } else {
    const std::size_t width = key_bytes(keys.kind);
    std::memcpy(keys_out, static_cast<const unsigned char*>(keys.data) + chunk.first * width,
                chunk.count * width);
    staged.data = keys_out;
  }
  if (keys.validity != nullptr) {
    const std::size_t bit = keys.validity_bit + chunk.first;
    std::memcpy(validity_out, keys.validity + bit / 8, chunk.validity_bytes);
    staged.validity = validity_out;
    staged.validity_bit = bit % 8;
  }
  return staged;
}

key_batch chunk_view(const key_batch& keys, const key_chunk& chunk) {
  key_batch view = keys;
  view.count = chunk.count;
  if (keys.is_string()) {
    view.offsets = static_cast<const unsigned char*>(keys.offsets) +
                   chunk.first * offset_bytes(keys.kind);
  } else {
    view.data = static_cast<const unsigned char*>(keys.data) + chunk.first * key_bytes(keys.kind);
  }
  view.validity_bit = keys.validity_bit + chunk.first;
  return view;
}

}  // namespace gbf::detail
