// The scaling chain on the GPU: one device bit array per level, a device array
// of their level_refs (kernels/scaling.cuh) that every probe receives, so that
// contains, count and select probe all levels in one launch; the shared
// executor (host/gpu/executor.hpp) owns streams, ordering, transfers and the
// checking of device string batches.
//
// An add runs fill (host/scaling_backend.hpp) on each piece of the batch, in
// batch order (an ordered executor run: a host batch arrives in pinned chunks,
// a device batch in pieces of chunk_keys keys). The steps are kernels over
// the piece's candidates, (hash, position) pairs kept in device memory; only
// counts come back to the host, as fill needs them to cut slices at level
// boundaries and to open levels. A step therefore waits for its stream: an
// add is synchronous, as the public header says.
//
// Status: compiled, not run (no GPU on the development machine); the GPU
// tests (tests/gpu/test_gpu_scaling.cpp) compare it with the CPU chain bit for
// bit and skip without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gbf/error.hpp"
#include "host/gpu/executor.hpp"
#include "host/gpu/runtime.hpp"
#include "host/scaling_backend.hpp"
#include "kernels/scaling.cuh"
#include "kernels/select.cuh"
#include "kernels/words.cuh"

namespace gbf::detail {
namespace {

using gpu::scaling::chain_ref;
using gpu::scaling::level_ref;

key_call call_of(const call_options& call) {
  key_call c;
  c.what = call.what;
  c.stream = call.stream;
  c.async = call.async;
  return c;
}

std::uint64_t read_count(const std::uint64_t* device_count, cudaStream_t s) {
  std::uint64_t value = 0;
  GBF_CUDA_TRY(cudaMemcpyAsync(&value, device_count, sizeof value, cudaMemcpyDeviceToHost, s));
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  return value;
}

// Device memory of the steps of one add, sized for its largest piece: about 90
// bytes a key (360 MB for the default 4 Mi-key pieces), freed when the add returns.
struct piece_memory {
  explicit piece_memory(std::size_t n)
      : capacity(n),
        hashes_all(n),
        flags(n),
        rows(n),
        slice_new(n),
        counter(1),
        compact_scratch(gpu::compact_scratch_bytes(n)),
        // The sort behind insert_new needs the most scratch for 32-bit block indices.
        insert_scratch(gpu::scaling::insert_new_scratch_bytes(std::uint64_t{1} << 32, n)),
        repeats_scratch(gpu::scaling::first_of_each_hash_scratch_bytes(n)) {
    for (int i = 0; i < 2; ++i) {
      hashes[i] = device_buffer<std::uint64_t>(n);
      positions[i] = device_buffer<std::uint32_t>(n);
    }
  }

  std::size_t capacity;
  device_buffer<std::uint64_t> hashes_all;
  device_buffer<unsigned char> flags;
  device_buffer<std::uint64_t> rows;
  device_buffer<unsigned char> slice_new;
  device_buffer<std::uint64_t> counter;
  device_buffer<unsigned char> compact_scratch;
  device_buffer<unsigned char> insert_scratch;
  device_buffer<unsigned char> repeats_scratch;
  device_buffer<std::uint64_t> hashes[2];     // the candidates, double-buffered
  device_buffer<std::uint32_t> positions[2];
};

class gpu_scaling final : public scaling_backend {
 public:
  gpu_scaling(const shape& s, std::size_t chunk_keys, unsigned streams)
      : shape_(s), device_refs_(max_scaling_levels), executor_(chunk_keys, streams) {}

  backend kind() const noexcept override { return backend::gpu; }

  void push_level(const layout& l) override {
    executor_.run_sync([&](cudaStream_t s) { append_level(l, s); });
  }

  // The chain's level count is levels_.size() (chain_now): the dropped level's
  // entry in device_refs_ is no longer read, and the next push overwrites it.
  void pop_level() noexcept override { levels_.pop_back(); }

  std::uint64_t add(const key_batch& keys, bool* is_new, const call_options& call,
                    const scaling_config& config, std::vector<scaling_level>& levels) override {
    key_call c = call_of(call);
    c.results = reinterpret_cast<std::uint8_t*>(is_new);
    c.ordered = true;
    c.max_piece_keys = executor_.chunk_keys();
    const device_scope on_device(executor_.device());
    std::unique_ptr<piece_memory> memory;
    if (keys.count > 0)
      memory = std::make_unique<piece_memory>(std::min(keys.count, executor_.chunk_keys()));
    std::uint64_t inserted = 0;
    executor_.run(keys, c, [&](const chunk_work& work) {
      steps s(*this, work, *memory);
      inserted += fill(s, config, levels);
    });
    return inserted;
  }

  void contains(const key_batch& keys, bool* found, const call_options& call) const override {
    key_call c = call_of(call);
    c.results = reinterpret_cast<std::uint8_t*>(found);
    executor_.run(keys, c, [&](const chunk_work& work) { probe(work); });
  }

  std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                      const call_options& call) const override {
    key_call c = call_of(call);
    c.counting = true;
    c.device_count = device_count;
    const chain_ref chain = chain_now();
    return executor_.run(keys, c, [&](const chunk_work& work) {
      gpu::scaling::count(chain, work.keys, work.counter, work.status, work.stream);
    });
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t* device_count,
                       const call_options& call) const override {
    key_call c = call_of(call);
    c.device_count = device_count;
    return executor_.select(keys, c, rows, [&](const chunk_work& work) { probe(work); });
  }

  std::uint64_t popcount(std::size_t level) const override {
    const level_memory& m = levels_.at(level);
    std::uint64_t bits = 0;
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(executor_.counter(), 0, sizeof(std::uint64_t), s));
      gpu::popcount(m.words.data(), m.l.num_words(), executor_.counter(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&bits, executor_.counter(), sizeof bits,
                                   cudaMemcpyDeviceToHost, s));
    });
    return bits;
  }

  void read_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                  std::uint32_t* out) const override {
    const level_memory& m = levels_.at(level);
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, m.words.data() + first, count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void write_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                   const std::uint32_t* in) override {
    level_memory& m = levels_.at(level);
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(m.words.data() + first, in, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  void or_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                const std::uint32_t* in) override {
    if (first % 4 != 0)
      throw invalid_argument("or_words: first word " + std::to_string(first) +
                             " is not a multiple of 4 (the kernel combines 16-byte vectors)");
    if (count == 0) return;
    level_memory& m = levels_.at(level);
    // Through the chain's scratch, as gpu_bloom::combine_host.
    const std::size_t bytes = count * sizeof(std::uint32_t);
    auto* staged = static_cast<std::uint32_t*>(executor_.scratch_for(key_call{}, bytes));
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(staged, in, bytes, cudaMemcpyHostToDevice, s));
      gpu::combine_words(m.words.data() + first, staged, count, gpu::word_op::bit_or, s);
    });
  }

  void begin_trial() override {
    level_memory& newest = levels_.back();
    const device_scope on_device(executor_.device());
    device_buffer<std::uint32_t> copy(newest.l.num_words());
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(copy.data(), newest.words.data(), copy.size_bytes(),
                                   cudaMemcpyDeviceToDevice, s));
    });
    kept_ = std::move(newest.words);
    newest.words = std::move(copy);
    try {
      publish(levels_.size() - 1);
    } catch (...) {
      // The device's level table may still name the original: put it back, so
      // that adds and probes keep going to one array.
      newest.words = std::move(kept_);
      throw;
    }
  }

  void end_trial(bool keep) noexcept override {
    if (!keep) {
      levels_.back().words = std::move(kept_);
      try {
        publish(levels_.size() - 1);
      } catch (...) {
        // The entry still names the trial copy, which is freed below: a later
        // probe would read freed memory, so the error cannot be dropped.
        std::terminate();
      }
    }
    kept_ = device_buffer<std::uint32_t>();
  }

  void synchronize(const char* what) const override { executor_.synchronize(what); }

 private:
  struct level_memory {
    layout l;
    device_buffer<std::uint32_t> words;
  };

  chain_ref chain_now() const {
    return {device_refs_.data(), static_cast<std::uint32_t>(levels_.size()), shape_.words_per_block,
            shape_.bits_per_key, shape_.seed};
  }

  level_ref ref_of(std::size_t level) const {
    return {levels_[level].words.data(), levels_[level].l.num_blocks};
  }

  // Writes level `level`'s entry into the device array, on the filter's stream
  // after every earlier operation, and waits.
  void publish(std::size_t level) {
    const level_ref ref = ref_of(level);
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(device_refs_.data() + level, &ref, sizeof ref,
                                   cudaMemcpyHostToDevice, s));
    });
  }

  // Appends a zeroed level and its entry, on stream `s` (an add's, or the
  // filter's), and waits for both.
  void append_level(const layout& l, cudaStream_t s) {
    if (levels_.size() >= max_scaling_levels)
      throw filter_full("a chain has at most " + std::to_string(max_scaling_levels) + " levels", 0, 0);
    const device_scope on_device(executor_.device());
    level_memory m{l, device_buffer<std::uint32_t>(l.num_words())};
    GBF_CUDA_TRY(cudaMemsetAsync(m.words.data(), 0, m.words.size_bytes(), s));
    const level_ref ref{m.words.data(), l.num_blocks};
    GBF_CUDA_TRY(cudaMemcpyAsync(device_refs_.data() + levels_.size(), &ref, sizeof ref,
                                 cudaMemcpyHostToDevice, s));
    GBF_CUDA_TRY(cudaStreamSynchronize(s));
    levels_.push_back(std::move(m));
  }

  void probe(const chunk_work& work) const {
    gpu::scaling::contains(chain_now(), work.keys, reinterpret_cast<bool*>(work.results),
                           work.status, work.stream);
  }

  // The steps of fill on one piece (host/scaling_backend.hpp), on work.stream.
  class steps final : public fill_steps {
   public:
    steps(gpu_scaling& chain, const chunk_work& work, piece_memory& memory)
        : chain_(chain), work_(work), m_(memory), s_(work.stream) {}

    std::size_t probe_all() override {
      const std::size_t n = work_.keys.count;
      if (work_.results != nullptr) GBF_CUDA_TRY(cudaMemsetAsync(work_.results, 0, n, s_));
      gpu::scaling::hash_absent(chain_.chain_now(), work_.keys, m_.hashes_all.data(), flags(), s_);
      const std::size_t kept = compact(n);
      gpu::scaling::gather(m_.hashes_all.data(), nullptr, m_.rows.data(), kept,
                           m_.hashes[current_].data(), m_.positions[current_].data(), s_);
      return size_ = kept;
    }

    std::uint64_t add_slice(std::size_t level, std::size_t first, std::size_t n) override {
      auto* slice_new = reinterpret_cast<bool*>(m_.slice_new.data());
      gpu::scaling::insert_new(chain_.ref_of(level), chain_.shape_.words_per_block,
                               chain_.shape_.bits_per_key, m_.hashes[current_].data() + first, n,
                               slice_new, m_.insert_scratch.data(), m_.insert_scratch.size_bytes(),
                               s_);
      GBF_CUDA_TRY(cudaMemsetAsync(m_.counter.data(), 0, sizeof(std::uint64_t), s_));
      gpu::scaling::scatter_new(slice_new, m_.positions[current_].data() + first, n,
                                reinterpret_cast<bool*>(work_.results), m_.counter.data(), s_);
      return read_count(m_.counter.data(), s_);
    }

    std::size_t drop_present(std::size_t level, std::size_t first) override {
      const std::size_t n = size_ - first;
      gpu::scaling::absent_in_level(chain_.ref_of(level), chain_.shape_.words_per_block,
                                    chain_.shape_.bits_per_key, m_.hashes[current_].data() + first,
                                    n, flags(), s_);
      return keep_flagged(first, n);
    }

    std::size_t drop_repeats() override {
      gpu::scaling::first_of_each_hash(m_.hashes[current_].data(), size_, flags(),
                                       m_.repeats_scratch.data(), m_.repeats_scratch.size_bytes(),
                                       s_);
      return keep_flagged(0, size_);
    }

    void open_level(const layout& l) override { chain_.append_level(l, s_); }

   private:
    bool* flags() { return reinterpret_cast<bool*>(m_.flags.data()); }

    // The indices of the n set flags to rows; returns how many.
    std::size_t compact(std::size_t n) {
      gpu::compact_flags(flags(), n, m_.rows.data(), m_.counter.data(), m_.compact_scratch.data(),
                         m_.compact_scratch.size_bytes(), s_);
      return static_cast<std::size_t>(read_count(m_.counter.data(), s_));
    }

    // Keeps the flagged candidates among [first, first + n), in order, renumbered from 0.
    std::size_t keep_flagged(std::size_t first, std::size_t n) {
      const std::size_t kept = compact(n);
      const int next = 1 - current_;
      gpu::scaling::gather(m_.hashes[current_].data() + first,
                           m_.positions[current_].data() + first, m_.rows.data(), kept,
                           m_.hashes[next].data(), m_.positions[next].data(), s_);
      current_ = next;
      return size_ = kept;
    }

    gpu_scaling& chain_;
    chunk_work work_;
    piece_memory& m_;
    cudaStream_t s_;
    int current_ = 0;       // which of the double buffers holds the candidates
    std::size_t size_ = 0;  // candidates
  };

  shape shape_;
  // The levels' words and entries are declared before the executor, so they are
  // freed after its destructor has waited for _async work that may use them.
  std::vector<level_memory> levels_;
  device_buffer<level_ref> device_refs_;
  device_buffer<std::uint32_t> kept_;  // the original newest level during a trial
  mutable gpu_executor executor_;
};

}  // namespace

std::unique_ptr<scaling_backend> make_gpu_scaling(const shape& s, const options& opts,
                                                  std::string* description) {
  require_gpu();
  const gpu_geometry geometry = gpu_geometry_of(opts, gpu::scaling::max_slice);
  auto chain = std::make_unique<gpu_scaling>(s, geometry.chunk_keys, geometry.streams);
  if (description != nullptr) *description = describe_current_gpu();
  return chain;
}

}  // namespace gbf::detail
