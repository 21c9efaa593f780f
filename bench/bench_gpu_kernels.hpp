// gbf_bench_gpu's kernels as the host sees them: one launcher per kernel.
// The kernels live in bench_gpu_bounds.cu (the bound kernels) and
// bench_gpu_support.cu (key generation, counts), the only files nvcc compiles
// besides the optional peer (bench_cuco.cu), and this header is all they include besides the CUDA runtime and
// gbf's bit math: nvcc's front end (cudafe++, then cicc once per GPU
// architecture) parses everything a .cu file includes: with Google Benchmark
// and the standard containers, each of these files took about 6 s of CPU to
// compile for sm_80 + sm_90 instead of about 2 s. The rows, in .cpp files,
// include bench_gpu.hpp, which includes this.
//
// Every launcher queues its kernel on `s` with block_threads threads per CTA,
// checks the launch (GBF_CUDA_TRY: cuda_error) and returns without waiting.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gbf_bench {

/// Threads per CTA of every kernel of the suite (gbf's own launch policy).
inline constexpr int block_threads = 256;

/// Grid of `kernel` (launched with block_threads) for `work` items: the CTAs
/// the device keeps resident, capped by the work (gbf's own launch policy).
unsigned grid_for_kernel(const void* kernel, std::size_t work);

#if defined(__CUDACC__)
/// The calling thread's index in a 1-D grid, and the grid's thread count (grid-stride loops).
__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}
#endif

// ---------------------------------------------------------------------------
// Bound kernels (bench_gpu_bounds.cu). Blocks are picked as gbf picks them:
// gbf::block_index of gbf::detail::splitmix64(seed + i). Each kernel has a
// *_grid function giving the grid it runs with, for sizing per-thread outputs
// (grid * block_threads words). The templates exist for the sizes the bound
// rows measure (explicit instantiations in bench_gpu_bounds.cu).
// ---------------------------------------------------------------------------

/// Grid of the streaming read of `n` 16-byte vectors.
unsigned stream_read_grid(std::size_t n);
/// Reads data[0, n) with 16-byte loads, grid-stride, four loads in flight per
/// thread; each thread stores the XOR of what it read to out[thread].
void stream_read(const uint4* data, std::size_t n, std::uint32_t* out, unsigned grid,
                 cudaStream_t s);

/// Grid of `lookups` random reads of AccessBytes (32 or 64) each.
template <std::uint32_t AccessBytes>
unsigned random_read_grid(std::size_t lookups);
/// Lookup i < lookups reads block block_index(splitmix64(seed + i), num_blocks) of
/// AccessBytes (32: one sector, a W=8 block; 64: a W=16 block) with 16-byte loads,
/// four lookups in flight per thread; XORs to out[thread].
template <std::uint32_t AccessBytes>
void random_read(const uint4* data, std::uint64_t num_blocks, std::size_t lookups,
                 std::uint64_t seed, std::uint32_t* out, unsigned grid, cudaStream_t s);

/// Grid of `ops` random atomic ORs into blocks of Words (1, 8 or 16) words.
template <std::uint32_t Words>
unsigned random_atomic_or_grid(std::size_t ops);
/// Operation i < ops ORs one bit (gbf::probe_bit) into each of the Words words of
/// block block_index(splitmix64(seed + i), num_blocks), the result unused (a RED, as in
/// gbf's add): Words = 1 is a plain random 32-bit atomic, 8 and 16 a W=8 / W=16 add's
/// writes without the hashing.
template <std::uint32_t Words>
void random_atomic_or(std::uint32_t* data, std::uint64_t num_blocks, std::size_t ops,
                      std::uint64_t seed, unsigned grid, cudaStream_t s);

// ---------------------------------------------------------------------------
// Support kernels (bench_gpu_support.cu)
// ---------------------------------------------------------------------------

/// keys[i] = mix((first + i) mod period) for i < n (period 0 = no modulo): SplitMix64
/// (gbf::detail::splitmix64) for 64-bit keys, MurmurHash3's fmix32 for 32-bit keys;
/// both are bijections, so disjoint counter ranges give disjoint keys.
void generate_keys(std::uint64_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s);
void generate_keys(std::uint32_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s);

/// Adds to *total (device memory) the number of true values among flags[0, n).
void add_true_count(const bool* flags, std::size_t n, unsigned long long* total, cudaStream_t s);
/// Adds to *total (device memory) the number of i < n with a[i] != b[i].
void add_differing_words(const std::uint32_t* a, const std::uint32_t* b, std::uint64_t n,
                         unsigned long long* total, cudaStream_t s);

}  // namespace gbf_bench
