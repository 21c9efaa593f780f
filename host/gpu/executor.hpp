// How every GPU filter kind runs a key operation: one executor per filter
// owns the filter's stream, the ordering against other work, the pinned
// pipeline for host batches, the checking of device string offsets and the
// deferred errors of _async calls. A kind supplies only the kernels of one
// device batch (a chunk_kernels callable); the executor calls them on the
// whole of a device batch, on pieces of it, or on the chunks of a host batch.
//
// Ordering with other work. The filter's own stream is non-blocking, so a
// synchronous operation first makes the stream it runs on wait for (1) the
// work of every _async call so far, on each caller stream one was queued on,
// and (2) the work already queued on the stream the caller gave, or, when it
// gave none, on the legacy default stream (a kernel that produced the keys,
// say), as a cudaMemcpy would. It runs on the caller's stream when one was
// given, else on the filter's own, and returns with no work pending, also
// when it throws. _async calls are stream-ordered on the caller's stream only,
// as in CUB: ordering between _async calls on different caller streams is the
// caller's.
//
// Device string batches are checked before any bit is written: a synchronous
// call runs a validation kernel and throws invalid_argument naming the first
// bad offset; an _async call cannot throw for its offsets, so its kernels are
// gated on the device by a per-call status word (a bad batch writes nothing and
// answers false) and the bad index is kept in a sticky word that synchronize()
// or the next synchronous key operation reports (and clears).
//
// Every call runs on the GPU the executor was made on (device_scope), whatever
// the caller's cudaSetDevice since; keys in another GPU's memory are refused.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/keys.hpp"
#include "host/gpu/pinned_pipeline.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf::detail {

/// Throws no_gpu ("no GPU: <reason>") unless query_gpu() finds a usable GPU.
void require_gpu();

/// "gpu (<name>, <memory>)" for the current device.
std::string describe_current_gpu();

/// The pipeline's shape from options: chunk keys (0: 4 Mi) and streams (0: 3).
struct gpu_geometry {
  std::size_t chunk_keys;
  unsigned streams;
};
/// gpu_geometry of `opts`; invalid_argument when chunk keys exceed `max_chunk_keys`
/// (what the kind's kernels take in one launch).
gpu_geometry gpu_geometry_of(const options& opts, std::size_t max_chunk_keys);

/// One key operation as a kind asks the executor to run it.
struct key_call {
  const char* what = "";          ///< The operation, for error messages.
  cudaStream_t stream = nullptr;  ///< The caller's stream; null: the filter's own (sync) / legacy default (async).
  bool async = false;             ///< Queue and return (device keys only).
  std::uint8_t* results = nullptr;        ///< One byte per key, in the keys' memory space (null: none).
  bool counting = false;                  ///< The kernels add to work.counter; the total is returned.
  std::uint64_t* device_count = nullptr;  ///< Async counting: where the total goes (device memory).
  bool ordered = false;           ///< Sequential semantics: chunks and pieces run in batch order.
  std::size_t max_piece_keys = 0; ///< Device batches launch in pieces of at most this many keys (0: whole).
};

class gpu_executor {
 public:
  /// Host batches stream through `streams` slots of `chunk_keys` keys; made on the current GPU.
  gpu_executor(std::size_t chunk_keys, unsigned streams);
  gpu_executor(const gpu_executor&) = delete;
  gpu_executor& operator=(const gpu_executor&) = delete;
  /// Waits for the _async work still queued (it may use the filter's memory).
  ~gpu_executor();

  /// The GPU everything runs on.
  int device() const noexcept { return device_; }
  /// Keys per pinned chunk.
  std::size_t chunk_keys() const noexcept { return pipeline_.chunk_keys(); }

  /// Runs a key operation (see the file comment): checks, ordering, transfers,
  /// `queue` for each device batch, waiting. Returns the count of a synchronous
  /// counting call, else 0.
  std::uint64_t run(const key_batch& keys, const key_call& call, const chunk_kernels& queue);

  /// select: `flag` kernels write one byte per key (1: selected, nulls 0) to
  /// work.results; the ascending indices of the flagged keys go to `rows` (room
  /// for keys.count, in the keys' memory space). Returns their number (sync) or
  /// writes it to call.device_count (async, device keys).
  std::uint64_t select(const key_batch& keys, const key_call& call, std::uint64_t* rows,
                       const chunk_kernels& flag);

  /// Runs `queue(stream)` (whole-array work: clear, combine, popcount, copies) on
  /// the filter's stream after every earlier operation, and waits.
  void run_sync(const std::function<void(cudaStream_t)>& queue) const;

  /// Waits for every _async call; throws the deferred error of a bad _async
  /// string batch, its message starting with `what`.
  void synchronize(const char* what) const;

  /// Makes `s` wait for the work of every _async call so far.
  void wait_for_async(cudaStream_t s) const;

  /// Device scratch of at least `bytes` bytes for call `c`, on the filter's GPU,
  /// kept between operations. The buffer is shared by every call that takes one,
  /// so an _async call that does first makes its stream wait for every earlier
  /// _async call (any of which may still use it); a larger buffer replaces the
  /// old one only after the host has waited for every _async call.
  void* scratch_for(const key_call& c, std::size_t bytes);

  /// One device word for the synchronous calls' counts.
  std::uint64_t* counter() const noexcept { return counter_.data(); }

 private:
  void require_this_gpu(const key_batch& keys, const char* what) const;
  void order_after_earlier_work(cudaStream_t s, cudaStream_t caller) const;
  void prepare_async(cudaStream_t stream) const;
  void note_async(cudaStream_t stream) const;
  void forget_finished_async() const noexcept;
  void check_device_offsets(const key_batch& keys, const char* what, cudaStream_t s) const;
  void report_async_string_error(const char* what) const;
  std::uint64_t run_async(const key_batch& keys, const key_call& call, const chunk_kernels& queue);
  void queue_pieces(const key_batch& keys, const key_call& call, std::uint8_t* results,
                    std::uint64_t* counter, const std::uint64_t* status, cudaStream_t s,
                    const chunk_kernels& queue) const;

  int device_ = 0;
  stream main_;
  pinned_pipeline pipeline_;
  struct async_stream {
    cudaStream_t stream;
    event done;
  };
  mutable std::vector<async_stream> async_streams_;  // each caller stream an _async call used
  event caller_done_;                  // re-recorded on the caller's stream by each sync call
  device_buffer<std::uint64_t> counter_{1};     // counts of synchronous calls
  device_buffer<std::uint64_t> status_{1};      // check_device_offsets' verdict
  device_buffer<std::uint64_t> sticky_bad_{1};  // first bad offset of any _async string call
  mutable bool async_strings_ = false;          // an _async string call ran since the last report
  device_buffer<unsigned char> scratch_;
};

}  // namespace gbf::detail
