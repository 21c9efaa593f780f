// Shared pieces of gbf_bench_gpu (bench_gpu.cu) and its optional peer rows
// (bench_cuco.cu): the results the rows leave for later rows, device key
// generation, event timing and the bound arithmetic. See docs/performance.md.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gbf/layout.hpp"
#include "host/gpu/runtime.hpp"

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

/// keys[i] = mix((first + i) mod period) for i < n (period 0 = no modulo).
void generate_keys(std::uint64_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s);
void generate_keys(std::uint32_t* keys, std::size_t n, std::uint64_t first, std::uint64_t period,
                   cudaStream_t s);

/// Number of true values among flags[0, n) (device memory); synchronizes `s`.
std::uint64_t count_true(const bool* flags, std::size_t n, cudaStream_t s);
/// Number of i < n with a[i] != b[i] (device memory); synchronizes `s`.
std::uint64_t count_differing_words(const std::uint32_t* a, const std::uint32_t* b,
                                    std::uint64_t n, cudaStream_t s);

/// Largest key count at which a filter of layout `l` has expected FPR <= fpp.
std::uint64_t capacity_for(const gbf::layout& l, double fpp);

/// Free device memory now (cudaMemGetInfo).
std::size_t free_device_bytes();
/// Device memory a row leaves unused (allocator slack, CUDA context growth).
inline constexpr std::size_t headroom_bytes = std::size_t{512} << 20;
/// Default keys per timed call: 10^8, fewer when the batch (keys + one result byte
/// per key) would not fit in free memory; 0 when not even 10^6 fit.
std::size_t default_batch(std::size_t bytes_per_key);

/// Sets the bound counters of a filter row that ran at `keys_per_s` (see
/// docs/performance.md): frac_random against the random-access bound of the
/// same size (random_read for contains, atomic block OR for add), frac_stream
/// against streaming the key (and result) bytes, fraction_of_bound against the
/// tighter of the two.
void set_bound_counters(benchmark::State& state, bool is_add, std::uint32_t key_bytes,
                        std::uint32_t block_bytes, std::uint64_t filter_bytes, l2fetch g,
                        double keys_per_s);

/// Filter sizes of the suite (bytes), in registration order.
const std::vector<std::uint64_t>& filter_sizes();

#if defined(GBF_BENCH_HAS_CUCO)
/// Registers the cuco::bloom_filter rows (bench_cuco.cu); call after the gbf rows.
void register_cuco_benchmarks();
#endif

}  // namespace gbf_bench
