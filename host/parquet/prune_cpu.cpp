// Row-group pruning on the CPU (host/parquet/prune.hpp).
//
// Order of work. Probing n keys against G filters is n * G block tests; what
// decides the speed is where the data comes from. Key-major order (each key
// against every filter) touches a random block of every filter per key: with
// 10^4 filters of 16 KiB (160 MiB, past the caches) every test is a DRAM miss.
// Filter-major order over the whole batch re-reads all n hashes per filter.
// Tiles do both halves well: a thread hashes a tile of up to 16 Ki keys once
// (128 KiB of hashes, L2-resident) and tests every filter against the whole
// tile, so a filter's blocks come from memory once per tile and then from L1/L2
// for the tile's remaining keys, and the hashes never leave L2.
//
// Answers. may_hold flags are shared by all threads (relaxed atomics: each is
// only ever set to 1); without per_key a thread skips a row group some thread
// has already flagged and stops probing one as soon as a key hits it. With
// per_key every pair is tested; a tile's hits come out filter by filter, so a
// stable counting sort by key leaves each key's row groups ascending. Each
// thread owns a contiguous key range and keeps its counts and ids; the ranges
// are then concatenated (an exclusive scan over the counts gives the offsets).
//
// The block test is the Bloom filter's own CPU kernel (host/cpu/bloom_kernels.hpp:
// scalar, or AVX2 through an entry point compiled for it and called only after
// the run-time check).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "host/cpu/bloom_kernels.hpp"
#include "host/cpu/key_loop.hpp"
#include "host/cpu/threads.hpp"
#include "host/parquet/prune.hpp"

namespace gbf::detail::parquet {
namespace {

/// Keys a thread hashes and then tests against every filter (see the top).
constexpr std::size_t tile_keys = std::size_t{1} << 14;
/// Block tests below which one more thread costs more than it saves.
constexpr std::uint64_t min_probes_per_thread = std::uint64_t{1} << 20;

/// A (key, row group) pair that may match: the key's place among the tile's
/// valid keys, and the row group.
struct hit {
  std::uint32_t key;
  std::uint32_t group;
};

struct tile_job {
  const packed_filters* filters;
  const std::uint64_t* hashes;  ///< The tile's non-null keys' hashes.
  std::size_t count;            ///< How many.
  std::atomic<std::uint8_t>* may_hold;
  std::vector<hit>* hits;       ///< per_key: every pair that may match; null: flags only.
};

template <class Block>
void probe_tile(const tile_job& job) {
  constexpr std::size_t group = cpu::prefetch_group;
  const packed_filters& f = *job.filters;
  const std::size_t m = job.count;
  if (m == 0) return;
  for (std::size_t g = 0; g < f.count(); ++g) {
    const std::uint64_t num_blocks = f.num_blocks[g];
    const std::uint32_t* words = f.words.get() + f.word_offset[g];
    if (job.hits == nullptr && job.may_hold[g].load(std::memory_order_relaxed) != 0) continue;
    if (num_blocks == 0) {  // no filter: every key may be there
      if (job.hits != nullptr)
        for (std::size_t q = 0; q < m; ++q) job.hits->push_back({static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(g)});
      job.may_hold[g].store(1, std::memory_order_relaxed);
      continue;
    }
    bool any = false;
    if (job.hits == nullptr) {
      // Flags only: groups of keys, so that the first hit ends the filter's probe.
      for (std::size_t first = 0; first < m && !any; first += group) {
        const std::size_t last = std::min(first + group, m);
        const std::uint32_t* block[group];
        for (std::size_t q = first; q < last; ++q) {
          block[q - first] = words + block_index(job.hashes[q], num_blocks) * sbbf_words;
          __builtin_prefetch(block[q - first]);
        }
        for (std::size_t q = first; q < last; ++q)
          any |= Block::contains(block[q - first], job.hashes[q], sbbf_words);
      }
    } else {
      // Every key: the key loop's ring, each block prefetched 40 keys ahead (the
      // groups of 16 above, prefetched in a burst, kept per_key at 4-6x the time of
      // as many contains calls).
      const cpu::key_range<cpu::stored_hashes> range{{job.hashes}, 0, m, num_blocks, nullptr, 0};
      std::vector<hit>& hits = *job.hits;
      const std::size_t hits_before = hits.size();
      cpu::for_each_key(
          range, [words](std::uint64_t b) { return words + b * sbbf_words; },
          [&hits, g](std::size_t q, std::uint64_t h, const std::uint32_t* block) {
            if (Block::contains(block, h, sbbf_words))
              hits.push_back({static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(g)});
          });
      any = hits.size() > hits_before;
    }
    if (any) job.may_hold[g].store(1, std::memory_order_relaxed);
  }
}

__attribute__((flatten)) void probe_tile_scalar(const tile_job& job) {
  probe_tile<cpu::scalar_block<sbbf_words>>(job);
}
#if GBF_CPU_X86
__attribute__((flatten)) GBF_TARGET_AVX2 void probe_tile_avx2(const tile_job& job) {
  probe_tile<cpu::avx2_block<sbbf_words>>(job);
}
#endif

/// What one thread found for its key range [begin, end).
struct part_result {
  std::vector<std::uint32_t> counts;  ///< per_key: row groups of each key of the range.
  std::vector<std::uint32_t> ids;     ///< per_key: their ids, key by key.
};

template <class Hashes>
void prune_range(const packed_filters& filters, const key_batch& keys, const Hashes& hash_of,
                 std::size_t begin, std::size_t end, bool per_key, bool use_avx2,
                 std::atomic<std::uint8_t>* may_hold, part_result& out) {
  std::vector<std::uint64_t> hashes(tile_keys);
  std::vector<std::uint32_t> position(tile_keys);  // valid key q is key tile_begin + position[q]
  std::vector<hit> hits;
  std::vector<std::uint32_t> start;
  if (per_key) out.counts.assign(end - begin, 0);
  for (std::size_t tile_begin = begin; tile_begin < end; tile_begin += tile_keys) {
    const std::size_t tile_end = std::min(tile_begin + tile_keys, end);
    std::size_t m = 0;
    for (std::size_t i = tile_begin; i < tile_end; ++i) {
      if (!key_valid(keys.validity, keys.validity_bit, i)) continue;
      hashes[m] = hash_of(i);
      position[m] = static_cast<std::uint32_t>(i - tile_begin);
      ++m;
    }
    hits.clear();
    const tile_job job{&filters, hashes.data(), m, may_hold, per_key ? &hits : nullptr};
#if GBF_CPU_X86
    if (use_avx2) {
      probe_tile_avx2(job);
    } else {
      probe_tile_scalar(job);
    }
#else
    (void)use_avx2;
    probe_tile_scalar(job);
#endif
    if (!per_key) continue;
    // Stable counting sort of the tile's hits by key: each key's ids stay in
    // row-group order.
    std::uint32_t* counts = out.counts.data() + (tile_begin - begin);
    for (const hit& h : hits) ++counts[position[h.key]];
    const std::size_t tile_size = tile_end - tile_begin;
    start.assign(tile_size, 0);
    for (std::size_t i = 1; i < tile_size; ++i) start[i] = start[i - 1] + counts[i - 1];
    const std::size_t base = out.ids.size();
    out.ids.resize(base + hits.size());
    for (const hit& h : hits) out.ids[base + start[position[h.key]]++] = h.group;
  }
}

}  // namespace

void cpu_prune(const packed_filters& filters, const key_batch& keys, bool per_key,
               unsigned threads, bool use_avx2, gbf::parquet::prune_result& out) {
  const std::size_t n = keys.count;
  const std::size_t groups = filters.count();
  out.may_hold.assign(groups, 0);
  out.key_offsets.clear();
  out.row_groups.clear();
  if (per_key) out.key_offsets.assign(n + 1, 0);
  if (n == 0 || groups == 0) return;

  std::unique_ptr<std::atomic<std::uint8_t>[]> may_hold(new std::atomic<std::uint8_t>[groups]());
  const unsigned hardware = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  // Threads get at least min_probes_per_thread tests each (n * groups is not
  // formed: it could overflow).
  const std::uint64_t keys_per_thread = std::max<std::uint64_t>(1, min_probes_per_thread / groups);
  const unsigned parts = cpu::parts_for(n, keys_per_thread, hardware);
  const std::vector<std::uint64_t> bounds = cpu::key_bounds(keys, parts);
  std::vector<part_result> results(parts);

  std::exception_ptr failure;
  std::mutex failure_lock;
  cpu::with_hashes(keys, /*seed=*/0, [&](const auto& hash_of) {
    cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
      try {
        prune_range(filters, keys, hash_of, begin, end, per_key, use_avx2, may_hold.get(),
                    results[part]);
      } catch (...) {  // e.g. bad_alloc growing the hits: rethrown on the caller's thread
        const std::lock_guard<std::mutex> lock(failure_lock);
        if (!failure) failure = std::current_exception();
      }
    });
  });
  if (failure) std::rethrow_exception(failure);

  for (std::size_t g = 0; g < groups; ++g) out.may_hold[g] = may_hold[g].load(std::memory_order_relaxed);
  if (!per_key) return;
  std::uint64_t total = 0;
  for (unsigned part = 0; part < parts; ++part) {
    const std::vector<std::uint32_t>& counts = results[part].counts;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      out.key_offsets[bounds[part] + i] = total;
      total += counts[i];
    }
  }
  out.key_offsets[n] = total;
  out.row_groups.resize(total);
  for (unsigned part = 0; part < parts; ++part) {
    std::vector<std::uint32_t>& ids = results[part].ids;
    if (!ids.empty())
      std::memcpy(out.row_groups.data() + out.key_offsets[bounds[part]], ids.data(),
                  ids.size() * sizeof(std::uint32_t));
    std::vector<std::uint32_t>().swap(ids);
  }
}

}  // namespace gbf::detail::parquet
