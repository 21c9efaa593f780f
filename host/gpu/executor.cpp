// The GPU executor (host/gpu/executor.hpp).
#include "host/gpu/executor.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "host/backend.hpp"
#include "host/chunker.hpp"
#include "host/keys.hpp"
#include "kernels/keys.cuh"
#include "kernels/select.cuh"

namespace gbf::detail {
namespace {

// After a failure, waits for whatever `s` still runs (so that no kernel or copy
// outlives the call that queued it) and drops any error this raises.
void settle(cudaStream_t s) noexcept {
  cudaStreamSynchronize(s);
  cudaGetLastError();
}

void require_device_keys(const key_batch& keys, const char* what) {
  if (keys.count != 0 && keys.space != memory_space::device)
    throw invalid_argument(std::string(what) +
                           ": the async API needs device pointers, but the keys are in host "
                           "memory (use the synchronous call for host batches)");
}

constexpr std::size_t default_chunk_keys = std::size_t{4} << 20;
constexpr unsigned default_streams = 3;

}  // namespace

void require_gpu() {
  const gpu_status gpu = query_gpu();
  if (!gpu.available) throw no_gpu("no GPU: " + gpu.description);
}

std::string describe_current_gpu() {
  int device = 0;
  GBF_CUDA_TRY(cudaGetDevice(&device));
  cudaDeviceProp properties{};
  GBF_CUDA_TRY(cudaGetDeviceProperties(&properties, device));
  return "gpu (" + std::string(properties.name) + ", " + format_bytes(properties.totalGlobalMem) +
         ")";
}

gpu_geometry gpu_geometry_of(const options& opts, std::size_t max_chunk_keys) {
  gpu_geometry geometry{opts.gpu_chunk_keys, opts.gpu_streams};
  if (geometry.chunk_keys == 0) geometry.chunk_keys = std::min(default_chunk_keys, max_chunk_keys);
  if (geometry.chunk_keys > max_chunk_keys) {
    throw invalid_argument("gpu_chunk_keys must be at most " + std::to_string(max_chunk_keys) +
                           " (got " + std::to_string(geometry.chunk_keys) + ")");
  }
  if (geometry.streams == 0) geometry.streams = default_streams;
  return geometry;
}

gpu_executor::gpu_executor(std::size_t chunk_keys, unsigned streams)
    : pipeline_(chunk_keys, streams) {
  GBF_CUDA_TRY(cudaGetDevice(&device_));  // where main_ and the buffers were just made
  GBF_CUDA_TRY(cudaMemsetAsync(sticky_bad_.data(), 0xff, sizeof(std::uint64_t), main_.get()));
  main_.synchronize();
}

gpu_executor::~gpu_executor() {
  // Async work on a caller's stream may still use the filter's memory: let it
  // finish before the buffers go (errors cannot leave a destructor).
  for (const async_stream& a : async_streams_) cudaEventSynchronize(a.done.get());
  cudaGetLastError();
}

// An empty batch has no memory to speak of (check_batch marks it host):
// allowed. A kernel reading another GPU's memory would fault (no peer access
// is set up) and poison the context: refused up front, naming both GPUs.
void gpu_executor::require_this_gpu(const key_batch& keys, const char* what) const {
  if (keys.space != memory_space::device || keys.count == 0) return;
  const int holder = pointer_device(keys.is_string() ? keys.offsets : keys.data);
  if (holder >= 0 && holder != device_) {
    throw invalid_argument(std::string(what) + ": the keys are in the memory of GPU " +
                           std::to_string(holder) + ", the filter on GPU " +
                           std::to_string(device_));
  }
}

void gpu_executor::wait_for_async(cudaStream_t s) const {
  for (const async_stream& a : async_streams_)
    GBF_CUDA_TRY(cudaStreamWaitEvent(s, a.done.get(), 0));
}

void gpu_executor::order_after_earlier_work(cudaStream_t s, cudaStream_t caller) const {
  wait_for_async(s);
  const cudaStream_t earlier = caller != nullptr ? caller : cudaStreamLegacy;
  if (earlier == s) return;
  caller_done_.record(earlier);
  GBF_CUDA_TRY(cudaStreamWaitEvent(s, caller_done_.get(), 0));
}

// The stream's entry is made before any of the call's work is queued: made
// after, a failure to create its event would leave queued kernels that no
// later call waits for (and the destructor would free memory under them).
void gpu_executor::prepare_async(cudaStream_t stream) const {
  for (const async_stream& a : async_streams_) {
    if (a.stream == stream) return;
  }
  async_streams_.push_back({stream, event{}});  // a never-recorded event counts as complete
}

void gpu_executor::note_async(cudaStream_t stream) const {
  for (const async_stream& a : async_streams_) {
    if (a.stream == stream) return a.done.record(stream);
  }
  throw std::logic_error("note_async: the stream was not prepared");
}

// A synchronous call made its stream(s) wait for every _async call's event and
// then waited for them on the host: all those events have completed, and
// forgetting them keeps a program that uses a new stream per request from
// making every later call wait on (and hold) an event per stream ever used.
void gpu_executor::forget_finished_async() const noexcept { async_streams_.clear(); }

void gpu_executor::run_sync(const std::function<void(cudaStream_t)>& queue) const {
  const device_scope on_device(device_);
  const cudaStream_t s = main_.get();
  try {
    order_after_earlier_work(s, nullptr);
    queue(s);
    main_.synchronize();
    forget_finished_async();
  } catch (...) {
    settle(s);
    throw;
  }
}

void* gpu_executor::scratch_for(const key_call& c, std::size_t bytes) {
  const device_scope on_device(device_);
  if (c.async) wait_for_async(c.stream);
  if (scratch_.size_bytes() < bytes) {
    // An earlier _async call's kernels may still use the old buffer, and
    // cudaFree is not promised to wait for them (it "may" synchronize): the
    // host waits for every one first. Synchronous calls have finished.
    for (const async_stream& a : async_streams_) GBF_CUDA_TRY(cudaEventSynchronize(a.done.get()));
    scratch_ = device_buffer<unsigned char>();  // free the old one first: less peak memory
    scratch_ = device_buffer<unsigned char>(bytes);
  }
  return scratch_.data();
}

// The validation kernel leaves the first bad index in a device word, which
// comes back to the host with the two offsets that name the problem.
void gpu_executor::check_device_offsets(const key_batch& keys, const char* what,
                                        cudaStream_t s) const {
  std::uint64_t first_bad = gpu::offsets_ok;
  GBF_CUDA_TRY(cudaMemsetAsync(status_.data(), 0xff, sizeof(std::uint64_t), s));
  gpu::validate_offsets(keys, status_.data(), nullptr, s);
  GBF_CUDA_TRY(cudaMemcpyAsync(&first_bad, status_.data(), sizeof(first_bad),
                               cudaMemcpyDeviceToHost, s));
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  if (first_bad == gpu::offsets_ok) return;
  const std::size_t width = offset_bytes(keys.kind);
  const std::size_t from = first_bad == 0 ? 0 : static_cast<std::size_t>(first_bad) - 1;
  unsigned char raw[16] = {};
  copy_device_to_host(raw, static_cast<const unsigned char*>(keys.offsets) + from * width,
                      (first_bad == 0 ? 1 : 2) * width);
  key_batch window = keys;
  window.offsets = raw;
  const std::int64_t previous = first_bad == 0 ? 0 : offset_at(window, 0);
  const std::int64_t value = offset_at(window, first_bad == 0 ? 0 : 1);
  throw invalid_argument(std::string(what) + ": " +
                         bad_offset_message(static_cast<std::size_t>(first_bad), value, previous,
                                            keys.data_bytes));
}

void gpu_executor::report_async_string_error(const char* what) const {
  if (!async_strings_) return;
  std::uint64_t first_bad = gpu::offsets_ok;
  run_sync([&](cudaStream_t s) {
    GBF_CUDA_TRY(cudaMemcpyAsync(&first_bad, sticky_bad_.data(), sizeof(first_bad),
                                 cudaMemcpyDeviceToHost, s));
    GBF_CUDA_TRY(cudaMemsetAsync(sticky_bad_.data(), 0xff, sizeof(std::uint64_t), s));
  });
  async_strings_ = false;
  if (first_bad != gpu::offsets_ok) {
    throw invalid_argument(std::string(what) +
                           ": string keys: an earlier _async call had a bad offset at offsets[" +
                           std::to_string(first_bad) +
                           "] (it wrote no bit; contains answered false, count 0)");
  }
}

void gpu_executor::synchronize(const char* what) const {
  run_sync([](cudaStream_t) {});  // the filter's stream waits for every _async call's stream
  report_async_string_error(what);
}

// Queues a device batch's kernels on `s`: whole, or in pieces of at most
// call.max_piece_keys keys, in batch order (each piece's kernels see the
// writes of the earlier pieces: one stream).
void gpu_executor::queue_pieces(const key_batch& keys, const key_call& call,
                                std::uint8_t* results, std::uint64_t* counter,
                                const std::uint64_t* status, cudaStream_t s,
                                const chunk_kernels& queue) const {
  const std::size_t piece_keys = call.max_piece_keys == 0 ? keys.count : call.max_piece_keys;
  key_chunk piece;
  std::size_t index = 0;
  for (std::size_t first = 0; first < keys.count; first += piece_keys, ++index) {
    piece.first = first;
    piece.count = std::min(piece_keys, keys.count - first);
    chunk_work work;
    // A piece of a string batch keeps indexing the caller's whole data buffer.
    work.keys = piece.first == 0 && piece.count == keys.count ? keys : chunk_view(keys, piece);
    work.first = first;
    work.index = index;
    work.results = results == nullptr ? nullptr : results + first;
    work.counter = counter;
    work.status = status;
    work.stream = s;
    queue(work);
  }
}

std::uint64_t gpu_executor::run_async(const key_batch& keys, const key_call& call,
                                      const chunk_kernels& queue) {
  require_device_keys(keys, call.what);
  const cudaStream_t s = call.stream;
  prepare_async(s);
  if (call.counting) {
    // The kernels accumulate: the caller's counter starts from zero in stream order.
    GBF_CUDA_TRY(cudaMemsetAsync(call.device_count, 0, sizeof(std::uint64_t), s));
  }
  if (keys.count == 0) return 0;
  if (!keys.is_string()) {
    try {
      queue_pieces(keys, call, call.results, call.device_count, nullptr, s, queue);
    } catch (...) {
      note_async(s);  // pieces queued before the failure still use the filter: later calls wait for them
      throw;
    }
    note_async(s);
    return 0;
  }
  // A status word of the call's own: its kernels run only when its offsets pass.
  async_strings_ = true;
  void* status = nullptr;
  GBF_CUDA_TRY(cudaMallocAsync(&status, sizeof(std::uint64_t), s));
  auto* word = static_cast<std::uint64_t*>(status);
  try {
    GBF_CUDA_TRY(cudaMemsetAsync(word, 0xff, sizeof(std::uint64_t), s));
    gpu::validate_offsets(keys, word, sticky_bad_.data(), s);
    queue_pieces(keys, call, call.results, call.device_count, word, s, queue);
  } catch (...) {
    cudaFreeAsync(status, s);
    note_async(s);
    throw;
  }
  GBF_CUDA_TRY(cudaFreeAsync(status, s));
  note_async(s);
  return 0;
}

std::uint64_t gpu_executor::run(const key_batch& keys, const key_call& call,
                                const chunk_kernels& queue) {
  const device_scope on_device(device_);
  require_this_gpu(keys, call.what);
  if (call.async) return run_async(keys, call, queue);
  report_async_string_error(call.what);
  if (keys.count == 0) return 0;

  if (keys.space == memory_space::host) {
    pipeline_run host_run;
    host_run.results = call.results;
    host_run.counting = call.counting;
    host_run.ordered = call.ordered;
    host_run.order_after_earlier_work = [this, &call](cudaStream_t s) {
      order_after_earlier_work(s, call.stream);
    };
    const std::uint64_t total = pipeline_.run(keys, host_run, queue);
    forget_finished_async();  // every slot waited for them, and every slot has finished
    return total;
  }

  const cudaStream_t s = call.stream != nullptr ? call.stream : main_.get();
  std::uint64_t total = 0;
  try {
    order_after_earlier_work(s, call.stream);
    if (keys.is_string()) check_device_offsets(keys, call.what, s);
    if (call.counting) GBF_CUDA_TRY(cudaMemsetAsync(counter_.data(), 0, sizeof(total), s));
    queue_pieces(keys, call, call.results, counter_.data(), nullptr, s, queue);
    if (call.counting)
      GBF_CUDA_TRY(cudaMemcpyAsync(&total, counter_.data(), sizeof(total),
                                   cudaMemcpyDeviceToHost, s));
    GBF_CUDA_TRY(cudaStreamSynchronize(s));
    forget_finished_async();
  } catch (...) {
    settle(s);
    throw;
  }
  return total;
}

std::uint64_t gpu_executor::select(const key_batch& keys, const key_call& call,
                                   std::uint64_t* rows, const chunk_kernels& flag) {
  if (keys.space == memory_space::host && !call.async) {
    // The pipeline's flags, compacted on the host.
    std::unique_ptr<std::uint8_t[]> flags(new std::uint8_t[keys.count]);
    key_call flags_call = call;
    flags_call.results = flags.get();
    flags_call.counting = false;
    run(keys, flags_call, flag);
    std::uint64_t selected = 0;
    for (std::size_t i = 0; i < keys.count; ++i) {
      rows[selected] = i;  // branch-free: always write, advance by the flag
      selected += flags[i];
    }
    return selected;
  }

  // Device keys: flags and CUB's scratch in one stream-ordered allocation, so
  // nothing here synchronizes but a synchronous call's final wait.
  const device_scope on_device(device_);
  require_this_gpu(keys, call.what);
  if (call.async) {
    require_device_keys(keys, call.what);
    if (keys.is_string())
      throw invalid_argument(std::string(call.what) +
                             ": string keys are not supported by select_async; use select");
    prepare_async(call.stream);
  } else {
    report_async_string_error(call.what);
  }
  const cudaStream_t s =
      call.async ? call.stream : (call.stream != nullptr ? call.stream : main_.get());
  std::uint64_t* count = call.async ? call.device_count : counter_.data();
  std::uint64_t selected = 0;
  const std::size_t n = keys.count;
  try {
    if (!call.async) {
      order_after_earlier_work(s, call.stream);
      if (keys.is_string() && n > 0) check_device_offsets(keys, call.what, s);
    }
    const std::size_t flag_bytes = (n + 255) / 256 * 256;
    const std::size_t compact_bytes = gpu::compact_scratch_bytes(n);
    void* scratch = nullptr;
    GBF_CUDA_TRY(cudaMallocAsync(&scratch, flag_bytes + compact_bytes, s));
    try {
      auto* flags = static_cast<std::uint8_t*>(scratch);
      if (n > 0) queue_pieces(keys, call, flags, nullptr, nullptr, s, flag);
      gpu::compact_flags(reinterpret_cast<const bool*>(flags), n, rows, count,
                         static_cast<unsigned char*>(scratch) + flag_bytes, compact_bytes, s);
    } catch (...) {
      cudaFreeAsync(scratch, s);
      throw;
    }
    GBF_CUDA_TRY(cudaFreeAsync(scratch, s));
    if (call.async) {
      note_async(s);
      return 0;
    }
    GBF_CUDA_TRY(cudaMemcpyAsync(&selected, count, sizeof(selected), cudaMemcpyDeviceToHost, s));
    GBF_CUDA_TRY(cudaStreamSynchronize(s));
    forget_finished_async();
  } catch (...) {
    if (call.async) note_async(s);  // kernels queued before the failure still use the filter
    else settle(s);
    throw;
  }
  return selected;
}

}  // namespace gbf::detail
