// The peer rows of gbf_bench_gpu: NVIDIA cuCollections' cuco::bloom_filter at
// the filter sizes, key counts and batches of the gbf rows. Built only when
// GBF_CUCO_INCLUDE_DIR names a cuCollections include directory (header-only;
// it needs the CCCL that ships with the CUDA toolkit). Nothing of cuco is
// copied here: this file only calls its public API.
//
// Policies (64-bit keys, 256-bit blocks of 8 x uint32, 8 bits per key):
//   arrow    cuco::arrow_filter_policy<uint64_t>: Apache Arrow/Parquet's split
//            block filter, the same layout as gbf's default (W=8, k=8, xxh64
//            seed 0), so after the same keys both hold the same bits (checked:
//            words_differing_from_gbf). Present in cuco releases that ship
//            <cuco/bloom_filter_policies.cuh>; the policy addresses at most
//            max_filter_blocks blocks (128 MiB), so larger sizes are skipped.
//   default  cuco::bloom_filter<uint64_t>'s default policy (xxhash_64, 8 words
//            of 32 bits, pattern_bits = 8).
// Each row fills the filter with the same keys as the gbf row of its size at
// fpp 1%, then times add_async / contains_async on device-resident keys with
// CUDA events, and reports its bound fractions and gbf_speedup = gbf keys/s
// (same op, size, default L2 fetch granularity) / cuco keys/s.
#include <cuco/bloom_filter.cuh>

#include <cuda/stream_ref>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "bench/bench_gpu.hpp"
#include "gbf/filter.hpp"
#include "gbf/sizing.hpp"

#if __has_include(<cuco/bloom_filter_policies.cuh>)
#define GBF_BENCH_CUCO_HAS_ARROW 1
#endif

namespace gbf_bench {
namespace {

using key_type = std::uint64_t;

using cuco_default = cuco::bloom_filter<key_type>;
#if defined(GBF_BENCH_CUCO_HAS_ARROW)
using arrow_policy = cuco::arrow_filter_policy<key_type>;
using cuco_arrow = cuco::bloom_filter<key_type, cuco::extent<std::size_t>, cuda::thread_scope_device,
                                      arrow_policy>;
#endif

constexpr double peer_fpp = 0.01;

// The largest block count a policy addresses, when it declares one.
template <class Policy, class = void>
struct policy_block_limit {
  static constexpr std::uint64_t value = ~std::uint64_t{0};
};
template <class Policy>
struct policy_block_limit<Policy, std::void_t<decltype(Policy::max_filter_blocks)>> {
  static constexpr std::uint64_t value = Policy::max_filter_blocks;
};

template <class Filter>
void fill(Filter& f, std::uint64_t capacity, cudaStream_t s) {
  const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(capacity, 1ULL << 26));
  device_array<key_type> keys(chunk);
  for (std::uint64_t first = 0; first < capacity; first += chunk) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, capacity - first));
    generate_keys(keys.data(), n, first, 0, s);
    f.add_async(keys.data(), keys.data() + n, cuda::stream_ref{s});
  }
  GBF_CUDA_TRY(cudaStreamSynchronize(s));
}

template <class Filter, class Policy>
void run_cuco(benchmark::State& state, bool contains, std::uint64_t bytes, bool same_layout_as_gbf) {
  using word_type = typename Filter::word_type;
  constexpr std::uint64_t block_bytes = Filter::words_per_block * sizeof(word_type);
  const std::uint64_t num_blocks = bytes / block_bytes;
  if (num_blocks > policy_block_limit<Policy>::value) {
    state.SkipWithError(("this cuco policy addresses at most " +
                         std::to_string(policy_block_limit<Policy>::value) + " blocks (" +
                         std::to_string(policy_block_limit<Policy>::value * block_bytes >> 20) +
                         " MiB); a " + size_name(bytes) + " filter would not be used in full")
                            .c_str());
    return;
  }
  // gbf's W=8, k=8 layout of this size: its capacity at 1% is the key count here too.
  gbf::layout l;
  l.num_blocks = bytes / (l.words_per_block * gbf::bytes_per_word);
  const std::uint64_t capacity = capacity_for(l, peer_fpp);
  const std::size_t bytes_per_key = sizeof(key_type) + (contains ? 1 : 0);
  const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(capacity, 1ULL << 26));
  const std::size_t free = free_device_bytes();
  if (free < bytes + chunk * sizeof(key_type) + headroom_bytes) {
    state.SkipWithError(("a " + size_name(bytes) + " filter does not fit in free device memory")
                            .c_str());
    return;
  }

  cuda_stream s;
  Filter f{typename Filter::extent_type{static_cast<std::size_t>(num_blocks)}, {}, Policy{}, {},
           cuda::stream_ref{s.get()}};
  GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));
  fill(f, capacity, s.get());

  if (same_layout_as_gbf) {
    // Same keys into a gbf filter of the same layout: the bit arrays must agree.
    gbf::options opts;
    opts.where = gbf::backend::gpu;
    gbf::filter g(l, opts, capacity);
    device_array<key_type> keys(chunk);
    for (std::uint64_t first = 0; first < capacity; first += chunk) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, capacity - first));
      generate_keys(keys.data(), n, first, 0, s.get());
      g.add_async(keys.data(), n, s.get());
    }
    const auto* cuco_words = reinterpret_cast<const std::uint32_t*>(f.data());
    state.counters["words_differing_from_gbf"] = static_cast<double>(
        count_differing_words(cuco_words, g.device_words(), l.num_words(), s.get()));
  }

  const std::size_t n = default_batch(bytes_per_key);
  if (n == 0) {
    state.SkipWithError("too little free device memory for a batch of 10^6 keys");
    return;
  }
  device_array<key_type> keys(n);
  device_array<bool> found(contains ? n : 0);
  if (contains) {
    generate_keys(keys.data(), n, negative_base_u64, 0, s.get());
  } else {
    generate_keys(keys.data(), n, 0, capacity, s.get());  // the filter's own keys again
  }
  GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));
  auto call = [&] {
    if (contains) {
      f.contains_async(keys.data(), keys.data() + n, found.data(), cuda::stream_ref{s.get()});
    } else {
      f.add_async(keys.data(), keys.data() + n, cuda::stream_ref{s.get()});
    }
  };
  call();  // warm-up
  GBF_CUDA_TRY(cudaStreamSynchronize(s.get()));
  gpu_timer timer;
  double seconds = 0;
  for (auto _ : state) {
    timer.start(s.get());
    call();
    const double t = timer.seconds(s.get());
    state.SetIterationTime(t);
    seconds += t;
  }
  const double keys_total = static_cast<double>(state.iterations()) * static_cast<double>(n);
  const double keys_per_s = keys_total / seconds;
  const double effective =
      static_cast<double>(bytes_per_key) + (contains ? 1.0 : 2.0) * static_cast<double>(block_bytes);
  state.SetItemsProcessed(static_cast<std::int64_t>(keys_total));
  state.SetBytesProcessed(static_cast<std::int64_t>(keys_total * effective));
  state.counters["keys_per_s"] = keys_per_s;
  state.counters["filter_bytes"] = static_cast<double>(num_blocks * block_bytes);
  state.counters["capacity"] = static_cast<double>(capacity);
  state.counters["batch_keys"] = static_cast<double>(n);
  set_bound_counters(state, !contains, sizeof(key_type), static_cast<std::uint32_t>(block_bytes),
                     bytes, l2fetch::keep, keys_per_s);
  const double gbf_rate = lookup(gbf_rate_key(contains ? "contains" : "add", "u64", 8, 8, peer_fpp,
                                              bytes, l2fetch::keep));
  if (gbf_rate > 0) state.counters["gbf_speedup"] = gbf_rate / keys_per_s;
  if (contains) {
    f.contains_async(keys.data(), keys.data() + n, found.data(), cuda::stream_ref{s.get()});
    state.counters["fpr"] =
        static_cast<double>(count_true(found.data(), n, s.get())) / static_cast<double>(n);
  }
}

template <class Filter, class Policy>
void register_policy(const char* name, bool same_layout_as_gbf) {
  for (std::uint64_t bytes : filter_sizes()) {
    for (bool contains : {true, false}) {
      const std::string row = std::string("cuco/") + (contains ? "contains" : "add") + "/" + name +
                              "/u64/" + fpp_name(peer_fpp) + "/" + size_name(bytes);
      benchmark::RegisterBenchmark(row.c_str(),
                                   [=](benchmark::State& state) {
                                     try {
                                       run_cuco<Filter, Policy>(state, contains, bytes,
                                                                same_layout_as_gbf);
                                     } catch (const std::exception& e) {
                                       state.SkipWithError(e.what());
                                     }
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

template <class Filter>
struct policy_of;
template <class K, class E, cuda::thread_scope S, class P, class A>
struct policy_of<cuco::bloom_filter<K, E, S, P, A>> {
  using type = P;
};

}  // namespace

void register_cuco_benchmarks() {
#if defined(GBF_BENCH_CUCO_HAS_ARROW)
  register_policy<cuco_arrow, arrow_policy>("arrow", true);
#else
  for (std::uint64_t bytes : filter_sizes()) {
    for (const char* op_name : {"contains", "add"}) {
      const std::string row = std::string("cuco/") + op_name + "/arrow/u64/" + fpp_name(peer_fpp) +
                              "/" + size_name(bytes);
      benchmark::RegisterBenchmark(row.c_str(), [](benchmark::State& state) {
        state.SkipWithError(
            "this cuCollections has no arrow_filter_policy (<cuco/bloom_filter_policies.cuh>); "
            "use a newer commit");
      })->UseManualTime();
    }
  }
#endif
  register_policy<cuco_default, typename policy_of<cuco_default>::type>("default", false);
}

}  // namespace gbf_bench
