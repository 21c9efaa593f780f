// The pinned pipeline: how a host batch of any size reaches the kernels of any
// filter kind.
//
// The batch is cut into chunks (host/chunker.hpp); chunk c runs on slot c % S
// (S streams, default 3). Each slot owns a stream, pinned staging buffers,
// device buffers and events:
//
//   host:   wait slot done (chunk c-S) -> deliver its results -> stage chunk c
//   stream: H2D copies -> the kind's kernels -> D2H results -> record done
//
// With three slots the H2D copy of chunk c+1, the kernels of chunk c and the
// D2H copy of chunk c-1 run at once (they sit on different streams). A slot's
// buffers are reused only after the host has waited for its `done` event,
// which follows every use of them, so no copy or kernel ever sees a buffer
// being refilled. Integer keys already in pinned memory skip staging and are
// copied straight from the caller's array (alive until the call returns: run
// drains every slot before it returns, also when it throws).
//
// An ordered run additionally orders the kernels of successive chunks: chunk
// c's stream waits (after its H2D copies are queued, so copies still overlap)
// for the event chunk c-1 recorded after its kernels. The kernels then run in
// batch order, each seeing the writes of all earlier chunks, which is what
// operations with sequential semantics (add_new) need; a scratch buffer shared
// by the chunks' kernels is safe for the same reason.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "gbf/keys.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf::detail {

/// What one chunk's kernels are given.
struct chunk_work {
  key_batch keys;                   ///< The chunk's keys, in device memory.
  std::size_t first = 0;            ///< Index of its first key in the batch.
  std::size_t index = 0;            ///< The chunk's number in the batch.
  std::uint8_t* results = nullptr;  ///< Device: one byte per key for the caller (null: none).
  std::uint64_t* counter = nullptr; ///< Device: a counter the chunks of a batch add to (zeroed per batch).
  /// Device: an _async string batch's validation word (gpu::offsets_ok or the
  /// first bad index); the kernels write nothing but false answers unless it is
  /// offsets_ok. Null: the offsets are known to be good.
  const std::uint64_t* status = nullptr;
  cudaStream_t stream = nullptr;    ///< Where the kernels go.
};

/// Queues one chunk's kernels (a filter kind's operation).
using chunk_kernels = std::function<void(const chunk_work&)>;

/// How a host batch runs through the pipeline.
struct pipeline_run {
  std::uint8_t* results = nullptr;  ///< Host: one byte per key, filled from the chunks' results.
  bool counting = false;            ///< Sum the chunks' counters and return the total.
  bool ordered = false;             ///< Chunks' kernels in batch order (see the file comment).
  /// Makes a slot's stream wait for earlier work before the batch's first copy.
  std::function<void(cudaStream_t)> order_after_earlier_work;
};

class pinned_pipeline {
 public:
  /// `chunk_keys` keys per chunk, `slots` streams; buffers are allocated on the first run.
  pinned_pipeline(std::size_t chunk_keys, unsigned slots);
  pinned_pipeline(const pinned_pipeline&) = delete;
  pinned_pipeline& operator=(const pinned_pipeline&) = delete;
  ~pinned_pipeline();

  /// Streams the host batch `keys` through the slots, calling `queue` once per
  /// chunk, and returns the summed counters (0 unless run.counting). Returns with
  /// no work pending, also when it throws.
  std::uint64_t run(const key_batch& keys, const pipeline_run& run, const chunk_kernels& queue);

  /// Keys per chunk.
  std::size_t chunk_keys() const noexcept { return chunk_keys_; }

 private:
  struct slot;
  void reserve_slots();
  void reserve(slot& s, const key_batch& keys, std::size_t data_bytes);
  void retire(slot& s);
  void abandon() noexcept;

  std::size_t chunk_keys_;
  unsigned num_slots_;
  std::vector<slot> slots_;
};

/// Bytes of string data a chunk holds (a single longer string travels alone).
std::size_t chunk_bytes_for(std::size_t chunk_keys);

}  // namespace gbf::detail
