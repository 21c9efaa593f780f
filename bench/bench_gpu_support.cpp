// gbf_bench_gpu: gbf on the GPU next to what the same GPU can do, in one run.
//
//   gbf_bench_gpu --benchmark_format=json --benchmark_out=results.json
//   scripts/gpu_bench.sh NAME      (on the device machine; see docs/performance.md)
//
// Rows run in registration order, in three families:
//   bound/...  microbenchmarks of the hardware (bench_gpu_bounds.*): pinned
//              H2D/D2H copies, a streaming read, random 32/64-byte reads and
//              random atomic ORs over a buffer of each filter size, each with
//              the device's L2 fetch granularity and with
//              cudaLimitMaxL2FetchGranularity = 32;
//   gbf/...    gbf::filter add/contains on device-resident keys (sizes 1 MiB ..
//              16 GiB, FPR 10%/1%/0.1%, W=8 k=8 and W=16 k=16, 64- and 32-bit
//              keys), a batch-size sweep (10^4 .. 10^9 keys), and host keys
//              (pageable, pinned) through the streaming pipeline (bench_gpu_gbf.cpp);
//   cuco/...   cuco::bloom_filter at the same size and keys (bench_cuco.cu,
//              only when built with GBF_CUCO_INCLUDE_DIR).
// The bound rows run first and record their rates; each gbf/cuco row divides
// its keys/s by the bound of its own size (fraction_of_bound and friends).
// Timing is manual: CUDA events around the stream-ordered call (the sync API
// and host-key rows: a host clock around the synchronous call), one untimed
// warm-up call first. Without a GPU the binary registers nothing, says why and
// exits 0 (--benchmark_list_tests still lists the rows).
//
// This file is the host side of the support the rows share (bench_gpu.hpp):
// main and the suite's order, timers, the L2 fetch guard, the result registry,
// device facts, memory checks and the bound arithmetic. Its kernels (key
// generation, counts) are in bench_gpu_support.cu.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "bench/bench_gpu.hpp"
#include "gbf/backend.hpp"
#include "gbf/sizing.hpp"

namespace gbf_bench {
namespace {

std::map<std::string, double>& results() {
  static std::map<std::string, double> map;
  return map;
}

std::string mib_text(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Zeroes a device total on `s`, runs `add(total)`, and returns the total.
template <class Add>
std::uint64_t device_total(cudaStream_t s, Add&& add) {
  device_array<unsigned long long> total(1);
  GBF_CUDA_TRY(cudaMemsetAsync(total.data(), 0, sizeof(unsigned long long), s));
  add(total.data());
  unsigned long long host = 0;
  GBF_CUDA_TRY(cudaMemcpyAsync(&host, total.data(), sizeof(host), cudaMemcpyDeviceToHost, s));
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
  return host;
}

}  // namespace

// ---------------------------------------------------------------------------
// Timers, the L2 fetch guard, names
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

// ---------------------------------------------------------------------------
// Device facts
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// The result registry
// ---------------------------------------------------------------------------

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

std::string copy_key(bool host_to_device) { return host_to_device ? "h2d_pinned" : "d2h_pinned"; }

std::string gbf_rate_key(const char* op_name, const char* key, std::uint32_t words_per_block,
                         std::uint32_t bits_per_key, double fpp, std::uint64_t filter_bytes,
                         l2fetch g) {
  return std::string("gbf/") + op_name + "/" + key + "/W" + std::to_string(words_per_block) + "k" +
         std::to_string(bits_per_key) + "/" + fpp_name(fpp) + "/" + size_name(filter_bytes) + "/" +
         to_string(g);
}

// ---------------------------------------------------------------------------
// Counts and capacity
// ---------------------------------------------------------------------------

std::uint64_t count_true(const bool* flags, std::size_t n, cudaStream_t s) {
  if (n == 0) return 0;
  return device_total(s, [&](unsigned long long* total) { add_true_count(flags, n, total, s); });
}

std::uint64_t count_differing_words(const std::uint32_t* a, const std::uint32_t* b,
                                    std::uint64_t n, cudaStream_t s) {
  if (n == 0) return 0;
  return device_total(s,
                      [&](unsigned long long* total) { add_differing_words(a, b, n, total, s); });
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

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

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

void require_free(std::size_t bytes, const std::string& what) {
  const std::size_t free = free_device_bytes();
  if (free < bytes + headroom_bytes) {
    throw skip_row(what + " needs " + mib_text(bytes) + " + " + mib_text(headroom_bytes) +
                   " headroom of device memory, only " + mib_text(free) + " free");
  }
}

// ---------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------

void set_common(benchmark::State& state, double items, double bytes, const l2fetch_guard* guard) {
  state.SetItemsProcessed(static_cast<std::int64_t>(items));
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  if (guard != nullptr) {
    state.counters["l2_fetch_granularity"] = static_cast<double>(guard->effective());
  }
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

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

const std::vector<std::uint64_t>& filter_sizes() {
  static const std::vector<std::uint64_t> sizes = {1 * mib,    8 * mib,    32 * mib,   256 * mib,
                                                   1024 * mib, 4096 * mib, 16384 * mib};
  return sizes;
}

void register_row(const std::string& name, std::function<void(benchmark::State&)> body,
                  benchmark::TimeUnit unit) {
  benchmark::RegisterBenchmark(name.c_str(), [body](benchmark::State& state) { body(state); })
      ->UseManualTime()
      ->Unit(unit);
}

namespace {
// The suite's order: bounds first (later rows divide by what they record), then
// gbf, then the peer.
void register_all() {
  register_bound_benchmarks();
  register_gbf_benchmarks();
#if defined(GBF_BENCH_HAS_CUCO)
  register_cuco_benchmarks();
#endif
}
}  // namespace

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
  gbf_bench::release_gbf_filters();  // before the CUDA runtime shuts down
  benchmark::Shutdown();
  return status;
}
