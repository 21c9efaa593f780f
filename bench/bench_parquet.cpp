// Row-group pruning (gbf::parquet::pruner, docs/parquet.md): a batch of keys
// against the Bloom filters of many row groups.
//
// The data set: `groups` row groups of an INT64 column, each with 10^4
// distinct values and the filter a Parquet writer would size for them at
// fpp 1% (a power of two: 16 KiB), so the filters total 160 MiB for 10^4 row
// groups, well past the caches. Half the keys are values of some row group,
// half random (absent). Rows:
//
//   per_key:1  every (key, row group) pair is probed once and each key's row
//              groups are listed (the CSR result): probes_per_s is the rate of
//              block tests.
//   per_key:0  only "may some key be in row group g": a row group stops being
//              probed once a key may be in it, so pairs_per_s counts pairs
//              decided, not probes.
//
//   gbf_bench_parquet --benchmark_filter='keys:10000000/groups:10000'   # the 10^7 x 10^4 row
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gbf/io.hpp"
#include "gbf/parquet.hpp"

namespace {

namespace pq = gbf::parquet;

constexpr std::int64_t values_per_group = 10000;
constexpr double writer_fpp = 0.01;

struct dataset {
  std::unique_ptr<pq::pruner> index;
  std::vector<std::int64_t> keys;
};

/// Row group g holds the values g * 2^20 + [0, 10^4).
std::int64_t value_of(std::int64_t group, std::int64_t i) { return (group << 20) + i; }

const dataset& data_for(std::size_t n, std::size_t groups, gbf::backend where, gbf::cpu_simd simd) {
  static std::map<std::tuple<std::size_t, std::size_t, gbf::backend, gbf::cpu_simd>, dataset> cache;
  const auto key = std::make_tuple(n, groups, where, simd);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  cache.clear();  // one data set at a time: the big one takes 160 MiB of filters

  gbf::options one_thread;
  one_thread.where = gbf::backend::cpu;
  one_thread.cpu_threads = 1;
  const gbf::layout l = gbf::parquet_compatible_layout(values_per_group, writer_fpp);
  pq::column_filter_set set;
  set.file = "synthetic";
  set.column.path = "id";
  set.column.type = pq::physical_type::int64;
  std::vector<std::int64_t> values(values_per_group);
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::int64_t i = 0; i < values_per_group; ++i) values[i] = value_of(static_cast<std::int64_t>(g), i);
    gbf::filter f(l, one_thread);
    f.add(values.data(), values.size());
    set.row_groups.push_back({g, 100000, 1 << 20, std::move(f)});
  }
  std::vector<pq::column_filter_set> sets;
  sets.push_back(std::move(set));
  gbf::options opts;
  opts.where = where;
  opts.simd = simd;
  dataset d;
  d.index = std::make_unique<pq::pruner>(std::move(sets), opts);

  std::mt19937_64 rng(42);
  d.keys.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    d.keys[i] = i % 2 == 0 ? value_of(static_cast<std::int64_t>(rng() % groups),
                                      static_cast<std::int64_t>(rng() % values_per_group))
                           : static_cast<std::int64_t>(rng());
  return cache.emplace(key, std::move(d)).first->second;
}

void prune(benchmark::State& state, gbf::backend where,
           gbf::cpu_simd simd = gbf::cpu_simd::automatic) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto groups = static_cast<std::size_t>(state.range(1));
  const bool per_key = state.range(2) != 0;
  if (where == gbf::backend::gpu && !gbf::query_gpu().available) {
    state.SkipWithError("no GPU");
    return;
  }
  const dataset& d = data_for(n, groups, where, simd);
  std::uint64_t pairs = 0, kept = 0;
  for (auto _ : state) {
    const pq::prune_result r = d.index->prune(d.keys.data(), d.keys.size(), per_key);
    pairs = r.row_groups.size();
    kept = 0;
    for (std::uint8_t m : r.may_hold) kept += m;
    benchmark::DoNotOptimize(r.may_hold.data());
  }
  const double probes = static_cast<double>(n) * static_cast<double>(groups);
  state.counters[per_key ? "probes_per_s" : "pairs_per_s"] =
      benchmark::Counter(probes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["row_groups_kept"] = static_cast<double>(kept);
  if (per_key) {
    // Half the keys are in exactly one row group; the rest of the pairs are false positives.
    const double present = static_cast<double>((n + 1) / 2);
    state.counters["pairs_may_match"] = static_cast<double>(pairs);
    state.counters["fpr"] = (static_cast<double>(pairs) - present) / (probes - present);
  }
  state.SetLabel(std::string(gbf::to_string(d.index->where())) +
                 (simd == gbf::cpu_simd::scalar ? " scalar" : "") + ", filters " +
                 std::to_string(gbf::parquet_compatible_layout(values_per_group, writer_fpp).size_bytes() >> 10) +
                 " KiB each");
}

void BM_PruneCpu(benchmark::State& state) { prune(state, gbf::backend::cpu); }
/// The portable kernel, for the ratio to AVX2 (the default where the CPU has it).
void BM_PruneCpuScalar(benchmark::State& state) {
  prune(state, gbf::backend::cpu, gbf::cpu_simd::scalar);
}
void BM_PruneGpu(benchmark::State& state) { prune(state, gbf::backend::gpu); }

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"keys", "groups", "per_key"});
  // Rows of one data set are adjacent: it is built once for them.
  for (const auto& [keys, groups] : {std::pair{100000, 1000}, {1000000, 1000}, {10000000, 10000}})
    for (int per_key : {1, 0}) b->Args({keys, groups, per_key});
  b->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
}

BENCHMARK(BM_PruneCpu)->Apply(shapes);
BENCHMARK(BM_PruneCpuScalar)
    ->ArgNames({"keys", "groups", "per_key"})
    ->Args({1000000, 1000, 1})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);
BENCHMARK(BM_PruneGpu)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
