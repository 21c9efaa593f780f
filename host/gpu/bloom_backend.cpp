// The CUDA backend: the bit array in device memory, the kernels of
// kernels/filter_kernels.cu, and the transfer pipeline that streams host
// batches through pinned staging buffers.
//
// Host batches. The batch is cut into chunks of `chunk_keys` keys; chunk c runs
// on slot c % S (S streams, default 3). Each slot owns a stream, pinned staging
// for keys and results, device buffers for keys and results, and events:
//
//   host:   wait slot done (chunk c-S) -> deliver its results -> memcpy keys to pinned
//   stream: H2D keys -> kernel -> D2H results -> record done
//
// With three slots the H2D copy of chunk c+1, the kernel of chunk c and the D2H
// copy of chunk c-1 run at once (they sit on different streams). A slot's
// buffers are reused only after the host has waited for its `done` event, which
// follows every use of them, so no copy or kernel ever sees a buffer being
// refilled. Keys already in pinned memory skip the staging memcpy and are copied
// straight from the caller's array (alive until the call returns: every sync
// call drains all slots before it returns).
//
// add_new additionally orders the kernels of successive chunks: chunk c's
// stream waits (after its H2D copy is queued, so copies still overlap) for the
// `kernel_done` event chunk c-1 recorded after its last kernel. The kernels
// thus run in batch order, each seeing the bits of all earlier chunks: the
// sequential semantics hold across chunks. The shared add_new scratch is safe
// for the same reason: chunk c's first use of it follows chunk c-1's last.
//
// String batches (run_host_strings) take the same path with three arrays per
// chunk: offsets rebased to the chunk's first byte, the chunk's bytes, and its
// validity bits. A chunk holds at most chunk_keys keys and at most
// chunk_bytes_for(chunk_keys) bytes; a single longer string goes alone and
// grows its slot's byte buffers (kept for later batches). Device string
// batches are checked by a validation kernel before any bit is written.
//
// Ordering with other work. The internal streams are non-blocking, so each
// synchronous operation first makes its streams wait for (1) the work of every
// _async call so far, on each caller stream one was queued on, and (2) the
// work already queued on the legacy default stream (a kernel that produced the
// keys, say), as a cudaMemcpy would. Each synchronous operation returns with no
// work pending, also when it throws. _async calls are stream-ordered on the
// caller's stream only, as in CUB: ordering between _async calls on different
// caller streams is the caller's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gbf/error.hpp"
#include "host/backend.hpp"
#include "host/gpu/runtime.hpp"
#include "kernels/filter_kernels.cuh"

namespace gbf::detail {
namespace {

constexpr std::size_t default_chunk_keys = std::size_t{4} << 20;
constexpr unsigned default_streams = 3;

std::size_t key_bytes(key_kind kind) {
  return kind == key_kind::u32 ? sizeof(std::uint32_t) : sizeof(std::uint64_t);
}

gpu::word_op to_word_op(set_op op) {
  return op == set_op::union_or ? gpu::word_op::bit_or : gpu::word_op::bit_and;
}

// After a failure, waits for whatever `s` still runs (so that no kernel or copy
// outlives the call that queued it) and drops any error this raises: the error
// being thrown already says what went wrong.
void settle(cudaStream_t s) noexcept {
  cudaStreamSynchronize(s);
  cudaGetLastError();
}

enum class batch_op { add, add_new, contains, count };

// One stage of the host pipeline (see the file comment).
struct pipeline_slot {
  explicit pipeline_slot(std::size_t chunk_keys)
      : staged_keys(checked_bytes(chunk_keys, sizeof(std::uint64_t))),
        staged_results(chunk_keys),
        keys(checked_bytes(chunk_keys, sizeof(std::uint64_t))),
        results(chunk_keys),
        counter(1) {}

  stream work;
  event done;         // the slot's last chunk: H2D, kernels and D2H all finished
  event kernel_done;  // the slot's last add_new kernels (orders the next chunk's)
  pinned_buffer<unsigned char> staged_keys;
  pinned_buffer<bool> staged_results;
  device_buffer<unsigned char> keys;  // cudaMalloc'd: aligned for 64-bit keys
  device_buffer<bool> results;
  device_buffer<std::uint64_t> counter;  // count: this slot's hits
  bool* pending_results = nullptr;       // caller's array awaiting staged_results
  std::size_t pending_count = 0;

  // String batches (allocated on the first one): rebased offsets, the chunk's
  // bytes (grown when one string outgrows them) and its validity bytes.
  pinned_buffer<unsigned char> staged_offsets;
  pinned_buffer<unsigned char> staged_data;
  pinned_buffer<std::uint8_t> staged_validity;
  device_buffer<unsigned char> offsets;
  device_buffer<unsigned char> data;
  device_buffer<std::uint8_t> validity;
};

/// Bytes of string data a pipeline chunk holds (a single longer string grows its slot).
std::size_t chunk_bytes_for(std::size_t chunk_keys) {
  constexpr std::size_t min_bytes = std::size_t{64} << 10;
  constexpr std::size_t max_bytes = std::size_t{64} << 20;
  return std::clamp(chunk_keys * 32, min_bytes, max_bytes);
}

std::size_t offset_width(key_kind kind) { return kind == key_kind::str32 ? 4 : 8; }

class cuda_backend final : public backend_impl {
 public:
  cuda_backend(const layout& l, std::size_t chunk_keys, unsigned streams)
      : layout_(l), chunk_keys_(chunk_keys), num_slots_(streams), words_(l.num_words()) {
    GBF_CUDA_TRY(cudaGetDevice(&device_));  // where words_ and main_ were just made
    GBF_CUDA_TRY(cudaMemsetAsync(words_.data(), 0, words_.size_bytes(), main_.get()));
    GBF_CUDA_TRY(cudaMemsetAsync(sticky_bad_.data(), 0xff, sizeof(std::uint64_t), main_.get()));
    main_.synchronize();
  }

  cuda_backend(const cuda_backend&) = delete;
  cuda_backend& operator=(const cuda_backend&) = delete;

  ~cuda_backend() override {
    // Async work on a caller's stream may still read or write the bit array:
    // let it finish before the buffers go (errors cannot leave a destructor).
    // cudaFree and the stream and event releases need no current device.
    for (const async_stream& a : async_streams_) cudaEventSynchronize(a.done.get());
    cudaGetLastError();
  }

  backend kind() const noexcept override { return backend::gpu; }
  const layout& get_layout() const noexcept override { return layout_; }

  void add(const key_batch& keys) override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "add");
    report_async_string_error("add");
    if (keys.count == 0) return;
    if (keys.is_string()) return add_strings(keys);
    if (keys.space == memory_space::host) return run_host(keys, batch_op::add, nullptr, nullptr);
    run_on_main([&](cudaStream_t s) {
      gpu::add(layout_, words_.data(), keys.kind, keys.data, keys.count, s);
    });
  }

  void add_new(const key_batch& keys, bool* is_new) override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "add_new");
    report_async_string_error("add_new");
    if (keys.count == 0) return;
    if (keys.is_string()) return add_new_strings(keys, is_new);
    if (keys.space == memory_space::host) return run_host(keys, batch_op::add_new, is_new, nullptr);
    reserve_scratch(std::min(keys.count, chunk_keys_));
    // Pieces of chunk_keys keys (add_new_max_keys at most) queued in batch order
    // on one stream: each piece's kernels see the bits of the earlier pieces.
    const auto* first = static_cast<const unsigned char*>(keys.data);
    const std::size_t bytes_per_key = key_bytes(keys.kind);
    run_on_main([&](cudaStream_t s) {
      for (std::size_t offset = 0; offset < keys.count; offset += chunk_keys_) {
        const std::size_t n = std::min(chunk_keys_, keys.count - offset);
        gpu::add_new(layout_, words_.data(), keys.kind, first + offset * bytes_per_key, n,
                     is_new + offset, scratch_.data(), scratch_.size_bytes(), s);
      }
    });
  }

  void contains(const key_batch& keys, bool* found) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "contains");
    report_async_string_error("contains");
    if (keys.count == 0) return;
    if (keys.is_string()) return contains_strings(keys, found);
    if (keys.space == memory_space::host) return run_host(keys, batch_op::contains, found, nullptr);
    run_on_main([&](cudaStream_t s) {
      gpu::contains(layout_, words_.data(), keys.kind, keys.data, keys.count, found, s);
    });
  }

  std::uint64_t count(const key_batch& keys) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "count");
    report_async_string_error("count");
    if (keys.count == 0) return 0;
    if (keys.is_string()) return count_strings(keys);
    std::uint64_t hits = 0;
    if (keys.space == memory_space::host) {
      run_host(keys, batch_op::count, nullptr, &hits);
      return hits;
    }
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(counter_.data(), 0, sizeof(std::uint64_t), s));
      gpu::count(layout_, words_.data(), keys.kind, keys.data, keys.count, counter_.data(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&hits, counter_.data(), sizeof(hits), cudaMemcpyDeviceToHost, s));
    });
    return hits;
  }

  // Host keys: the pipeline's contains answers, compacted on the host (validity
  // applied there for integer keys; the string kernels are null-aware already).
  // Device keys: gpu::select on the internal stream, the count copied back.
  std::uint64_t select(const key_batch& keys, std::uint64_t* rows) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "select");
    report_async_string_error("select");
    if (keys.count == 0) return 0;
    if (keys.space == memory_space::host) {
      std::unique_ptr<bool[]> found(new bool[keys.count]);
      if (keys.is_string()) {
        contains_strings(keys, found.get());
      } else {
        run_host(keys, batch_op::contains, found.get(), nullptr);
      }
      std::uint64_t c = 0;
      for (std::size_t i = 0; i < keys.count; ++i) {
        rows[c] = i;
        c += (found[i] && key_valid(keys.validity, keys.validity_bit, i)) ? 1 : 0;
      }
      return c;
    }
    if (keys.is_string()) check_device_offsets(keys, "select");
    std::uint64_t selected = 0;
    run_on_main([&](cudaStream_t s) {
      gpu::select(layout_, words_.data(), keys, rows, counter_.data(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&selected, counter_.data(), sizeof(selected),
                                   cudaMemcpyDeviceToHost, s));
    });
    return selected;
  }

  void select_async(const key_batch& keys, std::uint64_t* rows, std::uint64_t* count,
                    stream_t stream) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "select_async");
    require_device(keys, "select_async");
    if (keys.is_string())
      throw invalid_argument("select_async: string keys are not supported; use select");
    gpu::select(layout_, words_.data(), keys, rows, count, stream);
    note_async(stream);
  }

  void add_async(const key_batch& keys, stream_t stream) override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "add_async");
    require_device(keys, "add_async");
    if (keys.is_string()) {
      return string_async(keys, stream, [&](const std::uint64_t* status) {
        gpu::add_strings(layout_, words_.data(), keys, status, stream);
      });
    }
    gpu::add(layout_, words_.data(), keys.kind, keys.data, keys.count, stream);
    note_async(stream);
  }

  void contains_async(const key_batch& keys, bool* found, stream_t stream) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "contains_async");
    require_device(keys, "contains_async");
    if (keys.is_string()) {
      return string_async(keys, stream, [&](const std::uint64_t* status) {
        gpu::contains_strings(layout_, words_.data(), keys, found, status, stream);
      });
    }
    gpu::contains(layout_, words_.data(), keys.kind, keys.data, keys.count, found, stream);
    note_async(stream);
  }

  void count_async(const key_batch& keys, std::uint64_t* count, stream_t stream) const override {
    const device_scope on_device(device_);
    require_this_gpu(keys, "count_async");
    require_device(keys, "count_async");
    // The kernel accumulates: the caller's counter starts from zero in stream order.
    GBF_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(std::uint64_t), stream));
    if (keys.is_string()) {
      return string_async(keys, stream, [&](const std::uint64_t* status) {
        gpu::count_strings(layout_, words_.data(), keys, count, status, stream);
      });
    }
    gpu::count(layout_, words_.data(), keys.kind, keys.data, keys.count, count, stream);
    note_async(stream);
  }

  void clear() override {
    const device_scope on_device(device_);
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(words_.data(), 0, words_.size_bytes(), s));
    });
  }

  void combine(const backend_impl& other, set_op op) override {
    const device_scope on_device(device_);
    const auto* gpu_other = dynamic_cast<const cuda_backend*>(&other);
    if (gpu_other == nullptr) {
      throw invalid_argument("combine: the other filter's bits are not on the GPU");
    }
    if (gpu_other->layout_ != layout_) {
      throw layout_mismatch("combine: the two filters have different layouts");
    }
    if (gpu_other->device_ != device_) {
      throw invalid_argument("combine: the filters are on different GPUs (device " + std::to_string(device_) +
                             " and device " + std::to_string(gpu_other->device_) + ")");
    }
    if (gpu_other == this) return;  // x | x == x & x == x
    run_on_main([&](cudaStream_t s) {
      gpu_other->wait_for_async(s);
      gpu::combine_words(words_.data(), gpu_other->words_.data(), layout_.num_words(),
                         to_word_op(op), s);
    });
  }

  void combine_host(const std::uint32_t* words, set_op op) override {
    const device_scope on_device(device_);
    device_buffer<std::uint32_t> staged(layout_.num_words());
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(staged.data(), words, staged.size_bytes(),
                                   cudaMemcpyHostToDevice, s));
      gpu::combine_words(words_.data(), staged.data(), layout_.num_words(), to_word_op(op), s);
    });
  }

  std::uint64_t popcount() const override {
    const device_scope on_device(device_);
    std::uint64_t bits = 0;
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(counter_.data(), 0, sizeof(std::uint64_t), s));
      gpu::popcount(words_.data(), layout_.num_words(), counter_.data(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&bits, counter_.data(), sizeof(bits), cudaMemcpyDeviceToHost, s));
    });
    return bits;
  }

  void read_words(std::uint32_t* out) const override {
    const device_scope on_device(device_);
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, words_.data(), words_.size_bytes(),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void write_words(const std::uint32_t* in) override {
    const device_scope on_device(device_);
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(words_.data(), in, words_.size_bytes(),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  const std::uint32_t* device_words() const override { return words_.data(); }

  void synchronize(const char* what) const override {
    const device_scope on_device(device_);
    run_on_main([](cudaStream_t) {});  // main waits for every _async call's stream
    report_async_string_error(what);
  }

 private:
  // ---- String keys -------------------------------------------------------

  void add_strings(const key_batch& keys) {
    if (keys.space == memory_space::host) return run_host_strings(keys, batch_op::add, nullptr, nullptr);
    check_device_offsets(keys, "add");
    run_on_main([&](cudaStream_t s) {
      gpu::add_strings(layout_, words_.data(), keys, nullptr, s);
    });
  }

  void add_new_strings(const key_batch& keys, bool* is_new) {
    if (keys.space == memory_space::host) {
      return run_host_strings(keys, batch_op::add_new, is_new, nullptr);
    }
    check_device_offsets(keys, "add_new");
    reserve_scratch(std::min(keys.count, chunk_keys_), true);
    // Pieces of chunk_keys keys in batch order on one stream (as for integers).
    // A piece's offsets still index the caller's whole data buffer.
    const std::size_t width = offset_width(keys.kind);
    run_on_main([&](cudaStream_t s) {
      for (std::size_t first = 0; first < keys.count; first += chunk_keys_) {
        key_batch piece = keys;
        piece.count = std::min(chunk_keys_, keys.count - first);
        piece.offsets = static_cast<const unsigned char*>(keys.offsets) + first * width;
        piece.validity_bit = keys.validity_bit + first;
        gpu::add_new_strings(layout_, words_.data(), piece, is_new + first, scratch_.data(),
                             scratch_.size_bytes(), s);
      }
    });
  }

  void contains_strings(const key_batch& keys, bool* found) const {
    if (keys.space == memory_space::host) {
      return run_host_strings(keys, batch_op::contains, found, nullptr);
    }
    check_device_offsets(keys, "contains");
    run_on_main([&](cudaStream_t s) {
      gpu::contains_strings(layout_, words_.data(), keys, found, nullptr, s);
    });
  }

  std::uint64_t count_strings(const key_batch& keys) const {
    std::uint64_t hits = 0;
    if (keys.space == memory_space::host) {
      run_host_strings(keys, batch_op::count, nullptr, &hits);
      return hits;
    }
    check_device_offsets(keys, "count");
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(counter_.data(), 0, sizeof(std::uint64_t), s));
      gpu::count_strings(layout_, words_.data(), keys, counter_.data(), nullptr, s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&hits, counter_.data(), sizeof(hits), cudaMemcpyDeviceToHost, s));
    });
    return hits;
  }

  // Checks a device batch's offsets before any bit is written: the validation
  // kernel leaves the first bad index in a device word, which comes back to
  // the host with the two offsets that name the problem.
  void check_device_offsets(const key_batch& keys, const char* what) const {
    std::uint64_t first_bad = gpu::offsets_ok;
    run_on_main([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(status_.data(), 0xff, sizeof(std::uint64_t), s));
      gpu::validate_offsets(keys, status_.data(), nullptr, s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&first_bad, status_.data(), sizeof(first_bad),
                                   cudaMemcpyDeviceToHost, s));
    });
    if (first_bad == gpu::offsets_ok) return;
    const std::size_t width = offset_width(keys.kind);
    const std::size_t from = first_bad == 0 ? 0 : static_cast<std::size_t>(first_bad) - 1;
    unsigned char raw[16] = {};
    copy_device_to_host(raw, static_cast<const unsigned char*>(keys.offsets) + from * width,
                        (first_bad == 0 ? 1 : 2) * width);
    key_batch window = keys;
    window.offsets = raw;
    const std::int64_t previous = first_bad == 0 ? 0 : offset_at(window, 0);
    const std::int64_t value = offset_at(window, first_bad == 0 ? 0 : 1);
    throw invalid_argument(std::string(what) + ": " +
                           bad_offset_message(static_cast<std::size_t>(first_bad), value,
                                              previous, keys.data_bytes));
  }

  // An _async string call cannot throw for its offsets (they are checked on the
  // device, in stream order). Its validation kernel gates its own kernels
  // through a per-call status word (a bad batch writes nothing) and also
  // atomicMin's the bad index into sticky_bad_, which synchronize() or the next
  // synchronous key operation of any kind reports here (and clears).
  template <class Queue>
  void string_async(const key_batch& keys, cudaStream_t stream, Queue&& queue) const {
    if (keys.count == 0) return;
    async_strings_ = true;
    void* status = nullptr;
    GBF_CUDA_TRY(cudaMallocAsync(&status, sizeof(std::uint64_t), stream));
    auto* word = static_cast<std::uint64_t*>(status);
    try {
      GBF_CUDA_TRY(cudaMemsetAsync(word, 0xff, sizeof(std::uint64_t), stream));
      gpu::validate_offsets(keys, word, sticky_bad_.data(), stream);
      queue(word);
    } catch (...) {
      cudaFreeAsync(status, stream);
      throw;
    }
    GBF_CUDA_TRY(cudaFreeAsync(status, stream));
    note_async(stream);
  }

  void report_async_string_error(const char* what) const {
    if (!async_strings_) return;
    std::uint64_t first_bad = gpu::offsets_ok;
    run_on_main([&](cudaStream_t s) {
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

  // Allocates (or grows) a slot's string buffers for a chunk of `data_bytes` bytes.
  void reserve_string_slot(pipeline_slot& slot, std::size_t data_bytes) const {
    if (slot.offsets.size() == 0) {
      // All four or none: `offsets` is the flag that they exist, so it is set last.
      const std::size_t offset_bytes = (chunk_keys_ + 1) * sizeof(std::int64_t);
      pinned_buffer<unsigned char> staged_offsets(offset_bytes);
      pinned_buffer<std::uint8_t> staged_validity(chunk_keys_ / 8 + 2);
      device_buffer<std::uint8_t> validity(chunk_keys_ / 8 + 2);
      device_buffer<unsigned char> offsets(offset_bytes);
      slot.staged_offsets = std::move(staged_offsets);
      slot.staged_validity = std::move(staged_validity);
      slot.validity = std::move(validity);
      slot.offsets = std::move(offsets);
    }
    const std::size_t wanted = std::max(data_bytes, chunk_bytes_for(chunk_keys_));
    if (slot.data.size() < wanted) {
      slot.staged_data = pinned_buffer<unsigned char>();  // free first: less peak memory
      slot.data = device_buffer<unsigned char>();
      slot.staged_data = pinned_buffer<unsigned char>(wanted);
      slot.data = device_buffer<unsigned char>(wanted);
    }
  }

  // Streams a host string batch through the pipeline: chunks of at most
  // chunk_keys keys and at most chunk_bytes_for(chunk_keys) bytes (one string
  // longer than that travels alone, its slot's buffers grown to fit), offsets
  // rebased to the chunk's first byte, validity bits copied from the byte that
  // holds the chunk's first bit. Otherwise as run_host.
  void run_host_strings(const key_batch& keys, batch_op op, bool* results,
                        std::uint64_t* hits) const {
    reserve_pipeline();
    if (op == batch_op::add_new) reserve_scratch(std::min(keys.count, chunk_keys_), true);
    const std::size_t width = offset_width(keys.kind);
    const std::size_t max_bytes = chunk_bytes_for(chunk_keys_);
    const auto* data = static_cast<const unsigned char*>(keys.data);
    try {
      prepare_pipeline(op);
      std::size_t chunk = 0;
      for (std::size_t first = 0; first < keys.count; ++chunk) {
        pipeline_slot& slot = slots_[chunk % slots_.size()];
        const cudaStream_t s = slot.work.get();
        const std::int64_t base = offset_at(keys, first);
        // The most keys (>= 1, <= chunk_keys) whose bytes fit max_bytes: offsets
        // do not decrease, so bytes grow with n and a binary search finds it.
        std::size_t n = std::min(chunk_keys_, keys.count - first);
        const auto bytes_of = [&](std::size_t keys_in_chunk) {
          return static_cast<std::size_t>(offset_at(keys, first + keys_in_chunk) - base);
        };
        if (bytes_of(n) > max_bytes) {
          std::size_t lo = 1, hi = n;  // largest m in [1, n] with bytes_of(m) <= max_bytes, or 1
          while (lo < hi) {
            const std::size_t mid = lo + (hi - lo + 1) / 2;
            if (bytes_of(mid) <= max_bytes) lo = mid; else hi = mid - 1;
          }
          n = lo;
        }
        const std::size_t bytes = bytes_of(n);
        retire(slot);
        reserve_string_slot(slot, bytes);

        // Stage: rebased offsets, bytes, validity.
        if (keys.kind == key_kind::str32) {
          auto* out = reinterpret_cast<std::int32_t*>(slot.staged_offsets.data());
          const auto* in = static_cast<const std::int32_t*>(keys.offsets) + first;
          for (std::size_t j = 0; j <= n; ++j) out[j] = static_cast<std::int32_t>(in[j] - base);
        } else {
          auto* out = reinterpret_cast<std::int64_t*>(slot.staged_offsets.data());
          const auto* in = static_cast<const std::int64_t*>(keys.offsets) + first;
          for (std::size_t j = 0; j <= n; ++j) out[j] = in[j] - base;
        }
        if (bytes > 0) std::memcpy(slot.staged_data.data(), data + base, bytes);
        key_batch piece;
        piece.kind = keys.kind;
        piece.space = memory_space::device;
        piece.count = n;
        piece.data = slot.data.data();
        piece.data_bytes = bytes;
        piece.offsets = slot.offsets.data();
        std::size_t validity_bytes = 0;
        if (keys.validity != nullptr) {
          const std::size_t bit = keys.validity_bit + first;
          validity_bytes = (bit % 8 + n + 7) / 8;
          std::memcpy(slot.staged_validity.data(), keys.validity + bit / 8, validity_bytes);
          piece.validity = slot.validity.data();
          piece.validity_bit = bit % 8;
        }
        GBF_CUDA_TRY(cudaMemcpyAsync(slot.offsets.data(), slot.staged_offsets.data(),
                                     (n + 1) * width, cudaMemcpyHostToDevice, s));
        if (bytes > 0) {
          GBF_CUDA_TRY(cudaMemcpyAsync(slot.data.data(), slot.staged_data.data(), bytes,
                                       cudaMemcpyHostToDevice, s));
        }
        if (validity_bytes > 0) {
          GBF_CUDA_TRY(cudaMemcpyAsync(slot.validity.data(), slot.staged_validity.data(),
                                       validity_bytes, cudaMemcpyHostToDevice, s));
        }
        switch (op) {
          case batch_op::add:
            gpu::add_strings(layout_, words_.data(), piece, nullptr, s);
            break;
          case batch_op::contains:
            gpu::contains_strings(layout_, words_.data(), piece, slot.results.data(), nullptr, s);
            break;
          case batch_op::count:
            gpu::count_strings(layout_, words_.data(), piece, slot.counter.data(), nullptr, s);
            break;
          case batch_op::add_new:
            if (chunk > 0) {
              const pipeline_slot& previous = slots_[(chunk - 1) % slots_.size()];
              GBF_CUDA_TRY(cudaStreamWaitEvent(s, previous.kernel_done.get(), 0));
            }
            gpu::add_new_strings(layout_, words_.data(), piece, slot.results.data(),
                                 scratch_.data(), scratch_.size_bytes(), s);
            slot.kernel_done.record(s);
            break;
        }
        finish_chunk(slot, results == nullptr ? nullptr : results + first, n);
        first += n;
      }
      drain_pipeline(op, hits);
    } catch (...) {
      abandon_pipeline();
      throw;
    }
  }

  // ---- Shared -------------------------------------------------------------

  // An empty batch has no memory to speak of (gbf::filter marks it host): allowed.
  // A kernel reading another GPU's memory would fault (no peer access is set
  // up) and poison the context: refused up front, naming both GPUs.
  void require_this_gpu(const key_batch& keys, const char* operation) const {
    if (keys.space != memory_space::device || keys.count == 0) return;
    const int holder = pointer_device(keys.data);
    if (holder >= 0 && holder != device_) {
      throw invalid_argument(std::string(operation) + ": the keys are in the memory of GPU " +
                             std::to_string(holder) + ", the filter on GPU " + std::to_string(device_));
    }
  }

  static void require_device(const key_batch& keys, const char* operation) {
    if (keys.count != 0 && keys.space != memory_space::device) {
      throw invalid_argument(std::string(operation) +
                             ": the async API needs device pointers, but the keys are in host "
                             "memory (use the synchronous call for host batches)");
    }
  }

  // Records that an _async call queued work on the caller's `stream`.
  void note_async(cudaStream_t stream) const {
    for (const async_stream& a : async_streams_) {
      if (a.stream == stream) return a.done.record(stream);
    }
    async_streams_.push_back({stream, event{}});
    async_streams_.back().done.record(stream);
  }

  // Makes `s` wait for the work of every _async call so far, on whichever
  // caller stream it was queued.
  void wait_for_async(cudaStream_t s) const {
    for (const async_stream& a : async_streams_)
      GBF_CUDA_TRY(cudaStreamWaitEvent(s, a.done.get(), 0));
  }

  // Makes `s` wait for earlier work that may touch this filter or the caller's
  // arrays: the _async calls' and the legacy default stream's (see the file
  // comment).
  void order_after_earlier_work(cudaStream_t s) const {
    wait_for_async(s);
    default_stream_done_.record(cudaStreamLegacy);
    GBF_CUDA_TRY(cudaStreamWaitEvent(s, default_stream_done_.get(), 0));
  }

  // Runs `queue(stream)` on the internal stream, ordered after earlier work, and
  // waits for it: the synchronous operations on device arrays and on the bit array.
  template <class Queue>
  void run_on_main(Queue&& queue) const {
    try {
      order_after_earlier_work(main_.get());
      queue(main_.get());
      main_.synchronize();
    } catch (...) {
      settle(main_.get());
      throw;
    }
  }

  // Grows the add_new scratch to hold batches of `max_keys` keys. Only called
  // between operations, when no queued work uses the old scratch.
  void reserve_scratch(std::size_t max_keys, bool strings = false) const {
    const std::size_t bytes = strings ? gpu::add_new_strings_scratch_bytes(layout_, max_keys)
                                      : gpu::add_new_scratch_bytes(layout_, max_keys);
    if (scratch_.size_bytes() < bytes) {
      scratch_ = device_buffer<unsigned char>();  // free the old one first: less peak memory
      scratch_ = device_buffer<unsigned char>(bytes);
    }
  }

  // Allocates the host pipeline on the first host batch and keeps it.
  void reserve_pipeline() const {
    if (!slots_.empty()) return;
    std::vector<pipeline_slot> slots;
    slots.reserve(num_slots_);
    for (unsigned i = 0; i < num_slots_; ++i) slots.emplace_back(chunk_keys_);
    slots_ = std::move(slots);
  }

  // Waits for the slot's last chunk and hands its results to the caller.
  // Ends a chunk on its slot's stream: the D2H copy of its `n` answers (when the
  // caller wants them at `results`, delivered by retire) and the `done` event.
  static void finish_chunk(pipeline_slot& slot, bool* results, std::size_t n) {
    const cudaStream_t s = slot.work.get();
    if (results != nullptr) {
      GBF_CUDA_TRY(cudaMemcpyAsync(slot.staged_results.data(), slot.results.data(), n,
                                   cudaMemcpyDeviceToHost, s));
      slot.pending_results = results;
      slot.pending_count = n;
    }
    slot.done.record(s);
  }

  // Orders every slot after earlier work (see the file comment) and, for count,
  // zeroes the slots' counters.
  void prepare_pipeline(batch_op op) const {
    for (pipeline_slot& slot : slots_) {
      order_after_earlier_work(slot.work.get());
      if (op == batch_op::count) {
        GBF_CUDA_TRY(cudaMemsetAsync(slot.counter.data(), 0, sizeof(std::uint64_t),
                                     slot.work.get()));
      }
    }
  }

  // Waits for every slot, delivers their last results and, for count, sums the
  // slots' counters into *hits.
  void drain_pipeline(batch_op op, std::uint64_t* hits) const {
    for (pipeline_slot& slot : slots_) retire(slot);
    if (op != batch_op::count) return;
    *hits = 0;
    for (pipeline_slot& slot : slots_) {
      std::uint64_t slot_hits = 0;
      GBF_CUDA_TRY(cudaMemcpyAsync(&slot_hits, slot.counter.data(), sizeof(slot_hits),
                                   cudaMemcpyDeviceToHost, slot.work.get()));
      slot.work.synchronize();
      *hits += slot_hits;
    }
  }

  // After a failure: lets every queued copy and kernel finish (they read the
  // caller's arrays) and forgets results that will never be delivered.
  void abandon_pipeline() const noexcept {
    for (pipeline_slot& slot : slots_) {
      settle(slot.work.get());
      slot.pending_results = nullptr;
      slot.pending_count = 0;
    }
  }

  static void retire(pipeline_slot& slot) {
    slot.done.synchronize();
    if (slot.pending_results != nullptr) {
      std::memcpy(slot.pending_results, slot.staged_results.data(), slot.pending_count);
      slot.pending_results = nullptr;
      slot.pending_count = 0;
    }
  }

  // Queues one chunk's kernel(s) on `s`; `chunk` is the chunk's index in the batch.
  void queue_chunk_kernel(batch_op op, const pipeline_slot& slot, key_kind kind, std::size_t n,
                          std::size_t chunk, cudaStream_t s) const {
    switch (op) {
      case batch_op::add:
        gpu::add(layout_, words_.data(), kind, slot.keys.data(), n, s);
        break;
      case batch_op::contains:
        gpu::contains(layout_, words_.data(), kind, slot.keys.data(), n, slot.results.data(), s);
        break;
      case batch_op::count:
        gpu::count(layout_, words_.data(), kind, slot.keys.data(), n, slot.counter.data(), s);
        break;
      case batch_op::add_new: {
        if (chunk > 0) {
          const pipeline_slot& previous = slots_[(chunk - 1) % slots_.size()];
          GBF_CUDA_TRY(cudaStreamWaitEvent(s, previous.kernel_done.get(), 0));
        }
        gpu::add_new(layout_, words_.data(), kind, slot.keys.data(), n, slot.results.data(),
                     scratch_.data(), scratch_.size_bytes(), s);
        slot.kernel_done.record(s);
        break;
      }
    }
  }

  // Streams a host batch through the pipeline (see the file comment). `results`
  // (contains, add_new) receives one bool per key; `hits` (count) the count.
  void run_host(const key_batch& keys, batch_op op, bool* results, std::uint64_t* hits) const {
    reserve_pipeline();
    if (op == batch_op::add_new) reserve_scratch(std::min(keys.count, chunk_keys_));
    const std::size_t bytes_per_key = key_bytes(keys.kind);
    const auto* first = static_cast<const unsigned char*>(keys.data);
    // Pinned caller memory is copied from directly. A batch that starts in
    // pageable memory (the common case) is staged whole, with no more queries.
    const bool starts_pinned = pointer_type(first) == cudaMemoryTypeHost;
    try {
      prepare_pipeline(op);
      std::size_t chunk = 0;
      for (std::size_t offset = 0; offset < keys.count; offset += chunk_keys_, ++chunk) {
        pipeline_slot& slot = slots_[chunk % slots_.size()];
        const cudaStream_t s = slot.work.get();
        const std::size_t n = std::min(chunk_keys_, keys.count - offset);
        const std::size_t bytes = n * bytes_per_key;
        retire(slot);  // chunk - S is done: its buffers are free, its results delivered
        const void* source = first + offset * bytes_per_key;
        // Both ends of the chunk: a batch may run past the end of a cudaHostRegister'ed range.
        const bool chunk_pinned =
            starts_pinned && pointer_type(source) == cudaMemoryTypeHost &&
            pointer_type(static_cast<const unsigned char*>(source) + bytes - 1) == cudaMemoryTypeHost;
        if (!chunk_pinned) {
          std::memcpy(slot.staged_keys.data(), source, bytes);
          source = slot.staged_keys.data();
        }
        GBF_CUDA_TRY(cudaMemcpyAsync(slot.keys.data(), source, bytes, cudaMemcpyHostToDevice, s));
        queue_chunk_kernel(op, slot, keys.kind, n, chunk, s);
        finish_chunk(slot, results == nullptr ? nullptr : results + offset, n);
      }
      drain_pipeline(op, hits);
    } catch (...) {
      abandon_pipeline();
      throw;
    }
  }

  layout layout_;
  int device_ = 0;  // the GPU holding everything below; every call runs there
  std::size_t chunk_keys_;
  unsigned num_slots_;
  stream main_;                  // synchronous operations on device arrays and the bit array
  // Each caller stream an _async call used, with an event after its last such call.
  struct async_stream {
    cudaStream_t stream;
    event done;
  };
  mutable std::vector<async_stream> async_streams_;
  event default_stream_done_;    // re-recorded on the legacy default stream by each sync call
  device_buffer<std::uint32_t> words_;
  device_buffer<std::uint64_t> counter_{1};       // count and popcount of synchronous calls
  device_buffer<std::uint64_t> status_{1};        // check_device_offsets' verdict
  device_buffer<std::uint64_t> sticky_bad_{1};    // first bad offset of any _async string call
  mutable bool async_strings_ = false;            // an _async string call ran since the last report
  mutable device_buffer<unsigned char> scratch_;  // add_new: sort buffers + CUB temp storage
  mutable std::vector<pipeline_slot> slots_;      // host pipeline, allocated on first use
};

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

std::unique_ptr<backend_impl> make_gpu_backend(const layout& l, std::size_t chunk_keys,
                                               unsigned streams, std::string* description) {
  const gpu_status gpu = query_gpu();
  if (!gpu.available) throw no_gpu("no GPU: " + gpu.description);
  if (const char* problem = layout_problem(l)) throw invalid_argument(problem);
  if (chunk_keys == 0) chunk_keys = default_chunk_keys;
  if (chunk_keys > gpu::add_new_max_keys) {
    throw invalid_argument("gpu_chunk_keys must be at most 2^30 (got " +
                           std::to_string(chunk_keys) + ")");
  }
  if (streams == 0) streams = default_streams;

  auto backend = std::make_unique<cuda_backend>(l, chunk_keys, streams);
  if (description != nullptr) {
    int device = 0;
    GBF_CUDA_TRY(cudaGetDevice(&device));
    cudaDeviceProp properties{};
    GBF_CUDA_TRY(cudaGetDeviceProperties(&properties, device));
    *description = "gpu (" + std::string(properties.name) + ", " +
                   gib(properties.totalGlobalMem) + ")";
  }
  return backend;
}

}  // namespace gbf::detail
