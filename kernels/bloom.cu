// The plain Bloom filter's key operations (kernels/bloom.cuh): each is a
// device_ref call inside the shared key loops (launch.cuh), so the probe and
// insert logic exists once, in gbf::device_ref, the view user kernels get too.
#include "kernels/bloom.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::bloom {
namespace {

// Integer keys are added a warp at a time (device_ref::add_hashes: W lanes write
// each key's block together); string keys, hashed one per lane or per warp, one
// key at a time.
template <std::uint32_t W>
struct add_op {
  device_ref<W> filter;
  static constexpr bool counts = false;
  static constexpr bool per_warp = true;
  __device__ std::uint64_t seed() const { return filter.seed(); }
  __device__ void keys(const warp_tile& warp, std::uint64_t h, bool valid) const {
    filter.add_hashes(warp, h, valid);
  }
  __device__ unsigned key(std::size_t, std::uint64_t h) const {
    filter.add_hash(h);
    return 0;
  }
  __device__ void skip(std::size_t) const {}
};

template <std::uint32_t W>
struct contains_op {
  device_ref<W, const std::uint32_t> filter;
  bool* __restrict__ found;
  static constexpr bool counts = false;
  __device__ std::uint64_t seed() const { return filter.seed(); }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    found[i] = filter.contains_hash(h);
    return 0;
  }
  __device__ void skip(std::size_t i) const { found[i] = false; }
};

template <std::uint32_t W>
struct count_op {
  device_ref<W, const std::uint32_t> filter;
  counter_t* tally;
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return filter.seed(); }
  __device__ unsigned key(std::size_t, std::uint64_t h) const {
    return filter.contains_hash(h) ? 1u : 0u;
  }
  __device__ void skip(std::size_t) const {}
};

}  // namespace

void add(const layout& l, std::uint32_t* words, const key_batch& keys,
         const std::uint64_t* status, cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, add_op<W>{device_ref<W>(words, l)}, status, stream);
  });
}

void contains(const layout& l, const std::uint32_t* words, const key_batch& keys, bool* found,
              const std::uint64_t* status, cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, contains_op<W>{{words, l}, found}, status, stream);
  });
}

void count(const layout& l, const std::uint32_t* words, const key_batch& keys,
           std::uint64_t* counter, const std::uint64_t* status, cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, count_op<W>{{words, l}, reinterpret_cast<counter_t*>(counter)}, status,
                 stream);
  });
}

}  // namespace gbf::detail::gpu::bloom
