// gbf_bench_gpu's gbf rows: gbf::filter on the GPU through its public API
// (docs/performance.md, "gbf"):
//   gbf/...        add / contains on device-resident keys, the async API, one
//                  call of 10^8 keys per iteration, at every size, FPR, layout
//                  and key width of the suite;
//   gbf_batch/...  a batch-size sweep (10^4 .. 10^9 keys), async and sync;
//   gbf_host/...   host keys (pageable, pinned) through the synchronous API,
//                  i.e. the pinned staging pipeline.
// Every row reports its fractions of the bounds the bound rows recorded
// earlier in the process (set_bound_counters), its measured FPR, and fails
// on a false negative. No kernels here: the host compiler builds this file.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench/bench_gpu.hpp"
#include "gbf/filter.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"

namespace gbf_bench {
namespace {

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
  device_array<Key> keys(chunk);
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
  cuda_stream s;
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
  device_array<Key> keys(n);
  device_array<bool> found(contains ? n : 0);
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
  cuda_stream s;
  cached_filter& cache = filter_for<std::uint64_t>(r.filter, s.get());
  gbf::filter& f = *cache.filter;
  const bool contains = r.what == op::contains;
  const std::size_t n = std::size_t{100'000'000};
  // Keys made on the device, then copied into the kind of host memory the row tests.
  pinned_array<std::uint64_t> pinned_keys(pinned ? n : 0);
  pinned_array<bool> pinned_found(pinned && contains ? n : 0);
  std::unique_ptr<std::uint64_t[]> pageable_keys(pinned ? nullptr : new std::uint64_t[n]);
  std::unique_ptr<bool[]> pageable_found(!pinned && contains ? new bool[n] : nullptr);
  std::uint64_t* keys = pinned ? pinned_keys.data() : pageable_keys.get();
  bool* found = pinned ? pinned_found.data() : pageable_found.get();
  {
    require_free(n * sizeof(std::uint64_t), "staging the host keys");
    device_array<std::uint64_t> staged(n);
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
  if (const double h2d = lookup(copy_key(true)); h2d > 0) {
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

}  // namespace

void register_gbf_benchmarks() {
  const l2fetch both[] = {l2fetch::keep, l2fetch::bytes32};

  // Device-resident keys. Rows of one filter are consecutive (one fill).
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

  // Batch sweep: one L2-sized and one far-beyond-L2 filter.
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

  // Host keys through the pipeline, against the pinned H2D bound.
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
}

void release_gbf_filters() { filter_cache().filter.reset(); }

}  // namespace gbf_bench
