// The shared header of gbf_bench_gpu's rows (docs/performance.md). The
// program is split by role, and each role's kernels (.cu, the only files nvcc
// compiles, kept lean: bench_gpu_kernels.hpp) apart from its host code (.cpp):
//   bench_gpu_support.cpp/.cu  main and the suite's order; timers, the L2 fetch
//                              guard, the result registry, device facts, the
//                              bound arithmetic / key generation and counts;
//   bench_gpu_bounds.cpp/.cu   the hardware bounds (bound/...): pinned copies,
//                              a streaming read, random sector reads, random
//                              atomics / their kernels;
//   bench_gpu_gbf.cpp          gbf's rows (gbf/..., gbf_batch/..., gbf_host/...):
//                              gbf::filter through its public API, no kernels;
//   bench_cuco.cu              the optional peer rows (cuco/...).
// Rows run in registration order, bounds first: every later row divides its
// rate by what the bound rows of the same process recorded (record / lookup).
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_gpu_kernels.hpp"
#include "bench/cuda_memory.hpp"
#include "gbf/layout.hpp"

namespace gbf_bench {

inline constexpr std::uint64_t mib = std::uint64_t{1} << 20;

/// What a row does with cudaLimitMaxL2FetchGranularity: leave the device's
/// value, or set 32 bytes for the row and restore the previous value after it.
enum class l2fetch { keep, bytes32 };
const char* to_string(l2fetch g);  // "default" or "32B"

/// Sets the L2 fetch granularity for the guard's lifetime (keep: touches nothing).
class l2fetch_guard {
 public:
  explicit l2fetch_guard(l2fetch g);
  l2fetch_guard(const l2fetch_guard&) = delete;
  l2fetch_guard& operator=(const l2fetch_guard&) = delete;
  ~l2fetch_guard();
  /// The granularity in force, as the device reports it back (bytes).
  std::size_t effective() const noexcept { return effective_; }

 private:
  std::size_t previous_ = 0;
  std::size_t effective_ = 0;
  bool changed_ = false;
};

/// Two timing events on one stream: start(), the work, then seconds() waits for it.
class gpu_timer {
 public:
  gpu_timer();
  gpu_timer(const gpu_timer&) = delete;
  gpu_timer& operator=(const gpu_timer&) = delete;
  ~gpu_timer();
  void start(cudaStream_t s);
  /// Records the stop event on `s`, waits for it and returns start..stop in seconds.
  double seconds(cudaStream_t s);

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

/// "1MiB", "1024MiB", ...
std::string size_name(std::uint64_t bytes);
/// "fpp0.01", ...
std::string fpp_name(double fpp);

// ---------------------------------------------------------------------------
// Device facts, read once (the current device).
// ---------------------------------------------------------------------------
struct device_facts {
  std::string name;
  int sms = 0;
  std::size_t l2_bytes = 0;
  std::size_t memory_bytes = 0;
  int driver_version = 0;
  int runtime_version = 0;
};
const device_facts& facts();

// ---------------------------------------------------------------------------
// Results of earlier rows of this process, keyed by the strings below. A row
// that finds no entry (its bound row was filtered out) omits the fraction.
// ---------------------------------------------------------------------------
void record(const std::string& key, double value);
/// The recorded value, or 0 when none was recorded.
double lookup(const std::string& key);

/// Random reads of `access_bytes` per lookup over `buffer_bytes`: lookups/s.
std::string random_read_key(std::uint32_t access_bytes, std::uint64_t buffer_bytes, l2fetch g);
/// Random blocks of `block_bytes` atomically ORed word by word: blocks/s.
std::string atomic_block_key(std::uint32_t block_bytes, std::uint64_t buffer_bytes, l2fetch g);
/// Streaming read: bytes/s.
std::string stream_read_key(l2fetch g);
/// Pinned copies, 256 MiB: bytes/s ("h2d_pinned", "d2h_pinned").
std::string copy_key(bool host_to_device);
/// gbf device-resident rows: keys/s (async API, default batch).
std::string gbf_rate_key(const char* op, const char* key, std::uint32_t words_per_block,
                         std::uint32_t bits_per_key, double fpp, std::uint64_t filter_bytes,
                         l2fetch g);

// ---------------------------------------------------------------------------
// Keys. Key i of a range is a bijective mix of the counter first + i, so
// disjoint counter ranges give disjoint key sets: a filter holds the keys of
// counters [0, capacity); `contains` rows probe counters from negative_base
// (never added: every hit is a false positive); `add` rows re-add counters
// modulo capacity (the bits do not change, so the filter stays at its load).
// ---------------------------------------------------------------------------
inline constexpr std::uint64_t negative_base_u64 = std::uint64_t{1} << 62;
inline constexpr std::uint64_t negative_base_u32 = std::uint64_t{1} << 31;

// generate_keys (bench_gpu_kernels.hpp) makes them on the device.

/// Number of true values among flags[0, n) (device memory); synchronizes `s`.
std::uint64_t count_true(const bool* flags, std::size_t n, cudaStream_t s);
/// Number of i < n with a[i] != b[i] (device memory); synchronizes `s`.
std::uint64_t count_differing_words(const std::uint32_t* a, const std::uint32_t* b,
                                    std::uint64_t n, cudaStream_t s);

/// Largest key count at which a filter of layout `l` has expected FPR <= fpp.
std::uint64_t capacity_for(const gbf::layout& l, double fpp);

// ---------------------------------------------------------------------------
// Memory and rows that cannot run
// ---------------------------------------------------------------------------

/// Free device memory now (cudaMemGetInfo).
std::size_t free_device_bytes();
/// Device memory a row leaves unused (allocator slack, CUDA context growth).
inline constexpr std::size_t headroom_bytes = std::size_t{512} << 20;
/// Default keys per timed call: 10^8, fewer when the batch (keys + one result byte
/// per key) would not fit in free memory; 0 when not even 10^6 fit.
std::size_t default_batch(std::size_t bytes_per_key);

/// A row that cannot run here (too little memory, key space too small): skipped with the message.
struct skip_row : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws skip_row unless `bytes` more (plus headroom) fit in free device memory;
/// `what` names the allocation in the message.
void require_free(std::size_t bytes, const std::string& what);

/// Runs `body` and turns any exception into a skipped row with its message.
template <class Body>
void guarded(benchmark::State& state, Body&& body) {
  try {
    std::forward<Body>(body)();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// ---------------------------------------------------------------------------
// Timing and counters
// ---------------------------------------------------------------------------

/// Times the iterations of `launch(seed)` on `s` with events, after one untimed
/// warm-up call (seed 0); each iteration gets a fresh seed. Returns the seconds summed.
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

/// items/s and bytes/s from the totals; the granularity in force when `guard` is given.
void set_common(benchmark::State& state, double items, double bytes, const l2fetch_guard* guard);

/// Sets the bound counters of a filter row that ran at `keys_per_s` (see
/// docs/performance.md): frac_random against the random-access bound of the
/// same size (random_read for contains, atomic block OR for add), frac_stream
/// against streaming the key (and result) bytes, fraction_of_bound against the
/// tighter of the two.
void set_bound_counters(benchmark::State& state, bool is_add, std::uint32_t key_bytes,
                        std::uint32_t block_bytes, std::uint64_t filter_bytes, l2fetch g,
                        double keys_per_s);

// ---------------------------------------------------------------------------
// Registration (in this order: bounds, gbf, cuco)
// ---------------------------------------------------------------------------

/// Filter sizes of the suite (bytes), in registration order.
const std::vector<std::uint64_t>& filter_sizes();

/// Registers a manually timed row.
void register_row(const std::string& name, std::function<void(benchmark::State&)> body,
                  benchmark::TimeUnit unit = benchmark::kMillisecond);

/// Registers the bound/... rows (bench_gpu_bounds.cpp).
void register_bound_benchmarks();
/// Registers the gbf/..., gbf_batch/... and gbf_host/... rows (bench_gpu_gbf.cpp).
void register_gbf_benchmarks();
/// Frees the filter the gbf rows keep between rows (before the CUDA runtime shuts down).
void release_gbf_filters();
#if defined(GBF_BENCH_HAS_CUCO)
/// Registers the cuco::bloom_filter rows (bench_cuco.cu).
void register_cuco_benchmarks();
#endif

}  // namespace gbf_bench
