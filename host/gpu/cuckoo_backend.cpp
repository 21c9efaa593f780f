// The cuckoo filter on the GPU: the table and its cumulative counters in
// device memory, the kind's kernels (kernels/cuckoo.cuh), run by the shared
// executor (host/gpu/executor.hpp), which owns streams, ordering, transfers
// and the checking of device string batches.
//
// Counters. The kernels add to device counters (inserted, present, failed,
// evictions, removed) as they go, so _async calls need no host round trip; a
// synchronous add or remove reports the difference of the counters around it.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "gbf/error.hpp"
#include "host/cuckoo_backend.hpp"
#include "host/gpu/executor.hpp"
#include "host/gpu/runtime.hpp"
#include "kernels/cuckoo.cuh"

namespace gbf::detail {
namespace {

namespace kernels = gpu::cuckoo;

using counter_values = std::array<std::uint64_t, kernels::counter_count>;

key_call call_of(const call_options& call) {
  key_call c;
  c.what = call.what;
  c.stream = call.stream;
  c.async = call.async;
  return c;
}

class gpu_cuckoo final : public cuckoo_backend {
 public:
  gpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks, std::size_t chunk_keys,
             unsigned streams)
      : layout_(l),
        max_kicks_(max_kicks),
        words_(l.num_buckets * cuckoo_bucket_words),
        counters_(kernels::counter_count),
        executor_(chunk_keys, streams) {
    clear();
  }

  backend kind() const noexcept override { return backend::gpu; }

  cuckoo_add_report add(const key_batch& keys, cuckoo_status* status,
                        const cuckoo_add_options& how, const call_options& call) override {
    key_call c = call_of(call);
    c.results = reinterpret_cast<std::uint8_t*>(status);
    const bool sorted = how.unique || how.placement == cuckoo_placement::deterministic;
    const counter_values before = call.async ? counter_values{} : read_counters();
    if (!sorted) {
      executor_.run(keys, c, [&](const chunk_work& work) {
        kernels::add(table(), work.keys, reinterpret_cast<cuckoo_status*>(work.results),
                     work.status, work.stream);
      });
    } else {
      // The sorted steps read string offsets without the per-call gate of an
      // _async batch, so they take device strings only synchronously (checked first).
      if (call.async && keys.is_string())
        throw invalid_argument(std::string(call.what) +
                               ": unique or deterministic adds of device string keys must be "
                               "synchronous (use add, not add_async)");
      // Pieces of at most one chunk, in batch order, sharing one scratch.
      c.ordered = true;
      c.max_piece_keys = std::min(executor_.chunk_keys(), kernels::sorted_max_keys);
      const device_scope on_device(executor_.device());  // CUB sizes its scratch for the current GPU
      const std::size_t scratch_bytes =
          kernels::sorted_scratch_bytes(std::min(keys.count, c.max_piece_keys));
      void* scratch = keys.count == 0 ? nullptr : executor_.scratch_for(c, scratch_bytes);
      const bool deterministic = how.placement == cuckoo_placement::deterministic;
      executor_.run(keys, c, [&](const chunk_work& work) {
        kernels::add_sorted(table(), work.keys, reinterpret_cast<cuckoo_status*>(work.results),
                            how.unique, deterministic, scratch, scratch_bytes, work.stream);
      });
    }
    if (call.async) return {};
    const counter_values after = read_counters();
    cuckoo_add_report report;
    report.inserted = after[kernels::inserted] - before[kernels::inserted];
    report.present = after[kernels::present] - before[kernels::present];
    report.failed = after[kernels::failed] - before[kernels::failed];
    return report;
  }

  std::uint64_t remove(const key_batch& keys, bool* removed, const call_options& call) override {
    key_call c = call_of(call);
    c.results = reinterpret_cast<std::uint8_t*>(removed);
    const counter_values before = call.async ? counter_values{} : read_counters();
    executor_.run(keys, c, [&](const chunk_work& work) {
      kernels::remove(table(), work.keys, reinterpret_cast<bool*>(work.results), work.status,
                      work.stream);
    });
    if (call.async) return 0;
    return read_counters()[kernels::removed] - before[kernels::removed];
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
      kernels::count(layout_, words_.data(), work.keys, work.counter, work.status, work.stream);
    });
  }

  void approximate_count(const key_batch& keys, std::uint8_t* copies,
                         const call_options& call) const override {
    key_call c = call_of(call);
    c.results = copies;
    executor_.run(keys, c, [&](const chunk_work& work) {
      kernels::approximate_count(layout_, words_.data(), work.keys, work.results, work.status,
                                 work.stream);
    });
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t* device_count,
                       const call_options& call) const override {
    key_call c = call_of(call);
    c.device_count = device_count;
    return executor_.select(keys, c, rows, [&](const chunk_work& work) { probe(work); });
  }

  void clear() override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(words_.data(), 0, words_.size_bytes(), s));
      GBF_CUDA_TRY(cudaMemsetAsync(counters_.data(), 0, counters_.size_bytes(), s));
    });
  }

  std::uint64_t occupied_slots() const override {
    std::uint64_t slots = 0;
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(executor_.counter(), 0, sizeof(std::uint64_t), s));
      kernels::occupied(layout_, words_.data(), executor_.counter(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&slots, executor_.counter(), sizeof(slots),
                                   cudaMemcpyDeviceToHost, s));
    });
    return slots;
  }

  cuckoo_totals totals() const override {
    const counter_values v = read_counters();
    cuckoo_totals t;
    t.keys_added = v[kernels::inserted];
    t.keys_removed = v[kernels::removed];
    t.evictions = v[kernels::evictions];
    t.failed_inserts = v[kernels::failed];
    return t;
  }

  void set_totals(const cuckoo_totals& t) override {
    counter_values v{};
    v[kernels::inserted] = t.keys_added;
    v[kernels::removed] = t.keys_removed;
    v[kernels::evictions] = t.evictions;
    v[kernels::failed] = t.failed_inserts;
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(counters_.data(), v.data(), sizeof(v), cudaMemcpyHostToDevice, s));
    });
  }

  void read_words(std::uint32_t* out) const override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, words_.data(), words_.size_bytes(),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    // The table is held as 64-bit words (a bucket's two halves); `first` counts 32-bit ones.
    const auto* words32 = reinterpret_cast<const std::uint32_t*>(words_.data());
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, words32 + first, count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    // As in read_words: `first` counts 32-bit words of the 64-bit table.
    auto* words32 = reinterpret_cast<std::uint32_t*>(words_.data());
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(words32 + first, in, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  const std::uint32_t* device_words() const override {
    return reinterpret_cast<const std::uint32_t*>(words_.data());
  }

  void synchronize(const char* what) const override { executor_.synchronize(what); }

 private:
  kernels::table_ref table() { return {words_.data(), layout_, max_kicks_, counters_.data()}; }

  counter_values read_counters() const {
    counter_values v{};
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(v.data(), counters_.data(), sizeof(v), cudaMemcpyDeviceToHost, s));
    });
    return v;
  }

  void probe(const chunk_work& work) const {
    kernels::contains(layout_, words_.data(), work.keys, reinterpret_cast<bool*>(work.results),
                      work.status, work.stream);
  }

  cuckoo_layout layout_;
  std::uint32_t max_kicks_;
  // The table and counters are declared before the executor, so they are freed
  // after the executor's destructor has waited for the _async work using them.
  device_buffer<std::uint64_t> words_;
  device_buffer<std::uint64_t> counters_;
  mutable gpu_executor executor_;
};

}  // namespace

std::unique_ptr<cuckoo_backend> make_gpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks,
                                                const options& opts, std::string* description) {
  require_gpu();
  if (const char* problem = cuckoo_layout_problem(l))
    throw invalid_argument(std::string("invalid cuckoo layout: ") + problem);
  const gpu_geometry geometry = gpu_geometry_of(opts, kernels::sorted_max_keys);
  auto backend = std::make_unique<gpu_cuckoo>(l, max_kicks, geometry.chunk_keys, geometry.streams);
  if (description != nullptr) *description = describe_current_gpu();
  return backend;
}

}  // namespace gbf::detail
