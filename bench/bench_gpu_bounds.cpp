// gbf_bench_gpu's hardware bounds (bound/...): what this GPU can do for the
// access patterns of a Bloom filter, measured in the same process as gbf's
// rows, which divide by them (docs/performance.md, "Bounds"):
//   h2d_pinned, d2h_pinned   cudaMemcpyAsync of 256 MiB, pinned host <-> device;
//   stream_read              16-byte vector loads, grid-stride, far beyond L2;
//   random_sector_read       random 32- and 64-byte blocks (a W=8 / W=16 block);
//   random_atomic_or         random REDs: one word, or every word of a 32- or
//                            64-byte block (a W=8 / W=16 add without the hash).
// Each device-memory row runs over a buffer of every filter size, with the
// device's L2 fetch granularity and with 32 bytes, and records its rate for
// the later rows. The kernels are in bench_gpu_bounds.cu.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "bench/bench_gpu.hpp"

namespace gbf_bench {
namespace {

constexpr std::size_t copy_bytes = std::size_t{256} << 20;

void bm_copy(benchmark::State& state, bool host_to_device) {
  guarded(state, [&] {
    require_free(copy_bytes, "the copy buffer");
    pinned_array<unsigned char> host(copy_bytes);
    device_array<unsigned char> device(copy_bytes);
    std::memset(host.data(), 0x5A, copy_bytes);  // touch every page
    GBF_CUDA_TRY(cudaMemset(device.data(), 0xA5, copy_bytes));
    cuda_stream s;
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
    record(copy_key(host_to_device), bytes / seconds);
  });
}

// A buffer of `bytes` random bytes (never all zeros: docs/performance.md, "Bounds").
device_array<uint4> random_buffer(std::size_t bytes, cudaStream_t s) {
  device_array<uint4> data(bytes / sizeof(uint4));
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
    cuda_stream s;
    device_array<uint4> data = random_buffer(bytes, s.get());
    const std::size_t n = bytes / sizeof(uint4);
    const unsigned grid = stream_read_grid(n);
    device_array<std::uint32_t> out(static_cast<std::size_t>(grid) * block_threads);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t) {
      stream_read(data.data(), n, out.data(), grid, s.get());
    });
    const double total = static_cast<double>(state.iterations()) * static_cast<double>(bytes);
    set_common(state, total, total, &guard);
    state.counters["buffer_bytes"] = static_cast<double>(bytes);
    record(stream_read_key(g), total / seconds);
  });
}

constexpr std::size_t random_lookups = std::size_t{1} << 27;
constexpr std::size_t random_atomic_ops = std::size_t{1} << 26;

template <std::uint32_t AccessBytes>
void bm_random_read(benchmark::State& state, std::uint64_t bytes, l2fetch g) {
  guarded(state, [&] {
    constexpr std::uint32_t access_bytes = AccessBytes;
    require_free(bytes, "a " + size_name(bytes) + " buffer");
    l2fetch_guard guard(g);
    cuda_stream s;
    device_array<uint4> data = random_buffer(bytes, s.get());
    const std::uint64_t num_blocks = bytes / access_bytes;
    const unsigned grid = random_read_grid<AccessBytes>(random_lookups);
    device_array<std::uint32_t> out(static_cast<std::size_t>(grid) * block_threads);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t seed) {
      random_read<AccessBytes>(data.data(), num_blocks, random_lookups, seed, out.data(), grid,
                               s.get());
    });
    const double lookups = static_cast<double>(state.iterations()) * random_lookups;
    set_common(state, lookups, lookups * access_bytes, &guard);
    state.counters["lookups_per_s"] = lookups / seconds;
    state.counters["sectors_per_s"] = lookups * (access_bytes / 32) / seconds;
    record(random_read_key(access_bytes, bytes, g), lookups / seconds);
  });
}

template <std::uint32_t Words>
void bm_random_atomic(benchmark::State& state, std::uint64_t bytes, l2fetch g) {
  guarded(state, [&] {
    constexpr std::uint32_t block_bytes = Words * 4;
    require_free(bytes, "a " + size_name(bytes) + " buffer");
    l2fetch_guard guard(g);
    cuda_stream s;
    device_array<uint4> data = random_buffer(bytes, s.get());
    auto* words = reinterpret_cast<std::uint32_t*>(data.data());
    const std::uint64_t num_blocks = bytes / block_bytes;
    const std::size_t ops = Words == 1 ? random_lookups : random_atomic_ops;
    const unsigned grid = random_atomic_or_grid<Words>(ops);
    const double seconds = time_on_stream(state, s.get(), [&](std::uint64_t seed) {
      random_atomic_or<Words>(words, num_blocks, ops, seed, grid, s.get());
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

}  // namespace

void register_bound_benchmarks() {
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
                   [=](benchmark::State& st) { bm_random_read<32>(st, bytes, g); });
      register_row("bound/random_sector_read/64B" + tail,
                   [=](benchmark::State& st) { bm_random_read<64>(st, bytes, g); });
      register_row("bound/random_atomic_or/word" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<1>(st, bytes, g); });
      register_row("bound/random_atomic_or/block32B" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<8>(st, bytes, g); });
      register_row("bound/random_atomic_or/block64B" + tail,
                   [=](benchmark::State& st) { bm_random_atomic<16>(st, bytes, g); });
    }
  }
}

}  // namespace gbf_bench
