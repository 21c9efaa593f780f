// gbf's CPU backend beside the best CPU blocked Bloom filters, in one run, on
// the same keys, at the same size (so the same bits per key). docs/cpu.md
// has the results and how to fetch the peers.
//
//   gbf_bench_cpu_peers [--cases l2,1e7,1e8,llc] [--repeat N] [--sections ...]
//                       [--threads T] [--thread-counts 1,2,4,...]
//
// Peers (only those the build was given: GBF_FASTFILTER_DIR, GBF_PARQUET_DIR):
// Lemire's fastfilter_cpp SimdBlockFilter and SimdBlockFilterFixed, Arrow
// C++'s parquet::BlockSplitBloomFilter; each with the hash it ships and with
// xxh64 (gbf's hash, which Parquet compatibility requires). Peers run on one
// thread, as they ship; gbf runs on 1 thread and on all.
//
// Sections (all by default):
//   latency   a dependent pointer chase over a buffer of each case's size, with
//             2 MiB pages (as gbf maps big filters) and with the heap's 4 KiB
//             pages: the load-to-use latency of one miss at that size.
//   peers     per case: add (an empty filter, all n keys in one call) and
//             contains (n probes, half of them inserted keys) per engine, ns
//             per key, gbf's ratio to each peer, and the memory-level
//             parallelism reached: outstanding misses = keys/s x latency
//             (Little's law), per core.
//   scaling   gbf add and contains on batches of 1e6 and 1e7 keys with
//             T = 1 .. hardware threads (or the T of --thread-counts; 1
//             always among them), and an add made of atomic fetch_or
//             over key ranges (the alternative design), each against T x one
//             thread's keys/s; and their bound, the same number of random
//             64-byte line read-OR-writes in the filter's memory on T threads
//             (prefetched 128 ahead, no hashing), timed after each add, and
//             the add's scaling over the bound's in the same repeats.
//   overhead  the time of one call on a small batch (1 .. 9,999 keys).
//
// Cases: "l2" a filter of half the L2 (per core) rounded down to a power of
// two; "1e7" / "1e8" the power-of-two size that gives those keys at least 10
// bits each; "llc" the power of two at least 4x the last-level cache (merged
// with 1e8 when the sizes are equal). Power-of-two sizes because Arrow and
// SimdBlockFilter accept only those; every engine of a case gets the same size.
//
// Noise: every timed cell is run --repeat times (default 3), engines in a
// rotated order each round, and printed as the median with the spread
// (max - min) / median, and in the scaling table also as the best repeat;
// the load average is printed before and after.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cpu_peers.hpp"
#include "cli/cpu_caches.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "host/cpu/key_loop.hpp"

#if !defined(GBF_BENCH_HAS_FASTFILTER)
namespace gbf_bench {
std::vector<peer_row> fastfilter_rows() { return {}; }
std::string fastfilter_source() { return "fastfilter_cpp: not built (GBF_FASTFILTER_DIR unset)"; }
}  // namespace gbf_bench
#endif
#if !defined(GBF_BENCH_HAS_ARROW)
namespace gbf_bench {
std::vector<peer_row> arrow_rows() { return {}; }
std::string arrow_source() { return "Arrow: not built (GBF_PARQUET_DIR unset)"; }
}  // namespace gbf_bench
#endif

namespace {

using clock_type = std::chrono::steady_clock;
using gbf::detail::splitmix64;

template <class F>
double seconds_of(F&& f) {
  const auto start = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/// CPU seconds of every thread of this process (what the threads worked, not
/// what the shared machine's scheduler gave them).
double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Wall seconds of f(); adds its process CPU seconds to *cpu. The CPU clock is
/// read while gbf's pool workers sleep: a thread's CPU time is brought up to
/// date when it stops running (else at a scheduler tick, ms apart), and a
/// worker spins up to 20 us after a call before it sleeps (host/cpu/
/// thread_pool.cpp), which the CPU seconds then include.
template <class F>
double timed(F&& f, std::vector<double>& cpu) {
  const auto workers_asleep = [] { std::this_thread::sleep_for(std::chrono::microseconds(500)); };
  workers_asleep();
  const double cpu_start = process_cpu_seconds();
  const double wall = seconds_of(std::forward<F>(f));
  workers_asleep();
  cpu.push_back(process_cpu_seconds() - cpu_start);
  return wall;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median and (max - min) / median of repeated measurements.
struct summary {
  double median = 0;
  double spread = 0;
  double best = 0;  // the fastest repeat
};
summary summarize(const std::vector<double>& v) {
  summary s;
  if (v.empty()) return s;
  s.median = median(v);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.spread = s.median > 0 ? (*hi - *lo) / s.median : 0;
  s.best = *lo;
  return s;
}

std::string read_file_line(const char* path, const char* prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (prefix == nullptr || line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::string cpu_model() {
  std::string line = read_file_line("/proc/cpuinfo", "model name");
  const auto colon = line.find(':');
  return colon == std::string::npos ? "unknown CPU" : line.substr(colon + 2);
}

std::string load_average() { return read_file_line("/proc/loadavg", nullptr); }

std::string bytes_text(std::uint64_t b) {
  char buf[64];
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " GiB", b >> 30);
  else if (b >= (1ULL << 20) && b % (1ULL << 20) == 0)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " MiB", b >> 20);
  else
    std::snprintf(buf, sizeof buf, "%" PRIu64 " KiB", b >> 10);
  return buf;
}

std::uint64_t pow2_at_least(std::uint64_t v) {
  std::uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
std::uint64_t pow2_at_most(std::uint64_t v) {
  std::uint64_t p = 1;
  while (p * 2 <= v) p <<= 1;
  return p;
}

// ---------------------------------------------------------------------------
// Cases and keys
// ---------------------------------------------------------------------------

struct bench_case {
  std::string name;
  std::uint64_t keys = 0;   // inserted by add, probed by contains
  std::uint64_t bytes = 0;  // filter size, a power of two
  std::string where;        // "in L2", "in LLC", "beyond LLC (4.0x)"
};

std::string where_of(std::uint64_t bytes, const gbf::cli::cpu_caches& c) {
  if (c.l2_bytes != 0 && bytes <= c.l2_bytes) return "in L2";
  if (c.llc_bytes != 0 && bytes <= c.llc_bytes) return "in LLC";
  if (c.llc_bytes == 0) return "caches unknown";
  char buf[64];
  std::snprintf(buf, sizeof buf, "beyond LLC (%.1fx)", static_cast<double>(bytes) / c.llc_bytes);
  return buf;
}

std::vector<bench_case> make_cases(const std::vector<std::string>& names,
                                   const gbf::cli::cpu_caches& caches) {
  std::vector<bench_case> cases;
  const auto add_case = [&](std::string name, std::uint64_t bytes, std::uint64_t keys) {
    for (bench_case& c : cases)
      if (c.bytes == bytes) {  // same size: one case, both names
        c.name += " = " + name;
        return;
      }
    cases.push_back({std::move(name), keys, bytes, where_of(bytes, caches)});
  };
  for (const std::string& n : names) {
    if (n == "l2") {
      const std::uint64_t bytes = pow2_at_most(std::max<std::uint64_t>(caches.l2_bytes / 2, 64 << 10));
      add_case("half L2", bytes, bytes * 8 / 10);
    } else if (n == "1e7" || n == "1e8") {
      const std::uint64_t keys = n == "1e7" ? 10'000'000 : 100'000'000;
      add_case(n + " keys", pow2_at_least(keys * 10 / 8), keys);
    } else if (n == "llc") {
      const std::uint64_t bytes = pow2_at_least(4 * std::max<std::uint64_t>(caches.llc_bytes, 1 << 20));
      // Filled to its design load (10 bits of filter per key) a filter 4x a
      // 480 MiB L3 takes 1.7 x 10^9 keys, 17 bytes each here (inserted,
      // probes, answers): 29 GB, which the OOM killer ended, and minutes per
      // engine. At most 2^27 keys (2.2 GB), fewer where memory is short: beyond
      // the LLC every block access is a DRAM miss at any fill; only the FPR is lower.
      const std::uint64_t design_keys = bytes * 8 / 10;
      const std::uint64_t available = gbf::cli::host_available_bytes();
      const std::uint64_t fit_keys = available == 0 ? design_keys : available / 2 / 17;
      const std::uint64_t keys =
          std::max<std::uint64_t>(std::min({design_keys, fit_keys, std::uint64_t{1} << 27}), 1'000'000);
      add_case(keys == design_keys ? std::string(">= 4x LLC")
                                   : ">= 4x LLC, " + std::to_string(keys / 1'000'000) + " M keys (design load " +
                                         std::to_string(design_keys / 1'000'000) + " M)",
               bytes, keys);
    } else {
      std::fprintf(stderr, "unknown case '%s' (l2, 1e7, 1e8, llc)\n", n.c_str());
      std::exit(2);
    }
  }
  std::sort(cases.begin(), cases.end(),
            [](const bench_case& a, const bench_case& b) { return a.bytes < b.bytes; });
  return cases;
}

/// Inserted keys: SplitMix64 of [0, n). Probes: each a random inserted key or a
/// never-inserted one (counters from 2^62), half and half.
struct key_sets {
  std::vector<std::uint64_t> inserted;
  std::vector<std::uint64_t> probes;
  std::vector<std::uint8_t> probe_present;
  std::uint64_t present = 0;
};

key_sets make_keys(std::uint64_t n) {
  key_sets k;
  k.inserted.resize(n);
  k.probes.resize(n);
  k.probe_present.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) k.inserted[i] = splitmix64(i);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t r = splitmix64((1ULL << 61) + i);
    const bool present = (r >> 63) != 0;
    k.probe_present[i] = present;
    k.probes[i] = present ? k.inserted[(r & 0x7fffffffffffffffULL) % n] : splitmix64((1ULL << 62) + i);
    k.present += present;
  }
  return k;
}

/// `bytes` of zeroed memory on 2 MiB pages where the kernel grants them (words
/// is null when the mapping fails).
struct huge_buffer {
  void* memory = nullptr;
  std::uint64_t mapped = 0;
  std::uint64_t* words = nullptr;
  explicit huge_buffer(std::uint64_t bytes) : mapped(bytes + (2ULL << 20)) {
    memory = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      memory = nullptr;
      return;
    }
    const auto start = (reinterpret_cast<std::uintptr_t>(memory) + (2ULL << 20) - 1) & ~((2ULL << 20) - 1);
#if defined(MADV_HUGEPAGE)
    ::madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);
#endif
    std::memset(reinterpret_cast<void*>(start), 0, bytes);
    words = reinterpret_cast<std::uint64_t*>(start);
  }
  ~huge_buffer() {
    if (memory != nullptr) ::munmap(memory, mapped);
  }
  huge_buffer(const huge_buffer&) = delete;
  huge_buffer& operator=(const huge_buffer&) = delete;
};

// ---------------------------------------------------------------------------
// Latency: a dependent pointer chase (one miss at a time)
// ---------------------------------------------------------------------------

/// 64-byte lines in a random single cycle (Sattolo); returns ns per step.
double chase_ns(std::uint64_t bytes, bool huge_pages) {
  const std::uint64_t lines = bytes / 64;
  // 2 MiB pages as gbf maps big filters, or the heap's pages as the peers get.
  std::optional<huge_buffer> huge;
  std::vector<std::uint64_t> heap;
  if (huge_pages) huge.emplace(bytes); else heap.resize(lines * 8);
  std::uint64_t* const base = huge_pages ? huge->words : heap.data();
  if (base == nullptr) return 0;
  std::vector<std::uint64_t> order(lines);
  std::iota(order.begin(), order.end(), 0);
  for (std::uint64_t i = lines - 1; i > 0; --i) std::swap(order[i], order[splitmix64(i) % i]);
  for (std::uint64_t i = 0; i < lines; ++i) base[order[i] * 8] = order[(i + 1) % lines] * 8;
  std::uint64_t p = 0;
  const std::uint64_t steps = std::min<std::uint64_t>(lines * 4, 1 << 22);
  for (std::uint64_t s = 0; s < lines; ++s) p = base[p];  // warm the TLB and caches
  const double t = seconds_of([&] {
    for (std::uint64_t s = 0; s < steps; ++s) p = base[p];
  });
  volatile std::uint64_t sink = p;
  (void)sink;
  return t * 1e9 / static_cast<double>(steps);
}

// ---------------------------------------------------------------------------
// gbf as an engine
// ---------------------------------------------------------------------------

gbf::layout layout_of(std::uint64_t bytes) {
  gbf::layout l;
  l.num_blocks = bytes / 32;
  return l;
}

class gbf_engine final : public gbf_bench::peer_filter {
 public:
  gbf_engine(std::uint64_t num_blocks, unsigned threads, bool huge_pages,
             gbf::cpu_simd simd = gbf::cpu_simd::automatic)
      : f_(make(num_blocks, threads, huge_pages, simd)) {}
  void add(const std::uint64_t* keys, std::size_t n) override { f_.add(keys, n); }
  void contains(const std::uint64_t* keys, std::size_t n, bool* found) const override {
    f_.contains(keys, n, found);
  }
  std::vector<std::uint32_t> words() const override { return f_.words(); }
  gbf::filter& filter() { return f_; }

 private:
  static gbf::filter make(std::uint64_t num_blocks, unsigned threads, bool huge_pages,
                          gbf::cpu_simd simd) {
    gbf::options o;
    o.where = gbf::backend::cpu;
    o.simd = simd;
    o.cpu_threads = threads;
    o.cpu_huge_pages = huge_pages;
    gbf::layout l;
    l.num_blocks = num_blocks;
    return gbf::filter(l, o);
  }
  gbf::filter f_;
};

// ---------------------------------------------------------------------------
// The alternative threaded add: each thread takes a key range and ORs its
// masks in with atomic fetch_or (64 bits at a time, only where a bit is
// missing), over the same prefetching key loop as gbf's kernels.
// ---------------------------------------------------------------------------

class atomic_add_filter {
 public:
  /// On 2 MiB pages, as gbf maps its filters: on the heap's 4 KiB pages the
  /// comparison carried a TLB handicap (~1.25x beyond the caches) besides the atomics.
  explicit atomic_add_filter(std::uint64_t num_blocks)
      : num_blocks_(num_blocks), memory_(num_blocks * 32), words_(memory_.words) {
    if (words_ == nullptr) throw std::bad_alloc();
  }
  void clear() { std::memset(words_, 0, num_blocks_ * 32); }

  void add(const std::uint64_t* keys, std::size_t n, unsigned threads) {
    std::vector<std::thread> workers;
    const auto run = [&](std::size_t begin, std::size_t end) {
      using namespace gbf::detail::cpu;
      key_range<key_hashes<std::uint64_t>> range{{keys, 0}, begin, end, num_blocks_, nullptr, 0};
      std::uint64_t* const words = words_;
      for_each_key(range, [words](std::uint64_t b) { return words + b * 4; },
                   [](std::size_t, std::uint64_t h, std::uint64_t* block) {
                     std::uint32_t m[8];
                     gbf::block_masks<8>(h, 8, m);
                     for (int w = 0; w < 4; ++w) {
                       const std::uint64_t mask = m[2 * w] | (std::uint64_t{m[2 * w + 1]} << 32);
                       if ((__atomic_load_n(block + w, __ATOMIC_RELAXED) & mask) != mask)
                         __atomic_fetch_or(block + w, mask, __ATOMIC_RELAXED);
                     }
                   });
    };
    for (unsigned t = 1; t < threads; ++t)
      workers.emplace_back(run, n * t / threads, n * (t + 1) / threads);
    run(0, n / threads);
    for (std::thread& w : workers) w.join();
  }

  std::vector<std::uint32_t> words() const {
    std::vector<std::uint32_t> out(num_blocks_ * 8);
    std::memcpy(out.data(), words_, num_blocks_ * 32);
    return out;
  }

 private:
  std::uint64_t num_blocks_;
  huge_buffer memory_;
  std::uint64_t* words_;
};

// ---------------------------------------------------------------------------
// The peers table
// ---------------------------------------------------------------------------

struct engine {
  std::string name;
  bool add_only = false;
  bool same_bits_as_gbf = false;
  bool is_gbf = false;
  bool huge_pages = false;  // its bit array in 2 MiB pages
  unsigned threads = 1;
  std::function<std::unique_ptr<gbf_bench::peer_filter>(std::uint64_t)> make;
  bool reference = false;  // the row the others' ratios are taken against: gbf, 1 thread, default kernel
};

struct engine_result {
  std::vector<double> add_s, contains_s;
  std::uint64_t false_negatives = 0;
  std::uint64_t false_positives = 0;
  bool has_words = false;
  std::uint64_t digest = 0;  // xxh64 of the words after round 0's add
};

bool thp_madvise_only() {
  const std::string mode = read_file_line("/sys/kernel/mm/transparent_hugepage/enabled", nullptr);
  return mode.find("[always]") == std::string::npos;
}

void run_peers(const bench_case& c, const std::vector<engine>& engines, unsigned repeat,
               double latency_huge_ns, double latency_heap_ns) {
  const std::uint64_t n = c.keys;
  const std::uint64_t blocks = c.bytes / 32;
  std::fprintf(stderr, "peers: %s, %s filter, %" PRIu64 " keys: making keys\n", c.name.c_str(),
               bytes_text(c.bytes).c_str(), n);
  const key_sets keys = make_keys(n);
  std::unique_ptr<bool[]> found(new bool[n]);
  std::vector<engine_result> results(engines.size());

  for (unsigned r = 0; r < repeat; ++r) {
    for (std::size_t e0 = 0; e0 < engines.size(); ++e0) {
      const std::size_t e = (e0 + r) % engines.size();  // rotate the order each round
      const engine& en = engines[e];
      engine_result& res = results[e];
      std::unique_ptr<gbf_bench::peer_filter> f = en.make(blocks);
      res.add_s.push_back(seconds_of([&] { f->add(keys.inserted.data(), n); }));
      if (r == 0 && (en.is_gbf || en.same_bits_as_gbf)) {
        const std::vector<std::uint32_t> w = f->words();
        res.has_words = !w.empty();
        res.digest = gbf::xxh64(w.data(), w.size() * sizeof(std::uint32_t));
      }
      if (en.add_only) continue;
      res.contains_s.push_back(seconds_of([&] { f->contains(keys.probes.data(), n, found.get()); }));
      if (r == 0) {
        for (std::uint64_t i = 0; i < n; ++i) {
          if (keys.probe_present[i] && !found[i]) ++res.false_negatives;
          if (!keys.probe_present[i] && found[i]) ++res.false_positives;
        }
      }
    }
  }

  // Per core: a gbf row on T threads divides its keys/s by T.
  const double absent = static_cast<double>(n - keys.present);
  std::printf("\n### %s: %s filter (%s), %" PRIu64 " keys, %.1f bits/key\n\n", c.name.c_str(),
              bytes_text(c.bytes).c_str(), c.where.c_str(), n,
              static_cast<double>(c.bytes) * 8 / static_cast<double>(n));
  const bool beyond = c.where.rfind("beyond", 0) == 0;
  std::printf("| engine | threads | add ns/key | contains ns/key | add: gbf 1T x | contains: gbf 1T x |%s FPR | bits |\n",
              beyond ? " misses in flight per core (add / contains) |" : "");
  std::printf("|---|---|---|---|---|---|%s---|---|\n", beyond ? "---|" : "");
  double gbf_add = 0, gbf_contains = 0;
  std::uint64_t gbf_digest = 0;
  for (std::size_t e = 0; e < engines.size(); ++e)
    if (engines[e].reference) {
      gbf_add = summarize(results[e].add_s).median;
      gbf_contains = summarize(results[e].contains_s).median;
      gbf_digest = results[e].digest;
    }
  for (std::size_t e = 0; e < engines.size(); ++e) {
    const engine& en = engines[e];
    const engine_result& res = results[e];
    const summary a = summarize(res.add_s);
    const summary q = summarize(res.contains_s);
    const double add_ns = a.median * 1e9 / static_cast<double>(n);
    const double q_ns = q.median * 1e9 / static_cast<double>(n);
    char add_cell[64], q_cell[64], add_ratio[32] = "-", q_ratio[32] = "-", mlp[64] = "", fpr[32] = "-";
    std::snprintf(add_cell, sizeof add_cell, "%.2f (±%.0f%%)", add_ns, 50 * a.spread);
    if (en.add_only)
      std::snprintf(q_cell, sizeof q_cell, "(as above)");
    else
      std::snprintf(q_cell, sizeof q_cell, "%.2f (±%.0f%%)", q_ns, 50 * q.spread);
    if (!en.reference) {
      std::snprintf(add_ratio, sizeof add_ratio, "%.2f", a.median / gbf_add);
      if (!en.add_only) std::snprintf(q_ratio, sizeof q_ratio, "%.2f", q.median / gbf_contains);
    }
    if (beyond) {
      const double lat = en.huge_pages ? latency_huge_ns : latency_heap_ns;
      const double per_core = 1.0 / en.threads;
      if (en.add_only)
        std::snprintf(mlp, sizeof mlp, " %.1f / - |", lat / add_ns * per_core);
      else
        std::snprintf(mlp, sizeof mlp, " %.1f / %.1f |", lat / add_ns * per_core, lat / q_ns * per_core);
    }
    const char* bits = !(en.is_gbf || en.same_bits_as_gbf) ? "other layout"
                       : !res.has_words                      ? "n/a"
                       : res.digest == gbf_digest            ? "= gbf"
                                                             : "DIFFER";
    if (!en.add_only)
      std::snprintf(fpr, sizeof fpr, "%.3f%%%s", 100.0 * static_cast<double>(res.false_positives) / absent,
                    res.false_negatives ? " FALSE NEGATIVES" : "");
    std::printf("| %s | %u | %s | %s | %s | %s |%s %s | %s |\n", en.name.c_str(), en.threads, add_cell,
                q_cell, add_ratio, q_ratio, mlp, fpr, bits);
  }
  std::printf("\n(gbf 1T x: the row's time over gbf's 1-thread time, so > 1 means gbf is faster; ±: half "
              "the spread (max - min) / median over %u rounds)\n",
              repeat);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Thread scaling
// ---------------------------------------------------------------------------

__extension__ typedef unsigned __int128 uint128;  // GCC and Clang; -Wpedantic-clean

/// The memory system's bound for a blocked filter's add: random 64-byte lines
/// read, ORed and written back, keys_per_run of them on `threads` threads, each
/// in its own contiguous slice of `lines` (no two threads share a line, as in
/// gbf's add) with 128 lines prefetched ahead (the longest distance of gbf's
/// key walks, its AVX-512 add's; with 40, a Zen 5 core's AVX-512 add beat this
/// "bound"), and no hashing. Returns the seconds of one run.
double random_line_or_seconds(std::uint64_t* lines, std::uint64_t num_lines,
                              std::uint64_t keys_per_run, unsigned threads, std::uint64_t seed) {
  constexpr unsigned distance = 128;
  const auto slice = [&](unsigned t) {
    const std::uint64_t first = num_lines * t / threads;
    const std::uint64_t count = num_lines * (t + 1) / threads - first;
    std::uint64_t x = splitmix64(seed + t);
    const std::uint64_t n = keys_per_run * (t + 1) / threads - keys_per_run * t / threads;
    std::uint64_t ring[distance];
    const auto next = [&] {  // xorshift64: a random line of the slice
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return (first + static_cast<std::uint64_t>((static_cast<uint128>(x) * count) >> 64)) * 8;
    };
    for (unsigned d = 0; d < distance; ++d) __builtin_prefetch(lines + (ring[d] = next()));
    for (std::uint64_t i = 0; i < n; ++i) {
      const unsigned slot = static_cast<unsigned>(i % distance);
      lines[ring[slot]] |= i;
      __builtin_prefetch(lines + (ring[slot] = next()));
    }
  };
  return seconds_of([&] {
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < threads; ++t) workers.emplace_back(slice, t);
    slice(0);
    for (std::thread& w : workers) w.join();
  });
}

/// thread_counts: the T of the rows, ascending, starting at 1 (every ratio is
/// against one thread's keys/s).
void run_scaling(const bench_case& c, const std::vector<unsigned>& thread_counts, unsigned repeat,
                 const std::vector<std::uint64_t>& batches) {
  const unsigned max_threads = thread_counts.back();
  const std::uint64_t blocks = c.bytes / 32;
  std::printf("\n### Thread scaling, %s filter (%s)\n\n", bytes_text(c.bytes).c_str(), c.where.c_str());
  std::printf("| op | batch | threads | ns/key | keys/s | vs T x 1 thread | best ns/key | best: vs T x 1 thread | CPU ns/key (all threads) | CPU vs 1 thread | cores used |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::map<unsigned, gbf::filter> filters;
  for (const unsigned t : thread_counts) {
    gbf::options o;
    o.where = gbf::backend::cpu;
    o.cpu_threads = t;
    filters.emplace(t, gbf::filter(layout_of(c.bytes), o));
  }
  const std::uint64_t max_batch = *std::max_element(batches.begin(), batches.end());
  std::vector<std::uint64_t> batch_keys(max_batch);
  for (std::uint64_t i = 0; i < max_batch; ++i) batch_keys[i] = splitmix64((1ULL << 60) + i);
  std::unique_ptr<bool[]> found(new bool[max_batch]);
  atomic_add_filter atomic(blocks);
  for (const std::uint64_t b : batches) {
    std::vector<std::vector<double>> add_s(max_threads + 1), contains_s(max_threads + 1), atomic_s(max_threads + 1);
    std::vector<std::vector<double>> add_cpu(max_threads + 1), contains_cpu(max_threads + 1),
        atomic_cpu(max_threads + 1);
    // The bound of the add rows: the same number of random line ORs in a
    // buffer of the filter's size, mapped as gbf maps it (2 MiB pages), timed
    // right after each add: what the memory system gives T threads moves
    // between runs on a shared host (on the 2-vCPU EPYC, from 0.65 to 0.95 of
    // 2x within minutes: docs/cpu.md), so the add is held against the bound
    // of the same repeat.
    const huge_buffer buffer(c.bytes);
    std::vector<std::vector<double>> bound_s(max_threads + 1), bound_cpu(max_threads + 1);
    std::vector<std::uint32_t> reference;
    bool bits_ok = true;
    for (unsigned r = 0; r < repeat; ++r) {
      for (std::size_t i = 0; i < thread_counts.size(); ++i) {
        const unsigned t = thread_counts[(i + r) % thread_counts.size()];
        gbf::filter& f = filters.at(t);
        f.clear();
        add_s[t].push_back(timed([&] { f.add(batch_keys.data(), b); }, add_cpu[t]));
        if (buffer.words != nullptr)
          bound_s[t].push_back(timed(
              [&] { random_line_or_seconds(buffer.words, c.bytes / 64, b, t, r); }, bound_cpu[t]));
        if (r == 0) {
          const std::vector<std::uint32_t> w = f.words();
          if (reference.empty()) reference = w;
          bits_ok = bits_ok && w == reference;
        }
        contains_s[t].push_back(
            timed([&] { f.contains(batch_keys.data(), b, found.get()); }, contains_cpu[t]));
        atomic.clear();
        atomic_s[t].push_back(timed([&] { atomic.add(batch_keys.data(), b, t); }, atomic_cpu[t]));
        if (r == 0) bits_ok = bits_ok && atomic.words() == reference;
      }
    }
    // Wall-clock scaling needs a free core per thread; on a shared machine the
    // CPU time says what the threads cost: "CPU vs 1 thread" = CPU seconds of
    // one thread over those of T threads together (1.00: splitting added no
    // work), and "cores used" = CPU seconds / wall seconds (what the scheduler gave).
    // The best columns use the fastest repeat: on a shared host each vCPU
    // switches between a fast and a slow speed (1.5x apart on the 2-vCPU EPYC,
    // in windows of 0.1 to 1 s: docs/cpu.md), so the median mixes both, and
    // the best of many repeats is the code on an undisturbed machine.
    const auto print = [&](const char* op, const std::vector<std::vector<double>>& s,
                           const std::vector<std::vector<double>>& cpu) {
      const summary one = summarize(s[1]);
      const double one_cpu = summarize(cpu[1]).median;
      for (const unsigned t : thread_counts) {
        const summary m = summarize(s[t]);
        const double c = summarize(cpu[t]).median;
        std::printf("| %s | %.0e | %u | %.2f (±%.0f%%) | %.1f M | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                    op, static_cast<double>(b), t, m.median * 1e9 / b, 50 * m.spread,
                    b / m.median / 1e6, one.median / (t * m.median), m.best * 1e9 / b,
                    one.best / (t * m.best), c * 1e9 / b, one_cpu / c, c / m.median);
      }
    };
    print("add", add_s, add_cpu);
    print("contains", contains_s, contains_cpu);
    print("add by atomic fetch_or", atomic_s, atomic_cpu);
    if (buffer.words != nullptr) {
      print("bound: random 64 B line OR", bound_s, bound_cpu);
      // Whether the add scales as well as the memory system did in the same
      // repeats: per repeat, (add's 1-thread time / its T-thread time) over
      // (the bound's 1-thread time / its T-thread time); median over repeats.
      // 1.00: the add's T threads gained all that the memory system gave.
      for (const unsigned t : thread_counts) {
        if (t == 1) continue;
        std::vector<double> ratio;
        for (unsigned r = 0; r < repeat; ++r)
          ratio.push_back((add_s[1][r] / add_s[t][r]) / (bound_s[1][r] / bound_s[t][r]));
        std::printf("| add scaling over the bound's, same repeats | %.0e | %u | | | %.2f | | | | | |\n",
                    static_cast<double>(b), t, summarize(ratio).median);
      }
    }
    std::printf("| bits | %.0e | all | %s | | | | | | | |\n", static_cast<double>(b),
                bits_ok ? "every T and the atomic add: same bits" : "BITS DIFFER");
  }
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Fixed cost of a call
// ---------------------------------------------------------------------------

void run_overhead(std::uint64_t bytes, unsigned all_threads) {
  std::printf("\n### Time of one call on small batches, %s filter\n\n", bytes_text(bytes).c_str());
  std::printf("| op | threads option | 1 key | 10 | 100 | 1,000 | 9,999 | ns/key at 1e5 |\n|---|---|---|---|---|---|---|---|\n");
  std::vector<std::uint64_t> keys(100'000);
  for (std::uint64_t i = 0; i < keys.size(); ++i) keys[i] = splitmix64(i);
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  for (const unsigned threads : {1u, all_threads}) {
    gbf::options o;
    o.where = gbf::backend::cpu;
    o.cpu_threads = threads;
    gbf::filter f(layout_of(bytes), o);
    for (int op = 0; op < 2; ++op) {
      const auto call = [&](std::size_t n) {
        if (op == 0)
          f.add(keys.data(), n);
        else
          f.contains(keys.data(), n, found.get());
      };
      std::printf("| %s | %u |", op == 0 ? "add" : "contains", threads);
      for (const std::size_t n : {std::size_t{1}, std::size_t{10}, std::size_t{100}, std::size_t{1000},
                                  std::size_t{9999}, std::size_t{100000}}) {
        std::vector<double> per_call;
        for (int r = 0; r < 7; ++r) {
          std::uint64_t calls = 0;
          const double t = seconds_of([&] {
            const auto start = clock_type::now();
            do {
              for (int k = 0; k < 16; ++k) call(n);
              calls += 16;
            } while (clock_type::now() - start < std::chrono::milliseconds(5));
          });
          per_call.push_back(t / static_cast<double>(calls));
        }
        const double best = *std::min_element(per_call.begin(), per_call.end());
        if (n == 100000)
          std::printf(" %.2f |", best * 1e9 / n);
        else if (best < 1e-6)
          std::printf(" %.0f ns |", best * 1e9);
        else
          std::printf(" %.2f us |", best * 1e6);
      }
      std::printf("\n");
    }
  }
  std::printf("\n(best of 7 runs of >= 5 ms of back-to-back calls)\n");
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> case_names = {"l2", "1e7", "1e8", "llc"};
  std::vector<std::string> sections = {"latency", "peers", "scaling", "overhead"};
  unsigned repeat = 3;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> thread_counts;  // --thread-counts; default 1 .. threads
  std::vector<std::uint64_t> scaling_batches = {1'000'000, 10'000'000};
  std::vector<std::string> engine_filter;  // --engines: rows whose name contains one of these
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--cases")
      case_names = split(value());
    else if (a == "--sections")
      sections = split(value());
    else if (a == "--repeat")
      repeat = static_cast<unsigned>(std::max(1, std::atoi(value().c_str())));
    else if (a == "--engines")
      engine_filter = split(value());
    else if (a == "--threads")
      threads = static_cast<unsigned>(std::max(1, std::atoi(value().c_str())));
    else if (a == "--thread-counts") {
      thread_counts.clear();
      for (const std::string& t : split(value())) {
        const int count = std::atoi(t.c_str());
        if (count < 1) {
          std::fprintf(stderr, "--thread-counts: '%s' is not a thread count (a whole number from 1)\n", t.c_str());
          return 2;
        }
        thread_counts.push_back(static_cast<unsigned>(count));
      }
    } else if (a == "--scaling-batches") {
      scaling_batches.clear();
      for (const std::string& b : split(value())) scaling_batches.push_back(static_cast<std::uint64_t>(std::stod(b)));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--cases l2,1e7,1e8,llc] [--sections latency,peers,scaling,overhead] "
                   "[--repeat N] [--threads T] [--thread-counts 1,2,4,...] [--scaling-batches 1e6,1e7] "
                   "[--engines gbf,Fixed,...]\n",
                   argv[0]);
      return 2;
    }
  }
  const auto has = [&](const char* s) { return std::find(sections.begin(), sections.end(), s) != sections.end(); };

  const gbf::cli::cpu_caches caches = gbf::cli::read_cpu_caches();
  const std::vector<bench_case> cases = make_cases(case_names, caches);
  std::printf("## gbf CPU backend against CPU peers\n\n");
  std::printf("- cpu: %s, %u hardware threads, AVX2 %s, AVX-512 %s; L2 %s per core, L%u (last level) %s\n",
              cpu_model().c_str(), std::thread::hardware_concurrency(), gbf::cpu_has_avx2() ? "yes" : "no",
              gbf::cpu_has_avx512() ? "yes" : "no",
              bytes_text(caches.l2_bytes).c_str(), caches.llc_level, bytes_text(caches.llc_bytes).c_str());
  std::printf("- transparent huge pages: %s\n",
              read_file_line("/sys/kernel/mm/transparent_hugepage/enabled", nullptr).c_str());
  std::printf("- peers: %s; %s\n", gbf_bench::fastfilter_source().c_str(), gbf_bench::arrow_source().c_str());
  std::printf("- load average at start: %s\n", load_average().c_str());
  std::fflush(stdout);

  std::map<std::uint64_t, std::pair<double, double>> latency;  // bytes -> (huge, heap)
  if (has("latency") || has("peers")) {
    std::printf("\n### Latency of one miss (dependent pointer chase)\n\n| size | where | 2 MiB pages | heap (4 KiB pages%s) |\n|---|---|---|---|\n",
                thp_madvise_only() ? "" : " or THP");
    for (const bench_case& c : cases) {
      const double huge = chase_ns(c.bytes, true);
      const double heap = chase_ns(c.bytes, false);
      latency[c.bytes] = {huge, heap};
      std::printf("| %s | %s | %.1f ns | %.1f ns |\n", bytes_text(c.bytes).c_str(), c.where.c_str(), huge, heap);
    }
    std::fflush(stdout);
  }

  if (has("peers")) {
    const bool heap_is_huge = !thp_madvise_only();
    std::vector<engine> base;
    base.push_back({"gbf", false, false, true, true, 1,
                    [](std::uint64_t b) { return std::make_unique<gbf_engine>(b, 1, true); }});
    base.back().reference = true;
    base.push_back({"gbf, 4 KiB pages", false, false, true, heap_is_huge, 1,
                    [](std::uint64_t b) { return std::make_unique<gbf_engine>(b, 1, false); }});
    if (gbf::cpu_has_avx512())  // what the AVX-512 hash adds, beside the AVX2 kernel alone
      base.push_back({"gbf, AVX2 kernel", false, false, true, true, 1, [](std::uint64_t b) {
                        return std::make_unique<gbf_engine>(b, 1, true, gbf::cpu_simd::avx2);
                      }});
    if (threads > 1)
      base.push_back({"gbf", false, false, true, true, threads,
                      [threads](std::uint64_t b) { return std::make_unique<gbf_engine>(b, threads, true); }});
    std::vector<gbf_bench::peer_row> peers = gbf_bench::fastfilter_rows();
    for (gbf_bench::peer_row& r : gbf_bench::arrow_rows()) peers.push_back(std::move(r));
    for (const bench_case& c : cases) {
      std::vector<engine> engines = base;
      for (const gbf_bench::peer_row& p : peers) {
        if (p.max_bytes != 0 && c.bytes > p.max_bytes) {
          std::printf("\n(%s skipped at %s: it takes at most %s)\n", p.name.c_str(), bytes_text(c.bytes).c_str(),
                      bytes_text(p.max_bytes).c_str());
          continue;
        }
        engines.push_back({p.name, p.add_only, p.same_bits_as_gbf, false, heap_is_huge, 1, p.make});
      }
      if (!engine_filter.empty())
        engines.erase(std::remove_if(engines.begin(), engines.end(),
                                     [&](const engine& e) {
                                       return !e.reference &&
                                              std::none_of(engine_filter.begin(), engine_filter.end(),
                                                           [&](const std::string& f) {
                                                             return e.name.find(f) != std::string::npos;
                                                           });
                                     }),
                      engines.end());
      run_peers(c, engines, repeat, latency[c.bytes].first, latency[c.bytes].second);
    }
  }

  if (thread_counts.empty())
    for (unsigned t = 1; t <= threads; ++t) thread_counts.push_back(t);
  thread_counts.push_back(1);  // every ratio is against one thread
  std::sort(thread_counts.begin(), thread_counts.end());
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  if (has("scaling"))
    for (const bench_case& c : cases) run_scaling(c, thread_counts, repeat, scaling_batches);

  if (has("overhead")) {
    const std::uint64_t small = pow2_at_most(std::max<std::uint64_t>(caches.l2_bytes / 2, 64 << 10));
    run_overhead(small, threads);
  }
  std::printf("\n- load average at end: %s\n", load_average().c_str());
  return 0;
}
