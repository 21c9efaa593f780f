// The plain Bloom filter on the GPU: the bit array in device memory and the
// kind's kernels (kernels/bloom.cuh), run by the shared executor
// (host/gpu/executor.hpp), which owns streams, ordering, transfers and the
// checking of device string batches.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "gbf/error.hpp"
#include "host/bloom_backend.hpp"
#include "host/gpu/executor.hpp"
#include "host/gpu/runtime.hpp"
#include "kernels/bloom.cuh"
#include "kernels/words.cuh"

namespace gbf::detail {
namespace {

gpu::word_op to_word_op(set_op op) {
  switch (op) {
    case set_op::union_or: return gpu::word_op::bit_or;
    case set_op::intersect_and: return gpu::word_op::bit_and;
    case set_op::symmetric_xor: break;
  }
  return gpu::word_op::bit_xor;
}

key_call call_of(const call_options& call) {
  key_call c;
  c.what = call.what;
  c.stream = call.stream;
  c.async = call.async;
  return c;
}

class gpu_bloom final : public bloom_backend {
 public:
  gpu_bloom(const layout& l, std::size_t chunk_keys, unsigned streams)
      : layout_(l), words_(l.num_words()), executor_(chunk_keys, streams) {
    clear();
  }

  backend kind() const noexcept override { return backend::gpu; }

  void add(const key_batch& keys, bool* is_new, const call_options& call) override {
    key_call c = call_of(call);
    if (is_new == nullptr) {
      executor_.run(keys, c, [&](const chunk_work& work) {
        gpu::bloom::add(layout_, words_.data(), work.keys, work.status, work.stream);
      });
      return;
    }
    // add_new: pieces of at most chunk_keys keys, in batch order, sharing one
    // scratch (each piece's kernels follow the previous piece's).
    c.results = reinterpret_cast<std::uint8_t*>(is_new);
    c.ordered = true;
    c.max_piece_keys = executor_.chunk_keys();
    const device_scope on_device(executor_.device());  // CUB sizes its scratch for the current GPU
    const std::size_t scratch_bytes =
        gpu::bloom::add_new_scratch_bytes(layout_, std::min(keys.count, executor_.chunk_keys()));
    void* scratch = keys.count == 0 ? nullptr : executor_.scratch_for(c, scratch_bytes);
    executor_.run(keys, c, [&](const chunk_work& work) {
      gpu::bloom::add_new(layout_, words_.data(), work.keys, reinterpret_cast<bool*>(work.results),
                          scratch, scratch_bytes, work.stream);
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
      gpu::bloom::count(layout_, words_.data(), work.keys, work.counter, work.status, work.stream);
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
    });
  }

  void combine(const bloom_backend& other, set_op op) override {
    const auto* gpu_other = dynamic_cast<const gpu_bloom*>(&other);
    if (gpu_other == nullptr)
      throw invalid_argument("combine: the other filter's bits are not on the GPU");
    if (gpu_other->layout_ != layout_)
      throw layout_mismatch("combine: the two filters have different layouts");
    if (gpu_other->executor_.device() != executor_.device()) {
      throw invalid_argument("combine: the filters are on different GPUs (device " +
                             std::to_string(executor_.device()) + " and device " +
                             std::to_string(gpu_other->executor_.device()) + ")");
    }
    if (gpu_other == this) {  // x | x == x & x == x; x ^ x == 0 (and no aliased kernel)
      if (op == set_op::symmetric_xor) clear();
      return;
    }
    executor_.run_sync([&](cudaStream_t s) {
      gpu_other->executor_.wait_for_async(s);
      gpu::combine_words(words_.data(), gpu_other->words_.data(), layout_.num_words(),
                         to_word_op(op), s);
    });
  }

  void combine_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* words,
                    set_op op) override {
    if (first % 4 != 0)
      throw invalid_argument("combine_host: first word " + std::to_string(first) +
                             " is not a multiple of 4 (the kernel combines 16-byte vectors)");
    if (count == 0) return;
    // The slice goes through the filter's scratch: one allocation for all the
    // steps of a staged combine, not a cudaMalloc and a synchronizing cudaFree each.
    const std::size_t bytes = count * sizeof(std::uint32_t);
    auto* staged = static_cast<std::uint32_t*>(executor_.scratch_for(key_call{}, bytes));
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(staged, words, bytes, cudaMemcpyHostToDevice, s));
      gpu::combine_words(words_.data() + first, staged, count, to_word_op(op), s);
    });
  }

  void or_blocks(const std::uint32_t* blocks, const std::uint32_t* rows, std::uint64_t count) override {
    // Through the filter's scratch in steps of at most 2^20 blocks (4 (1 + W) MiB):
    // the indices and rows go over, and one thread per row word ORs it in. The cost
    // is the bits' bytes, not the filter's.
    const std::uint64_t words_per_block = layout_.words_per_block;
    const std::uint64_t step_blocks = std::min<std::uint64_t>(count, std::uint64_t{1} << 20);
    if (step_blocks == 0) return;
    // The rows first (16-byte aligned as the scratch is), the indices after them.
    const std::size_t row_bytes = step_blocks * words_per_block * sizeof(std::uint32_t);
    auto* staged_rows =
        static_cast<std::uint32_t*>(executor_.scratch_for(key_call{}, row_bytes + step_blocks * sizeof(std::uint32_t)));
    std::uint32_t* const staged_blocks = staged_rows + step_blocks * words_per_block;
    for (std::uint64_t first = 0; first < count; first += step_blocks) {
      const std::uint64_t n = std::min(step_blocks, count - first);
      executor_.run_sync([&](cudaStream_t s) {
        GBF_CUDA_TRY(cudaMemcpyAsync(staged_rows, rows + first * words_per_block,
                                     n * words_per_block * sizeof(std::uint32_t), cudaMemcpyHostToDevice, s));
        GBF_CUDA_TRY(cudaMemcpyAsync(staged_blocks, blocks + first, n * sizeof(std::uint32_t),
                                     cudaMemcpyHostToDevice, s));
        gpu::or_block_rows(words_.data(), staged_blocks, staged_rows, n, layout_.words_per_block, s);
      });
    }
  }

  std::uint64_t popcount() const override {
    std::uint64_t bits = 0;
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemsetAsync(executor_.counter(), 0, sizeof(std::uint64_t), s));
      gpu::popcount(words_.data(), layout_.num_words(), executor_.counter(), s);
      GBF_CUDA_TRY(cudaMemcpyAsync(&bits, executor_.counter(), sizeof(bits),
                                   cudaMemcpyDeviceToHost, s));
    });
    return bits;
  }

  void read_words(std::uint32_t* out) const override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, words_.data(), words_.size_bytes(),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(out, words_.data() + first, count * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, s));
    });
  }

  void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(words_.data() + first, in, count * sizeof(std::uint32_t),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  void write_words(const std::uint32_t* in) override {
    executor_.run_sync([&](cudaStream_t s) {
      GBF_CUDA_TRY(cudaMemcpyAsync(words_.data(), in, words_.size_bytes(),
                                   cudaMemcpyHostToDevice, s));
    });
  }

  std::uint32_t* device_words() override { return words_.data(); }

  void synchronize(const char* what) const override { executor_.synchronize(what); }

 private:
  void probe(const chunk_work& work) const {
    gpu::bloom::contains(layout_, words_.data(), work.keys, reinterpret_cast<bool*>(work.results),
                         work.status, work.stream);
  }

  layout layout_;
  // The words are declared before the executor, so they are freed after the
  // executor's destructor has waited for the _async work that may still use them.
  device_buffer<std::uint32_t> words_;
  mutable gpu_executor executor_;
};

}  // namespace

std::unique_ptr<bloom_backend> make_gpu_bloom(const layout& l, const options& opts,
                                              std::string* description) {
  require_gpu();
  if (const char* problem = layout_problem(l)) throw invalid_argument(problem);
  const gpu_geometry geometry = gpu_geometry_of(opts, gpu::bloom::add_new_max_keys);
  auto backend = std::make_unique<gpu_bloom>(l, geometry.chunk_keys, geometry.streams);
  if (description != nullptr) *description = describe_current_gpu();
  return backend;
}

}  // namespace gbf::detail
