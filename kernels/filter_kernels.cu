// gbf's CUDA kernels and their launchers (declared in filter_kernels.cuh).
//
// Every key kernel is a thin grid-stride loop around gbf::device_ref, the same
// view user kernels get, so the probe and insert logic exists once. Kernels are
// templates over the block width W and the key type only (5 x 2 instances per
// family); k is a runtime argument.
//
// Launch configuration: 256 threads per CTA; the grid is the number of CTAs
// the device keeps resident at once (SMs x occupancy, measured once per kernel)
// capped by ceil(work / 256). Each thread then strides over the input, so a
// launch never has more CTAs than the GPU runs concurrently, and indices are
// 64-bit: batches above 2^31 keys are fine.
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <type_traits>

#include "gbf/device_ref.cuh"
#include "kernels/filter_kernels.cuh"

#include "host/gpu/runtime.hpp"

namespace gbf::detail::gpu {
namespace {

constexpr int block_threads = 256;

// atomicAdd has a 64-bit overload for unsigned long long only.
using counter_t = unsigned long long;
static_assert(sizeof(counter_t) == sizeof(std::uint64_t), "64-bit counters");

__device__ __forceinline__ std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// Sums `value` over the CTA and adds the total to *counter: one atomic per CTA.
__device__ __forceinline__ void add_block_total(counter_t value, counter_t* counter) {
  using reduce = cub::BlockReduce<counter_t, block_threads>;
  __shared__ typename reduce::TempStorage temp;
  const counter_t total = reduce(temp).Sum(value);  // valid in thread 0 only
  if (threadIdx.x == 0 && total != 0) atomicAdd(counter, total);
}

// ---------------------------------------------------------------------------
// Key kernels
// ---------------------------------------------------------------------------

template <std::uint32_t W, class Key>
__global__ void __launch_bounds__(block_threads)
    add_kernel(device_ref<W> filter, const Key* __restrict__ keys, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) filter.add(keys[i]);
}

template <std::uint32_t W, class Key>
__global__ void __launch_bounds__(block_threads)
    contains_kernel(device_ref<W> filter, const Key* __restrict__ keys, std::size_t n,
                    bool* __restrict__ found) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) found[i] = filter.contains(keys[i]);
}

template <std::uint32_t W, class Key>
__global__ void __launch_bounds__(block_threads)
    count_kernel(device_ref<W> filter, const Key* __restrict__ keys, std::size_t n,
                 counter_t* counter) {
  counter_t hits = 0;
  for (std::size_t i = first_index(); i < n; i += grid_stride()) hits += filter.contains(keys[i]);
  add_block_total(hits, counter);
}

// select, step 1: flags[i] = key i is non-null and may be present.
template <std::uint32_t W, class Key>
__global__ void __launch_bounds__(block_threads)
    select_flags_kernel(device_ref<W> filter, const Key* __restrict__ keys, std::size_t n,
                        const std::uint8_t* __restrict__ validity, std::size_t validity_bit,
                        bool* __restrict__ flags) {
  for (std::size_t i = first_index(); i < n; i += grid_stride())
    flags[i] = key_valid(validity, validity_bit, i) && filter.contains(keys[i]);
}

// Where add_new's kernels get key i's hash and whether it is null: integer
// keys hash on the fly, string keys were hashed by an earlier kernel.
template <class Key>
struct key_source {
  const Key* __restrict__ keys;
  template <std::uint32_t W>
  __device__ __forceinline__ std::uint64_t hash(const device_ref<W>& filter, std::size_t i) const {
    return filter.hash(keys[i]);
  }
  __device__ __forceinline__ bool valid(std::size_t) const { return true; }
};

struct hash_source {
  const std::uint64_t* __restrict__ hashes;
  const std::uint8_t* __restrict__ validity;  // may be null
  std::size_t validity_bit;
  template <std::uint32_t W>
  __device__ __forceinline__ std::uint64_t hash(const device_ref<W>&, std::size_t i) const {
    return hashes[i];
  }
  __device__ __forceinline__ bool valid(std::size_t i) const {
    return key_valid(validity, validity_bit, i);
  }
};

// add_new, step 1: each key's block (< num_blocks <= 2^32, so 32 bits) and its
// position in the batch, the (key, value) pairs of the sort.
template <std::uint32_t W, class Source>
__global__ void __launch_bounds__(block_threads)
    block_of_kernel(device_ref<W> filter, Source source, std::size_t n,
                    std::uint32_t* __restrict__ blocks, std::uint32_t* __restrict__ positions) {
  for (std::size_t i = first_index(); i < n; i += grid_stride()) {
    blocks[i] = static_cast<std::uint32_t>(filter.block_of(source.hash(filter, i)));
    positions[i] = static_cast<std::uint32_t>(i);
  }
}

// add_new, step 3 (after a stable sort by block): the first entry of each run
// of equal blocks owns that block. Its thread loads the block once, walks the
// run -- the run's positions ascend, since the sort is stable -- testing each
// key against the bits of the filter plus those of the run's earlier keys, and
// finally ORs the bits the run added. No other thread of the launch touches the
// block, so the register copy is exact; the final OR is atomic anyway so that
// concurrent adds from other streams are never lost. Null keys are not new and
// add nothing.
template <std::uint32_t W, class Source>
__global__ void __launch_bounds__(block_threads)
    add_new_runs_kernel(device_ref<W> filter, Source source, std::size_t n,
                        const std::uint32_t* __restrict__ sorted_blocks,
                        const std::uint32_t* __restrict__ sorted_positions,
                        bool* __restrict__ is_new) {
  for (std::size_t head = first_index(); head < n; head += grid_stride()) {
    const std::uint32_t block = sorted_blocks[head];
    if (head != 0 && sorted_blocks[head - 1] == block) continue;  // inside a run, not its head
    std::uint32_t before[W];
    filter.load_block(block, before);
    std::uint32_t bits[W];
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) bits[w] = before[w];
    for (std::size_t i = head; i < n && sorted_blocks[i] == block; ++i) {
      const std::uint32_t position = sorted_positions[i];
      if (!source.valid(position)) {
        is_new[position] = false;
        continue;
      }
      std::uint32_t masks[W];
      filter.masks_of(source.hash(filter, position), masks);
      is_new[position] = !device_ref<W>::covers(bits, masks);
#pragma unroll
      for (std::uint32_t w = 0; w < W; ++w) bits[w] |= masks[w];
    }
#pragma unroll
    for (std::uint32_t w = 0; w < W; ++w) bits[w] &= ~before[w];  // only the new bits
    filter.or_block(block, bits);
  }
}

// ---------------------------------------------------------------------------
// String kernels (see filter_kernels.cuh for the strategy)
// ---------------------------------------------------------------------------

// A string batch as its kernels see it.
template <class Offset>
struct string_args {
  const unsigned char* data;
  const Offset* __restrict__ offsets;
  std::size_t n;
  const std::uint8_t* __restrict__ validity;  // may be null
  std::size_t validity_bit;
  const std::uint64_t* status;  // null, or validate_offsets' verdict for this batch
};

// True when validate_offsets found a bad offset in this batch (uniform over the grid).
template <class Offset>
__device__ __forceinline__ bool rejected(const string_args<Offset>& a) {
  return a.status != nullptr && *a.status != offsets_ok;
}

// Calls visit(i, hash) for each non-null key i, from the lane that owns it, and
// on_null(i) for each null key. Warps step over groups of 32 consecutive keys
// (the loop bounds depend on the warp only, so whole warps stay in step: the
// cooperative hash needs all 32 lanes, and block_threads is a multiple of 32).
template <class Offset, class Visit, class OnNull>
__device__ __forceinline__ void for_each_string(const string_args<Offset>& a, std::uint64_t seed,
                                                const Visit& visit, const OnNull& on_null) {
  namespace cg = cooperative_groups;
  const warp_tile warp = cg::tiled_partition<32>(cg::this_thread_block());
  const unsigned lane = warp.thread_rank();
  const std::size_t first_group = first_index() - lane;
  for (std::size_t group = first_group; group < a.n; group += grid_stride()) {
    const std::size_t i = group + lane;
    std::size_t begin = 0;
    std::size_t len = 0;
    bool is_long = false;
    if (i < a.n) {
      if (key_valid(a.validity, a.validity_bit, i)) {
        begin = static_cast<std::size_t>(a.offsets[i]);
        len = static_cast<std::size_t>(a.offsets[i + 1]) - begin;
        is_long = len > long_string_bytes;
        if (!is_long) visit(i, hash_key(a.data + begin, len, seed));
      } else {
        on_null(i);
      }
    }
    for (unsigned longs = warp.ballot(is_long); longs != 0; longs &= longs - 1) {
      const int owner = __ffs(static_cast<int>(longs)) - 1;
      const std::size_t owner_begin = warp.shfl(begin, owner);
      const std::size_t owner_len = warp.shfl(len, owner);
      const std::uint64_t h = warp_xxh64(warp, a.data + owner_begin, owner_len, seed);
      if (static_cast<int>(lane) == owner) visit(i, h);
    }
  }
}

template <std::uint32_t W, class Offset>
__global__ void __launch_bounds__(block_threads)
    add_strings_kernel(device_ref<W> filter, string_args<Offset> a) {
  if (rejected(a)) return;
  for_each_string(
      a, filter.seed(), [&](std::size_t, std::uint64_t h) { filter.add_hash(h); },
      [](std::size_t) {});
}

template <std::uint32_t W, class Offset>
__global__ void __launch_bounds__(block_threads)
    contains_strings_kernel(device_ref<W> filter, string_args<Offset> a,
                            bool* __restrict__ found) {
  if (rejected(a)) {
    for (std::size_t i = first_index(); i < a.n; i += grid_stride()) found[i] = false;
    return;
  }
  for_each_string(
      a, filter.seed(),
      [&](std::size_t i, std::uint64_t h) { found[i] = filter.contains_hash(h); },
      [&](std::size_t i) { found[i] = false; });
}

template <std::uint32_t W, class Offset>
__global__ void __launch_bounds__(block_threads)
    count_strings_kernel(device_ref<W> filter, string_args<Offset> a, counter_t* counter) {
  counter_t hits = 0;
  if (!rejected(a)) {
    for_each_string(
        a, filter.seed(), [&](std::size_t, std::uint64_t h) { hits += filter.contains_hash(h); },
        [](std::size_t) {});
  }
  add_block_total(hits, counter);
}

// add_new for strings, step 0: every key's hash. The runs skip null keys, but
// their hashes still pick a block; a constant would pile every null into one
// run walked by one thread, so a null gets the hash of its row number instead.
template <class Offset>
__global__ void __launch_bounds__(block_threads)
    hash_strings_kernel(string_args<Offset> a, std::uint64_t seed,
                        std::uint64_t* __restrict__ hashes) {
  for_each_string(
      a, seed, [&](std::size_t i, std::uint64_t h) { hashes[i] = h; },
      [&](std::size_t i) { hashes[i] = xxh64_u64(i, seed); });
}

// Index i is bad when offsets[i] > data_bytes, or offsets[0] < 0, or
// offsets[i] < offsets[i - 1] (host/backend.hpp, bad_offset_message).
template <class Offset>
__global__ void __launch_bounds__(block_threads)
    validate_offsets_kernel(const Offset* __restrict__ offsets, std::size_t count,
                            std::uint64_t data_bytes, counter_t* first_bad, counter_t* sticky) {
  for (std::size_t i = first_index(); i <= count; i += grid_stride()) {
    const auto value = static_cast<long long>(offsets[i]);
    const bool bad = (i == 0 && value < 0) ||
                     (i > 0 && value < static_cast<long long>(offsets[i - 1])) ||
                     (value > 0 && static_cast<std::uint64_t>(value) > data_bytes);
    if (bad) {
      atomicMin(first_bad, static_cast<counter_t>(i));
      if (sticky != nullptr) atomicMin(sticky, static_cast<counter_t>(i));
    }
  }
}

// ---------------------------------------------------------------------------
// Bit-array kernels: 16-byte vectors, then the num_words % 4 tail words.
// ---------------------------------------------------------------------------

template <word_op Op>
__device__ __forceinline__ std::uint32_t apply(std::uint32_t a, std::uint32_t b) {
  return Op == word_op::bit_or ? (a | b) : (a & b);
}

template <word_op Op>
__global__ void __launch_bounds__(block_threads)
    combine_kernel(std::uint32_t* __restrict__ dst, const std::uint32_t* __restrict__ src,
                   std::uint64_t num_words) {
  const std::uint64_t num_vectors = num_words / 4;
  auto* dst4 = reinterpret_cast<uint4*>(dst);
  const auto* src4 = reinterpret_cast<const uint4*>(src);
  for (std::size_t i = first_index(); i < num_vectors; i += grid_stride()) {
    uint4 a = dst4[i];
    const uint4 b = src4[i];
    a.x = apply<Op>(a.x, b.x);
    a.y = apply<Op>(a.y, b.y);
    a.z = apply<Op>(a.z, b.z);
    a.w = apply<Op>(a.w, b.w);
    dst4[i] = a;
  }
  for (std::size_t i = num_vectors * 4 + first_index(); i < num_words; i += grid_stride()) {
    dst[i] = apply<Op>(dst[i], src[i]);
  }
}

__global__ void __launch_bounds__(block_threads)
    popcount_kernel(const std::uint32_t* __restrict__ words, std::uint64_t num_words,
                    counter_t* counter) {
  const std::uint64_t num_vectors = num_words / 4;
  const auto* words4 = reinterpret_cast<const uint4*>(words);
  counter_t bits = 0;
  for (std::size_t i = first_index(); i < num_vectors; i += grid_stride()) {
    const uint4 v = words4[i];
    bits += __popc(v.x) + __popc(v.y) + __popc(v.z) + __popc(v.w);
  }
  for (std::size_t i = num_vectors * 4 + first_index(); i < num_words; i += grid_stride()) {
    bits += __popc(words[i]);
  }
  add_block_total(bits, counter);
}

// ---------------------------------------------------------------------------
// Launch machinery
// ---------------------------------------------------------------------------

// Launches Kernel over `work_items` items (one per thread, grid-stride) on `stream`.
template <auto Kernel, class... Args>
void launch(std::size_t work_items, cudaStream_t stream, Args... args) {
  if (work_items == 0) return;
  // CTAs of this kernel one SM holds at once; measured once per kernel (a
  // failed query throws and is retried by the next launch).
  static const int ctas_per_sm = [] {
    int ctas = 0;
    GBF_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, Kernel, block_threads, 0));
    return std::max(ctas, 1);
  }();
  int device = 0;
  GBF_CUDA_TRY(cudaGetDevice(&device));
  int sms = 0;
  GBF_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t needed = (work_items + block_threads - 1) / block_threads;
  const std::size_t resident = static_cast<std::size_t>(sms) * static_cast<std::size_t>(ctas_per_sm);
  const auto grid = static_cast<unsigned>(std::min(needed, resident));
  Kernel<<<grid, block_threads, 0, stream>>>(args...);
  GBF_CUDA_TRY(cudaGetLastError());
}

// Calls f(std::integral_constant<uint32_t, W>{}, Key{}) for the layout's W and
// the batch's key type: the one place runtime geometry becomes template arguments.
template <std::uint32_t W, class F>
void dispatch_key(key_kind kind, F&& f) {
  if (kind == key_kind::u32) {
    f(std::integral_constant<std::uint32_t, W>{}, std::uint32_t{});
  } else {
    f(std::integral_constant<std::uint32_t, W>{}, std::uint64_t{});
  }
}

template <class F>
void dispatch(const layout& l, key_kind kind, F&& f) {
  switch (l.words_per_block) {
    case 1: return dispatch_key<1>(kind, f);
    case 2: return dispatch_key<2>(kind, f);
    case 4: return dispatch_key<4>(kind, f);
    case 8: return dispatch_key<8>(kind, f);
    case 16: return dispatch_key<16>(kind, f);
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

// Calls f(std::integral_constant<uint32_t, W>{}, Offset{}) for a string batch.
template <std::uint32_t W, class F>
void dispatch_offset(key_kind kind, F&& f) {
  if (kind == key_kind::str32) {
    f(std::integral_constant<std::uint32_t, W>{}, std::int32_t{});
  } else if (kind == key_kind::str64) {
    f(std::integral_constant<std::uint32_t, W>{}, std::int64_t{});
  } else {
    throw invalid_argument("string kernels need a string batch");
  }
}

template <class F>
void dispatch_string(const layout& l, key_kind kind, F&& f) {
  switch (l.words_per_block) {
    case 1: return dispatch_offset<1>(kind, f);
    case 2: return dispatch_offset<2>(kind, f);
    case 4: return dispatch_offset<4>(kind, f);
    case 8: return dispatch_offset<8>(kind, f);
    case 16: return dispatch_offset<16>(kind, f);
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

template <class Offset>
string_args<Offset> args_of(const key_batch& keys, const std::uint64_t* status) {
  return {static_cast<const unsigned char*>(keys.data), static_cast<const Offset*>(keys.offsets),
          keys.count, keys.validity, keys.validity_bit, status};
}

// Bits the block indices of `l` occupy: the radix sort skips the rest.
int block_index_bits(const layout& l) {
  int bits = 0;
  while (bits < 32 && ((l.num_blocks - 1) >> bits) != 0) ++bits;
  return bits;
}

constexpr std::size_t scratch_alignment = 256;

constexpr std::size_t aligned(std::size_t bytes) {
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

// Temporary bytes of CUB's radix sort for `n` pairs over `bits` key bits.
std::size_t sort_temp_bytes(std::size_t n, int bits) {
  if (bits == 0) return 0;  // one block: every key is in block 0, nothing to sort
  std::size_t bytes = 0;
  cub::DoubleBuffer<std::uint32_t> blocks(nullptr, nullptr);
  cub::DoubleBuffer<std::uint32_t> positions(nullptr, nullptr);
  GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, blocks, positions,
                                               static_cast<int>(n), 0, bits));
  return bytes;
}

}  // namespace

// ---------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------

void add(const layout& l, std::uint32_t* words, key_kind kind, const void* keys, std::size_t n,
         cudaStream_t stream) {
  dispatch(l, kind, [&](auto w, auto key) {
    using Key = decltype(key);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<add_kernel<W, Key>>(n, stream, device_ref<W>(words, l), static_cast<const Key*>(keys),
                               n);
  });
}

void contains(const layout& l, const std::uint32_t* words, key_kind kind, const void* keys,
              std::size_t n, bool* found, cudaStream_t stream) {
  // device_ref views mutable words; the contains kernel only reads them.
  auto* bits = const_cast<std::uint32_t*>(words);
  dispatch(l, kind, [&](auto w, auto key) {
    using Key = decltype(key);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<contains_kernel<W, Key>>(n, stream, device_ref<W>(bits, l),
                                    static_cast<const Key*>(keys), n, found);
  });
}

void count(const layout& l, const std::uint32_t* words, key_kind kind, const void* keys,
           std::size_t n, std::uint64_t* counter, cudaStream_t stream) {
  auto* bits = const_cast<std::uint32_t*>(words);
  dispatch(l, kind, [&](auto w, auto key) {
    using Key = decltype(key);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<count_kernel<W, Key>>(n, stream, device_ref<W>(bits, l), static_cast<const Key*>(keys),
                                 n, reinterpret_cast<counter_t*>(counter));
  });
}

// Scratch layout: blocks[2][max_keys] and positions[2][max_keys] (the sort's
// double buffers), then CUB's temporary storage; each region 256-byte aligned.
// add_new after its scratch is carved: block per key, stable sort, runs.
template <std::uint32_t W, class Source>
void add_new_sorted(const device_ref<W>& filter, const Source& source, std::size_t n, int bits,
                    std::size_t sort_bytes, void* sort_temp,
                    cub::DoubleBuffer<std::uint32_t>& blocks,
                    cub::DoubleBuffer<std::uint32_t>& positions, bool* is_new,
                    cudaStream_t stream) {
  launch<block_of_kernel<W, Source>>(n, stream, filter, source, n, blocks.Current(),
                                     positions.Current());
  if (bits != 0) {
    // Stable, so equal blocks keep their keys in batch order.
    std::size_t temp_bytes = sort_bytes;
    GBF_CUDA_TRY(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, blocks, positions,
                                                 static_cast<int>(n), 0, bits, stream));
  }
  launch<add_new_runs_kernel<W, Source>>(n, stream, filter, source, n, blocks.Current(),
                                         positions.Current(), is_new);
}

std::size_t add_new_scratch_bytes(const layout& l, std::size_t max_keys) {
  if (max_keys > add_new_max_keys) {
    throw invalid_argument("add_new takes at most 2^30 keys per launch");
  }
  const std::size_t array_bytes = aligned(max_keys * sizeof(std::uint32_t));
  return 4 * array_bytes + aligned(sort_temp_bytes(max_keys, block_index_bits(l)));
}

void add_new(const layout& l, std::uint32_t* words, key_kind kind, const void* keys,
             std::size_t n, bool* is_new, void* scratch, std::size_t scratch_bytes,
             cudaStream_t stream) {
  if (n == 0) return;
  if (n > add_new_max_keys) throw invalid_argument("add_new takes at most 2^30 keys per launch");
  const int bits = block_index_bits(l);
  const std::size_t array_bytes = aligned(n * sizeof(std::uint32_t));
  const std::size_t sort_bytes = sort_temp_bytes(n, bits);
  if (scratch_bytes < 4 * array_bytes + sort_bytes) {
    throw invalid_argument("add_new: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " keys");
  }
  auto* base = static_cast<unsigned char*>(scratch);
  auto region = [&](int i) { return reinterpret_cast<std::uint32_t*>(base + i * array_bytes); };
  cub::DoubleBuffer<std::uint32_t> blocks(region(0), region(1));
  cub::DoubleBuffer<std::uint32_t> positions(region(2), region(3));
  void* sort_temp = base + 4 * array_bytes;

  dispatch(l, kind, [&](auto w, auto key) {
    using Key = decltype(key);
    constexpr std::uint32_t W = decltype(w)::value;
    const device_ref<W> filter(words, l);
    const key_source<Key> source{static_cast<const Key*>(keys)};
    add_new_sorted(filter, source, n, bits, sort_bytes, sort_temp, blocks, positions, is_new,
                   stream);
  });
}

// ---------------------------------------------------------------------------
// String launchers
// ---------------------------------------------------------------------------

void validate_offsets(const key_batch& keys, std::uint64_t* first_bad, std::uint64_t* sticky,
                      cudaStream_t stream) {
  auto* bad = reinterpret_cast<counter_t*>(first_bad);
  auto* sticky_bad = reinterpret_cast<counter_t*>(sticky);
  if (keys.kind == key_kind::str32) {
    launch<validate_offsets_kernel<std::int32_t>>(
        keys.count + 1, stream, static_cast<const std::int32_t*>(keys.offsets), keys.count,
        static_cast<std::uint64_t>(keys.data_bytes), bad, sticky_bad);
  } else {
    launch<validate_offsets_kernel<std::int64_t>>(
        keys.count + 1, stream, static_cast<const std::int64_t*>(keys.offsets), keys.count,
        static_cast<std::uint64_t>(keys.data_bytes), bad, sticky_bad);
  }
}

void add_strings(const layout& l, std::uint32_t* words, const key_batch& keys,
                 const std::uint64_t* status, cudaStream_t stream) {
  dispatch_string(l, keys.kind, [&](auto w, auto offset) {
    using Offset = decltype(offset);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<add_strings_kernel<W, Offset>>(keys.count, stream, device_ref<W>(words, l),
                                          args_of<Offset>(keys, status));
  });
}

void contains_strings(const layout& l, const std::uint32_t* words, const key_batch& keys,
                      bool* found, const std::uint64_t* status, cudaStream_t stream) {
  auto* bits = const_cast<std::uint32_t*>(words);
  dispatch_string(l, keys.kind, [&](auto w, auto offset) {
    using Offset = decltype(offset);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<contains_strings_kernel<W, Offset>>(keys.count, stream, device_ref<W>(bits, l),
                                               args_of<Offset>(keys, status), found);
  });
}

void count_strings(const layout& l, const std::uint32_t* words, const key_batch& keys,
                   std::uint64_t* counter, const std::uint64_t* status, cudaStream_t stream) {
  auto* bits = const_cast<std::uint32_t*>(words);
  dispatch_string(l, keys.kind, [&](auto w, auto offset) {
    using Offset = decltype(offset);
    constexpr std::uint32_t W = decltype(w)::value;
    launch<count_strings_kernel<W, Offset>>(keys.count, stream, device_ref<W>(bits, l),
                                            args_of<Offset>(keys, status),
                                            reinterpret_cast<counter_t*>(counter));
  });
}

// Scratch: the hashes (n x 8 bytes), then add_new's own scratch.
std::size_t add_new_strings_scratch_bytes(const layout& l, std::size_t max_keys) {
  return aligned(max_keys * sizeof(std::uint64_t)) + add_new_scratch_bytes(l, max_keys);
}

void add_new_strings(const layout& l, std::uint32_t* words, const key_batch& keys, bool* is_new,
                     void* scratch, std::size_t scratch_bytes, cudaStream_t stream) {
  const std::size_t n = keys.count;
  if (n == 0) return;
  if (n > add_new_max_keys) throw invalid_argument("add_new takes at most 2^30 keys per launch");
  if (scratch_bytes < add_new_strings_scratch_bytes(l, n)) {
    throw invalid_argument("add_new: scratch of " + std::to_string(scratch_bytes) +
                           " bytes is too small for " + std::to_string(n) + " string keys");
  }
  auto* hashes = static_cast<std::uint64_t*>(scratch);
  auto* base = static_cast<unsigned char*>(scratch) + aligned(n * sizeof(std::uint64_t));
  const int bits = block_index_bits(l);
  const std::size_t array_bytes = aligned(n * sizeof(std::uint32_t));
  const std::size_t sort_bytes = sort_temp_bytes(n, bits);
  auto region = [&](int i) { return reinterpret_cast<std::uint32_t*>(base + i * array_bytes); };
  cub::DoubleBuffer<std::uint32_t> blocks(region(0), region(1));
  cub::DoubleBuffer<std::uint32_t> positions(region(2), region(3));
  void* sort_temp = base + 4 * array_bytes;

  if (keys.kind == key_kind::str32) {
    launch<hash_strings_kernel<std::int32_t>>(n, stream, args_of<std::int32_t>(keys, nullptr),
                                              l.seed, hashes);
  } else {
    launch<hash_strings_kernel<std::int64_t>>(n, stream, args_of<std::int64_t>(keys, nullptr),
                                              l.seed, hashes);
  }
  const hash_source source{hashes, keys.validity, keys.validity_bit};
  dispatch(l, key_kind::u64, [&](auto w, auto) {
    constexpr std::uint32_t W = decltype(w)::value;
    add_new_sorted(device_ref<W>(words, l), source, n, bits, sort_bytes, sort_temp, blocks,
                   positions, is_new, stream);
  });
}

void combine_words(std::uint32_t* dst, const std::uint32_t* src, std::uint64_t num_words,
                   word_op op, cudaStream_t stream) {
  const std::size_t work = (num_words + 3) / 4;
  if (op == word_op::bit_or) {
    launch<combine_kernel<word_op::bit_or>>(work, stream, dst, src, num_words);
  } else {
    launch<combine_kernel<word_op::bit_and>>(work, stream, dst, src, num_words);
  }
}

// select: a flag per key (select_flags_kernel, or the string contains kernel,
// which is null-aware), then cub::DeviceSelect::Flagged over the row numbers
// 0..n-1 (a counting iterator): stable, so the rows come out ascending, and the
// count is written on the device. The flags and CUB's temporary storage are one
// stream-ordered allocation (cudaMallocAsync / cudaFreeAsync), so nothing here
// synchronizes.
void select(const layout& l, const std::uint32_t* words, const key_batch& keys,
            std::uint64_t* rows, std::uint64_t* count, cudaStream_t stream) {
  const std::size_t n = keys.count;
  if (n == 0) {
    GBF_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(std::uint64_t), stream));
    return;
  }
  const thrust::counting_iterator<std::uint64_t> row_numbers(0);
  std::size_t temp_bytes = 0;
  GBF_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, temp_bytes, row_numbers,
                                          static_cast<const bool*>(nullptr), rows, count,
                                          static_cast<std::int64_t>(n), stream));
  const std::size_t flag_bytes = aligned(n);
  void* scratch = nullptr;
  GBF_CUDA_TRY(cudaMallocAsync(&scratch, flag_bytes + temp_bytes, stream));
  try {
    auto* flags = static_cast<bool*>(scratch);
    if (keys.is_string()) {
      contains_strings(l, words, keys, flags, nullptr, stream);
    } else {
      auto* bits = const_cast<std::uint32_t*>(words);
      dispatch(l, keys.kind, [&](auto w, auto key) {
        using Key = decltype(key);
        constexpr std::uint32_t W = decltype(w)::value;
        launch<select_flags_kernel<W, Key>>(n, stream, device_ref<W>(bits, l),
                                            static_cast<const Key*>(keys.data), n, keys.validity,
                                            keys.validity_bit, flags);
      });
    }
    GBF_CUDA_TRY(cub::DeviceSelect::Flagged(static_cast<unsigned char*>(scratch) + flag_bytes,
                                            temp_bytes, row_numbers,
                                            static_cast<const bool*>(flags), rows, count,
                                            static_cast<std::int64_t>(n), stream));
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  GBF_CUDA_TRY(cudaFreeAsync(scratch, stream));
}

void popcount(const std::uint32_t* words, std::uint64_t num_words, std::uint64_t* counter,
              cudaStream_t stream) {
  launch<popcount_kernel>((num_words + 3) / 4, stream, words, num_words,
                          reinterpret_cast<counter_t*>(counter));
}

}  // namespace gbf::detail::gpu
