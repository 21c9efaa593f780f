// The counting filter on the GPU: the counter array in device memory and the
// kind's kernels (kernels/counting.cuh), run by the shared executor
// (host/gpu/executor.hpp), which owns streams, ordering, transfers and the
// checking of device string batches. Compiled, not yet run on a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "host/counting_backend.hpp"
#include "host/gpu/executor.hpp"
#include "host/gpu/runtime.hpp"
#include "kernels/counting.cuh"

namespace gbf::detail {
namespace {

key_call call_of(const call_options& call) {
  key_call c;
  c.what = call.what;
  c.stream = call.stream;
  c.async = call.async;
  return c;
}

class gpu_counting final : public counting_backend {
 public:
  gpu_counting(const layout& l, std::uint32_t counter_bits, std::size_t chunk_keys,
               unsigned streams)
      : layout_(l),
        counter_bits_(counter_bits),
        counters_(num_counter_words(l, counter_bits)),
        executor_(chunk_keys, streams) {
    clear();
  }

  backend kind() const noexcept override { return backend::gpu; }

  void add(const key_batch& keys, const call_options& call) override {
    executor_.run(keys, call_of(call), [&](const chunk_work& work) {
      gpu::counting::add(layout_, counter_bits_, counters_.data(), work.keys, work.status,
                         work.stream);
    });
  }

  // Pieces of at most chunk_keys keys, in batch order, sharing one scratch
  // (each piece's kernels follow the previous piece's), as the plain filter's add_new.
  std::uint64_t remove(const key_batch& keys, bool* removed, std::uint64_t* device_refused,
                       const call_options& call) override {
    key_call c = call_of(call);
    c.results = reinterpret_cast<std::uint8_t*>(removed);
    c.ordered = true;
    c.max_piece_keys = executor_.chunk_keys();
    c.counting = !call.async || device_refused != nullptr;
    c.device_count = device_refused;
    const device_scope on_device(executor_.device());  // CUB sizes its scratch for the current GPU
    const std::size_t scratch_bytes = gpu::counting::remove_scratch_bytes(
        layout_, std::min(keys.count, executor_.chunk_keys()));
    void* scratch = keys.count == 0 ? nullptr : executor_.scratch_for(c, scratch_bytes);
    return executor_.run(keys, c, [&](const chunk_work& work) {
      gpu::counting::remove_checked(layout_, counter_bits_, counters_.data(), work.keys,
                                    reinterpret_cast<bool*>(work.results), work.counter,
                                    work.status, scratch, scratch_bytes, work.stream);
    });
  }

  void remove_unchecked(const key_batch& keys, const call_options& call) override {
    executor_.run(keys, call_of(call), [&](const chunk_work& work) {
      gpu::counting::remove_unchecked(layout_, counter_bits_, counters_.data(), work.keys,
                                      work.status, work.stream);
    });
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
    return executor_.run(keys, c, [&](const chunk_work& work) {
      gpu::counting::count(layout_, counter_bits_, counters_.data(), work.keys, work.counter,
                           work.status, work.stream);
    });
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t* device_count,
                       const call_options& call) const override {
    key_call c = call_of(call);
    c.device_count = device_count;
    return executor_.select(keys, c, rows, [&](const chunk_work& work) { probe(work); });
  }

  void approximate_count(const key_batch& keys, std::uint8_t* counts,
                         const call_options& call) const override {
    key_call c = call_of(call);
    c.results = counts;
    executor_.run(keys, c, [&](const chunk_work& work) {
      gpu::counting::approximate_count(layout_, counter_bits_, counters_.data(), work.keys,
                                       work.results, work.status, work.stream);
    });
  }

  void clear() override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, counters_.size_bytes(), s));
    });
  }

  void merge(const counting_backend& other, counter_merge op) override {
    const char* const verb = op == counter_merge::sum ? "merge" : "intersect";
    const auto* gpu_other = dynamic_cast<const gpu_counting*>(&other);
    if (gpu_other == nullptr)
      throw invalid_argument(std::string(verb) + ": the other filter's counters are not on the GPU");
    if (gpu_other->layout_ != layout_ || gpu_other->counter_bits_ != counter_bits_)
      throw layout_mismatch(std::string(verb) + ": the two counting filters have different layouts");
    if (gpu_other->executor_.device() != executor_.device()) {
      throw invalid_argument(std::string(verb) + ": the filters are on different GPUs (device " +
                             std::to_string(executor_.device()) + " and device " +
                             std::to_string(gpu_other->executor_.device()) + ")");
    }
    if (gpu_other == this && op == counter_merge::min) return;  // min(x, x) = x
    if (gpu_other == this) {
      // x + x in place: no second copy of the counters, as on the CPU.
      executor_.run_sync([&](cudaStream_t s) {
        gpu::counting::double_counters(counters_.data(), counters_.size(), counter_bits_, s);
      });
      return;
    }
    executor_.run_sync([&](cudaStream_t s) {
      gpu_other->executor_.wait_for_async(s);
      combine(0, counters_.size(), gpu_other->counters_.data(), op, s);
    });
  }

  void merge_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* counters,
                  counter_merge op) override {
    if (count == 0) return;
    // Through the filter's scratch, as gpu_bloom::combine_host.
    const std::size_t bytes = count * sizeof(std::uint32_t);
    auto* staged = static_cast<std::uint32_t*>(executor_.scratch_for(key_call{}, bytes));
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(staged, counters, bytes, cudaMemcpyHostToDevice, s));
      combine(first, count, staged, op, s);
    });
  }

  counter_census census() const override {
    std::uint64_t totals[2] = {0, 0};
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(census_.data(), 0, census_.size_bytes(), s));
      gpu::counting::census(counters_.data(), counters_.size(), counter_bits_, census_.data(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(totals, census_.data(), sizeof(totals),
                                   cudaMemcpyDeviceToHost, s));
    });
    return {totals[0], totals[1]};
  }

  void read_counters(std::uint32_t* out) const override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, counters_.data(), counters_.size_bytes(),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void read_counters(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, counters_.data() + first, count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void write_counters(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(counters_.data() + first, in, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  void project(std::uint32_t* words) const override {
    cudaPointerAttributes target{};
    GBF_CUDA_TRY(cudaPointerGetAttributes(&target, words));
    if (target.type == cudaMemoryTypeDevice && target.device != executor_.device()) {
      // counting_filter::projection() makes its filter on the caller's current
      // GPU, which need not be this one: project here, then copy across (peer
      // to peer or through the host, as the driver can).
      const device_scope on_device(executor_.device());
      device_buffer<std::uint32_t> staged(layout_.num_words());
      executor_.run_sync([&](cudaStream_t s) {
        gpu::counting::project(counters_.data(), layout_.num_words(), counter_bits_, staged.data(), s);
        GBF_CUDA_TRY(cudaMemcpyAsync(words, staged.data(), staged.size_bytes(), cudaMemcpyDefault, s));
      });
      return;
    }
    executor_.run_sync([&](cudaStream_t s) {
      gpu::counting::project(counters_.data(), layout_.num_words(), counter_bits_, words, s);
    });
  }

  void synchronize(const char* what) const override { executor_.synchronize(what); }

 private:
  /// counters_ = op(counters_, other) on stream s; `other` is another device array.
  /// Counter words [first, first + count) = op(themselves, other[0 .. count)).
  void combine(std::uint64_t first, std::uint64_t count, const std::uint32_t* other, counter_merge op,
               cudaStream_t s) {
    if (op == counter_merge::sum)
      gpu::counting::merge(counters_.data() + first, other, count, counter_bits_, s);
    else
      gpu::counting::intersect(counters_.data() + first, other, count, counter_bits_, s);
  }

  void probe(const chunk_work& work) const {
    gpu::counting::contains(layout_, counter_bits_, counters_.data(), work.keys,
                            reinterpret_cast<bool*>(work.results), work.status, work.stream);
  }

  layout layout_;
  std::uint32_t counter_bits_;
  // The counters are declared before the executor, so they are freed after the
  // executor's destructor has waited for the _async work that may still use them.
  device_buffer<std::uint32_t> counters_;
  device_buffer<std::uint64_t> census_{2};
  mutable gpu_executor executor_;
};

}  // namespace

std::unique_ptr<counting_backend> make_gpu_counting(const layout& l, std::uint32_t counter_bits,
                                                    const options& opts, std::string* description) {
  require_gpu();
  if (const char* problem = counting_layout_problem(l, counter_bits))
    throw invalid_argument(std::string("invalid counting filter layout: ") + problem);
  const gpu_geometry geometry = gpu_geometry_of(opts, gpu::counting::remove_max_keys);
  auto backend =
      std::make_unique<gpu_counting>(l, counter_bits, geometry.chunk_keys, geometry.streams);
  if (description != nullptr) *description = describe_current_gpu();
  return backend;
}

}  // namespace gbf::detail
