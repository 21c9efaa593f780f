// The pinned pipeline (host/gpu/pinned_pipeline.hpp).
#include "host/gpu/pinned_pipeline.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "host/chunker.hpp"

namespace gbf::detail {

namespace {

// After a failure, waits for whatever `s` still runs (so that no kernel or copy
// outlives the call that queued it) and drops any error this raises: the error
// being thrown already says what went wrong.
void settle(cudaStream_t s) noexcept {
  cudaStreamSynchronize(s);
  cudaGetLastError();
}

}  // namespace

std::size_t chunk_bytes_for(std::size_t chunk_keys) {
  constexpr std::size_t min_bytes = std::size_t{64} << 10;
  constexpr std::size_t max_bytes = std::size_t{64} << 20;
  return std::clamp(chunk_keys * 32, min_bytes, max_bytes);
}

// One stage of the pipeline (see the header).
struct pinned_pipeline::slot {
  explicit slot(std::size_t chunk_keys)
      : staged_keys(checked_bytes(chunk_keys, sizeof(std::uint64_t))),
        staged_results(chunk_keys),
        keys(checked_bytes(chunk_keys, sizeof(std::uint64_t))),
        results(chunk_keys),
        counter(1) {}

  stream work;
  event done;         // the slot's last chunk: copies, kernels and D2H all finished
  event kernel_done;  // the slot's last chunk's kernels (orders the next chunk's in an ordered run)
  pinned_buffer<unsigned char> staged_keys;  // integer keys, or a string chunk's offsets
  pinned_buffer<std::uint8_t> staged_results;
  device_buffer<unsigned char> keys;  // cudaMalloc'd: aligned for 64-bit keys
  device_buffer<std::uint8_t> results;
  device_buffer<std::uint64_t> counter;
  std::uint8_t* pending_results = nullptr;  // caller's array awaiting staged_results
  std::size_t pending_count = 0;

  // Allocated on the first batch that needs them: validity bytes, and a string
  // chunk's bytes (grown when one string outgrows them).
  pinned_buffer<unsigned char> staged_data;
  pinned_buffer<std::uint8_t> staged_validity;
  device_buffer<unsigned char> data;
  device_buffer<std::uint8_t> validity;
};

pinned_pipeline::pinned_pipeline(std::size_t chunk_keys, unsigned slots)
    : chunk_keys_(chunk_keys), num_slots_(slots) {}

pinned_pipeline::~pinned_pipeline() = default;

void pinned_pipeline::reserve_slots() {
  if (!slots_.empty()) return;
  std::vector<slot> slots;
  slots.reserve(num_slots_);
  // The offsets of a string chunk (chunk_keys + 1 of them, 8 bytes at most)
  // share the key buffers: one more key's room.
  for (unsigned i = 0; i < num_slots_; ++i) slots.emplace_back(chunk_keys_ + 1);
  slots_ = std::move(slots);
}

// Allocates a slot's validity buffers on the first batch with a bitmap, and
// grows its string buffers for a chunk of `data_bytes` bytes; all of a size or
// none, so a failure leaves the slot as it was.
void pinned_pipeline::reserve(slot& s, const key_batch& keys, std::size_t data_bytes) {
  if (keys.validity != nullptr && s.validity.size() == 0) {
    pinned_buffer<std::uint8_t> staged_validity(staged_validity_bytes(chunk_keys_));
    device_buffer<std::uint8_t> validity(staged_validity_bytes(chunk_keys_));
    s.staged_validity = std::move(staged_validity);
    s.validity = std::move(validity);
  }
  if (!keys.is_string()) return;
  const std::size_t wanted = std::max(data_bytes, chunk_bytes_for(chunk_keys_));
  if (s.data.size() < wanted) {
    s.staged_data = pinned_buffer<unsigned char>();  // free first: less peak memory
    s.data = device_buffer<unsigned char>();
    pinned_buffer<unsigned char> staged_data(wanted);
    device_buffer<unsigned char> data(wanted);
    s.staged_data = std::move(staged_data);
    s.data = std::move(data);
  }
}

// Waits for the slot's last chunk and hands its results to the caller.
void pinned_pipeline::retire(slot& s) {
  s.done.synchronize();
  if (s.pending_results != nullptr) {
    std::memcpy(s.pending_results, s.staged_results.data(), s.pending_count);
    s.pending_results = nullptr;
    s.pending_count = 0;
  }
}

// After a failure: lets every queued copy and kernel finish (they read the
// caller's arrays) and forgets results that will never be delivered.
void pinned_pipeline::abandon() noexcept {
  for (slot& s : slots_) {
    settle(s.work.get());
    s.pending_results = nullptr;
    s.pending_count = 0;
  }
}

std::uint64_t pinned_pipeline::run(const key_batch& keys, const pipeline_run& run,
                                   const chunk_kernels& queue) {
  reserve_slots();
  const std::size_t max_bytes = chunk_bytes_for(chunk_keys_);
  // Pinned caller memory is copied from directly. A batch that starts in
  // pageable memory (the common case) is staged whole, with no more queries.
  const bool starts_pinned =
      !keys.is_string() && pointer_type(keys.data) == cudaMemoryTypeHost && keys.validity == nullptr;
  try {
    for (slot& s : slots_) {
      if (run.order_after_earlier_work) run.order_after_earlier_work(s.work.get());
      if (run.counting)
        GBF_CUDA_TRY(cudaMemsetAsync(s.counter.data(), 0, sizeof(std::uint64_t), s.work.get()));
    }
    chunker chunks(keys, chunk_keys_, max_bytes);
    key_chunk chunk;
    for (std::size_t index = 0; chunks.next(chunk); ++index) {
      slot& s = slots_[index % slots_.size()];
      const cudaStream_t st = s.work.get();
      retire(s);  // chunk index - S is done: its buffers are free, its results delivered
      reserve(s, keys, chunk.bytes);

      key_batch device_keys;
      const key_batch view = chunk_view(keys, chunk);
      const std::size_t key_array_bytes =
          keys.is_string() ? (chunk.count + 1) * offset_bytes(keys.kind)
                           : chunk.count * key_bytes(keys.kind);
      // Both ends of the chunk: a batch may run past the end of a cudaHostRegister'ed range.
      const bool direct =
          starts_pinned && pointer_type(view.data) == cudaMemoryTypeHost &&
          pointer_type(static_cast<const unsigned char*>(view.data) + key_array_bytes - 1) ==
              cudaMemoryTypeHost;
      if (direct) {
        device_keys = view;
      } else {
        device_keys = stage_chunk(keys, chunk, s.staged_keys.data(), s.staged_data.data(),
                                  s.staged_validity.data());
      }
      // H2D: the key array (or offsets), the string bytes, the validity bytes.
      const void* key_source = keys.is_string() ? device_keys.offsets : device_keys.data;
      GBF_CUDA_TRY(cudaMemcpyAsync(s.keys.data(), key_source, key_array_bytes,
                                   cudaMemcpyHostToDevice, st));
      if (keys.is_string()) {
        device_keys.offsets = s.keys.data();
        if (chunk.bytes > 0)
          GBF_CUDA_TRY(cudaMemcpyAsync(s.data.data(), device_keys.data, chunk.bytes,
                                       cudaMemcpyHostToDevice, st));
        device_keys.data = s.data.data();
      } else {
        device_keys.data = s.keys.data();
      }
      if (device_keys.validity != nullptr) {
        GBF_CUDA_TRY(cudaMemcpyAsync(s.validity.data(), device_keys.validity, chunk.validity_bytes,
                                     cudaMemcpyHostToDevice, st));
        device_keys.validity = s.validity.data();
      }
      device_keys.space = memory_space::device;

      if (run.ordered && index > 0) {
        const slot& previous = slots_[(index - 1) % slots_.size()];
        GBF_CUDA_TRY(cudaStreamWaitEvent(st, previous.kernel_done.get(), 0));
      }
      chunk_work work;
      work.keys = device_keys;
      work.first = chunk.first;
      work.index = index;
      work.results = run.results != nullptr ? s.results.data() : nullptr;
      work.counter = s.counter.data();
      work.stream = st;
      queue(work);
      if (run.ordered) s.kernel_done.record(st);

      if (run.results != nullptr) {
        GBF_CUDA_TRY(cudaMemcpyAsync(s.staged_results.data(), s.results.data(), chunk.count,
                                     cudaMemcpyDeviceToHost, st));
        s.pending_results = run.results + chunk.first;
        s.pending_count = chunk.count;
      }
      s.done.record(st);
    }
    for (slot& s : slots_) retire(s);
    if (!run.counting) return 0;
    std::uint64_t total = 0;
    for (slot& s : slots_) {
      std::uint64_t slot_total = 0;
      GBF_CUDA_TRY(cudaMemcpyAsync(&slot_total, s.counter.data(), sizeof(slot_total),
                                   cudaMemcpyDeviceToHost, s.work.get()));
      s.work.synchronize();
      total += slot_total;
    }
    return total;
  } catch (...) {
    abandon();
    throw;
  }
}

}  // namespace gbf::detail
