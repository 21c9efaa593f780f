// The cuckoo filter's per-key kernels (kernels/cuckoo.cuh): each operation is
// a value type run over any key kind by for_each_key (launch.cuh); the table
// math is gbf/cuckoo_layout.hpp's, the lock-free updates cuckoo_device.cuh's.
#include "kernels/cuckoo.cuh"
#include "kernels/cuckoo_device.cuh"
#include "kernels/launch.cuh"

namespace gbf::detail::gpu::cuckoo {
namespace {

template <std::uint32_t F>
struct add_op {
  shared_table<F> table;
  cuckoo_layout layout;
  std::uint32_t max_kicks;
  cuckoo_status* __restrict__ status;  // may be null
  counter_t* counters;
  counter_t* tally;  // counters + inserted
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return layout.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    const cuckoo_place p = cuckoo_place_of(h, layout);
    std::uint32_t moves = 0;
    const bool ok = table.insert(p.bucket, p.alternate, p.tag, max_kicks, moves);
    if (moves != 0) atomicAdd(counters + evictions, static_cast<counter_t>(moves));
    if (!ok) atomicAdd(counters + failed, counter_t{1});
    if (status != nullptr) status[i] = ok ? cuckoo_status::inserted : cuckoo_status::failed;
    return ok ? 1u : 0u;
  }
  __device__ void skip(std::size_t i) const {
    if (status != nullptr) status[i] = cuckoo_status::skipped;
  }
};

template <std::uint32_t F>
struct remove_op {
  shared_table<F> table;
  cuckoo_layout layout;
  bool* __restrict__ removed;  // may be null
  counter_t* tally;            // counters + removed
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return layout.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    const cuckoo_place p = cuckoo_place_of(h, layout);
    const bool ok = table.remove_one(p.bucket, p.tag) ||
                    (p.alternate != p.bucket && table.remove_one(p.alternate, p.tag));
    if (removed != nullptr) removed[i] = ok;
    return ok ? 1u : 0u;
  }
  __device__ void skip(std::size_t i) const {
    if (removed != nullptr) removed[i] = false;
  }
};

/// What a query op does with a key's two buckets.
template <std::uint32_t F>
struct two_buckets {
  const std::uint64_t* __restrict__ words;
  cuckoo_layout layout;
  __device__ bool holds(std::uint64_t h) const {
    const cuckoo_place p = cuckoo_place_of(h, layout);
    std::uint64_t a[cuckoo_bucket_words];
    std::uint64_t b[cuckoo_bucket_words];
    load_bucket_readonly(words, p.bucket, a);  // both sectors in flight before either compare
    load_bucket_readonly(words, p.alternate, b);
    return cuckoo_bucket<F>::holds(a, p.tag) || cuckoo_bucket<F>::holds(b, p.tag);
  }
  __device__ std::uint32_t copies(std::uint64_t h) const {
    const cuckoo_place p = cuckoo_place_of(h, layout);
    std::uint64_t a[cuckoo_bucket_words];
    std::uint64_t b[cuckoo_bucket_words];
    load_bucket_readonly(words, p.bucket, a);
    load_bucket_readonly(words, p.alternate, b);
    return cuckoo_bucket<F>::count(a, p.tag) +
           (p.alternate == p.bucket ? 0u : cuckoo_bucket<F>::count(b, p.tag));
  }
};

template <std::uint32_t F>
struct contains_op {
  two_buckets<F> table;
  bool* __restrict__ found;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return table.layout.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    found[i] = table.holds(h);
    return 0;
  }
  __device__ void skip(std::size_t i) const { found[i] = false; }
};

template <std::uint32_t F>
struct count_op {
  two_buckets<F> table;
  counter_t* tally;
  static constexpr bool counts = true;
  __device__ std::uint64_t seed() const { return table.layout.seed; }
  __device__ unsigned key(std::size_t, std::uint64_t h) const { return table.holds(h) ? 1u : 0u; }
  __device__ void skip(std::size_t) const {}
};

template <std::uint32_t F>
struct copies_op {
  two_buckets<F> table;
  std::uint8_t* __restrict__ copies;
  static constexpr bool counts = false;
  counter_t* tally = nullptr;
  __device__ std::uint64_t seed() const { return table.layout.seed; }
  __device__ unsigned key(std::size_t i, std::uint64_t h) const {
    copies[i] = static_cast<std::uint8_t>(table.copies(h));
    return 0;
  }
  __device__ void skip(std::size_t i) const { copies[i] = 0; }
};

template <std::uint32_t F>
__global__ void __launch_bounds__(block_threads)
    occupied_kernel(const std::uint64_t* __restrict__ words, std::uint64_t num_buckets,
                    counter_t* counter) {
  counter_t n = 0;
  for (std::size_t b = first_index(); b < num_buckets; b += grid_stride()) {
    std::uint64_t w[cuckoo_bucket_words];
    load_bucket_readonly(words, b, w);
    n += cuckoo_bucket<F>::occupied(w);
  }
  add_block_total(n, counter);
}

counter_t* counters_of(const table_ref& t, int which) {
  return reinterpret_cast<counter_t*>(t.counters) + which;
}

}  // namespace

void add(const table_ref& t, const key_batch& keys, cuckoo_status* status,
         const std::uint64_t* offsets, cudaStream_t stream) {
  dispatch_tag_bits(t.layout.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    const add_op<F> op{{t.words, t.layout.num_buckets}, t.layout, t.max_kicks, status,
                       counters_of(t, 0), counters_of(t, inserted)};
    for_each_key(keys, op, offsets, stream);
  });
}

void remove(const table_ref& t, const key_batch& keys, bool* removed,
            const std::uint64_t* offsets, cudaStream_t stream) {
  dispatch_tag_bits(t.layout.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    const remove_op<F> op{{t.words, t.layout.num_buckets}, t.layout, removed,
                          counters_of(t, cuckoo::removed)};
    for_each_key(keys, op, offsets, stream);
  });
}

void contains(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
              bool* found, const std::uint64_t* offsets, cudaStream_t stream) {
  dispatch_tag_bits(l.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    for_each_key(keys, contains_op<F>{{words, l}, found}, offsets, stream);
  });
}

void count(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
           std::uint64_t* counter, const std::uint64_t* offsets, cudaStream_t stream) {
  dispatch_tag_bits(l.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    for_each_key(keys, count_op<F>{{words, l}, reinterpret_cast<counter_t*>(counter)}, offsets,
                 stream);
  });
}

void approximate_count(const cuckoo_layout& l, const std::uint64_t* words, const key_batch& keys,
                       std::uint8_t* copies, const std::uint64_t* offsets, cudaStream_t stream) {
  dispatch_tag_bits(l.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    for_each_key(keys, copies_op<F>{{words, l}, copies}, offsets, stream);
  });
}

void occupied(const cuckoo_layout& l, const std::uint64_t* words, std::uint64_t* counter,
              cudaStream_t stream) {
  dispatch_tag_bits(l.tag_bits, [&](auto bits) {
    constexpr std::uint32_t F = decltype(bits)::value;
    launch<occupied_kernel<F>>(l.num_buckets, stream, words, l.num_buckets,
                               reinterpret_cast<counter_t*>(counter));
  });
}

}  // namespace gbf::detail::gpu::cuckoo
