// Google Benchmark suite for byte-string keys (gbf::string_keys).
//
//   gbf_bench_strings --benchmark_format=json --benchmark_out=strings.json
//
// Rows are <op>/<distribution>/<backend>:
//   distributions  url      ~60 B (40..90), URL-like ASCII
//                  id       ~12 B (8..16), short identifiers
//                  longtail 99% 8..64 B, 0.9% 256 B..4 KiB, 0.1% 16..64 KiB, plus
//                           two 1 MiB strings per batch
//   ops            add (into an empty filter each iteration), contains (keys
//                  never added: every hit is a false positive, the `fpr` counter),
//                  hash (xxh64 of every key only: the CPU hashing bound)
//   backends       cpu (all threads), cpu1 (one thread), gpu_host (keys in host
//                  memory, through the pinned pipeline), gpu_device (keys in
//                  device memory), bound_d2d (GPU: a device-to-device copy of the
//                  batch's bytes, the streaming bound the string kernels are held
//                  against; the copy reads and writes each byte, so its rates are
//                  those of reading the batch at the copy's total bytes/s),
//                  bound_h2d (GPU: a pinned host-to-device copy, the bound of
//                  gpu_host).
// Counters: keys/s (items_per_second) and bytes/s (bytes_per_second, key bytes
// only). GPU rows appear only when a GPU is present.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#if defined(GBF_HAS_CUDA)
#include "bench/cuda_memory.hpp"
#endif

namespace {

constexpr std::size_t batch_keys = std::size_t{1} << 20;
constexpr std::uint64_t filter_bytes = std::uint64_t{16} << 20;

enum class distribution { url, id, longtail };
const char* name_of(distribution d) {
  return d == distribution::url ? "url" : d == distribution::id ? "id" : "longtail";
}

struct string_batch {
  std::vector<char> data;
  std::vector<std::int64_t> offsets{0};
  gbf::string_keys<std::int64_t> keys() const {
    gbf::string_keys<std::int64_t> k;
    k.data = data.data();
    k.data_bytes = data.size();
    k.offsets = offsets.data();
    k.count = offsets.size() - 1;
    return k;
  }
};

void push_random(string_batch& b, std::mt19937_64& rng, std::size_t len, const char* alphabet,
                 std::size_t alphabet_size) {
  for (std::size_t i = 0; i < len; ++i) b.data.push_back(alphabet[rng() % alphabet_size]);
  b.offsets.push_back(static_cast<std::int64_t>(b.data.size()));
}

string_batch make_batch(distribution d, std::uint64_t seed) {
  static const char url_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-._~/?=&";
  static const char id_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::mt19937_64 rng(seed);
  string_batch b;
  b.offsets.reserve(batch_keys + 1);
  for (std::size_t i = 0; i < batch_keys; ++i) {
    if (d == distribution::url) {
      static const char* const hosts[] = {"https://www.example.com/", "https://cdn.site.org/",
                                          "http://news.example.net/a/"};
      const std::string host = hosts[rng() % 3];
      b.data.insert(b.data.end(), host.begin(), host.end());
      push_random(b, rng, 40 + rng() % 51 - host.size(), url_chars, sizeof url_chars - 1);
    } else if (d == distribution::id) {
      push_random(b, rng, 8 + rng() % 9, id_chars, sizeof id_chars - 1);
    } else {
      const std::uint64_t r = rng() % 1000;
      const std::size_t len = r < 990   ? 8 + rng() % 57
                              : r < 999 ? 256 + rng() % 3841
                                        : (16 << 10) + rng() % (48 << 10);
      push_random(b, rng, i % (batch_keys / 2) == 1 ? std::size_t{1} << 20 : len, url_chars,
                  sizeof url_chars - 1);
    }
  }
  return b;
}

// Batches are built once per (distribution, role) and reused by every row.
const string_batch& batch_of(distribution d, bool probe) {
  static std::unique_ptr<string_batch> cache[3][2];
  auto& slot = cache[static_cast<int>(d)][probe ? 1 : 0];
  const auto seed = static_cast<std::uint64_t>(d) + (probe ? 1000u : 0u);
  if (!slot) slot = std::make_unique<string_batch>(make_batch(d, seed));
  return *slot;
}

gbf::layout bench_layout() {
  gbf::layout l;
  l.num_blocks = filter_bytes / (l.words_per_block * gbf::bytes_per_word);
  return l;
}

void set_counters(benchmark::State& state, const string_batch& b) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * (b.offsets.size() - 1)));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * b.data.size()));
  state.counters["avg_key_bytes"] =
      static_cast<double>(b.data.size()) / static_cast<double>(b.offsets.size() - 1);
}

gbf::options cpu_opts(unsigned threads) {
  gbf::options o;
  o.where = gbf::backend::cpu;
  o.cpu_threads = threads;
  return o;
}

void bm_hash_cpu(benchmark::State& state, distribution d) {
  const string_batch& b = batch_of(d, false);
  std::uint64_t sink = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i + 1 < b.offsets.size(); ++i)
      sink += gbf::hash_key(b.data.data() + b.offsets[i],
                            static_cast<std::size_t>(b.offsets[i + 1] - b.offsets[i]), 0);
    benchmark::DoNotOptimize(sink);
  }
  set_counters(state, b);
}

void bm_add(benchmark::State& state, distribution d, gbf::options o) {
  const string_batch& b = batch_of(d, false);
  gbf::filter f(bench_layout(), o);
  for (auto _ : state) {
    state.PauseTiming();
    f.clear();
    state.ResumeTiming();
    f.add(b.keys());
  }
  set_counters(state, b);
  state.SetLabel(f.description());
}

void bm_contains(benchmark::State& state, distribution d, gbf::options o) {
  const string_batch& added = batch_of(d, false);
  const string_batch& b = batch_of(d, true);
  gbf::filter f(bench_layout(), o);
  f.add(added.keys());
  std::unique_ptr<bool[]> found(new bool[b.offsets.size() - 1]);
  for (auto _ : state) f.contains(b.keys(), found.get());
  set_counters(state, b);
  state.counters["fpr"] =
      static_cast<double>(f.count(b.keys())) / static_cast<double>(b.offsets.size() - 1);
  state.SetLabel(f.description());
}

#if defined(GBF_HAS_CUDA)
using gbf_bench::device_array;

struct device_copy {
  device_array<char> data;
  device_array<std::int64_t> offsets;
  gbf::string_keys<std::int64_t> keys;
  explicit device_copy(const string_batch& b) : data(b.data.size()), offsets(b.offsets.size()) {
    GBF_CUDA_TRY(cudaMemcpy(data.data(), b.data.data(), b.data.size(), cudaMemcpyHostToDevice));
    GBF_CUDA_TRY(cudaMemcpy(offsets.data(), b.offsets.data(), b.offsets.size() * 8,
                            cudaMemcpyHostToDevice));
    keys = b.keys();
    keys.data = data.data();
    keys.offsets = offsets.data();
  }
};

gbf::options gpu_opts() {
  gbf::options o;
  o.where = gbf::backend::gpu;
  return o;
}

void bm_gpu_device(benchmark::State& state, distribution d, bool add) {
  const string_batch& b = batch_of(d, !add);
  const device_copy keys(b);
  device_array<bool> found(b.offsets.size() - 1);
  gbf::filter f(bench_layout(), gpu_opts());
  if (!add) f.add(device_copy(batch_of(d, false)).keys);
  for (auto _ : state) {
    if (add) {
      f.add_async(keys.keys, nullptr);
    } else {
      f.contains_async(keys.keys, found.data(), nullptr);
    }
    GBF_CUDA_TRY(cudaDeviceSynchronize());
  }
  set_counters(state, b);
  state.SetLabel(f.description());
}

void bm_bound(benchmark::State& state, distribution d, bool from_host) {
  const string_batch& b = batch_of(d, false);
  device_array<char> dst(b.data.size());
  device_array<char> src(b.data.size());
  gbf_bench::pinned_array<char> pinned(b.data.size());
  for (auto _ : state) {
    GBF_CUDA_TRY(cudaMemcpy(dst.data(), from_host ? pinned.data() : src.data(), b.data.size(),
                            from_host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice));
  }
  set_counters(state, b);
  if (!from_host) {
    // A device-to-device copy moves 2 N bytes (a read and a write) where the kernels
    // read N: counted as one batch per copy it halved the bound they are held to.
    state.SetItemsProcessed(2 * state.items_processed());
    state.SetBytesProcessed(2 * state.bytes_processed());
  }
}
#endif

void register_all() {
  const distribution dists[] = {distribution::url, distribution::id, distribution::longtail};
  for (distribution d : dists) {
    const std::string n = name_of(d);
    benchmark::RegisterBenchmark(("hash/" + n + "/cpu1").c_str(), bm_hash_cpu, d)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    for (auto [backend, threads] : {std::pair<const char*, unsigned>{"cpu", 0u}, {"cpu1", 1u}}) {
      benchmark::RegisterBenchmark(("add/" + n + "/" + backend).c_str(), bm_add, d,
                                   cpu_opts(threads))
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("contains/" + n + "/" + backend).c_str(), bm_contains, d,
                                   cpu_opts(threads))
          ->Unit(benchmark::kMillisecond)->UseRealTime();
    }
#if defined(GBF_HAS_CUDA)
    if (gbf::query_gpu().available) {
      benchmark::RegisterBenchmark(("add/" + n + "/gpu_host").c_str(), bm_add, d, gpu_opts())
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("contains/" + n + "/gpu_host").c_str(), bm_contains, d,
                                   gpu_opts())
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("add/" + n + "/gpu_device").c_str(), bm_gpu_device, d, true)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("contains/" + n + "/gpu_device").c_str(), bm_gpu_device, d,
                                   false)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("bound/" + n + "/d2d").c_str(), bm_bound, d, false)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark(("bound/" + n + "/h2d").c_str(), bm_bound, d, true)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
    }
#endif
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("gpu", gbf::query_gpu().description);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
