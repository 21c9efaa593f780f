// Kernels shared by every filter kind's key batches (kernels/keys.cuh).
#include "kernels/keys.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu {
namespace {

// Index i is bad by offset_is_bad (gbf/keys.hpp), the rule the host check uses.
template <class Offset>
__global__ void __launch_bounds__(block_threads)
    validate_offsets_kernel(const Offset* __restrict__ offsets, std::size_t count,
                            std::uint64_t data_bytes, counter_t* first_bad, counter_t* sticky) {
  for (std::size_t i = first_index(); i <= count; i += grid_stride()) {
    const auto value = static_cast<std::int64_t>(offsets[i]);
    const auto previous = i > 0 ? static_cast<std::int64_t>(offsets[i - 1]) : 0;
    if (offset_is_bad(i, value, previous, data_bytes)) {
      atomicMin(first_bad, static_cast<counter_t>(i));
      if (sticky != nullptr) atomicMin(sticky, static_cast<counter_t>(i));
    }
  }
}

struct hash_op {
  std::uint64_t hash_seed;
  std::uint64_t* __restrict__ hashes;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return hash_seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    hashes[i] = h;
    return 0;
  }
  __device__ void skip(std::size_t i) const { hashes[i] = xxh64_u64(i, hash_seed); }
};

}  // namespace

void validate_offsets(const key_batch& keys, std::uint64_t* first_bad, std::uint64_t* sticky,
                      cudaStream_t stream) {
  auto* bad = reinterpret_cast<counter_t*>(first_bad);
  auto* sticky_bad = reinterpret_cast<counter_t*>(sticky);
  const auto data_bytes = static_cast<std::uint64_t>(keys.data_bytes);
  if (keys.kind == key_kind::str32) {
    launch<validate_offsets_kernel<std::int32_t>>(keys.count + 1, stream,
                                                  static_cast<const std::int32_t*>(keys.offsets),
                                                  keys.count, data_bytes, bad, sticky_bad);
  } else {
    launch<validate_offsets_kernel<std::int64_t>>(keys.count + 1, stream,
                                                  static_cast<const std::int64_t*>(keys.offsets),
                                                  keys.count, data_bytes, bad, sticky_bad);
  }
}

void hash_keys(const key_batch& keys, std::uint64_t seed, std::uint64_t* hashes,
               cudaStream_t stream) {
  for_each_key(keys, hash_op{seed, hashes}, nullptr, stream);
}

}  // namespace gbf::detail::gpu
