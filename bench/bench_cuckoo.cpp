// The cuckoo filter beside gbf's blocked Bloom filter of the same memory, on
// the CPU, in one run (docs/cuckoo.md):
//
//   gbf_bench_cuckoo [MiB...]        default: 1 64
//   gbf_bench_cuckoo fpr             measured against predicted FPR per tag width and load
//   gbf_bench_cuckoo load            the load at which the first insert fails
//
// For each table size: a cuckoo filter of 16-bit tags filled to 80% load, and
// Bloom filters of exactly the same bytes holding the same keys (the default
// 8 words/block, 8 bits/key shape, and k = 14, near the optimum at 20 bits per
// key). Rows: insert, query of present keys, query of absent keys (the FPR),
// and the cuckoo filter's delete, in keys/s on one thread (the cuckoo filter's
// inserts and deletes run on one thread; queries are given one thread on both
// so that the rows compare per core). Each rate is the median of 3 runs.
//
// In a build with CUDA and a GPU present, each size also gets GPU rows: the
// same filters on the GPU, keys in device memory, synchronous calls (the
// issue's targets compare these: cuckoo query >= 1.0x and insert >= 0.7x the
// Bloom filter of the same memory). GPU rows were compiled but never run by
// the session that wrote them (no GPU).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gbf/cuckoo_filter.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/filter.hpp"
#if defined(GBF_HAS_CUDA)
#include <cuda_runtime.h>

#include "bench/cuda_memory.hpp"
#endif

namespace {

constexpr int repeats = 3;
constexpr std::size_t absent_probes = 4'000'000;

std::vector<std::uint64_t> make_keys(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = gbf::detail::splitmix64(first + i);
  return keys;
}

/// Median seconds of `repeats` runs of `run`, each after `prepare` (not timed).
double median_seconds(const std::function<void()>& prepare, const std::function<void()>& run) {
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    prepare();
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[repeats / 2];
}

gbf::options one_thread() {
  gbf::options o;
  o.where = gbf::backend::cpu;
  o.cpu_threads = 1;
  return o;
}

void row(const char* filter, const std::string& shape, std::uint64_t bytes, std::size_t n,
         double insert_s, double hit_s, double miss_s, double fpr, double delete_s) {
  const auto rate = [&](double s, std::size_t keys) { return s > 0 ? keys / s / 1e6 : 0.0; };
  std::printf("| %-7s | %-22s | %8.1f | %6.2f | %8.2f | %8.2f | %8.2f | %8s | %.4f%% |\n", filter,
              shape.c_str(), static_cast<double>(bytes) / (1 << 20),
              8.0 * static_cast<double>(bytes) / static_cast<double>(n), rate(insert_s, n),
              rate(hit_s, n), rate(miss_s, absent_probes),
              delete_s > 0 ? std::to_string(rate(delete_s, n)).substr(0, 5).c_str() : "-",
              100 * fpr);
  std::fflush(stdout);
}

void run_size(std::uint64_t mib) {
  const std::uint64_t bytes = mib << 20;
  gbf::cuckoo_layout cl;
  cl.tag_bits = 16;
  cl.num_buckets = bytes / gbf::cuckoo_bucket_bytes;
  const std::size_t n = cl.num_slots() * 8 / 10;
  const auto keys = make_keys(0, n);
  const auto absent = make_keys(std::uint64_t{1} << 40, absent_probes);
  auto found = std::make_unique<bool[]>(std::max(n, absent_probes));

  {
    std::unique_ptr<gbf::cuckoo_filter> f;
    const auto fresh = [&] { f = std::make_unique<gbf::cuckoo_filter>(cl, one_thread()); };
    const double insert_s = median_seconds(fresh, [&] { f->add(keys.data(), keys.size()); });
    const double hit_s = median_seconds([] {}, [&] { f->contains(keys.data(), n, found.get()); });
    if (!std::all_of(found.get(), found.get() + n, [](bool b) { return b; })) {
      std::fprintf(stderr, "bench_cuckoo: a false negative in the cuckoo filter\n");
      std::exit(1);
    }
    const double miss_s =
        median_seconds([] {}, [&] { f->contains(absent.data(), absent_probes, found.get()); });
    const double fpr = static_cast<double>(f->count(absent.data(), absent_probes)) / absent_probes;
    // Deletes: each run refills a fresh table first (not timed), then removes every key.
    const double delete_s = median_seconds(
        [&] {
          fresh();
          f->add(keys.data(), keys.size());
        },
        [&] { f->remove(keys.data(), keys.size()); });
    row("cuckoo", "16-bit tags, 80% load", cl.size_bytes(), n, insert_s, hit_s, miss_s, fpr,
        delete_s);
  }
  for (const std::uint32_t k : {8u, 14u}) {
    gbf::layout bl;
    bl.words_per_block = 8;
    bl.bits_per_key = k;
    bl.num_blocks = bytes / (bl.words_per_block * gbf::bytes_per_word);
    std::unique_ptr<gbf::filter> f;
    const auto fresh = [&] { f = std::make_unique<gbf::filter>(bl, one_thread()); };
    const double insert_s = median_seconds(fresh, [&] { f->add(keys.data(), keys.size()); });
    const double hit_s = median_seconds([] {}, [&] { f->contains(keys.data(), n, found.get()); });
    const double miss_s =
        median_seconds([] {}, [&] { f->contains(absent.data(), absent_probes, found.get()); });
    const double fpr = static_cast<double>(f->count(absent.data(), absent_probes)) / absent_probes;
    row("bloom", "8 words/block, k = " + std::to_string(k), bl.size_bytes(), n, insert_s, hit_s,
        miss_s, fpr, 0);
  }
}

/// Tables of 2^16 buckets per tag width filled to 50%, 80% and 95% load:
/// measured FPR of absent keys beside cuckoo_expected_fpr.
void run_fpr() {
  std::printf("| tag bits | load | keys | probes | measured FPR | predicted FPR | 95%% interval |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::uint32_t f : {8u, 16u, 32u}) {
    for (const double load : {0.5, 0.8, 0.95}) {
      gbf::cuckoo_layout l;
      l.tag_bits = f;
      l.num_buckets = 1 << 16;
      l.seed = 1;
      gbf::cuckoo_filter c(l, one_thread());
      const auto n = static_cast<std::size_t>(load * static_cast<double>(l.num_slots()));
      const auto keys = make_keys(0, n);
      c.add(keys.data(), keys.size());
      const std::size_t probes = f == 32 ? 100'000'000 : 20'000'000;
      std::uint64_t hits = 0;
      for (std::size_t first = 0; first < probes; first += absent_probes) {
        const auto absent = make_keys((std::uint64_t{1} << 40) + first, absent_probes);
        hits += c.count(absent.data(), absent.size());
      }
      const double measured = static_cast<double>(hits) / static_cast<double>(probes);
      const double predicted = gbf::cuckoo_expected_fpr(l, n);
      const double sigma = std::sqrt(measured * (1 - measured) / static_cast<double>(probes));
      std::printf("| %u | %.0f%% | %zu | %zu | %.4g%% (%llu hits) | %.4g%% | +-%.2g%% |\n", f,
                  100 * load, n, probes, 100 * measured, static_cast<unsigned long long>(hits),
                  100 * predicted, 100 * 1.96 * sigma);
      std::fflush(stdout);
    }
  }
}

/// Per tag width and table size, keys inserted one after another (the CPU's
/// order) with the default max_kicks: the load at the first refused insert,
/// lowest and highest over 5 seeds, beside the advertised cuckoo_max_load.
void run_load() {
  std::printf("| tag bits | buckets | first failure at load (min .. max of 5 seeds) | advertised |\n");
  std::printf("|---|---|---|---|\n");
  for (const std::uint32_t f : {8u, 16u, 32u}) {
    for (const std::uint64_t buckets : {std::uint64_t{1} << 10, std::uint64_t{1} << 14,
                                        std::uint64_t{1} << 18, std::uint64_t{1} << 20}) {
      double lowest = 1, highest = 0;
      for (std::uint64_t seed = 0; seed < 5; ++seed) {
        gbf::cuckoo_layout l;
        l.tag_bits = f;
        l.num_buckets = buckets;
        l.seed = seed;
        gbf::cuckoo_filter c(l, one_thread());
        const auto keys = make_keys(seed << 40, l.num_slots());
        std::vector<gbf::cuckoo_status> status(keys.size());
        c.add(keys.data(), keys.size(), status.data());
        const auto first = std::find(status.begin(), status.end(), gbf::cuckoo_status::failed);
        const double load = static_cast<double>(first - status.begin()) / static_cast<double>(l.num_slots());
        lowest = std::min(lowest, load);
        highest = std::max(highest, load);
      }
      std::printf("| %u | 2^%d | %.4f .. %.4f | %.2f |\n", f, __builtin_ctzll(buckets), lowest,
                  highest, gbf::cuckoo_max_load(f));
      std::fflush(stdout);
    }
  }
}

#if defined(GBF_HAS_CUDA)
gbf::options on_gpu() {
  gbf::options o;
  o.where = gbf::backend::gpu;
  return o;
}

/// The GPU rows of one size: device keys, synchronous calls, median of 3 runs.
void run_size_gpu(std::uint64_t mib) {
  const std::uint64_t bytes = mib << 20;
  gbf::cuckoo_layout cl;
  cl.tag_bits = 16;
  cl.num_buckets = bytes / gbf::cuckoo_bucket_bytes;
  const std::size_t n = cl.num_slots() * 8 / 10;
  const auto host_keys = make_keys(0, n);
  const auto host_absent = make_keys(std::uint64_t{1} << 40, absent_probes);
  const auto keys = gbf::detail::to_device(host_keys.data(), n);
  const auto absent = gbf::detail::to_device(host_absent.data(), absent_probes);
  gbf_bench::device_array<bool> found(std::max<std::size_t>(cl.num_slots(), absent_probes));  // every row's keys
  {
    std::unique_ptr<gbf::cuckoo_filter> f;
    const auto fresh = [&] { f = std::make_unique<gbf::cuckoo_filter>(cl, on_gpu()); };
    const double insert_s = median_seconds(fresh, [&] { f->add(keys.data(), n); });
    const double hit_s = median_seconds([] {}, [&] { f->contains(keys.data(), n, found.data()); });
    if (f->count(keys.data(), n) != n) {
      std::fprintf(stderr, "bench_cuckoo: a false negative in the GPU cuckoo filter\n");
      std::exit(1);
    }
    const double miss_s =
        median_seconds([] {}, [&] { f->contains(absent.data(), absent_probes, found.data()); });
    const double fpr = static_cast<double>(f->count(absent.data(), absent_probes)) / absent_probes;
    const double delete_s = median_seconds(
        [&] {
          fresh();
          f->add(keys.data(), n);
        },
        [&] { f->remove(keys.data(), n); });
    row("cuckoo", "gpu, 16-bit, 80% load", cl.size_bytes(), n, insert_s, hit_s, miss_s, fpr,
        delete_s);
  }
  // Deterministic placement: the keys that fit neither bucket after the sorted
  // rounds are placed by one thread, one after another, and their share grows
  // with the load (an emulation put it at 0.7% of a piece at 80%, 4% at 95%):
  // these rows show what that tail costs, in one piece and in many.
  for (const double load : {0.8, 0.95}) {
    const std::size_t fill = static_cast<std::size_t>(static_cast<double>(cl.num_slots()) * load);
    const auto fill_keys = make_keys(0, fill);
    const auto device_fill = gbf::detail::to_device(fill_keys.data(), fill);
    gbf::cuckoo_add_options how;
    how.placement = gbf::cuckoo_placement::deterministic;
    std::unique_ptr<gbf::cuckoo_filter> f;
    gbf::cuckoo_add_report report;
    const auto fresh = [&] { f = std::make_unique<gbf::cuckoo_filter>(cl, on_gpu()); };
    const double insert_s = median_seconds(fresh, [&] {
      report = f->add(device_fill.data(), fill, static_cast<gbf::cuckoo_status*>(nullptr), how);
    });
    if (f->count(device_fill.data(), fill) < report.inserted) {
      std::fprintf(stderr, "bench_cuckoo: a false negative after a deterministic GPU add\n");
      std::exit(1);
    }
    const double hit_s = median_seconds([] {}, [&] { f->contains(device_fill.data(), fill, found.data()); });
    const double miss_s =
        median_seconds([] {}, [&] { f->contains(absent.data(), absent_probes, found.data()); });
    const double fpr = static_cast<double>(f->count(absent.data(), absent_probes)) / absent_probes;
    row("cuckoo", std::string("gpu, 16-bit, ") + (load > 0.9 ? "95" : "80") + "% load, deterministic (" +
                      std::to_string(report.failed) + " failed)",
        cl.size_bytes(), fill, insert_s, hit_s, miss_s, fpr, 0);
  }
  for (const std::uint32_t k : {8u, 14u}) {
    gbf::layout bl;
    bl.words_per_block = 8;
    bl.bits_per_key = k;
    bl.num_blocks = bytes / (bl.words_per_block * gbf::bytes_per_word);
    std::unique_ptr<gbf::filter> f;
    const auto fresh = [&] { f = std::make_unique<gbf::filter>(bl, on_gpu()); };
    const double insert_s = median_seconds(fresh, [&] { f->add(keys.data(), n); });
    const double hit_s = median_seconds([] {}, [&] { f->contains(keys.data(), n, found.data()); });
    const double miss_s =
        median_seconds([] {}, [&] { f->contains(absent.data(), absent_probes, found.data()); });
    const double fpr = static_cast<double>(f->count(absent.data(), absent_probes)) / absent_probes;
    row("bloom", "gpu, 8 words/block, k = " + std::to_string(k), bl.size_bytes(), n, insert_s,
        hit_s, miss_s, fpr, 0);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "load") {
    run_load();
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "fpr") {
    run_fpr();
    return 0;
  }
  std::vector<std::uint64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(argv[i], &end, 10);
    if (end == argv[i] || *end != '\0' || mib == 0 || mib > 4096) {
      std::fprintf(stderr, "bench_cuckoo: '%s' is not a table size in MiB (1 to 4096)\n", argv[i]);
      return 2;
    }
    sizes.push_back(mib);
  }
  if (sizes.empty()) sizes = {1, 64};
  std::printf("one CPU thread; rates in M keys/s, median of %d runs; %zu absent probes\n\n", repeats,
              absent_probes);
  std::printf("| filter  | shape                  | MiB      | bits/key | insert   | query hit | query miss | delete   | FPR |\n");
  std::printf("|---------|------------------------|----------|--------|----------|----------|----------|----------|-----|\n");
  for (const std::uint64_t mib : sizes) run_size(mib);
#if defined(GBF_HAS_CUDA)
  if (gbf::query_gpu().available)
    for (const std::uint64_t mib : sizes) run_size_gpu(mib);
#endif
  return 0;
}
