// Google Benchmark suite: add and contains throughput per backend and filter size.
//
//   gbf_bench --benchmark_format=json --benchmark_out=results.json
//
// Rows are named <op>/<backend>/<filter bytes>. Keys are 64-bit, 8 words per
// block, 8 bits per key (the Parquet layout). `contains` probes keys that were
// never added, so every hit is a false positive; its rate is the `fpr` counter.
// GPU rows appear only when a GPU is present.
//
// counting_<op> rows run the counting filter (docs/counting.md) of the same
// plain layout, so at the same key count as the plain rows (its counters are
// 4x the bytes in the name): counting_contains/X against contains/X is the
// price of a counting probe. counting_remove removes a batch that was added
// (checked remove), then adds it back outside the timing.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/counting_filter.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/filter.hpp"
#if defined(GBF_HAS_CUDA)
#include "bench/cuda_memory.hpp"
#endif

namespace {

constexpr std::size_t batch_keys = std::size_t{1} << 22;  // 4 Mi keys per iteration

// Distinct keys: SplitMix64 is a bijection, so disjoint counter ranges never collide.
std::vector<std::uint64_t> make_keys(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = gbf::detail::splitmix64(first + i);
  return keys;
}

gbf::layout layout_of_bytes(std::uint64_t bytes) {
  gbf::layout l;
  l.num_blocks = bytes / (l.words_per_block * gbf::bytes_per_word);
  return l;
}

enum class keys_in { host, device };

struct config {
  gbf::options opts;
  keys_in where_keys;
};

// Keys (and results) where the row wants them: host vectors, or device copies.
struct batch {
  std::vector<std::uint64_t> host_keys;
  std::unique_ptr<bool[]> host_found;
#if defined(GBF_HAS_CUDA)
  gbf_bench::device_array<std::uint64_t> device_keys;
  gbf_bench::device_array<bool> device_found;
#endif
  const std::uint64_t* keys = nullptr;
  bool* found = nullptr;

  batch(std::uint64_t first, keys_in where) : host_keys(make_keys(first, batch_keys)),
                                              host_found(new bool[batch_keys]) {
    keys = host_keys.data();
    found = host_found.get();
#if defined(GBF_HAS_CUDA)
    if (where == keys_in::device) {
      device_keys = gbf_bench::device_array<std::uint64_t>(batch_keys);
      GBF_CUDA_TRY(cudaMemcpy(device_keys.data(), host_keys.data(), device_keys.size_bytes(),
                              cudaMemcpyHostToDevice));
      device_found = gbf_bench::device_array<bool>(batch_keys);
      keys = device_keys.data();
      found = device_found.data();
    }
#else
    (void)where;
#endif
  }
};

void bm_add(benchmark::State& state, config c, std::uint64_t filter_bytes) {
  gbf::filter f(layout_of_bytes(filter_bytes), c.opts);
  batch b(0, c.where_keys);
  for (auto _ : state) f.add(b.keys, batch_keys);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys * 8));
  state.SetLabel(f.description());
}

void bm_contains(benchmark::State& state, config c, std::uint64_t filter_bytes) {
  gbf::filter f(layout_of_bytes(filter_bytes), c.opts);
  // Fill to the layout's design load (about 10.5 bits per key: fpp near 1%).
  const auto inserted = make_keys(1ULL << 62, static_cast<std::size_t>(filter_bytes * 8 / 10.5));
  f.add(inserted.data(), inserted.size());
  batch b(0, c.where_keys);
  for (auto _ : state) f.contains(b.keys, batch_keys, b.found);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys * 9));
  state.counters["fpr"] =
      static_cast<double>(f.count(b.keys, batch_keys)) / static_cast<double>(batch_keys);
  state.SetLabel(f.description());
}

gbf::counting_filter filled_counting(const config& c, std::uint64_t filter_bytes) {
  gbf::counting_filter f(layout_of_bytes(filter_bytes), c.opts);
  const auto inserted = make_keys(1ULL << 62, static_cast<std::size_t>(filter_bytes * 8 / 10.5));
  f.add(inserted.data(), inserted.size());
  return f;
}

void bm_counting_add(benchmark::State& state, config c, std::uint64_t filter_bytes) {
  gbf::counting_filter f(layout_of_bytes(filter_bytes), c.opts);
  batch b(0, c.where_keys);
  for (auto _ : state) {
    f.add(b.keys, batch_keys);
    state.PauseTiming();
    f.remove_unchecked(b.keys, batch_keys);  // keep the counters far from saturation
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys));
  state.SetLabel(f.description());
}

void bm_counting_contains(benchmark::State& state, config c, std::uint64_t filter_bytes) {
  const gbf::counting_filter f = filled_counting(c, filter_bytes);
  batch b(0, c.where_keys);
  for (auto _ : state) f.contains(b.keys, batch_keys, b.found);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys));
  state.counters["fpr"] =
      static_cast<double>(f.count(b.keys, batch_keys)) / static_cast<double>(batch_keys);
  state.SetLabel(f.description());
}

void bm_counting_remove(benchmark::State& state, config c, std::uint64_t filter_bytes) {
  gbf::counting_filter f = filled_counting(c, filter_bytes);
  batch b(0, c.where_keys);
  f.add(b.keys, batch_keys);
  std::uint64_t refused = 0;
  for (auto _ : state) {
    refused += f.remove(b.keys, batch_keys).refused;
    state.PauseTiming();
    f.add(b.keys, batch_keys);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_keys));
  state.counters["refused"] = static_cast<double>(refused);
  state.SetLabel(f.description());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, config>> configs;
  gbf::options cpu1;
  cpu1.where = gbf::backend::cpu;
  cpu1.cpu_threads = 1;
  gbf::options cpu_all = cpu1;
  cpu_all.cpu_threads = 0;
  gbf::options cpu_scalar = cpu1;
  cpu_scalar.simd = gbf::cpu_simd::scalar;
  configs.push_back({"cpu_1thread_scalar", {cpu_scalar, keys_in::host}});
  configs.push_back({"cpu_1thread", {cpu1, keys_in::host}});
  configs.push_back({"cpu_all_threads", {cpu_all, keys_in::host}});
  if (gbf::query_gpu().available) {
    gbf::options gpu;
    gpu.where = gbf::backend::gpu;
    configs.push_back({"gpu_device_keys", {gpu, keys_in::device}});
    configs.push_back({"gpu_host_keys", {gpu, keys_in::host}});
  }
  for (std::uint64_t mib : {1ULL, 16ULL, 256ULL}) {
    for (const auto& [name, c] : configs) {
      const std::uint64_t bytes = mib << 20;
      const std::string suffix = "/" + name + "/" + std::to_string(mib) + "MiB";
      benchmark::RegisterBenchmark(("add" + suffix).c_str(), bm_add, c, bytes)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("contains" + suffix).c_str(), bm_contains, c, bytes)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("counting_add" + suffix).c_str(), bm_counting_add, c, bytes)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("counting_contains" + suffix).c_str(), bm_counting_contains, c,
                                   bytes)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      if (c.where_keys == keys_in::host)  // remove reports to the host: host keys suffice
        benchmark::RegisterBenchmark(("counting_remove" + suffix).c_str(), bm_counting_remove, c,
                                     bytes)
            ->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
