// gbf_bench_gpu's bound kernels: what this GPU can do for the access patterns
// of a Bloom filter (a streaming read, random 32/64-byte reads, random atomic
// ORs), and their launchers (bench_gpu_kernels.hpp). The bound rows that time
// them are in bench_gpu_bounds.cpp; docs/performance.md, "Bounds". This file
// includes nothing heavier than the CUDA runtime and gbf's bit math, to keep
// nvcc's work small (see bench_gpu_kernels.hpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bench/bench_gpu_kernels.hpp"
#include "gbf/detail/cuda_check.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/layout.hpp"

namespace gbf_bench {
namespace {

using gbf::detail::splitmix64;

// Streaming read: 16-byte loads, grid-stride, four independent loads per trip;
// the XOR of everything read is stored once per thread so nothing is dead code.
__global__ void __launch_bounds__(block_threads)
    stream_read_kernel(const uint4* __restrict__ data, std::size_t n, std::uint32_t* out) {
  const std::size_t stride = thread_count();
  std::size_t i = thread_index();
  std::uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = data[i];
    const uint4 b = data[i + stride];
    const uint4 c = data[i + 2 * stride];
    const uint4 d = data[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    acc ^= c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = data[i];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  out[thread_index()] = acc;
}

// Random reads of Vectors x 16 bytes (2: one 32-byte sector, a W=8 block;
// 4: 64 bytes, a W=16 block): lookup i reads block
// gbf::block_index(splitmix64(seed + i), num_blocks), the multiply-shift gbf
// uses, with four lookups' loads in flight per thread.
template <int Vectors>
__global__ void __launch_bounds__(block_threads)
    random_read_kernel(const uint4* __restrict__ data, std::uint64_t num_blocks, std::size_t n,
                       std::uint64_t seed, std::uint32_t* out) {
  constexpr int unroll = 4;
  const std::size_t stride = thread_count();
  std::size_t i = thread_index();
  std::uint32_t acc = 0;
  for (; i + (unroll - 1) * stride < n; i += unroll * stride) {
    uint4 v[unroll][Vectors];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const std::uint64_t block = gbf::block_index(splitmix64(seed + i + u * stride), num_blocks);
      const uint4* p = data + block * Vectors;
#pragma unroll
      for (int w = 0; w < Vectors; ++w) v[u][w] = p[w];
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
#pragma unroll
      for (int w = 0; w < Vectors; ++w) acc ^= v[u][w].x ^ v[u][w].y ^ v[u][w].z ^ v[u][w].w;
    }
  }
  for (; i < n; i += stride) {
    const uint4* p = data + gbf::block_index(splitmix64(seed + i), num_blocks) * Vectors;
#pragma unroll
    for (int w = 0; w < Vectors; ++w) {
      const uint4 x = p[w];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
  }
  out[thread_index()] = acc;
}

// Random atomic ORs: operation i ORs one bit into each of the Words words of
// block gbf::block_index(splitmix64(seed + i), num_blocks), the result unused
// (a RED, as in gbf's add). Words = 1 is the plain random 32-bit atomic; 8 and
// 16 are the write pattern of a W=8 / W=16 add without the hashing, written the
// fastest way known: Words lanes per block (lane l ORs word l % Words of the
// operation of lane r * 32 / Words + l / Words in round r), so that one warp
// instruction writes whole blocks, as gbf's add and cuCollections' cooperative
// add do. (One thread per block, 8 REDs to scattered blocks per instruction,
// measured about half of this on an H100 beyond L2: cuco's 11.4 Gkeys/s against
// 4.5 G blocks/s at 16 GiB.) Warps step over groups of 32 operations together.
template <int Words>
__global__ void __launch_bounds__(block_threads)
    random_atomic_or_kernel(std::uint32_t* words, std::uint64_t num_blocks, std::size_t n,
                            std::uint64_t seed) {
  constexpr unsigned ops_per_round = 32 / Words;
  const unsigned lane = threadIdx.x % 32;
  const unsigned word = lane % Words;
  for (std::size_t group = thread_index() - lane; group < n; group += thread_count()) {
    const std::uint64_t h = splitmix64(seed + group + lane);
#pragma unroll
    for (unsigned round = 0; round < Words; ++round) {
      const unsigned owner = round * ops_per_round + lane / Words;
      const std::uint64_t owner_hash = __shfl_sync(0xffffffffu, h, static_cast<int>(owner));
      if (group + owner < n) {
        atomicOr(words + gbf::block_index(owner_hash, num_blocks) * Words + word,
                 1U << gbf::probe_bit(owner_hash, word));
      }
    }
  }
}

}  // namespace

unsigned stream_read_grid(std::size_t n) {
  return grid_for_kernel(reinterpret_cast<const void*>(stream_read_kernel), n);
}

void stream_read(const uint4* data, std::size_t n, std::uint32_t* out, unsigned grid,
                 cudaStream_t s) {
  stream_read_kernel<<<grid, block_threads, 0, s>>>(data, n, out);
  GBF_CUDA_TRY(cudaGetLastError());
}

// AccessBytes / 16 vectors per lookup: 32 bytes (a W=8 block), 64 bytes (W=16).
template <std::uint32_t AccessBytes>
unsigned random_read_grid(std::size_t lookups) {
  return grid_for_kernel(reinterpret_cast<const void*>(random_read_kernel<AccessBytes / 16>),
                         lookups);
}

template <std::uint32_t AccessBytes>
void random_read(const uint4* data, std::uint64_t num_blocks, std::size_t lookups,
                 std::uint64_t seed, std::uint32_t* out, unsigned grid, cudaStream_t s) {
  random_read_kernel<AccessBytes / 16><<<grid, block_threads, 0, s>>>(data, num_blocks, lookups,
                                                                      seed, out);
  GBF_CUDA_TRY(cudaGetLastError());
}

template <std::uint32_t Words>
unsigned random_atomic_or_grid(std::size_t ops) {
  return grid_for_kernel(reinterpret_cast<const void*>(random_atomic_or_kernel<Words>), ops);
}

template <std::uint32_t Words>
void random_atomic_or(std::uint32_t* data, std::uint64_t num_blocks, std::size_t ops,
                      std::uint64_t seed, unsigned grid, cudaStream_t s) {
  random_atomic_or_kernel<Words><<<grid, block_threads, 0, s>>>(data, num_blocks, ops, seed);
  GBF_CUDA_TRY(cudaGetLastError());
}

// The sizes the bound rows measure (bench_gpu_kernels.hpp).
template unsigned random_read_grid<32>(std::size_t);
template unsigned random_read_grid<64>(std::size_t);
template void random_read<32>(const uint4*, std::uint64_t, std::size_t, std::uint64_t,
                              std::uint32_t*, unsigned, cudaStream_t);
template void random_read<64>(const uint4*, std::uint64_t, std::size_t, std::uint64_t,
                              std::uint32_t*, unsigned, cudaStream_t);
template unsigned random_atomic_or_grid<1>(std::size_t);
template unsigned random_atomic_or_grid<8>(std::size_t);
template unsigned random_atomic_or_grid<16>(std::size_t);
template void random_atomic_or<1>(std::uint32_t*, std::uint64_t, std::size_t, std::uint64_t,
                                  unsigned, cudaStream_t);
template void random_atomic_or<8>(std::uint32_t*, std::uint64_t, std::size_t, std::uint64_t,
                                  unsigned, cudaStream_t);
template void random_atomic_or<16>(std::uint32_t*, std::uint64_t, std::size_t, std::uint64_t,
                                   unsigned, cudaStream_t);

}  // namespace gbf_bench
