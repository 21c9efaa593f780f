// The launch layer every filter kind's kernels share: the launch
// configuration, the key loops, and the tally of a counting launch.
//
// A kind writes an operation, a small value type that kernels receive by
// value, with
//
//   std::uint64_t seed() const;                      // the key hash's seed
//   unsigned key(std::size_t i, std::uint64_t h) const;  // non-null key i, hash h
//   void skip(std::size_t i) const;                  // key i is null, or its batch was rejected
//   static constexpr bool counts;                    // whether key()'s returns are summed
//   counter_t* tally;                                // where the sum goes (when counts)
//
// An operation may also declare
//
//   static constexpr bool per_warp = true;
//   void keys(const warp_tile& warp, std::uint64_t h, bool valid) const;  // a warp's 32 keys
//
// (per_warp operations do not count): integer batches then run it once per warp
// step with every lane's hash, so the warp can write blocks together; string
// batches still call key() per key.
//
// for_each_key runs an operation over a device batch of any key kind: integer keys
// hash their little-endian bytes, string keys their bytes (warp-cooperatively
// for long ones), null keys and the keys of a batch whose offsets failed
// validation go to skip(). The operation sees hashes only, so a kind's
// kernels are its operations and nothing else.
//
// Launch configuration: 256 threads per CTA; the grid is the number of CTAs
// the device keeps resident at once (SMs x occupancy, each measured once)
// capped by ceil(work / 256). Each thread strides over the input, so a launch
// never has more CTAs than the GPU runs concurrently, and indices are 64-bit:
// batches above 2^31 keys are fine.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gbf/detail/cuda_check.hpp"
#include "gbf/device_ref.cuh"
#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/keys.hpp"
#include "kernels/keys.cuh"
#include "kernels/launch.hpp"

namespace gbf::detail::gpu {

inline constexpr int block_threads = 256;

/// atomicAdd has a 64-bit overload for unsigned long long only.
using counter_t = unsigned long long;
static_assert(sizeof(counter_t) == sizeof(std::uint64_t), "64-bit counters");

/// Strings longer than this are hashed by a whole warp (gbf::warp_xxh64).
inline constexpr std::size_t long_string_bytes = 256;

__device__ __forceinline__ std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

/// Sums `value` over the warp by shuffles and adds the total to *counter: one
/// atomic per warp and launch (a thread's value already sums its grid-stride
/// loop). Every lane of the warp must call it. A shuffle tree rather than
/// cub::BlockReduce, whose header costs every kernel file ~8 s of nvcc time.
__device__ __forceinline__ void add_block_total(counter_t value, counter_t* counter) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  if ((threadIdx.x & 31u) == 0 && value != 0) atomicAdd(counter, value);
}

/// Launches Kernel over `work_items` items (grid-stride, see the file comment) on `stream`.
template <auto Kernel, class... Args>
void launch(std::size_t work_items, cudaStream_t stream, Args... args) {
  if (work_items == 0) return;
  // CTAs of this kernel one SM holds at once: a property of the kernel and the
  // architecture, measured once per kernel (a failed query throws and is
  // retried by the next launch).
  static const int ctas_per_sm = [] {
    int ctas = 0;
    GBF_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, Kernel, block_threads, 0));
    return std::max(ctas, 1);
  }();
  int device = 0;
  GBF_CUDA_TRY(cudaGetDevice(&device));
  const std::size_t needed = (work_items + block_threads - 1) / block_threads;
  const std::size_t resident =
      static_cast<std::size_t>(multiprocessors(device)) * static_cast<std::size_t>(ctas_per_sm);
  const auto grid = static_cast<unsigned>(std::min(needed, resident));
  Kernel<<<grid, block_threads, 0, stream>>>(args...);
  GBF_CUDA_TRY(cudaGetLastError());
}

// ---------------------------------------------------------------------------
// Key batches as kernels see them
// ---------------------------------------------------------------------------

template <class Key>
struct integer_batch {
  const Key* __restrict__ keys;
  std::size_t n;
  const std::uint8_t* __restrict__ validity;  // may be null
  std::size_t validity_bit;
};

template <class Offset>
struct string_batch {
  const unsigned char* data;
  const Offset* __restrict__ offsets;
  std::size_t n;
  const std::uint8_t* __restrict__ validity;  // may be null
  std::size_t validity_bit;
  const std::uint64_t* status;  // null, or validate_offsets' verdict for this batch
};

template <class Key>
integer_batch<Key> integer_batch_of(const key_batch& keys) {
  return {static_cast<const Key*>(keys.data), keys.count, keys.validity, keys.validity_bit};
}
template <class Offset>
string_batch<Offset> string_batch_of(const key_batch& keys, const std::uint64_t* status) {
  return {static_cast<const unsigned char*>(keys.data), static_cast<const Offset*>(keys.offsets),
          keys.count, keys.validity, keys.validity_bit, status};
}

// ---------------------------------------------------------------------------
// The key loops
// ---------------------------------------------------------------------------

template <class Key, class Op>
__global__ void __launch_bounds__(block_threads) integer_keys_kernel(integer_batch<Key> batch, Op op) {
  counter_t tally = 0;
  const std::uint64_t seed = op.seed();
  for (std::size_t i = first_index(); i < batch.n; i += grid_stride()) {
    if (key_valid(batch.validity, batch.validity_bit, i)) {
      tally += op.key(i, hash_key(batch.keys[i], seed));
    } else {
      op.skip(i);
    }
  }
  if constexpr (Op::counts) add_block_total(tally, op.tally);
}

template <class Op, class = void>
struct has_per_warp : std::false_type {};
template <class Op>
struct has_per_warp<Op, std::void_t<decltype(Op::per_warp)>> : std::true_type {};

/// Whether Op works a warp's keys together (Op::per_warp, see the file comment).
template <class Op>
constexpr bool is_per_warp() {
  if constexpr (has_per_warp<Op>::value) {
    return Op::per_warp;
  } else {
    return false;
  }
}

/// Calls f(warp, i) for each index of this thread's warp steps: warps step over
/// groups of 32 consecutive indices below n, i = group + lane (i may reach past n
/// in the last group). The bounds depend on the warp only, so whole warps stay
/// in step, as warp collectives need (block_threads is a multiple of 32).
template <class F>
__device__ __forceinline__ void for_each_warp_step(std::size_t n, F&& f) {
  namespace cg = cooperative_groups;
  const warp_tile warp = cg::tiled_partition<32>(cg::this_thread_block());
  const std::size_t lane = warp.thread_rank();
  for (std::size_t group = first_index() - lane; group < n; group += grid_stride()) f(warp, group + lane);
}

/// The integer key loop of a per_warp operation: op.keys gets every lane's hash of
/// a warp step, valid = the lane has a non-null key.
template <class Key, class Op>
__global__ void __launch_bounds__(block_threads)
    integer_keys_warp_kernel(integer_batch<Key> batch, Op op) {
  static_assert(!Op::counts, "per_warp operations do not count");
  const std::uint64_t seed = op.seed();
  for_each_warp_step(batch.n, [&](const warp_tile& warp, std::size_t i) {
    const bool valid = i < batch.n && key_valid(batch.validity, batch.validity_bit, i);
    op.keys(warp, valid ? hash_key(batch.keys[i], seed) : 0, valid);
  });
}

/// Calls op.key(i, hash) for each non-null key i, from the lane that owns it, and
/// op.skip(i) for each null key; returns the lane's tally. Warps step over groups
/// of 32 consecutive keys (the loop bounds depend on the warp only, so whole
/// warps stay in step: the cooperative hash needs all 32 lanes, and
/// block_threads is a multiple of 32). A lane hashes its own key when it is at
/// most long_string_bytes long; the longer keys of the step are then hashed one
/// after another by the whole warp, and the lane that owns each finishes it. A
/// 1 MiB string thus costs its warp 32 Ki stripe steps of 256-byte coalesced
/// loads, not one thread 1 Mi byte loads, and short keys never wait in a
/// divergent branch behind it.
template <class Offset, class Op>
__global__ void __launch_bounds__(block_threads) string_keys_kernel(string_batch<Offset> batch, Op op) {
  counter_t tally = 0;
  if (batch.status != nullptr && *batch.status != offsets_ok) {
    // Rejected by validation (uniform over the grid): nothing is read or written but answers.
    for (std::size_t i = first_index(); i < batch.n; i += grid_stride()) op.skip(i);
  } else {
    const std::uint64_t seed = op.seed();
    for_each_warp_step(batch.n, [&](const warp_tile& warp, std::size_t i) {
      const auto lane = static_cast<int>(warp.thread_rank());
      std::size_t begin = 0;
      std::size_t len = 0;
      bool is_long = false;
      if (i < batch.n) {
        if (key_valid(batch.validity, batch.validity_bit, i)) {
          begin = static_cast<std::size_t>(batch.offsets[i]);
          len = static_cast<std::size_t>(batch.offsets[i + 1]) - begin;
          is_long = len > long_string_bytes;
          if (!is_long) tally += op.key(i, hash_key(batch.data + begin, len, seed));
        } else {
          op.skip(i);
        }
      }
      for (unsigned longs = warp.ballot(is_long); longs != 0; longs &= longs - 1) {
        const int owner = __ffs(static_cast<int>(longs)) - 1;
        const std::size_t owner_begin = warp.shfl(begin, owner);
        const std::size_t owner_len = warp.shfl(len, owner);
        const std::uint64_t h = warp_xxh64(warp, batch.data + owner_begin, owner_len, seed);
        if (lane == owner) tally += op.key(i, h);
      }
    });
  }
  if constexpr (Op::counts) add_block_total(tally, op.tally);
}

/// Runs `op` over a device batch of Key integers: a warp at a time for per_warp operations.
template <class Key, class Op>
void for_each_integer_key(const key_batch& keys, const Op& op, cudaStream_t stream) {
  if constexpr (is_per_warp<Op>()) {
    launch<integer_keys_warp_kernel<Key, Op>>(keys.count, stream, integer_batch_of<Key>(keys), op);
  } else {
    launch<integer_keys_kernel<Key, Op>>(keys.count, stream, integer_batch_of<Key>(keys), op);
  }
}

/// Runs `op` over a device batch of any key kind on `stream`. `status` (string
/// keys; may be null) is the batch's validation word: not offsets_ok, every key
/// is skipped.
template <class Op>
void for_each_key(const key_batch& keys, const Op& op, const std::uint64_t* status,
                  cudaStream_t stream) {
  switch (keys.kind) {
    case key_kind::u32:
      return for_each_integer_key<std::uint32_t>(keys, op, stream);
    case key_kind::u64:
      return for_each_integer_key<std::uint64_t>(keys, op, stream);
    case key_kind::str32:
      return launch<string_keys_kernel<std::int32_t, Op>>(
          keys.count, stream, string_batch_of<std::int32_t>(keys, status), op);
    case key_kind::str64:
      return launch<string_keys_kernel<std::int64_t, Op>>(
          keys.count, stream, string_batch_of<std::int64_t>(keys, status), op);
  }
}

/// Calls f(std::integral_constant<std::uint32_t, W>{}) for a runtime block width:
/// the one place a kind's geometry becomes a template argument.
template <class F>
void dispatch_words_per_block(std::uint32_t words_per_block, F&& f) {
  switch (words_per_block) {
    case 1: return f(std::integral_constant<std::uint32_t, 1>{});
    case 2: return f(std::integral_constant<std::uint32_t, 2>{});
    case 4: return f(std::integral_constant<std::uint32_t, 4>{});
    case 8: return f(std::integral_constant<std::uint32_t, 8>{});
    case 16: return f(std::integral_constant<std::uint32_t, 16>{});
    default: throw invalid_argument("words_per_block must be one of 1, 2, 4, 8, 16");
  }
}

}  // namespace gbf::detail::gpu
