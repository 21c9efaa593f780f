// gbf_bench_gpu: gbf on the GPU next to what the same GPU can do, in one run.
//
//   gbf_bench_gpu --benchmark_format=json --benchmark_out=results.json
//   scripts/gpu_bench.sh NAME      (on the device machine; see docs/performance.md)
//
// Rows run in registration order, in three families:
//   bound/...  microbenchmarks of the hardware: pinned H2D/D2H copies, a
//              streaming read, random 32/64-byte reads and random atomic ORs
//              over a buffer of each filter size, each with the device's L2
//              fetch granularity and with cudaLimitMaxL2FetchGranularity = 32;
//   gbf/...    gbf::filter add/contains on device-resident keys (sizes 1 MiB ..
//              16 GiB, FPR 10%/1%/0.1%, W=8 k=8 and W=16 k=16, 64- and 32-bit
//              keys), a batch-size sweep (10^4 .. 10^9 keys), and host keys
//              (pageable, pinned) through the streaming pipeline;
//   cuco/...   cuco::bloom_filter at the same size and keys (bench_cuco.cu,
//              only when built with GBF_CUCO_INCLUDE_DIR).
// The bound rows run first and record their rates; each gbf/cuco row divides
// its keys/s by the bound of its own size (fraction_of_bound and friends).
// Timing is manual: CUDA events around the stream-ordered call (the sync API
// and host-key rows: a host clock around the synchronous call), one untimed
// warm-up call first. Without a GPU the binary registers nothing, says why and
// exits 0 (--benchmark_list_tests still lists the rows).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_gpu.hpp"
#include "gbf/filter.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf_bench {
namespace {

using gbf::detail::device_buffer;
using gbf::detail::pinned_buffer;

constexpr int block_threads = 256;

/// A row that cannot run here (too little memory, key space too small): skipped with the message.
struct skip_row : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------

// SplitMix64's finalizer after the golden-ratio step: a bijection on 64 bits.
__host__ __device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// MurmurHash3's fmix32: a bijection on 32 bits.
__host__ __device__ __forceinline__ std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6BU;
  x ^= x >> 13;
  x *= 0xC2B2AE35U;
  return x ^ (x >> 16);
}

__device__ __forceinline__ std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

template <class Key>
__global__ void __launch_bounds__(block_threads)
    generate_keys_kernel(Key* __restrict__ keys, std::size_t n, std::uint64_t first,
                         std::uint64_t period) {
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    std::uint64_t counter = first + i;
    if (period != 0) counter %= period;
    if constexpr (sizeof(Key) == 8) {
      keys[i] = mix64(counter);
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

// --- Bound kernels --------------------------------------------------------

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
// gbf::block_index(mix64(seed + i), num_blocks), the multiply-shift gbf uses,
// with four lookups' loads in flight per thread.
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
      const std::uint64_t block = gbf::block_index(mix64(seed + i + u * stride), num_blocks);
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
    const uint4* p = data + gbf::block_index(mix64(seed + i), num_blocks) * Vectors;
#pragma unroll
    for (int w = 0; w < Vectors; ++w) {
      const uint4 x = p[w];
      acc ^= x.x ^ x.y ^ x.z ^ x.w;
    }
  }
  out[thread_index()] = acc;
}

// Random atomic ORs: operation i ORs one bit into each of the Words words of
// block gbf::block_index(mix64(seed + i), num_blocks), the result unused (a
// RED, as in gbf's add). Words = 1 is the plain random 32-bit atomic; 8 and 16
// are exactly the write pattern of a W=8 / W=16 add, without the hashing.
template <int Words>
__global__ void __launch_bounds__(block_threads)
    random_atomic_or_kernel(std::uint32_t* words, std::uint64_t num_blocks, std::size_t n,
                            std::uint64_t seed) {
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    const std::uint64_t h = mix64(seed + i);
    std::uint32_t* p = words + gbf::block_index(h, num_blocks) * Words;
#pragma unroll
    for (int w = 0; w < Words; ++w) atomicOr(p + w, 1U << gbf::probe_bit(h, w));
  }
}

// Grid of `kernel` for `work` items: the CTAs the device keeps resident, capped
// by the work (the launch policy of gbf's own kernels).
template <class Kernel>
unsigned grid_for(Kernel kernel, std::size_t work) {
  int ctas = 0;
  GBF_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, block_threads, 0));
  int device = 0;
  GBF_CUDA_TRY(cudaGetDevice(&device));
  int sms = 0;
  GBF_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::size_t needed = (work + block_threads - 1) / block_threads;
  const std::size_t resident = static_cast<std::size_t>(sms) * static_cast<std::size_t>(std::max(ctas, 1));
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(needed, resident)));
}

// ---------------------------------------------------------------------------
// Device facts, read once
// ---------------------------------------------------------------------------

struct device_facts {
  std::string name;
  int sms = 0;
  std::size_t l2_bytes = 0;
  std::size_t memory_bytes = 0;
  int driver_version = 0;
  int runtime_version = 0;
};

const device_facts& facts() {
  static const device_facts f = [] {
    device_facts d;
    int device = 0;
    GBF_CUDA_TRY(cudaGetDevice(&device));
    cudaDeviceProp p{};
    GBF_CUDA_TRY(cudaGetDeviceProperties(&p, device));
    d.name = p.name;
    d.sms = p.multiProcessorCount;
    d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    d.memory_bytes = p.totalGlobalMem;
    GBF_CUDA_TRY(cudaDriverGetVersion(&d.driver_version));
    GBF_CUDA_TRY(cudaRuntimeGetVersion(&d.runtime_version));
    return d;
  }();
  return f;
}

std::string mib_text(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Throws skip_row unless `bytes` more (plus headroom) fit in free device memory.
void require_free(std::size_t bytes, const std::string& what) {
  const std::size_t free = free_device_bytes();
  if (free < bytes + headroom_bytes) {
    throw skip_row(what + " needs " + mib_text(bytes) + " + " + mib_text(headroom_bytes) +
                   " headroom of device memory, only " + mib_text(free) + " free");
  }
}

// Runs `body` and turns any exception into a skipped row with its message.
template <class Body>
void guarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void set_common(benchmark::State& state, double items, double bytes, const l2fetch_guard* guard) {
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  if (guard != nullptr) {
    state.counters["l2_fetch_granularity"] = static_cast<double>(guard->effective());
  }
}

// Times `iterations` of `launch(seed)` on `s` with events; returns the seconds summed.
template <class Launch>
double time_on_stream(benchmark::State& state, cudaStream_t s, Launch&& launch) {
  gpu_timer timer;
  launch(std::uint64_t{0});  // warm-up
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  double total = 0;
  std::uint64_t seed = 1;
  for (auto _ : state) {
    timer.start(s);
    launch(seed++ << 40);
    const double t = timer.seconds(s);
    state.SetIterationTime(t);
    total += t;
  }
  return total;
}

// ---------------------------------------------------------------------------
// Bound rows
// ---------------------------------------------------------------------------

constexpr std::size_t copy_bytes = std::size_t{256} << 20;

void bm_copy(benchmark::State& state, bool host_to_device) {
  guarded(state, [&] {
    require_free(copy_bytes, "the copy buffer");
    pinned_buffer<unsigned char> host(copy_bytes);
    device_buffer<unsigned char> device(copy_bytes);
    std::memset(host.data(), 0x5A, copy_bytes);  // touch every page
    GBF_CUDA_TRY(cudaMemset(device.data(), 0xA5, copy_bytes));
    gbf::detail::stream s;
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t) {
      if (host_to_device) {
        GBF_CUDA_TRY(cudaMemcpyAsync(device.data(), host.data(), copy_bytes, cudaMemcpyHostToDevice,
                                     s.get()));
      } else {
        GBF_CUDA_TRY(cudaMemcpyAsync(host.data(), device.data(), copy_bytes, cudaMemcpyDeviceToHost,
                                     s.get()));
      }
    });
    const double bytes = static_cast<double>(state.iterations()) * copy_bytes;
    set_common(state, bytes, bytes, nullptr);
    record(host_to_device ? "h2d_pinned" : "d2h_pinned", bytes / seconds);
  });
}

// A buffer of `bytes` random bytes (never zeros: see METHOD.md).
device_buffer<uint4> random_buffer(std::size_t bytes, cudaStream_t s) {
  device_buffer<uint4> data(bytes / sizeof(uint4));
  generate_keys(reinterpret_cast<std::uint64_t*>(data.data()), bytes / sizeof(std::uint64_t),
                std::uint64_t{1} << 50, 0, s);
  return data;
}

void bm_stream_read(benchmark::State& state, l2fetch g) {
  guarded(state, [&] {
    // Far beyond L2: the larger of 1 GiB and 16 x L2, less when memory is short.
    std::size_t bytes = std::max<std::size_t>(std::size_t{1} << 30, 16 * facts().l2_bytes);
    const std::size_t free = free_device_bytes();
    const std::size_t available = free > headroom_bytes ? (free - headroom_bytes) / 2 : 0;
    bytes = std::min(bytes, available) / 4096 * 4096;
    if (bytes < 4 * facts().l2_bytes) throw skip_row("too little free device memory for a buffer of 4 x L2");
    l2fetch_guard guard(g);
    gbf::detail::stream s;
    device_buffer<uint4> data = random_buffer(bytes, s.get());
    const std::size_t n = bytes / sizeof(uint4);
    const unsigned grid = grid_for(stream_read_kernel, n);
    device_buffer<std::uint32_t> out(static_cast<std::size_t>(grid) * block_threads);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t) {
      stream_read_kernel<<<grid, block_threads, 0, s.get()>>>(data.data(), n, out.data());
      GBF_CUDA_TRY(cudaGetLastError());
    });
    const double total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
    set_common(state, total, total, &guard);
    state.counters["buffer_bytes"] = static_cast<double>(bytes);
    record(stream_read_key(g), total / seconds);
  });
}

constexpr std::size_t random_lookups = std::size_t{1} << 27;
constexpr std::size_t random_atomic_ops = std::size_t{1} << 26;

template <int Vectors>
void bm_random_read(benchmark::State& state, std::uint64_t bytes, l2fetch g) {
  guarded(state, [&] {
    constexpr std::uint32_t access_bytes = Vectors * 16;
    require_free(bytes, "a " + size_name(bytes) + " buffer");
    l2fetch_guard guard(g);
    gbf::detail::stream s;
    device_buffer<uint4> data = random_buffer(bytes, s.get());
    const std::uint64_t num_blocks = bytes / access_bytes;
    auto* kernel = random_read_kernel<Vectors>;
    const unsigned grid = grid_for(kernel, random_lookups);
    device_buffer<std::uint32_t> out(static_cast<std::size_t>(grid) * block_threads);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t seed) {
      kernel<<<grid, block_threads, 0, s.get()>>>(data.data(), num_blocks, random_lookups, seed,
                                                  out.data());
      GBF_CUDA_TRY(cudaGetLastError());
    });
    const double lookups = static_cast<double>(state.iterations()) * random_lookups;
    set_common(state, lookups, lookups * access_bytes, &guard);
    state.counters["lookups_per_s"] = lookups / seconds;
    state.counters["sectors_per_s"] = lookups * (access_bytes / 32) / seconds;
    record(random_read_key(access_bytes, bytes, g), lookups / seconds);
  });
}

template <int Words>
void bm_random_atomic(benchmark::State& state, std::uint64_t bytes, l2fetch g) {
  guarded(state, [&] {
    constexpr std::uint32_t block_bytes = Words * 4;
    require_free(bytes, "a " + size_name(bytes) + " buffer");
    l2fetch_guard guard(g);
    gbf::detail::stream s;
    device_buffer<uint4> data = random_buffer(bytes, s.get());
    auto* words = reinterpret_cast<std::uint32_t*>(data.data());
    const std::uint64_t num_blocks = bytes / block_bytes;
    auto* kernel = random_atomic_or_kernel<Words>;
    const std::size_t ops = Words == 1 ? random_lookups : random_atomic_ops;
    const unsigned grid = grid_for(kernel, ops);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t seed) {
      kernel<<<grid, block_threads, 0, s.get()>>>(words, num_blocks, ops, seed);
      GBF_CUDA_TRY(cudaGetLastError());
    });
    const double total = static_cast<double>(state.iterations()) * ops;
    set_common(state, total, total * block_bytes, &guard);
    state.counters["atomics_per_s"] = total * Words / seconds;
    if (Words > 1) {
      state.counters["blocks_per_s"] = total / seconds;
      record(atomic_block_key(block_bytes, bytes, g), total / seconds);
    }
  });
}

// ---------------------------------------------------------------------------
// gbf rows
// ---------------------------------------------------------------------------

enum class op { add, contains };
enum class api { async, sync };

const char* to_string(op o) { return o == op::add ? "add" : "contains"; }

struct filter_config {
  bool u32 = false;
  std::uint32_t words_per_block = 8;
  std::uint32_t bits_per_key = 8;
  double fpp = 0.01;
  std::uint64_t bytes = 0;
  bool operator==(const filter_config& o) const {
    return u32 == o.u32 && words_per_block == o.words_per_block &&
           bits_per_key == o.bits_per_key && fpp == o.fpp && bytes == o.bytes;
  }
};

gbf::layout layout_of(const filter_config& c) {
  gbf::layout l;
  l.words_per_block = c.words_per_block;
  l.bits_per_key = c.bits_per_key;
  l.num_blocks = c.bytes / (c.words_per_block * gbf::bytes_per_word);
  return l;
}

// The filter of the last config used, filled to its capacity: consecutive rows
// of one config (add, contains, both granularities) share one fill.
struct cached_filter {
  filter_config config;
  std::uint64_t capacity = 0;
  std::unique_ptr<gbf::filter> filter;
};

cached_filter& filter_cache() {
  static cached_filter cache;
  return cache;
}

template <class Key>
cached_filter& filter_for(const filter_config& c, cudaStream_t s) {
  cached_filter& cache = filter_cache();
  if (cache.filter && cache.config == c) return cache;
  cache.filter.reset();  // free the old one first
  const gbf::layout l = layout_of(c);
  const std::uint64_t capacity = capacity_for(l, c.fpp);
  if (sizeof(Key) == 4 && capacity > negative_base_u32) {
    throw skip_row("32-bit keys: capacity " + std::to_string(capacity) +
                   " exceeds the 2^31 keys this suite keeps apart from its probe keys");
  }
  const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(capacity, 1ULL << 26));
  require_free(l.size_bytes() + chunk * sizeof(Key), "a " + size_name(l.size_bytes()) + " filter");
  gbf::options opts;
  opts.where = gbf::backend::gpu;
  auto f = std::make_unique<gbf::filter>(l, opts, capacity);
  device_buffer<Key> keys(chunk);
  for (std::uint64_t first = 0; first < capacity; first += chunk) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, capacity - first));
    generate_keys(keys.data(), n, first, 0, s);
    f->add_async(keys.data(), n, s);
  }
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  cache.config = c;
  cache.capacity = capacity;
  cache.filter = std::move(f);
  return cache;
}

struct gbf_row {
  op what = op::contains;
  filter_config filter;
  l2fetch g = l2fetch::keep;
  std::size_t batch = 0;  // keys per call; 0: default_batch
  api how = api::async;
  bool sweep = false;     // a batch-sweep row (not recorded for the peer comparison)
};

std::string row_name(const gbf_row& r) {
  const filter_config& c = r.filter;
  std::string name = std::string(r.sweep ? "gbf_batch/" : "gbf/") + to_string(r.what) + "/" +
                     (c.u32 ? "u32" : "u64") + "/W" + std::to_string(c.words_per_block) + "k" +
                     std::to_string(c.bits_per_key) + "/" + fpp_name(c.fpp) + "/" +
                     size_name(c.bytes) + "/l2fetch:" + to_string(r.g);
  if (r.sweep) name += "/batch:" + std::to_string(r.batch) + "/" + (r.how == api::async ? "async" : "sync");
  return name;
}

void set_filter_counters(benchmark::State& state, const gbf::layout& l, std::uint64_t capacity,
                         std::size_t batch) {
  state.counters["filter_bytes"] = static_cast<double>(l.size_bytes());
  state.counters["capacity"] = static_cast<double>(capacity);
  state.counters["bits_per_key"] = static_cast<double>(l.num_bits()) / static_cast<double>(capacity);
  state.counters["batch_keys"] = static_cast<double>(batch);
}

template <class Key>
void run_gbf_device(benchmark::State& state, const gbf_row& r) {
  gbf::detail::stream s;
  l2fetch_guard guard(r.g);
  cached_filter& cache = filter_for<Key>(r.filter, s.get());
  gbf::filter& f = *cache.filter;
  const gbf::layout& l = f.layout();
  const bool contains = r.what == op::contains;
  const std::size_t bytes_per_key = sizeof(Key) + (contains ? 1 : 0);
  std::size_t n = r.batch;
  if (n == 0) {
    n = default_batch(bytes_per_key);
    if (n == 0) throw skip_row("too little free device memory for a batch of 10^6 keys");
  } else {
    require_free(n * bytes_per_key, "a batch of " + std::to_string(n) + " keys");
  }
  if (sizeof(Key) == 4 && n > negative_base_u32) throw skip_row("32-bit keys: batch above 2^31");
  device_buffer<Key> keys(n);
  device_buffer<bool> found(contains ? n : 0);
  const std::uint64_t negative_base = sizeof(Key) == 8 ? negative_base_u64 : negative_base_u32;
  // contains: keys never added; add: the filter's own keys again (its bits stay as they are).
  if (contains) {
    generate_keys(keys.data(), n, negative_base, 0, s.get());
  } else {
    generate_keys(keys.data(), n, 0, cache.capacity, s.get());
  }
  GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));

  auto call = [&] {
    if (r.how == api::async) {
      if (contains) {
        f.contains_async(keys.data(), n, found.data(), s.get());
      } else {
        f.add_async(keys.data(), n, s.get());
      }
    } else {
      if (contains) {
        f.contains(keys.data(), n, found.data());
      } else {
        f.add(keys.data(), n);
      }
    }
  };
  double seconds = 0;
  if (r.how == api::async) {
    seconds = time_on_stream(state, s.get(), [&](std::uint64_t) { call(); });
  } else {
    call();  // warm-up
    for (auto _ : state) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      state.SetIterationTime(t);
      seconds += t;
    }
  }
  GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));

  const double keys_total = static_cast<double>(state.iterations()) * static_cast<double>(n);
  const double keys_per_s = keys_total / seconds;
  const std::uint32_t block_bytes = l.words_per_block * gbf::bytes_per_word;
  // Effective bytes: what one key must move at least -- its key (and result
  // byte) streamed, plus its block read (contains) or read and written back (add).
  const double effective = static_cast<double>(bytes_per_key) + (contains ? 1.0 : 2.0) * block_bytes;
  set_common(state, keys_total, keys_total * effective, &guard);
  state.counters["keys_per_s"] = keys_per_s;
  set_filter_counters(state, l, cache.capacity, n);
  set_bound_counters(state, !contains, sizeof(Key), block_bytes, l.size_bytes(), r.g, keys_per_s);
  if (!r.sweep && r.how == api::async && r.batch == 0) {
    record(gbf_rate_key(to_string(r.what), r.filter.u32 ? "u32" : "u64", l.words_per_block,
                        l.bits_per_key, r.filter.fpp, l.size_bytes(), r.g),
           keys_per_s);
  }
  // Checks: contains answers are only false positives; every added key is found.
  const std::uint64_t hits = f.count(keys.data(), n);
  if (contains) {
    state.counters["fpr"] = static_cast<double>(hits) / static_cast<double>(n);
    state.counters["expected_fpr"] = gbf::expected_fpr(l, static_cast<double>(cache.capacity));
  } else if (hits != n) {
    throw std::runtime_error("false negatives: " + std::to_string(n - hits) + " of " +
                             std::to_string(n) + " added keys not found");
  }
}

// Host keys through the synchronous API (the pinned staging pipeline); 64-bit keys.
void run_gbf_host(benchmark::State& state, const gbf_row& r, bool pinned) {
  gbf::detail::stream s;
  cached_filter& cache = filter_for<std::uint64_t>(r.filter, s.get());
  gbf::filter& f = *cache.filter;
  const bool contains = r.what == op::contains;
  const std::size_t n = std::size_t{100'000'000};
  // Keys made on the device, then copied into the kind of host memory the row tests.
  pinned_buffer<std::uint64_t> pinned_keys(pinned ? n : 0);
  pinned_buffer<bool> pinned_found(pinned && contains ? n : 0);
  std::unique_ptr<std::uint64_t[]> pageable_keys(pinned ? nullptr : new std::uint64_t[n]);
  std::unique_ptr<bool[]> pageable_found(!pinned && contains ? new bool[n] : nullptr);
  std::uint64_t* keys = pinned ? pinned_keys.data() : pageable_keys.get();
  bool* found = pinned ? pinned_found.data() : pageable_found.get();
  {
    require_free(n * sizeof(std::uint64_t), "staging the host keys");
    device_buffer<std::uint64_t> staged(n);
    if (contains) {
      generate_keys(staged.data(), n, negative_base_u64, 0, s.get());
    } else {
      generate_keys(staged.data(), n, 0, cache.capacity, s.get());
    }
    GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));
    GBF_CUDA_TRY(cudaMemcpy(keys, staged.data(), n * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
  }
  auto call = [&] {
    if (contains) {
      f.contains(keys, n, found);
    } else {
      f.add(keys, n);
    }
  };
  call();  // warm-up: allocates the pipeline, touches every result page
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(t);
    seconds += t;
  }
  const double keys_total = static_cast<double>(state.iterations()) * static_cast<double>(n);
  const double keys_per_s = keys_total / seconds;
  // Effective bytes: what crosses the bus per key (key in, result byte out).
  set_common(state, keys_total, keys_total * (sizeof(std::uint64_t) + (contains ? 1 : 0)), nullptr);
  state.counters["keys_per_s"] = keys_per_s;
  set_filter_counters(state, f.layout(), cache.capacity, n);
  if (const double h2d = lookup("h2d_pinned"); h2d > 0) {
    state.counters["fraction_of_bound"] = keys_per_s * sizeof(std::uint64_t) / h2d;
  }
  if (contains) {
    std::uint64_t hits = 0;
    for (std::size_t i = 0; i < n; ++i) hits += found[i] ? 1 : 0;
    state.counters["fpr"] = static_cast<double>(hits) / static_cast<double>(n);
  }
}

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

void register_row(const std::string& name, std::function<void(benchmark::State&)> body,
                  benchmark::TimeUnit unit = benchmark::kMillisecond) {
  benchmark::RegisterBenchmark(name.c_str(), [body](benchmark::State& state) { body(state); })
      ->UseManualTime()
      ->Unit(unit);
}

void register_gbf(const gbf_row& r) {
  const benchmark::TimeUnit unit =
      r.batch != 0 && r.batch < 10'000'000 ? benchmark::kMicrosecond : benchmark::kMillisecond;
  register_row(row_name(r), [r](benchmark::State& state) {
    guarded(state, [&] {
      if (r.filter.u32) {
        run_gbf_device<std::uint32_t>(state, r);
      } else {
        run_gbf_device<std::uint64_t>(state, r);
      }
    });
  }, unit);
}

void register_all() {
  // 1. Bounds, first: later rows divide by what these record.
  register_row("bound/h2d_pinned/256MiB", [](benchmark::State& st) { bm_copy(st, true); });
  register_row("bound/d2h_pinned/256MiB", [](benchmark::State& st) { bm_copy(st, false); });
  const l2fetch both[] = {l2fetch::keep, l2fetch::bytes32};
  for (l2fetch g : both) {
    register_row(std::string("bound/stream_read/l2fetch:") + to_string(g),
                 [g](benchmark::State& st) { bm_stream_read(st, g); });
  }
  for (std::uint64_t bytes : filter_sizes()) {
    for (l2fetch g : both) {
      const std::string tail = "/" + size_name(bytes) + "/l2fetch:" + to_string(g);
      register_row("bound/random_sector_read/32B" + tail,
                   [=](benchmark::State& st) { bm_random_read<2>(st, bytes, g); });
      register_row("bound/random_sector_read/64B" + tail,
                   [=](benchmark::State& st) { bm_random_read<4>(st, bytes, g); });
      register_row("bound/random_atomic_or/word" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<1>(st, bytes, g); });
      register_row("bound/random_atomic_or/block32B" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<8>(st, bytes, g); });
      register_row("bound/random_atomic_or/block64B" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<16>(st, bytes, g); });
    }
  }

  // 2. gbf, device-resident keys. Rows of one filter are consecutive (one fill).
  struct config {
    bool u32;
    std::uint32_t words_per_block, bits_per_key;
    double fpp;
    bool both_granularities;
  };
  const config configs[] = {
      {false, 8, 8, 0.01, true},   // the default layout at 1%
      {false, 8, 8, 0.1, false},   // 10%
      {false, 8, 8, 0.001, false}, // 0.1%
      {false, 16, 16, 0.01, true}, // 64-byte blocks
      {true, 8, 8, 0.01, false},   // 32-bit keys
  };
  for (const config& c : configs) {
    for (std::uint64_t bytes : filter_sizes()) {
      for (op what : {op::contains, op::add}) {
        for (l2fetch g : both) {
          if (g == l2fetch::bytes32 && !c.both_granularities) continue;
          gbf_row r;
          r.what = what;
          r.filter = {c.u32, c.words_per_block, c.bits_per_key, c.fpp, bytes};
          r.g = g;
          register_gbf(r);
        }
      }
    }
  }

  // 3. Batch sweep: one L2-sized and one far-beyond-L2 filter.
  for (std::uint64_t bytes : {32 * mib, 1024 * mib}) {
    for (std::size_t batch = 10'000; batch <= 1'000'000'000; batch *= 10) {
      for (int v = 0; v < 3; ++v) {
        gbf_row r;
        r.what = v == 2 ? op::add : op::contains;
        r.how = v == 1 ? api::sync : api::async;
        r.filter = {false, 8, 8, 0.01, bytes};
        r.batch = batch;
        r.sweep = true;
        register_gbf(r);
      }
    }
  }

  // 4. Host keys through the pipeline, against the pinned H2D bound.
  for (bool pinned : {false, true}) {
    for (op what : {op::contains, op::add}) {
      gbf_row r;
      r.what = what;
      r.filter = {false, 8, 8, 0.01, 1024 * mib};
      register_row(std::string("gbf_host/") + to_string(what) + "/" +
                       (pinned ? "pinned" : "pageable") + "/u64/W8k8/fpp0.01/1024MiB",
                   [r, pinned](benchmark::State& state) {
                     guarded(state, [&] { run_gbf_host(state, r, pinned); });
                   });
    }
  }

#if defined(GBF_BENCH_HAS_CUCO)
  // 5. The peer.
  register_cuco_benchmarks();
#endif
}

}  // namespace

// ---------------------------------------------------------------------------
// Shared pieces (bench_gpu.hpp)
// ---------------------------------------------------------------------------

const char* to_string(l2fetch g) { return g == l2fetch::keep ? "default" : "32B"; }

l2fetch_guard::l2fetch_guard(l2fetch g) {
  GBF_CUDA_TRY(cudaDeviceGetLimit(&previous_, cudaLimitMaxL2FetchGranularity));
  if (g == l2fetch::bytes32) {
    GBF_CUDA_TRY(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 32));
    changed_ = true;
  }
  GBF_CUDA_TRY(cudaDeviceGetLimit(&effective_, cudaLimitMaxL2FetchGranularity));
}

l2fetch_guard::~l2fetch_guard() {
  if (changed_) {
    cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, previous_);
    cudaGetLastError();
  }
}

gpu_timer::gpu_timer() {
  GBF_CUDA_TRY(cudaEventCreate(&start_));
  GBF_CUDA_TRY(cudaEventCreate(&stop_));
}

gpu_timer::~gpu_timer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void gpu_timer::start(cudaStream_t s) { GBF_CUDA_TRY(cudaEventRecord(start_, s)); }

double gpu_timer::seconds(cudaStream_t s) {
  GBF_CUDA_TRY(cudaEventRecord(stop_, s));
  GBF_CUDA_TRY(cudaEventSynchronize(stop_));
  float ms = 0;
  GBF_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms) * 1e-3;
}

std::string size_name(std::uint64_t bytes) { return std::to_string(bytes >> 20) + "MiB"; }

std::string fpp_name(double fpp) {
  char text[32];
  std::snprintf(text, sizeof(text), "fpp%g", fpp);
  return text;
}

namespace {
std::map<std::string, double>& results() {
  static std::map<std::string, double> map;
  return map;
}
}  // namespace

void record(const std::string& key, double value) { results()[key] = value; }

double lookup(const std::string& key) {
  const auto it = results().find(key);
  return it == results().end() ? 0.0 : it->second;
}

std::string random_read_key(std::uint32_t access_bytes, std::uint64_t buffer_bytes, l2fetch g) {
  return "random_read/" + std::to_string(access_bytes) + "B/" + size_name(buffer_bytes) + "/" +
         to_string(g);
}

std::string atomic_block_key(std::uint32_t block_bytes, std::uint64_t buffer_bytes, l2fetch g) {
  return "atomic_block/" + std::to_string(block_bytes) + "B/" + size_name(buffer_bytes) + "/" +
         to_string(g);
}

std::string stream_read_key(l2fetch g) { return std::string("stream_read/") + to_string(g); }

std::string gbf_rate_key(const char* op_name, const char* key, std::uint32_t words_per_block,
                         std::uint32_t bits_per_key, double fpp, std::uint64_t filter_bytes,
                         l2fetch g) {
  return std::string("gbf/") + op_name + "/" + key + "/W" + std::to_string(words_per_block) + "k" +
         std::to_string(bits_per_key) + "/" + fpp_name(fpp) + "/" + size_name(filter_bytes) + "/" +
         to_string(g);
}

void generate_keys(std::uint64_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s) {
  if (n == 0) return;
  generate_keys_kernel<std::uint64_t>
      <<<grid_for(generate_keys_kernel<std::uint64_t>, n), block_threads, 0, s>>>(keys, n, first, period);
  GBF_CUDA_TRY(cudaGetLastError());
}

void generate_keys(std::uint32_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s) {
  if (n == 0) return;
  generate_keys_kernel<std::uint32_t>
      <<<grid_for(generate_keys_kernel<std::uint32_t>, n), block_threads, 0, s>>>(keys, n, first, period);
  GBF_CUDA_TRY(cudaGetLastError());
}

namespace {
template <class Launch>
std::uint64_t device_total(cudaStream_t s, Launch&& launch) {
  device_buffer<unsigned long long> total(1);
  GBF_CUDA_TRY(cudaMemsetAsync(total.data(), 0, sizeof(unsigned long long), s));
  launch(total.data());
  GBF_CUDA_TRY(cudaGetLastError());
  unsigned long long host = 0;
  GBF_CUDA_TRY(cudaMemcpyAsync(&host, total.data(), sizeof(host), cudaMemcpyDeviceToHost, s));
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  return host;
}
}  // namespace

std::uint64_t count_true(const bool* flags, std::size_t n, cudaStream_t s) {
  if (n == 0) return 0;
  return device_total(s, [&](unsigned long long* total) {
    count_true_kernel<<<grid_for(count_true_kernel, n), block_threads, 0, s>>>(flags, n, total);
  });
}

std::uint64_t count_differing_words(const std::uint32_t* a, const std::uint32_t* b,
                                    std::uint64_t n, cudaStream_t s) {
  if (n == 0) return 0;
  return device_total(s, [&](unsigned long long* total) {
    differing_words_kernel<<<grid_for(differing_words_kernel, n), block_threads, 0, s>>>(a, b, n,
                                                                                        total);
  });
}

std::uint64_t capacity_for(const gbf::layout& l, double fpp) {
  // expected_fpr rises with the key count: the largest n with FPR <= fpp.
  std::uint64_t lo = 1, hi = l.num_bits();
  if (gbf::expected_fpr(l, 1.0) > fpp) return 1;
  while (lo < hi) {
    const std::uint64_t mid = hi - (hi - lo) / 2;
    if (gbf::expected_fpr(l, static_cast<double>(mid)) <= fpp) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  GBF_CUDA_TRY(cudaMemGetInfo(&free, &total));
  return free;
}

std::size_t default_batch(std::size_t bytes_per_key) {
  constexpr std::size_t preferred = 100'000'000, least = 1'000'000;
  const std::size_t free = free_device_bytes();
  if (free < headroom_bytes) return 0;
  const std::size_t fits = (free - headroom_bytes) / bytes_per_key;
  return fits < least ? 0 : std::min(preferred, fits);
}

void set_bound_counters(benchmark::State& state, bool is_add, std::uint32_t key_bytes,
                        std::uint32_t block_bytes, std::uint64_t filter_bytes, l2fetch g,
                        double keys_per_s) {
  const double random_bound = lookup(is_add ? atomic_block_key(block_bytes, filter_bytes, g)
                                            : random_read_key(block_bytes, filter_bytes, g));
  const double stream_bytes_per_s = lookup(stream_read_key(g));
  const double streamed_bytes = key_bytes + (is_add ? 0.0 : 1.0);
  const double stream_bound = stream_bytes_per_s > 0 ? stream_bytes_per_s / streamed_bytes : 0.0;
  if (random_bound > 0) {
    state.counters["bound_random_keys_per_s"] = random_bound;
    state.counters["frac_random"] = keys_per_s / random_bound;
  }
  if (stream_bound > 0) {
    state.counters["bound_stream_keys_per_s"] = stream_bound;
    state.counters["frac_stream"] = keys_per_s / stream_bound;
  }
  if (random_bound > 0 && stream_bound > 0) {
    state.counters["fraction_of_bound"] = keys_per_s / std::min(random_bound, stream_bound);
    // Both from DRAM, one after the other: the time per key is at least the sum.
    state.counters["frac_combined"] = keys_per_s * (1.0 / random_bound + 1.0 / stream_bound);
  } else if (random_bound > 0 || stream_bound > 0) {
    state.counters["fraction_of_bound"] = keys_per_s / std::max(random_bound, stream_bound);
  }
}

const std::vector<std::uint64_t>& filter_sizes() {
  static const std::vector<std::uint64_t> sizes = {1 * mib,    8 * mib,    32 * mib,   256 * mib,
                                                   1024 * mib, 4096 * mib, 16384 * mib};
  return sizes;
}

}  // namespace gbf_bench

int main(int argc, char** argv) {
  bool list_only = false;  // --benchmark_list_tests: names only, no GPU needed
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--benchmark_list_tests" || arg == "--benchmark_list_tests=true") list_only = true;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (!gpu.available) {
    if (list_only) {
      gbf_bench::register_all();
      benchmark::RunSpecifiedBenchmarks();
      return 0;
    }
    std::printf("gbf_bench_gpu: no GPU (%s): no rows registered, nothing measured\n",
                gpu.description.c_str());
    return 0;
  }
  int status = 0;
  try {
    const auto& f = gbf_bench::facts();
    benchmark::AddCustomContext("gpu", f.name);
    benchmark::AddCustomContext("gpu_sms", std::to_string(f.sms));
    benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(f.l2_bytes));
    benchmark::AddCustomContext("gpu_memory_bytes", std::to_string(f.memory_bytes));
    benchmark::AddCustomContext("cuda_driver_version", std::to_string(f.driver_version));
    benchmark::AddCustomContext("cuda_runtime_version", std::to_string(f.runtime_version));
#if defined(GBF_BENCH_HAS_CUCO)
    benchmark::AddCustomContext("cuco", GBF_BENCH_CUCO_COMMIT);
#else
    benchmark::AddCustomContext("cuco", "not built (configure with -DGBF_CUCO_INCLUDE_DIR=...)");
#endif
    gbf_bench::register_all();
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gbf_bench_gpu: %s\n", e.what());
    status = 1;
  }
  gbf_bench::filter_cache().filter.reset();  // before the CUDA runtime shuts down
  benchmark::Shutdown();
  return status;
}
