// Cutting a host batch into chunks, and staging a chunk into buffers of its
// own: how every host batch travels to the GPU (host/gpu/pinned_pipeline.hpp),
// written without CUDA so that it is tested on any machine.
//
// A chunk holds at most `max_keys` keys and, for string keys, at most
// `max_bytes` bytes of key data; a single string longer than that travels
// alone. Staging a chunk makes it self-contained: integer keys are copied,
// string offsets are rebased to the chunk's first byte (offset 0) and its bytes
// copied after them, and the validity bits are copied from the byte that holds
// the chunk's first bit (the staged batch's validity_bit says where in it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gbf/keys.hpp"

namespace gbf::detail {

/// One chunk of a batch.
struct key_chunk {
  std::size_t first = 0;           ///< Index of the chunk's first key in the batch.
  std::size_t count = 0;           ///< Keys in the chunk (>= 1).
  std::int64_t byte_base = 0;      ///< Strings: offsets[first], the chunk's first byte.
  std::size_t bytes = 0;           ///< Strings: bytes of the chunk's keys.
  std::size_t validity_bytes = 0;  ///< Bitmap bytes covering the chunk (0 without a bitmap).
};

/// Walks a host batch chunk by chunk, in order.
class chunker {
 public:
  /// `keys` is a checked host batch; max_keys >= 1.
  chunker(const key_batch& keys, std::size_t max_keys, std::size_t max_bytes);

  /// Describes the next chunk in `chunk`; false once every key has been handed out.
  bool next(key_chunk& chunk);

 private:
  const key_batch& keys_;
  std::size_t max_keys_;
  std::size_t max_bytes_;
  std::size_t next_first_ = 0;
};

/// Bytes of the staged key array of `max_keys` keys: integer keys, or the
/// max_keys + 1 offsets of a string chunk, whichever `kind` needs.
std::size_t staged_key_bytes(key_kind kind, std::size_t max_keys);
/// Bytes of the staged bitmap of `max_keys` keys (the first byte may hold 7 bits before the chunk).
std::size_t staged_validity_bytes(std::size_t max_keys);

/// Copies `chunk` of `keys` into staging buffers (each large enough: see the
/// sizes above; `data_out` holds chunk.bytes) and returns the staged batch:
/// integer keys or rebased offsets at `keys_out`, string bytes at `data_out`,
/// validity at `validity_out` (unused without a bitmap).
key_batch stage_chunk(const key_batch& keys, const key_chunk& chunk, void* keys_out,
                      void* data_out, std::uint8_t* validity_out);

/// The chunk as a view of the caller's batch, nothing copied: keys from
/// chunk.first, string offsets still indexing the whole data buffer.
key_batch chunk_view(const key_batch& keys, const key_chunk& chunk);

}  // namespace gbf::detail
