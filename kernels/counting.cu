// The counting filter's key operations and whole-array kernels
// (kernels/counting.cuh): each key operation is a counter_view call
// (counting_ops.cuh) inside the shared key loops (launch.cuh).
#include "kernels/counting.cuh"
#include "kernels/counting_ops.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::counting {
namespace {

template <std::uint32_t W>
struct update_op {
  counter_view<W> view;
  bool down;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return view.seed; }
  __device__ unsigned key(std::size_t, std::uint64_t h) const {
    if (down) {
      view.decrement(h);
    } else {
      view.increment(h);
    }
    return 0;
  }
  __device__ void skip(std::size_t) const {}
};

template <std::uint32_t W>
struct contains_op {
  counter_view<W> view;
  bool* __restrict__ found;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return view.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    found[i] = view.contains(h);
    return 0;
  }
  __device__ void skip(std::size_t i) const { found[i] = false; }
};

template <std::uint32_t W>
struct count_op {
  counter_view<W> view;
  counter_t* tally;
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return view.seed; }
  __device__ unsigned key(std::size_t, std::uint64_t h) const { return view.contains(h) ? 1u : 0u; }
  __device__ void skip(std::size_t) const {}
};

template <std::uint32_t W>
struct minimum_op {
  counter_view<W> view;
  std::uint8_t* __restrict__ counts_out;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return view.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    counts_out[i] = static_cast<std::uint8_t>(view.minimum(h));
    return 0;
  }
  __device__ void skip(std::size_t i) const { counts_out[i] = 0; }
};

void update(const layout& l, std::uint32_t c, std::uint32_t* counters, const key_batch& keys,
            const std::uint64_t* status, bool down, cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, update_op<W>{counter_view<W>(counters, l, c), down}, status, stream);
  });
}

// The view of a read-only operation: its kernels never write the counters.
template <std::uint32_t W>
counter_view<W> read_view(const std::uint32_t* counters, const layout& l, std::uint32_t c) {
  return counter_view<W>(const_cast<std::uint32_t*>(counters), l, c);
}

__global__ void __launch_bounds__(block_threads)
    census_kernel(const std::uint32_t* __restrict__ counters, std::uint64_t n, std::uint32_t c,
                  counter_t* census) {
  counter_t nonzero = 0;
  counter_t saturated = 0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::uint32_t word = counters[i];
    nonzero += static_cast<counter_t>(__popc(nonzero_fields(word, c)));
    saturated += static_cast<counter_t>(__popc(saturated_fields(word, c)));
  }
  add_block_total(nonzero, census);
  __syncthreads();  // the reduction's shared storage is reused
  add_block_total(saturated, census + 1);
}

__global__ void __launch_bounds__(block_threads)
    merge_kernel(std::uint32_t* __restrict__ dst, const std::uint32_t* __restrict__ src,
                 std::uint64_t n, std::uint32_t c) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    dst[i] = add_fields_saturating(dst[i], src[i], c);
}

// merge_kernel's operands are __restrict__; a filter added to itself takes
// this one, which reads and writes each word through one pointer.
__global__ void __launch_bounds__(block_threads)
    double_kernel(std::uint32_t* counters, std::uint64_t n, std::uint32_t c) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    const std::uint32_t word = counters[i];
    counters[i] = add_fields_saturating(word, word, c);
  }
}

__global__ void __launch_bounds__(block_threads)
    intersect_kernel(std::uint32_t* __restrict__ dst, const std::uint32_t* __restrict__ src,
                     std::uint64_t n, std::uint32_t c) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) dst[i] = min_fields(dst[i], src[i], c);
}

// Plain word i has its counters in counter words i * c .. i * c + c - 1.
__global__ void __launch_bounds__(block_threads)
    project_kernel(const std::uint32_t* __restrict__ counters, std::uint64_t num_words,
                   std::uint32_t c, std::uint32_t* __restrict__ words) {
  for (std::size_t i = first_index(); i < num_words; i += grid_stride()) {
    std::uint32_t bits = 0;
    for (std::uint32_t j = 0; j < c; ++j) bits |= projected_bits(counters[i * c + j], j, c);
    words[i] = bits;
  }
}

}  // namespace

void add(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
         const key_batch& keys, const std::uint64_t* status, cudaStream_t stream) {
  update(l, counter_bits, counters, keys, status, false, stream);
}

void remove_unchecked(const layout& l, std::uint32_t counter_bits, std::uint32_t* counters,
                      const key_batch& keys, const std::uint64_t* status, cudaStream_t stream) {
  update(l, counter_bits, counters, keys, status, true, stream);
}

void contains(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
              const key_batch& keys, bool* found, const std::uint64_t* status,
              cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, contains_op<W>{read_view<W>(counters, l, counter_bits), found}, status,
                 stream);
  });
}

void count(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
           const key_batch& keys, std::uint64_t* counter, const std::uint64_t* status,
           cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys,
                 count_op<W>{read_view<W>(counters, l, counter_bits),
                             reinterpret_cast<counter_t*>(counter)},
                 status, stream);
  });
}

void approximate_count(const layout& l, std::uint32_t counter_bits, const std::uint32_t* counters,
                       const key_batch& keys, std::uint8_t* counts, const std::uint64_t* status,
                       cudaStream_t stream) {
  dispatch_words_per_block(l.words_per_block, [&](auto w) {
    constexpr std::uint32_t W = decltype(w)::value;
    for_each_key(keys, minimum_op<W>{read_view<W>(counters, l, counter_bits), counts}, status,
                 stream);
  });
}

void census(const std::uint32_t* counters, std::uint64_t num_counter_words,
            std::uint32_t counter_bits, std::uint64_t* census, cudaStream_t stream) {
  launch<census_kernel>(num_counter_words, stream, counters, num_counter_words, counter_bits,
                        reinterpret_cast<counter_t*>(census));
}

void merge(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_counter_words,
           std::uint32_t counter_bits, cudaStream_t stream) {
  launch<merge_kernel>(num_counter_words, stream, dst, src, num_counter_words, counter_bits);
}

void double_counters(std::uint32_t* counters, std::uint64_t num_counter_words, std::uint32_t counter_bits,
                     cudaStream_t stream) {
  launch<double_kernel>(num_counter_words, stream, counters, num_counter_words, counter_bits);
}

void intersect(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_counter_words,
               std::uint32_t counter_bits, cudaStream_t stream) {
  launch<intersect_kernel>(num_counter_words, stream, dst, src, num_counter_words, counter_bits);
}

void project(const std::uint32_t* counters, std::uint64_t num_words, std::uint32_t counter_bits,
             std::uint32_t* words, cudaStream_t stream) {
  launch<project_kernel>(num_words, stream, counters, num_words, counter_bits, words);
}

}  // namespace gbf::detail::gpu::counting
