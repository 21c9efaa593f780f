// gbf_bench_gpu's support kernels: key generation and device-side counts, and
// the launch geometry every kernel of the suite uses (bench_gpu_kernels.hpp).
// The host side of the support (main, timers, the registry) is
// bench_gpu_support.cpp. Like every .cu file of the suite, this one includes
// only the CUDA runtime and small gbf headers (see bench_gpu_kernels.hpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bench/bench_gpu_kernels.hpp"
#include "gbf/detail/cuda_check.hpp"
#include "gbf/detail/splitmix64.hpp"

namespace gbf_bench {
namespace {

// MurmurHash3's fmix32: a bijection on 32 bits.
__device__ __forceinline__ std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6BU;
  x ^= x >> 13;
  x *= 0xC2B2AE35U;
  return x ^ (x >> 16);
}

template <class Key>
__global__ void __launch_bounds__(block_threads)
    generate_keys_kernel(Key* __restrict__ keys, std::size_t n, std::uint64_t first,
                         std::uint64_t period) {
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    std::uint64_t counter = first + i;
    if (period != 0) counter %= period;
    if constexpr (sizeof(Key) == 8) {
      keys[i] = gbf::detail::splitmix64(counter);
    } else {
      keys[i] = mix32(static_cast<std::uint32_t>(counter));
    }
  }
}

// Per-thread count, warp sum, one atomic per warp.
__device__ __forceinline__ void add_warp_total(unsigned long long value,
                                               unsigned long long* total) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xFFFFFFFFU, value, offset);
  if ((threadIdx.x & 31) == 0 && value != 0) atomicAdd(total, value);
}

__global__ void __launch_bounds__(block_threads)
    count_true_kernel(const bool* __restrict__ flags, std::size_t n, unsigned long long* total) {
  unsigned long long hits = 0;
  for (std::size_t i = thread_index(); i < n; i += thread_count()) hits += flags[i] ? 1 : 0;
  add_warp_total(hits, total);
}

__global__ void __launch_bounds__(block_threads)
    differing_words_kernel(const std::uint32_t* __restrict__ a, const std::uint32_t* __restrict__ b,
                           std::uint64_t n, unsigned long long* total) {
  unsigned long long differing = 0;
  for (std::size_t i = thread_index(); i < n; i += thread_count()) differing += a[i] != b[i] ? 1 : 0;
  add_warp_total(differing, total);
}

template <class Kernel>
unsigned grid_for(Kernel* kernel, std::size_t work) {
  return grid_for_kernel(reinterpret_cast<const void*>(kernel), work);
}

template <class Key>
void launch_generate_keys(Key* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                          cudaStream_t s) {
  if (n == 0) return;
  generate_keys_kernel<Key>
      <<<grid_for(generate_keys_kernel<Key>, n), block_threads, 0, s>>>(keys, n, first, period);
  GBF_CUDA_TRY(cudaGetLastError());
}

}  // namespace

unsigned grid_for_kernel(const void* kernel, std::size_t work) {
  int ctas = 0;
  GBF_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, block_threads, 0));
  int device = 0;
  GBF_CUDA_TRY(cudaGetDevice(&device));
  int sms = 0;
  GBF_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t needed = (work + block_threads - 1) / block_threads;
  const std::size_t resident =
      static_cast<std::size_t>(sms) * static_cast<std::size_t>(ctas > 1 ? ctas : 1);
  const std::size_t grid = needed < resident ? needed : resident;
  return static_cast<unsigned>(grid > 1 ? grid : 1);
}

void generate_keys(std::uint64_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s) {
  launch_generate_keys(keys, n, first, period, s);
}

void generate_keys(std::uint32_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s) {
  launch_generate_keys(keys, n, first, period, s);
}

void add_true_count(const bool* flags, std::size_t n, unsigned long long* total, cudaStream_t s) {
  if (n == 0) return;
  count_true_kernel<<<grid_for(count_true_kernel, n), block_threads, 0, s>>>(flags, n, total);
  GBF_CUDA_TRY(cudaGetLastError());
}

void add_differing_words(const std::uint32_t* a, const std::uint32_t* b, std::uint64_t n,
                         unsigned long long* total, cudaStream_t s) {
  if (n == 0) return;
  differing_words_kernel<<<grid_for(differing_words_kernel, n), block_threads, 0, s>>>(a, b, n,
                                                                                      total);
  GBF_CUDA_TRY(cudaGetLastError());
}

}  // namespace gbf_bench
