// The plain Bloom filter on the CPU: the bit array in host memory
// (host/cpu/memory.hpp), the kernels of host/cpu/bloom_kernels.hpp chosen once
// per filter, and threads for big batches (host/cpu/threads.hpp).
//
// Threads. A batch of at least 2 * min_keys_per_thread keys is split over
// threads. contains and count only read, so they split by key range.
//
// add (with or without is_new) writes, and partitions the batch by block
// range instead, so that no two threads ever write the same block. The batch
// goes a chunk at a time through two steps:
//   1. partition: the chunk is cut into slices of equal work (4 per thread),
//      and each slice's keys are hashed once and sorted into T buckets by
//      owner, stably (owner o owns a contiguous block range, o = floor(b * T /
//      B) through a fixed-point reciprocal, host/cpu/block_owner.hpp; up to 4
//      owners, fused_partition tests the hash's high half against the owners'
//      bounds instead; beyond, sorted_partition).
//   2. apply: thread o applies, in slice order, bucket o of every slice: the
//      keys of its blocks in batch order, which is what the sequential loop
//      does to those blocks (add with is_new must answer exactly as that loop
//      would: bloom_backend.hpp). No two threads write the same word, so plain
//      (SIMD) ORs are safe, and each key is hashed and visited once in all.
// One team of T threads runs the whole batch in rounds, meeting at a barrier
// after each: in round r, each thread applies chunk r - 1 and, between its
// keys (cpu::side_work, 8 keys at a time), partitions slices of chunk r into
// the other of two scratch buffers. Beyond the caches a key's apply waits on
// a DRAM miss, and the hashing can run in that wait, as it does in one
// thread's loop (which hashes key i + 40 while visiting key i): against the
// partition run after the apply, it cut two threads' CPU time per key by
// 13-22% on the 2-vCPU EPYC (docs/cpu.md). Slices are claimed one at a time,
// so a thread that runs faster partitions more of them: the apply share of
// each thread is fixed by its blocks, the partition is not, and on that
// shared VM one thread's apply took a third longer than the other's in some
// runs.
// Two threads whose kernels hash eight keys at once (AVX-512, integer keys)
// take another road for add and add_new (add_in_owned_walks): each thread
// reads the whole batch, hashes every key and keeps, in a ring, only those of
// its own half of the blocks, which it then visits in batch order (the same
// bits and answers as the sequential loop, no scratch, no barrier, no
// cross-thread hand-over of hashes). Every thread hashes every key, so this
// pays while the hash is cheap against a key's visit: on the 2-vCPU Zen 5
// EPYC, 2-thread add against the partition, ns/key, 16 MiB filter, 10^6
// keys: 1.04-1.05 against 1.62-1.65 (one thread: 1.23); 128 MiB, 10^6 and
// 10^7 keys: 1.76-1.80 against 1.94-2.06 (one thread: 2.48-2.60; docs/cpu.md;
// 1.70-1.74 since they test the hash's high half).
// Beyond 2 threads, unmeasured, the partition keeps the work per key flat.
// Plain add takes a cheaper road where private copies pay (copies_pay):
// threads 1..T-1 each add their key range into a zeroed private copy of the
// bit array, thread 0 into the filter, and then the copies are ORed in, split
// by word range. OR commutes, so the bits are the sequential loop's; add with
// is_new, whose answers depend on batch order, keeps the partition. Each
// thread then runs the one-thread loop over its keys, hashing inside its own
// misses, with no scratch and no barrier; the price is streaming: zeroing
// T - 1 copies and reading them back, about 2T bytes moved per filter byte,
// against one random line per key for the add itself. So copies pay for a
// filter that fits a core's L2 (the partition's extra pass over the hashes is
// most of a key's cost there: the copies doubled 2 threads' keys/s where the
// partition gave 1.1-1.2x), and for any filter when the batch is large against
// it: at least one key per copy_bytes_per_key bytes of the copies together
// (a filter built from its n keys at 10-20 bits per key has one per 1.25-2.5
// bytes). On the 2-vCPU EPYC, 16 MiB filter, 2 threads, alternated with the
// partition (docs/cpu.md): 10^7 keys 4.6-7.7 ns/key against 7.2-11.0, and
// 6.2-6.4 against 7.0-7.3 at 10^8 keys; it does not reach 2x one thread
// there, as the two copies together fill the L3. The copies are kept between
// calls, at most private_copies_max_total_bytes of them (the partition's
// scratch for such a batch is 64 MiB). Where owned walks run, they take the
// plain adds of filters past a core's L2 as well: there they ran as fast as
// the copies (within 5% either way, 2-32 MiB), without the copies' memory.
//
// Earlier designs: every thread read the hashes of the whole batch and kept
// the keys of its blocks, a pass over all keys each, so 2 threads ran slower
// than 1 (issue 13); then the two steps in two thread rounds per chunk, with
// fixed key ranges, which cost the hash and the miss in series (0.50-0.68 of
// 2x one thread's keys/s). The partition's own cost: one more write and read
// of each hash. Lock-free add (atomic fetch_or over key ranges) is
// the alternative: a lock-prefixed OR per word drains the store buffer and
// stops a core overlapping its cache misses (bench/bench_cpu_peers.cpp
// measures it beside this design; docs/cpu.md has the numbers).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gbf/error.hpp"
#include "host/bloom_backend.hpp"
#include "host/cpu/block_owner.hpp"
#include "host/cpu/bloom_kernels.hpp"
#include "host/cpu/memory.hpp"
#include "host/cpu/threads.hpp"

namespace gbf {

bool cpu_has_avx2() {
#if GBF_CPU_X86
  __builtin_cpu_init();  // needed when called before static initialization completes
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if GBF_CPU_AVX512
  // GCC's checks also require the OS to save the 512-bit registers (XCR0).
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") != 0 &&
         __builtin_cpu_supports("avx512dq") != 0;
#else
  return false;
#endif
}

namespace detail::cpu {

cpu_isa pick_cpu_isa(cpu_simd requested) {
  switch (requested) {
    case cpu_simd::scalar: return cpu_isa::scalar;
    case cpu_simd::avx2:
      if (!cpu_has_avx2())
        throw invalid_argument(
            "cpu_simd::avx2 was requested but this CPU does not support AVX2; use "
            "cpu_simd::automatic or cpu_simd::scalar");
      return cpu_isa::avx2;
    case cpu_simd::avx512:
      if (!cpu_has_avx512())
        throw invalid_argument(
            "cpu_simd::avx512 was requested but this CPU does not support AVX-512 F and DQ; use "
            "cpu_simd::automatic, cpu_simd::avx2 or cpu_simd::scalar");
      return cpu_isa::avx512;
    case cpu_simd::automatic:
      return cpu_has_avx512() ? cpu_isa::avx512 : cpu_has_avx2() ? cpu_isa::avx2 : cpu_isa::scalar;
  }
  check_listed(requested);  // throws: the value is none of the above
  return cpu_isa::scalar;
}

}  // namespace detail::cpu

namespace detail {
namespace {

using cpu::block_owner;
using cpu::bloom_job;
using cpu::kernel_op;
using cpu::kernel_set;
using cpu::key_range;
using cpu::stored_hashes;

/// add's threads partition a chunk of keys at a time, and chunks run one
/// after another, which keeps batch order. Chunk c is partitioned in round c
/// and applied in round c + 1, overlapped with the partition of chunk c + 1
/// (see the top of the file), so the first round's hashing and the last
/// round's applying are not hidden: a batch takes about 16 chunks (1/16 of
/// it unhidden at each end), at least 2^17 keys (a round then outlasts its
/// barrier by far), and the scratch of both rounds' buffers together at most
/// 2^23 cells of 8 bytes (`cells_per_key`: 2 buffers x the owner columns,
/// plus sorted_partition's unsorted copy), so scratch stays near 64 MiB,
/// 104 MiB with is_new (5 more bytes a cell), whatever the batch size.
constexpr std::uint64_t min_chunk_keys = std::uint64_t{1} << 17;
constexpr std::uint64_t max_chunk_cells = std::uint64_t{1} << 23;
constexpr std::uint64_t chunks_per_batch = 16;

inline std::uint64_t chunk_keys_for(std::uint64_t batch, unsigned cells_per_key) {
  const std::uint64_t most = std::max(min_chunk_keys, max_chunk_cells / cells_per_key);
  return std::min(batch, std::clamp(batch / chunks_per_batch, min_chunk_keys, most));
}

/// Largest filter whose plain add uses per-thread private copies whatever the
/// batch (see the top of the file): about a core's L2, and so cheap to zero
/// and merge next to the batches that start threads (>= 2 * min_keys_per_thread
/// keys).
constexpr std::uint64_t private_copy_max_bytes = std::uint64_t{1} << 20;

/// A larger filter's plain add uses them when the batch has at least one key
/// per this many bytes of all copies together ((T - 1) x the filter's bytes):
/// about where they stop costing more than the partition on the 2-vCPU EPYC
/// (2 threads, 16 MiB: within the noise of it at one key per 4.2 or 8.4
/// bytes, faster at one per 1.7 and 0.17).
constexpr std::uint64_t copy_bytes_per_key = 4;

/// ... and the most memory all private copies may take together, kept between
/// calls (as the partition's scratch is).
constexpr std::uint64_t private_copies_max_total_bytes = std::uint64_t{64} << 20;

/// Slices per thread a chunk's partition is cut into (claimed_partition):
/// enough that the team's faster threads can take over a slower one's share.
constexpr unsigned slices_per_thread = 4;

/// Owners up to which the partition keeps one cursor per owner in registers
/// (fused_partition); beyond, it counting-sorts (sorted_partition).
constexpr unsigned max_fused_owners = 4;

/// Threads up to which add reads the whole batch in each thread, keeping the
/// keys of its own blocks (add_in_owned_walks), rather than partitioning it,
/// where keys hash eight at a time. Each thread then walks every key (about
/// 0.5 ns a key on the Zen 5 EPYC: hash, owner test, compress) and visits 1/T
/// of them, so the walks pay while T walks stay small against a key's visit:
/// on that 2-vCPU host 2 threads' add took 0.64-0.90x the partition's time
/// (see the top of the file). More threads are not measured and keep the
/// partition, whose work per key does not grow with T.
constexpr unsigned max_owned_walk_threads = 2;

/// Owners are bytes in the partition's scratch.
constexpr unsigned max_add_threads = 256;

void require_host(const key_batch& keys) {
  if (keys.space == memory_space::device)
    throw invalid_argument(
        "keys are in device memory but this filter uses the CPU backend; copy them to the "
        "host or use the GPU backend");
}

/// The kernels skip null keys; their found / is_new answers are false.
void clear_null_results(const key_batch& keys, bool* results) {
  if (keys.validity == nullptr || results == nullptr) return;
  for (std::size_t i = 0; i < keys.count; ++i)
    if (!key_valid(keys.validity, keys.validity_bit, i)) results[i] = false;
}

/// The kernel entry point of a hash source in a kernel set.
template <class Hashes>
cpu::range_kernel<Hashes> kernel_for(const kernel_set& set);
template <>
cpu::range_kernel<cpu::key_hashes<std::uint32_t>> kernel_for(const kernel_set& set) {
  return set.u32_keys;
}
template <>
cpu::range_kernel<cpu::key_hashes<std::uint64_t>> kernel_for(const kernel_set& set) {
  return set.u64_keys;
}
template <>
cpu::range_kernel<cpu::string_hashes<std::int32_t>> kernel_for(const kernel_set& set) {
  return set.str32_keys;
}
template <>
cpu::range_kernel<cpu::string_hashes<std::int64_t>> kernel_for(const kernel_set& set) {
  return set.str64_keys;
}

/// The owned-walk entry point of a hash source in a kernel set (null: none,
/// as for string keys and cores without AVX-512).
template <class Hashes>
cpu::owned_kernel<Hashes> owned_kernel_for(const kernel_set& set) {
  if constexpr (std::is_same_v<Hashes, cpu::key_hashes<std::uint32_t>>) {
    return set.u32_owned;
  } else if constexpr (std::is_same_v<Hashes, cpu::key_hashes<std::uint64_t>>) {
    return set.u64_owned;
  } else {
    return nullptr;
  }
}

class cpu_bloom final : public bloom_backend {
 public:
  cpu_bloom(const layout& l, cpu::cpu_isa isa, unsigned num_threads, bool huge_pages)
      : layout_(l),
        num_threads_(num_threads),
        huge_pages_(huge_pages),
        isa_(isa),
        kernels_(cpu::select_kernels(l.words_per_block, isa)),
        words_(cpu::allocate_words(l.size_bytes(), huge_pages, "the CPU filter's bit array")) {}

  /// e.g. "cpu (avx2, 16 threads)": the kernel that actually runs for this layout.
  std::string description() const {
    return std::string("cpu (") + kernels_.isa + ", " + std::to_string(num_threads_) +
           (num_threads_ == 1 ? " thread)" : " threads)");
  }

  backend kind() const noexcept override { return backend::cpu; }

  void add(const key_batch& keys, bool* is_new, const call_options& call) override {
    require_sync(call);
    require_host(keys);
    clear_null_results(keys, is_new);
    run_owned(is_new == nullptr ? kernel_op::add : kernel_op::add_new, keys, is_new);
  }

  void contains(const key_batch& keys, bool* found, const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    clear_null_results(keys, found);
    run_keys(kernel_op::contains, keys, found, key_parts(keys));
  }

  std::uint64_t count(const key_batch& keys, std::uint64_t*,
                      const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    return run_keys(kernel_op::count, keys, nullptr, key_parts(keys));
  }

  // Each thread compacts its key range [b_t, e_t) in place into rows[b_t ..]
  // (branch-free: see kernel_op::select); then the per-thread runs move down, in
  // thread order, to follow one another. A run only moves left (its destination,
  // the hits of earlier ranges, is at most b_t), so memmove in order is safe.
  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t*,
                       const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    const unsigned parts = key_parts(keys);
    const std::vector<std::uint64_t> bounds = cpu::key_bounds(keys, parts);
    std::vector<std::uint64_t> counts(parts);
    cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = kernel_for<decltype(hash_of)>(kernels_);
      cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
        counts[part] = kernel(job(kernel_op::select, hash_of, begin, end, nullptr, rows, keys));
      });
    });
    std::uint64_t total = counts[0];
    for (unsigned part = 1; part < parts; ++part) {
      if (counts[part] != 0 && total != bounds[part])
        std::memmove(rows + total, rows + bounds[part], counts[part] * sizeof(std::uint64_t));
      total += counts[part];
    }
    return total;
  }

  void clear() override { std::memset(words_.get(), 0, layout_.size_bytes()); }

  void combine(const bloom_backend& other, set_op op) override {
    const auto* cpu_other = dynamic_cast<const cpu_bloom*>(&other);
    if (cpu_other == nullptr || cpu_other->layout_ != layout_)
      throw invalid_argument("combine needs another CPU filter of the same layout");
    combine_host(0, layout_.num_words(), cpu_other->words_.get(), op);
  }

  void combine_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* other_words,
                    set_op op) override {
    std::uint32_t* const words = words_.get() + first;
    const std::uint32_t* const other = other_words;
    cpu::run_in_parts(word_parts(), count,
                      [words, other, op](unsigned, std::uint64_t begin, std::uint64_t end) {
                        switch (op) {
                          case set_op::union_or:
                            for (std::uint64_t i = begin; i < end; ++i) words[i] |= other[i];
                            break;
                          case set_op::intersect_and:
                            for (std::uint64_t i = begin; i < end; ++i) words[i] &= other[i];
                            break;
                          case set_op::symmetric_xor:
                            for (std::uint64_t i = begin; i < end; ++i) words[i] ^= other[i];
                            break;
                        }
                      });
  }

  void or_blocks(const std::uint32_t* blocks, const std::uint32_t* rows, std::uint64_t count) override {
    const std::uint64_t words_per_block = layout_.words_per_block;
    std::uint32_t* const words = words_.get();
    for (std::uint64_t r = 0; r < count; ++r)
      for (std::uint64_t w = 0; w < words_per_block; ++w)
        words[blocks[r] * words_per_block + w] |= rows[r * words_per_block + w];
  }

  std::uint64_t popcount() const override {
    const std::uint32_t* const words = words_.get();
    const unsigned parts = word_parts();
    std::vector<std::uint64_t> counts(parts);
    cpu::run_in_parts(parts, layout_.num_words(),
                      [words, &counts](unsigned part, std::uint64_t begin, std::uint64_t end) {
                        counts[part] = cpu::count_set_bits(words + begin, end - begin);
                      });
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  void read_words(std::uint32_t* out) const override {
    std::memcpy(out, words_.get(), layout_.size_bytes());
  }

  void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    std::memcpy(out, words_.get() + first, count * sizeof(std::uint32_t));
  }

  void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    std::memcpy(words_.get() + first, in, count * sizeof(std::uint32_t));
  }

  void write_words(const std::uint32_t* in) override {
    std::memcpy(words_.get(), in, layout_.size_bytes());
  }

  std::uint32_t* device_words() override { return nullptr; }
  std::uint32_t* host_words() override { return words_.get(); }

  void synchronize(const char*) const override {}

 private:
  unsigned key_parts(const key_batch& keys) const {
    return cpu::parts_for(cpu::key_work(keys, keys.count), cpu::min_keys_per_thread, num_threads_);
  }
  unsigned word_parts() const {
    return cpu::parts_for(layout_.num_words(), cpu::min_words_per_thread, num_threads_);
  }

  template <class Hashes>
  bloom_job<Hashes> job(kernel_op op, Hashes hash_of, std::size_t begin, std::size_t end,
                        bool* results, std::uint64_t* rows, const key_batch& keys) const {
    key_range<Hashes> range{hash_of,       begin,         end, layout_.num_blocks,
                            keys.validity, keys.validity_bit};
    return {op, range, words_.get(), layout_.bits_per_key, results, rows};
  }

  /// Runs `op` over the batch in `parts` contiguous key ranges; returns the summed count.
  std::uint64_t run_keys(kernel_op op, const key_batch& keys, bool* results,
                         unsigned parts) const {
    return cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = kernel_for<decltype(hash_of)>(kernels_);
      std::vector<std::uint64_t> counts(parts);
      cpu::run_in_ranges(cpu::key_bounds(keys, parts), [&](unsigned part, std::uint64_t begin,
                                                           std::uint64_t end) {
        counts[part] = kernel(job(op, hash_of, begin, end, results, nullptr, keys));
      });
      return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    });
  }

  /// Runs a writing `op` (add, add_new) over the batch: one thread in batch order,
  /// or several threads partitioning it by block range (see the top of the file).
  void run_owned(kernel_op op, const key_batch& keys, bool* results) {
    const auto parts =
        static_cast<unsigned>(std::min<std::uint64_t>({key_parts(keys), layout_.num_blocks, max_add_threads}));
    if (parts == 1) {
      run_keys(op, keys, results, 1);
      return;
    }
    const bool walks = parts <= max_owned_walk_threads && owned_walks_run(keys);
    if (op == kernel_op::add && copies_pay(keys.count, parts, walks) && have_private_copies(parts)) {
      add_with_private_copies(keys, parts);
      return;
    }
    if (walks) {
      add_in_owned_walks(op, keys, results, parts);
      return;
    }
    const bool ran = with_partition_hashes(keys, [&](const auto& hash_of) {
      using Hashes = std::decay_t<decltype(hash_of)>;
      const bool answers = results != nullptr;
      switch ((parts <= max_fused_owners ? parts : 0) * 2 + (answers ? 1 : 0)) {
        case 4: return run_partitioned<fused_partition<2, false, Hashes>>(op, keys, hash_of, results, parts);
        case 5: return run_partitioned<fused_partition<2, true, Hashes>>(op, keys, hash_of, results, parts);
        case 6: return run_partitioned<fused_partition<3, false, Hashes>>(op, keys, hash_of, results, parts);
        case 7: return run_partitioned<fused_partition<3, true, Hashes>>(op, keys, hash_of, results, parts);
        case 8: return run_partitioned<fused_partition<4, false, Hashes>>(op, keys, hash_of, results, parts);
        case 9: return run_partitioned<fused_partition<4, true, Hashes>>(op, keys, hash_of, results, parts);
        case 0: return run_partitioned<sorted_partition<false, Hashes>>(op, keys, hash_of, results, parts);
        default: return run_partitioned<sorted_partition<true, Hashes>>(op, keys, hash_of, results, parts);
      }
    });
    // A thread that could not be started: the same bits and answers from one.
    if (!ran) run_keys(op, keys, results, 1);
  }

  /// Calls fn(hashes) with the hash source the partition reads: integer keys
  /// hashed eight at a time where the AVX-512 kernels run.
  template <class Fn>
  bool with_partition_hashes(const key_batch& keys, Fn&& fn) {
    return cpu::with_hashes(keys, layout_.seed, [&](const auto& hash_of) {
#if GBF_CPU_AVX512
      using Hashes = std::decay_t<decltype(hash_of)>;
      if constexpr (std::is_same_v<Hashes, cpu::key_hashes<std::uint64_t>> ||
                    std::is_same_v<Hashes, cpu::key_hashes<std::uint32_t>>) {
        if (isa_ == cpu::cpu_isa::avx512) return fn(cpu::hashing_eight_at_a_time(hash_of));
      }
#endif
      return fn(hash_of);
    });
  }

  /// The partitioned add on a team of `parts` threads. Round r: each thread
  /// applies, as owner t, chunk r - 1 from buffer (r - 1) % 2, and between its
  /// keys partitions slices of chunk r into buffer r % 2 (claimed_partition);
  /// then the team meets. Returns false, having done nothing, when the team
  /// could not be started.
  template <class Partition, class Hashes>
  bool run_partitioned(kernel_op op, const key_batch& keys, const Hashes& hash_of,
                       bool* results, unsigned parts) {
    const bool answers = results != nullptr;
    const unsigned columns = Partition::few_owners ? parts : 1;
    const unsigned slices = parts * slices_per_thread;
    const std::uint64_t chunk_cap =
        chunk_keys_for(keys.count, 2 * columns + (Partition::few_owners ? 0 : 1));
    scratch_.reserve(chunk_cap, columns, !Partition::few_owners, answers);
    const std::uint64_t num_chunks = (keys.count + chunk_cap - 1) / chunk_cap;
    // Slices of equal work, chunk by chunk: chunk c's slice s is [bounds[c *
    // (slices + 1) + s], bounds[c * (slices + 1) + s + 1]), chunk-relative.
    std::vector<std::uint64_t> bounds;
    bounds.reserve(num_chunks * (slices + 1));
    for (std::uint64_t chunk = 0; chunk < keys.count; chunk += chunk_cap) {
      key_batch piece = keys;
      piece.count = std::min(keys.count - chunk, chunk_cap);
      if (keys.is_string())
        piece.offsets = static_cast<const unsigned char*>(keys.offsets) + chunk * offset_bytes(keys.kind);
      const std::vector<std::uint64_t> chunk_bounds = cpu::key_bounds(piece, slices);
      bounds.insert(bounds.end(), chunk_bounds.begin(), chunk_bounds.end());
    }
    // Bucket (s, o) of buffer b: the keys of slice s that owner o applies, in
    // batch order, ending at bucket_end[(b * slices + s) * parts + o]. Few
    // owners: owner o has a column of its own and bucket (s, o) starts at slice
    // s's start. Many: one column; slice s's buckets follow one another.
    std::vector<std::uint64_t> bucket_end(2 * std::size_t{slices} * parts);
    // Chunk c's next unclaimed slice.
    std::unique_ptr<std::atomic<unsigned>[]> next_slice(new std::atomic<unsigned>[num_chunks]());
    const block_owner owner_of(parts, layout_.num_blocks);
    std::uint64_t first_high[max_fused_owners + 1] = {};
    if (Partition::few_owners)
      for (unsigned o = 0; o <= parts; ++o)
        first_high[o] = owner_of.first_hash_high(o, layout_.num_blocks);
    return cpu::run_team(parts, [&](unsigned t, cpu::team_barrier& barrier) {
      for (std::uint64_t round = 0; round <= num_chunks; ++round) {
        const unsigned fill = round % 2;
        const bool partitions = round < num_chunks;
        const partition_source<Hashes> source{hash_of,   keys.validity,      keys.validity_bit,
                                              round * chunk_cap, owner_of, layout_.num_blocks,
                                              first_high};
        claimed_partition<Partition, Hashes> task(
            source, bounds.data() + (partitions ? round : 0) * (slices + 1), partitions ? slices : 0,
            next_slice.get() + (partitions ? round : 0), scratch_.buffer(fill),
            bucket_end.data() + std::size_t{fill} * slices * parts);
        if (round > 0)
          apply_chunk(op, t, parts, slices, (round - 1) * chunk_cap,
                      bounds.data() + (round - 1) * (slices + 1),
                      bucket_end.data() + std::size_t{1 - fill} * slices * parts, 1 - fill,
                      cpu::side_work{&claimed_partition<Partition, Hashes>::step_some, &task},
                      results);
        task.finish();
        barrier.arrive_and_wait();
      }
    });
  }

  /// Owner o's share of a partitioned chunk (the keys at `chunk` on): its
  /// bucket of every slice, in slice order (so in batch order), from scratch
  /// buffer `buffer`, running `side` between keys; then is_new's answers to
  /// their keys.
  void apply_chunk(kernel_op op, unsigned o, unsigned parts, unsigned slices, std::uint64_t chunk,
                   const std::uint64_t* slice_bounds, const std::uint64_t* bucket_end,
                   unsigned buffer, cpu::side_work side, bool* results) const {
    const bool few = parts <= max_fused_owners;
    const std::size_t column = scratch_.cell(buffer, few ? o : 0);
    for (unsigned s = 0; s < slices; ++s) {
      const std::uint64_t begin =
          few || o == 0 ? slice_bounds[s] : bucket_end[std::size_t{s} * parts + o - 1];
      const std::uint64_t end = bucket_end[std::size_t{s} * parts + o];
      if (begin == end) continue;
      // Dense stored hashes (key_batch{}: no validity): the partition dropped the nulls.
      bool* const answer = results != nullptr ? scratch_.answers.get() + column : nullptr;
      bloom_job<stored_hashes> owned =
          job(op, stored_hashes{scratch_.sorted.get() + column}, begin, end, answer, nullptr,
              key_batch{});
      owned.side = side;
      kernels_.stored(owned);
      if (results != nullptr) {
        const std::uint32_t* const index = scratch_.index.get() + column;
        for (std::uint64_t j = begin; j < end; ++j) results[chunk + index[j]] = answer[j];
      }
    }
  }

  /// Whether this filter's kernels have owned walks for the batch's keys
  /// (AVX-512, integer keys: they hash eight keys at once).
  bool owned_walks_run(const key_batch& keys) const {
    return cpu::with_hashes(keys, layout_.seed, [&](const auto& hash_of) {
      return owned_kernel_for<std::decay_t<decltype(hash_of)>>(kernels_) != nullptr;
    });
  }

  /// add / add_new on `parts` threads that each read the whole batch and write
  /// only the keys of their own block range (cpu::for_each_owned_key); only
  /// where owned_walks_run(keys). Thread p owns the blocks [B p / T, B (p + 1)
  /// / T) and visits their keys in batch order, so the bits and is_new answers
  /// are the sequential loop's. A thread that cannot be started leaves its
  /// blocks to the calling thread.
  void add_in_owned_walks(kernel_op op, const key_batch& keys, bool* results, unsigned parts) {
    cpu::with_hashes(keys, layout_.seed, [&](const auto& hash_of) {
      const auto kernel = owned_kernel_for<std::decay_t<decltype(hash_of)>>(kernels_);
      if (kernel == nullptr) return;  // owned_walks_run(keys) was false
      const auto whole_batch = job(op, hash_of, 0, keys.count, results, nullptr, keys);
      cpu::run_in_parts(parts, layout_.num_blocks,
                        [&](unsigned, std::uint64_t first, std::uint64_t end) {
                          kernel(whole_batch, cpu::block_span{first, end - first});
                        });
    });
  }

  /// Whether a plain add of `keys` keys on `parts` threads takes private
  /// copies rather than the partition or, where `walks`, the owned walks (see
  /// the top of the file). Past private_copy_max_bytes the owned walks ran as
  /// fast as the copies (2 threads, 2-32 MiB, 10^6-2 x 10^7 keys: within 5%
  /// either way, docs/cpu.md) without their memory, so they take those adds.
  bool copies_pay(std::uint64_t keys, unsigned parts, bool walks) const {
    const std::uint64_t copy_bytes = layout_.size_bytes() * (parts - 1);
    if (copy_bytes > private_copies_max_total_bytes) return false;
    if (layout_.size_bytes() <= private_copy_max_bytes) return true;
    return !walks && keys * copy_bytes_per_key >= copy_bytes;
  }

  /// Plain add on `parts` threads with private copies: key range p goes into
  /// private copy p - 1 (range 0 into the filter), then word range p of every
  /// copy is ORed into the filter by thread p, which zeroes each word as it
  /// reads it (one pass over the copy, not a second one to clear it): a copy is
  /// all zeros between calls (allocate_words zeroes a new one), so no call
  /// zeroes a copy before using it.
  /// Whether the `parts - 1` private copies exist, allocating the missing ones:
  /// false when memory refuses one (the add then takes another road, which needs
  /// less; the copies made so far are kept for a later call).
  bool have_private_copies(unsigned parts) {
    const std::uint64_t bytes = layout_.size_bytes();
    try {
      while (private_copies_.size() < parts - 1)
        private_copies_.push_back(
            cpu::allocate_words(bytes, huge_pages_, "a thread's private copy of the CPU filter"));
    } catch (const allocation_error&) {
      return false;
    }
    return true;
  }

  void add_with_private_copies(const key_batch& keys, unsigned parts) {
    cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = kernel_for<decltype(hash_of)>(kernels_);
      cpu::run_in_ranges(cpu::key_bounds(keys, parts), [&](unsigned part, std::uint64_t begin,
                                                           std::uint64_t end) {
        bloom_job<decltype(hash_of)> j = job(kernel_op::add, hash_of, begin, end, nullptr, nullptr, keys);
        if (part != 0) j.words = private_copies_[part - 1].get();
        kernel(j);
      });
    });
    std::uint32_t* const words = words_.get();
    cpu::run_in_parts(parts, layout_.num_words(), [&](unsigned, std::uint64_t begin, std::uint64_t end) {
      for (unsigned copy = 0; copy + 1 < parts; ++copy) {
        std::uint32_t* const other = private_copies_[copy].get();
        for (std::uint64_t i = begin; i < end; ++i) {
          words[i] |= other[i];
          other[i] = 0;
        }
      }
    });
  }

  /// Where one chunk's partition goes (a buffer of add's scratch).
  struct partition_out {
    std::uint64_t* sorted;  ///< hashes by owner: few owners, column o at o * rows; many, one column
    std::uint32_t* index;   ///< is_new: chunk index of sorted[j] (null without is_new)
    std::uint64_t rows;     ///< rows of a column: the chunk capacity
    std::uint64_t* hashes;  ///< sorted_partition: hashes in key order (one buffer: used within a round)
    std::uint8_t* owner;    ///< sorted_partition: owner of hashes[i]
    std::uint32_t* original;  ///< sorted_partition with is_new: chunk index of hashes[i]
  };

  /// What a partition reads: keys i of the chunk at `chunk` of the batch, their
  /// validity and hashes, and which thread owns a hash's block.
  template <class Hashes>
  struct partition_source {
    Hashes hash_of;
    const std::uint8_t* validity;
    std::size_t validity_bit;
    std::uint64_t chunk;
    block_owner owner_of;
    std::uint64_t num_blocks;
    /// fused_partition: owner o's hashes have first_high[o] <= h >> 32 < first_high[o + 1].
    const std::uint64_t* first_high;
  };

  /// The partition with Parts <= max_fused_owners owners, as resumable work:
  /// hashes the non-null keys of [begin, end) of the chunk at `chunk` once and
  /// appends each (and, for is_new, its index in the chunk) to its owner's
  /// column, from row `begin` on. Branch-free: every key is written to every
  /// column, and only its owner's cursor moves. (A cursor array,
  /// sorted[next[o]++] = h, stores to addresses known late and then loads the
  /// next cursor, which the core often mispredicts as dependent: measured at
  /// several ns a key on a 2-core EPYC, more than the add itself.)
  template <unsigned Parts, bool Answers, class Hashes>
  class fused_partition {
   public:
    static constexpr bool few_owners = true;

    fused_partition(const partition_source<Hashes>& source, std::uint64_t begin,
                    std::uint64_t end, const partition_out& out)
        : source_(source), next_(begin), end_(end) {
      for (unsigned o = 0; o < Parts; ++o) {
        column_[o] = out.sorted + std::size_t{o} * out.rows;
        index_[o] = Answers ? out.index + std::size_t{o} * out.rows : nullptr;
        cursor_[o] = begin;
      }
    }

    /// The next `steps` keys (fewer at the end of the range).
    void step(std::size_t steps) {
#if GBF_CPU_AVX512
      if constexpr (cpu::key_loop_detail::hashes_eight<Hashes>::value) {
        step_avx512(steps);
        return;
      }
#endif
      step_any(steps);
    }
    std::uint64_t remaining() const { return end_ - next_; }

    /// The rest of the range; ends[o] = where owner o's bucket ends.
    void finish(std::uint64_t* ends) {
      step(end_ - next_);
      for (unsigned o = 0; o < Parts; ++o) ends[o] = cursor_[o];
    }

   private:
    static constexpr std::size_t keys_prefetched_ahead = 128;
#if GBF_CPU_AVX512
    // The step compiled for AVX-512, with hash8 inlined into it (an out-of-line
    // hash8 per 8 keys measured 1 ns a key in a profile of the 2-thread add).
    __attribute__((flatten)) GBF_TARGET_AVX512 void step_avx512(std::size_t steps) {
      step_any(steps);
    }
#endif
    void step_any(std::size_t steps) {
      const std::uint64_t stop = std::min<std::uint64_t>(end_, next_ + steps);
      // Everything the loop reads lives in locals: its stores through the
      // columns may alias any 64-bit member, so the compiler would reload every
      // member each key (8 loads a key; with the owner found from the hash's high
      // half rather than from the block, the step runs 17-31% faster alone).
      std::uint64_t cursor[Parts], first_high[Parts], span_high[Parts];
      std::uint64_t* column[Parts];
      std::uint32_t* index[Parts];
      for (unsigned o = 0; o < Parts; ++o) {
        cursor[o] = cursor_[o];
        first_high[o] = source_.first_high[o];
        span_high[o] = source_.first_high[o + 1] - source_.first_high[o];
        column[o] = column_[o];
        index[o] = index_[o];
      }
      const Hashes hash_of = source_.hash_of;
      const std::uint8_t* const validity = source_.validity;
      const std::uint64_t chunk = source_.chunk;
      const std::size_t validity_bit = source_.validity_bit + chunk;
      const auto place = [&](std::uint64_t i, std::uint64_t h) {
        const std::uint64_t high = h >> 32;
        for (unsigned o = 0; o < Parts; ++o) {
          column[o][cursor[o]] = h;
          if constexpr (Answers) index[o][cursor[o]] = static_cast<std::uint32_t>(i);
          // first_high[o] <= high < first_high[o + 1], one unsigned compare.
          cursor[o] += high - first_high[o] < span_high[o] ? 1 : 0;
        }
      };
      std::uint64_t i = next_;
      if constexpr (cpu::key_loop_detail::hashes_eight<Hashes>::value) {
        // Eight keys hashed at once (the side work's steps come 8 keys at a time).
        if (validity == nullptr) {
          alignas(64) std::uint64_t hashes[8];
          for (; i + 8 <= stop; i += 8) {
            // The keys are read 8 at a time between the apply's misses, too
            // slowly for the hardware's stream prefetch to run ahead of them.
            hash_of.prefetch(chunk + i + keys_prefetched_ahead);
            hash_of.hash8(chunk + i, hashes);
            for (unsigned lane = 0; lane < 8; ++lane) place(i + lane, hashes[lane]);
          }
        }
      }
      for (; i < stop; ++i) {
        if (!key_valid(validity, validity_bit, i)) continue;
        place(i, hash_of(chunk + i));
      }
      for (unsigned o = 0; o < Parts; ++o) cursor_[o] = cursor[o];
      next_ = stop;
    }

    partition_source<Hashes> source_;
    std::uint64_t next_, end_;
    std::uint64_t* column_[Parts];
    std::uint32_t* index_[Parts];
    std::uint64_t cursor_[Parts];
  };

  /// The partition with more owners than fused_partition serves, as resumable
  /// work: hashes the non-null keys of [begin, end) into out.hashes and their
  /// owners into out.owner; finish() then counting-sorts them (stably) into
  /// out.sorted [begin, ..) by owner.
  template <bool Answers, class Hashes>
  class sorted_partition {
   public:
    static constexpr bool few_owners = false;

    sorted_partition(const partition_source<Hashes>& source, std::uint64_t begin,
                     std::uint64_t end, const partition_out& out)
        : source_(source), begin_(begin), next_(begin), end_(end), valid_end_(begin), out_(out) {}

    /// The next `steps` keys (fewer at the end of the range).
    void step(std::size_t steps) {
      const std::uint64_t stop = std::min<std::uint64_t>(end_, next_ + steps);
      // Locals, as in fused_partition (a store through the byte array owner
      // may alias anything, so members would be reloaded each key).
      std::uint64_t valid_end = valid_end_;
      const Hashes hash_of = source_.hash_of;
      const std::uint8_t* const validity = source_.validity;
      const std::uint64_t chunk = source_.chunk;
      const std::size_t validity_bit = source_.validity_bit + chunk;
      const block_owner owner_of = source_.owner_of;
      const std::uint64_t num_blocks = source_.num_blocks;
      std::uint8_t* const owner = out_.owner;
      std::uint32_t* const original = out_.original;
      std::uint64_t* const hashes = out_.hashes;
      for (std::uint64_t i = next_; i < stop; ++i) {
        if (!key_valid(validity, validity_bit, i)) continue;
        const std::uint64_t h = hash_of(chunk + i);
        owner[valid_end] = static_cast<std::uint8_t>(owner_of(block_index(h, num_blocks)));
        if constexpr (Answers) original[valid_end] = static_cast<std::uint32_t>(i);
        hashes[valid_end++] = h;
      }
      valid_end_ = valid_end;
      next_ = stop;
    }
    std::uint64_t remaining() const { return end_ - next_; }

    /// The rest of the range, then the sort; ends[o] = where owner o's bucket ends.
    void finish(std::uint64_t* ends) {
      step(end_ - next_);
      const unsigned parts = source_.owner_of.parts;
      std::uint64_t next[max_add_threads] = {};
      for (std::uint64_t i = begin_; i < valid_end_; ++i) ++next[out_.owner[i]];
      std::uint64_t at = begin_;
      for (unsigned o = 0; o < parts; ++o) {
        const std::uint64_t count = next[o];
        next[o] = at;
        at += count;
        ends[o] = at;
      }
      for (std::uint64_t i = begin_; i < valid_end_; ++i) {
        const std::uint64_t j = next[out_.owner[i]]++;
        out_.sorted[j] = out_.hashes[i];
        if constexpr (Answers) out_.index[j] = out_.original[i];
      }
    }

   private:
    partition_source<Hashes> source_;
    std::uint64_t begin_, next_, end_, valid_end_;
    partition_out out_;
  };

  /// One chunk's partition as side work shared by the team: its slices are
  /// claimed one at a time (an atomic counter), each partitioned whole by
  /// the thread that claimed it, so a thread that runs faster (a vCPU not
  /// shared with another guest, an owner with fewer keys) partitions more of
  /// them, and no thread waits at the barrier for another's fixed share.
  template <class Partition, class Hashes>
  class claimed_partition {
   public:
    claimed_partition(const partition_source<Hashes>& source, const std::uint64_t* slice_bounds,
                      unsigned slices, std::atomic<unsigned>* next_slice,
                      const partition_out& out, std::uint64_t* bucket_end)
        : source_(source), slice_bounds_(slice_bounds), slices_(slices),
          next_slice_(next_slice), out_(out), bucket_end_(bucket_end) {}

    /// The next `steps` keys of this thread's slices, claiming slices as needed.
    void step(std::size_t steps) {
      while (steps > 0 && (current_ || claim())) {
        const std::size_t now = std::min<std::uint64_t>(steps, current_->remaining());
        current_->step(now);
        steps -= now;
        if (current_->remaining() == 0) finish_slice();
      }
    }
    static void step_some(void* self, std::size_t steps) {
      static_cast<claimed_partition*>(self)->step(steps);
    }

    /// Partitions slices until none is left unclaimed.
    void finish() {
      while (current_ || claim()) finish_slice();
    }

   private:
    bool claim() {
      if (slices_ == 0) return false;
      const unsigned s = next_slice_->fetch_add(1, std::memory_order_relaxed);
      if (s >= slices_) {
        slices_ = 0;  // all claimed: no more counter traffic from this thread
        return false;
      }
      slice_ = s;
      current_.emplace(source_, slice_bounds_[s], slice_bounds_[s + 1], out_);
      return true;
    }
    void finish_slice() {
      current_->finish(bucket_end_ + std::size_t{slice_} * source_.owner_of.parts);
      current_.reset();
    }

    partition_source<Hashes> source_;
    const std::uint64_t* slice_bounds_;
    unsigned slices_;
    std::atomic<unsigned>* next_slice_;
    partition_out out_;
    std::uint64_t* bucket_end_;
    unsigned slice_ = 0;
    std::optional<Partition> current_;
  };

  /// add's partition arrays, kept between calls: a fresh multi-MiB allocation
  /// per call costs a page fault per 4 KiB, a sizeable share of a batch's time.
  /// Two buffers, each `columns` columns of `rows` rows: one being filled by
  /// this round's partition while the other is applied.
  struct partition_scratch {
    std::uint64_t rows = 0;
    unsigned columns = 0;
    std::unique_ptr<std::uint64_t[]> sorted;    ///< hashes by owner
    std::unique_ptr<std::uint32_t[]> index;     ///< is_new: key index in the chunk of sorted[j]
    std::unique_ptr<bool[]> answers;            ///< is_new: answer of sorted[j]
    std::unique_ptr<std::uint64_t[]> hashes;    ///< sorted_partition: hashes in key order
    std::unique_ptr<std::uint8_t[]> owner;      ///< sorted_partition: owner of hashes[i]
    std::unique_ptr<std::uint32_t[]> original;  ///< sorted_partition, is_new: key index of hashes[i]
    std::uint64_t sorted_size = 0, answers_size = 0, sort_size = 0;
    bool with_answers = false;  ///< index and answers cover both buffers (this call has is_new)

    /// First cell of column `column` of buffer `buffer`.
    std::size_t cell(unsigned buffer, unsigned column) const {
      return (std::size_t{buffer} * columns + column) * rows;
    }

    partition_out buffer(unsigned b) const {
      return {sorted.get() + cell(b, 0), with_answers ? index.get() + cell(b, 0) : nullptr, rows,
              hashes.get(), owner.get(), original.get()};
    }

    /// Room for two buffers of `columns` columns of `rows` rows, with is_new's
    /// arrays when `need_answers`, and sorted_partition's when `need_sort`.
    void reserve(std::uint64_t need_rows, unsigned need_columns, bool need_sort, bool need_answers) {
      const std::uint64_t cells = 2 * need_rows * need_columns;
      try {
        if (sorted_size < cells) {
          sorted.reset(new std::uint64_t[cells]);
          sorted_size = cells;
        }
        if (need_answers && answers_size < cells) {
          index.reset(new std::uint32_t[cells]);
          answers.reset(new bool[cells]);
          answers_size = cells;
        }
        if (need_sort && sort_size < need_rows) {
          hashes.reset(new std::uint64_t[need_rows]);
          owner.reset(new std::uint8_t[need_rows]);
          original.reset(new std::uint32_t[need_rows]);
          sort_size = need_rows;
        }
      } catch (const std::bad_alloc&) {
        *this = partition_scratch{};
        const std::uint64_t bytes =
            cells * (8 + (need_answers ? 5 : 0)) + (need_sort ? need_rows * 13 : 0);
        throw allocation_error("cannot allocate " + std::to_string(bytes) +
                                   " bytes of scratch for a threaded add",
                               bytes);
      }
      rows = need_rows;
      columns = need_columns;
      with_answers = need_answers;
    }
  };

  layout layout_;
  unsigned num_threads_;
  bool huge_pages_;  ///< map the bit array and private copies of 2 MiB or more on huge pages
  cpu::cpu_isa isa_;
  kernel_set kernels_;
  cpu::word_array words_;
  partition_scratch scratch_;
  std::vector<cpu::word_array> private_copies_;  ///< add_with_private_copies' arrays, all zeros between calls.
};

}  // namespace

std::unique_ptr<bloom_backend> make_cpu_bloom(const layout& l, const options& opts,
                                              std::string* description) {
  if (const char* problem = layout_problem(l))
    throw invalid_argument(std::string("invalid layout: ") + problem);
  const cpu::cpu_isa isa = cpu::pick_cpu_isa(opts.simd);
  const unsigned num_threads =
      opts.cpu_threads != 0 ? opts.cpu_threads : std::max(1u, std::thread::hardware_concurrency());
  auto backend = std::make_unique<cpu_bloom>(l, isa, num_threads, opts.cpu_huge_pages);
  if (description != nullptr) *description = backend->description();
  return backend;
}

const char* cpu_bloom_kernels(const layout& l, const options& opts) {
  return cpu::select_kernels(l.words_per_block, cpu::pick_cpu_isa(opts.simd)).isa;
}

}  // namespace detail
}  // namespace gbf
