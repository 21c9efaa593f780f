// Row-group pruning on the GPU (host/parquet/prune.hpp): the packed filters
// uploaded once, host key batches copied in chunks, and per chunk one probe
// launch over all (key, filter) pairs (kernels/parquet_prune.cuh); per_key adds
// a scan of the counts and a fill launch.
#include <algorithm>
#include <cstring>
#include <vector>

#include "host/gpu/executor.hpp"
#include "host/gpu/runtime.hpp"
#include "host/keys.hpp"
#include "host/parquet/prune.hpp"
#include "kernels/parquet_prune.cuh"

namespace gbf::detail::parquet {
namespace {

namespace kernels = gpu::parquet_prune;

/// Keys per chunk: bounds the device memory of a batch (keys, counts and offsets,
/// about 24 bytes a key) whatever its size.
constexpr std::size_t chunk_keys = std::size_t{1} << 24;

template <class T>
device_buffer<T> upload(const T* host, std::size_t count, cudaStream_t stream) {
  device_buffer<T> buffer(std::max<std::size_t>(count, 1));
  if (count > 0)
    GBF_CUDA_TRY(cudaMemcpyAsync(buffer.data(), host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
  return buffer;
}

/// One chunk of a host batch in device memory. String keys get their offsets
/// rebased to the chunk's bytes (as int64); the validity bitmap is copied from
/// the byte holding the chunk's first bit.
struct device_chunk {
  key_batch batch;
  device_buffer<unsigned char> data;
  device_buffer<std::int64_t> offsets;
  device_buffer<std::uint8_t> validity;

  device_chunk(const key_batch& keys, std::size_t begin, std::size_t end, cudaStream_t stream) {
    const std::size_t n = end - begin;
    batch.count = n;
    batch.kind = keys.kind;
    batch.space = memory_space::device;
    if (keys.is_string()) {
      const std::int64_t first = offset_at(keys, begin);
      std::vector<std::int64_t> rebased(n + 1);
      for (std::size_t i = 0; i <= n; ++i) rebased[i] = offset_at(keys, begin + i) - first;
      const auto bytes = static_cast<std::size_t>(rebased[n]);
      data = upload(static_cast<const unsigned char*>(keys.data) + first, bytes, stream);
      offsets = upload(rebased.data(), rebased.size(), stream);
      stream_sync(stream);  // `rebased` dies with this scope
      batch.kind = key_kind::str64;
      batch.data = data.data();
      batch.data_bytes = bytes;
      batch.offsets = offsets.data();
    } else {
      const std::size_t width = key_bytes(keys.kind);
      data = upload(static_cast<const unsigned char*>(keys.data) + begin * width, n * width, stream);
      batch.data = data.data();
    }
    if (keys.validity != nullptr) {
      const std::size_t first_bit = keys.validity_bit + begin;
      const std::size_t first_byte = first_bit / 8;
      const std::size_t last_byte = (first_bit + n + 7) / 8;
      validity = upload(keys.validity + first_byte, last_byte - first_byte, stream);
      batch.validity = validity.data();
      batch.validity_bit = first_bit % 8;
    }
  }

  static void stream_sync(cudaStream_t stream) { GBF_CUDA_TRY(cudaStreamSynchronize(stream)); }
};

class gpu_pruner final : public gpu_prune_backend {
 public:
  explicit gpu_pruner(const packed_filters& f) : count_(f.count()) {
    GBF_CUDA_TRY(cudaGetDevice(&device_));
    words_ = upload(f.words.get(), static_cast<std::size_t>(f.num_words), stream_.get());
    word_offset_ = upload(f.word_offset.data(), f.word_offset.size(), stream_.get());
    num_blocks_ = upload(f.num_blocks.data(), f.num_blocks.size(), stream_.get());
    stream_.synchronize();
  }

  void prune(const key_batch& keys, bool per_key, gbf::parquet::prune_result& out) const override {
    const device_scope scope(device_);
    const cudaStream_t s = stream_.get();
    const kernels::packed_view view{words_.data(), word_offset_.data(), num_blocks_.data(),
                                    static_cast<std::uint32_t>(count_)};
    out.may_hold.assign(count_, 0);
    out.key_offsets.clear();
    out.row_groups.clear();
    if (per_key) out.key_offsets.assign(keys.count + 1, 0);
    if (keys.count == 0 || count_ == 0) return;

    device_buffer<std::uint8_t> may_hold(count_);
    GBF_CUDA_TRY(cudaMemsetAsync(may_hold.data(), 0, count_, s));
    std::uint64_t total = 0;
    for (std::size_t begin = 0; begin < keys.count; begin += chunk_keys) {
      const std::size_t end = std::min(begin + chunk_keys, keys.count);
      const std::size_t n = end - begin;
      const device_chunk chunk(keys, begin, end, s);
      if (!per_key) {
        kernels::mark(view, chunk.batch, may_hold.data(), s);
        stream_.synchronize();  // before the chunk's buffers are freed
        continue;
      }
      // counts[n] stays 0, so the scan's last entry is the chunk's total.
      device_buffer<std::uint64_t> counts(n + 1);
      device_buffer<std::uint64_t> offsets(n + 1);
      GBF_CUDA_TRY(cudaMemsetAsync(counts.data() + n, 0, sizeof(std::uint64_t), s));
      kernels::count(view, chunk.batch, counts.data(), may_hold.data(), s);
      const std::size_t scratch_bytes = kernels::scan_scratch_bytes(n + 1);
      device_buffer<unsigned char> scratch(std::max<std::size_t>(scratch_bytes, 1));
      kernels::exclusive_scan(counts.data(), offsets.data(), n + 1, scratch.data(), scratch_bytes, s);
      std::uint64_t* host_offsets = out.key_offsets.data() + begin;
      GBF_CUDA_TRY(cudaMemcpyAsync(host_offsets, offsets.data(), (n + 1) * sizeof(std::uint64_t),
                                   cudaMemcpyDeviceToHost, s));
      stream_.synchronize();
      const std::uint64_t chunk_total = host_offsets[n];
      device_buffer<std::uint32_t> ids(std::max<std::uint64_t>(chunk_total, 1));
      kernels::fill(view, chunk.batch, offsets.data(), ids.data(), s);
      out.row_groups.resize(total + chunk_total);
      if (chunk_total > 0)
        GBF_CUDA_TRY(cudaMemcpyAsync(out.row_groups.data() + total, ids.data(),
                                     chunk_total * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, s));
      stream_.synchronize();
      for (std::size_t i = 0; i <= n; ++i) host_offsets[i] += total;  // chunk -> batch offsets
      total += chunk_total;
    }
    GBF_CUDA_TRY(cudaMemcpyAsync(out.may_hold.data(), may_hold.data(), count_, cudaMemcpyDeviceToHost, s));
    stream_.synchronize();
  }

 private:
  std::size_t count_;
  int device_ = 0;
  stream stream_;
  device_buffer<std::uint32_t> words_;
  device_buffer<std::uint64_t> word_offset_;
  device_buffer<std::uint32_t> num_blocks_;
};

}  // namespace

std::unique_ptr<gpu_prune_backend> make_gpu_pruner(const packed_filters& filters) {
  require_gpu();
  return std::make_unique<gpu_pruner>(filters);
}

}  // namespace gbf::detail::parquet
