// The CPU backend: the bit array in host memory, the kernels of
// host/cpu/bloom_kernels.hpp chosen once per filter, and threads for big batches.
//
// Threads. A batch of at least 2 * min_keys_per_thread keys is split over
// threads. contains and count only read, so they split by key range.
//
// add and add_new write, and split by block instead. add_new must answer
// exactly as the sequential loop would (backend.hpp): key i's answer depends on
// every earlier key of the batch that shares its block. Blocks are
// independent, so thread t owns blocks [t*B/T, (t+1)*B/T), reads the hashes of
// the whole batch in order and handles the keys that land in its blocks. Each
// thread then sees exactly the keys of its blocks in batch order, which is
// what the sequential loop does to those blocks, and no two threads write the
// same word, so plain (SIMD) ORs are safe. The hashes are computed once, in
// parallel, beforehand.
//
// add takes the same path rather than splitting by key with atomic fetch_or:
// a lock-prefixed OR per word (8 per key) drains the store buffer and stops a
// core overlapping its cache misses. Measured on a 2-core x86 (125 MiB filter,
// 10 M keys): atomic add on 2 threads ran at 26 M keys/s against 45 M keys/s
// for one thread with plain ORs.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/backend.hpp"
#include "host/cpu/bloom_kernels.hpp"

namespace gbf {

bool cpu_has_avx2() {
#if GBF_CPU_X86
  __builtin_cpu_init();  // needed when called before static initialization completes
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

namespace detail {
namespace {

using cpu::kernel_op;
using cpu::kernel_set;
using cpu::key_hashes;
using cpu::range_job;
using cpu::stored_hashes;

// Set bits in n words. POPCNT is not in the x86-64 baseline, so without
// -mpopcnt __builtin_popcount compiles to a libgcc call per word; the POPCNT
// entry point runs the same loop with the instruction where the CPU has it.
GBF_FORCEINLINE std::uint64_t count_bits_loop(const std::uint32_t* words, std::uint64_t n) {
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits += static_cast<std::uint64_t>(__builtin_popcount(words[i]));
  return bits;
}
#if GBF_CPU_X86
__attribute__((target("popcnt"))) std::uint64_t count_bits_popcnt(const std::uint32_t* words,
                                                                   std::uint64_t n) {
  return count_bits_loop(words, n);
}
#endif
std::uint64_t count_bits(const std::uint32_t* words, std::uint64_t n) {
#if GBF_CPU_X86
  static const bool has_popcnt = __builtin_cpu_supports("popcnt") != 0;
  if (has_popcnt) return count_bits_popcnt(words, n);
#endif
  return count_bits_loop(words, n);
}

using detail::min_keys_per_thread;
/// Words (4 MiB) below which popcount and combine stay on fewer threads.
constexpr std::uint64_t min_words_per_thread = std::uint64_t{1} << 20;
/// add_new's threads keep this many hashes at a time (32 MiB), bounding its
/// scratch memory whatever the batch size; chunks run one after another, which
/// keeps batch order.
constexpr std::uint64_t owned_chunk_keys = std::uint64_t{1} << 22;
/// Alignment of the bit array: a block (at most 16 words = 64 bytes) never
/// straddles a cache line, and AVX2 loads of a block are aligned.
constexpr std::uint64_t cache_line_bytes = 64;

static_assert(sizeof(std::size_t) >= sizeof(std::uint64_t),
              "the largest filter (2^38 bytes) needs a 64-bit size_t");

/// Bit arrays from this size on are mapped whole, in 2 MiB huge pages where the
/// kernel grants them (see allocate_words).
constexpr std::uint64_t huge_page_bytes = std::uint64_t{2} << 20;

/// Frees a bit array: munmap for a mapped one (mapped_bytes > 0), else free.
struct word_deleter {
  std::uint64_t mapped_bytes = 0;
  void operator()(std::uint32_t* p) const noexcept {
    if (mapped_bytes > 0)
      ::munmap(p, mapped_bytes);
    else
      std::free(p);
  }
};
using word_array = std::unique_ptr<std::uint32_t[], word_deleter>;

/// The zeroed, 64-byte aligned bit array of `l`.
///
/// A filter beyond the caches is probed at random: every probe is a TLB miss
/// with 4 KiB pages once the array passes the TLB's reach (a few MiB), and the
/// page walk adds to the DRAM miss. With `huge_pages`, arrays of 2 MiB or more
/// are mapped 2 MiB-aligned and marked MADV_HUGEPAGE, which kernels whose
/// transparent huge pages are in "madvise" mode (a common default) need before
/// they back a mapping with 2 MiB pages; where the kernel declines, the mapping
/// still works with 4 KiB pages. Measured on a 2-vCPU EPYC VM (docs/cpu-vs-gpu.md, "Huge pages"):
/// 1-thread add and contains at 256 MiB 1.23-1.25x faster; creation, which
/// faults every page in, from 4x faster to 3x slower depending on how much the
/// kernel must compact memory to find free huge pages.
word_array allocate_words(const layout& l, bool huge_pages) {
  const std::uint64_t bytes = l.size_bytes();
  const auto fail = [bytes] {
    return allocation_error("cannot allocate the CPU filter's bit array of " + std::to_string(bytes) +
                                " bytes",
                            bytes);
  };
  if (huge_pages && bytes >= huge_page_bytes) {
    // Huge pages back only 2 MiB-aligned ranges: map one extra huge page and
    // trim the mapping to an aligned start.
    const std::uint64_t mapped = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    void* raw = ::mmap(nullptr, mapped + huge_page_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw fail();
    const auto raw_start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (raw_start + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    if (start > raw_start) ::munmap(raw, start - raw_start);
    const std::uintptr_t tail = raw_start + mapped + huge_page_bytes - (start + mapped);
    if (tail > 0) ::munmap(reinterpret_cast<void*>(start + mapped), tail);
    void* memory = reinterpret_cast<void*>(start);
#if defined(MADV_HUGEPAGE)
    ::madvise(memory, mapped, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
    word_array words(static_cast<std::uint32_t*>(memory), word_deleter{mapped});
    // Touch every page now, as the memset of the small path does: creating the
    // filter pays for the page faults, not its first batches.
    std::memset(memory, 0, mapped);
    return words;
  }
  // aligned_alloc takes only multiples of the alignment.
  const std::uint64_t padded = (bytes + cache_line_bytes - 1) / cache_line_bytes * cache_line_bytes;
  void* memory = std::aligned_alloc(cache_line_bytes, padded);
  if (memory == nullptr) throw fail();
  std::memset(memory, 0, padded);
  return word_array(static_cast<std::uint32_t*>(memory));
}

/// Start of part `part` when [0, n) is cut into `parts` contiguous ranges whose
/// sizes differ by at most one (no n * part product, so no overflow).
std::uint64_t part_begin(std::uint64_t n, unsigned parts, unsigned part) {
  return n / parts * part + std::min<std::uint64_t>(part, n % parts);
}

/// Calls fn(part, begin, end) for each range [bounds[part], bounds[part + 1]):
/// part 0 on the calling thread, the others on threads of their own. A thread
/// that cannot be started leaves its part to the calling thread: the work is
/// done either way.
template <class Fn>
void run_in_ranges(const std::vector<std::uint64_t>& bounds, const Fn& fn) {
  const auto parts = static_cast<unsigned>(bounds.size() - 1);
  std::vector<std::thread> workers;
  workers.reserve(parts - 1);
  struct join_all {
    std::vector<std::thread>& threads;
    ~join_all() {
      for (std::thread& t : threads) t.join();
    }
  } joiner{workers};
  for (unsigned part = 1; part < parts; ++part) {
    const std::uint64_t begin = bounds[part];
    const std::uint64_t end = bounds[part + 1];
    try {
      workers.emplace_back([&fn, part, begin, end] { fn(part, begin, end); });
    } catch (const std::system_error&) {
      fn(part, begin, end);
    }
  }
  fn(0u, bounds[0], bounds[1]);
}

/// `parts` contiguous ranges of [0, n) whose sizes differ by at most one.
std::vector<std::uint64_t> even_bounds(unsigned parts, std::uint64_t n) {
  std::vector<std::uint64_t> bounds(parts + 1);
  for (unsigned part = 0; part <= parts; ++part) bounds[part] = part_begin(n, parts, part);
  return bounds;
}

/// Calls fn(part, begin, end) for each of `parts` even ranges of [0, n) (see run_in_ranges).
template <class Fn>
void run_in_parts(unsigned parts, std::uint64_t n, const Fn& fn) {
  run_in_ranges(even_bounds(parts, n), fn);
}

/// What hashing a string costs, in "keys": one per key plus one per this many bytes
/// (xxh64 runs at a few GB/s; a probe costs about what hashing 16 bytes does).
constexpr std::uint64_t bytes_per_key_cost = 16;

/// The work of keys [0, i) of a string batch: i + (bytes before key i) / 16.
std::uint64_t string_work(const key_batch& keys, std::size_t i) {
  const auto bytes = static_cast<std::uint64_t>(offset_at(keys, i) - offset_at(keys, 0));
  return i + bytes / bytes_per_key_cost;
}

/// `parts` contiguous key ranges of equal work: even by count for integers, by
/// count and bytes for strings (a batch with a few long strings among many short
/// ones would otherwise leave one thread hashing the long ones alone). Offsets
/// are non-decreasing, so work is monotone in i and each cut is a binary search.
std::vector<std::uint64_t> key_bounds(const key_batch& keys, unsigned parts) {
  if (!keys.is_string() || parts == 1) return even_bounds(parts, keys.count);
  std::vector<std::uint64_t> bounds(parts + 1);
  const std::uint64_t total = string_work(keys, keys.count);
  bounds[0] = 0;
  bounds[parts] = keys.count;
  for (unsigned part = 1; part < parts; ++part) {
    const std::uint64_t target = part_begin(total, parts, part);
    std::uint64_t lo = bounds[part - 1], hi = keys.count;  // first i with work(i) >= target
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (string_work(keys, mid) < target) lo = mid + 1; else hi = mid;
    }
    bounds[part] = lo;
  }
  return bounds;
}

void require_host(const key_batch& keys) {
  if (keys.space == memory_space::device)
    throw invalid_argument(
        "keys are in device memory but this filter uses the CPU backend; copy them to the "
        "host or use the GPU backend");
}

class cpu_backend final : public backend_impl {
 public:
  cpu_backend(const layout& l, bool use_avx2, unsigned num_threads, bool huge_pages)
      : layout_(checked(l)),
        num_threads_(num_threads),
        kernels_(cpu::select_kernels(l.words_per_block, use_avx2)),
        words_(allocate_words(l, huge_pages)) {}

  /// e.g. "cpu (avx2, 16 threads)": the kernel that actually runs for this layout.
  std::string description() const {
    return std::string("cpu (") + kernels_.isa + ", " + std::to_string(num_threads_) +
           (num_threads_ == 1 ? " thread)" : " threads)");
  }

  backend kind() const noexcept override { return backend::cpu; }
  const layout& get_layout() const noexcept override { return layout_; }

  void add(const key_batch& keys) override { run_owned(kernel_op::add, keys, nullptr); }

  void add_new(const key_batch& keys, bool* is_new) override {
    clear_null_results(keys, is_new);
    run_owned(kernel_op::add_new, keys, is_new);
  }

  void contains(const key_batch& keys, bool* found) const override {
    clear_null_results(keys, found);
    run_keys(kernel_op::contains, keys, found, key_parts(keys));
  }

  std::uint64_t count(const key_batch& keys) const override {
    return run_keys(kernel_op::count, keys, nullptr, key_parts(keys));
  }

  // Each thread compacts its key range [b_t, e_t) in place into rows[b_t ..]
  // (branch-free: see kernel_op::select); then the per-thread runs move down, in
  // thread order, to follow one another. A run only moves left (its destination,
  // the hits of earlier ranges, is at most b_t), so memmove in order is safe.
  std::uint64_t select(const key_batch& keys, std::uint64_t* rows) const override {
    const unsigned parts = key_parts(keys);
    const std::vector<std::uint64_t> bounds = key_bounds(keys, parts);
    std::vector<std::uint64_t> counts(parts);
    with_hashes(keys, [&](auto hash_of, auto kernel) {
      run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
        auto job = make_job(kernel_op::select, hash_of, begin, end, nullptr, keys);
        job.rows = rows;
        counts[part] = kernel(job);
      });
      return std::uint64_t{0};
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

  void combine(const backend_impl& other, set_op op) override {
    const auto* cpu_other = dynamic_cast<const cpu_backend*>(&other);
    if (cpu_other == nullptr || cpu_other->layout_ != layout_)
      throw invalid_argument("combine needs another CPU filter of the same layout");
    combine_host(cpu_other->words_.get(), op);
  }

  void combine_host(const std::uint32_t* other, set_op op) override {
    std::uint32_t* const words = words_.get();
    run_in_parts(word_parts(), layout_.num_words(),
                 [words, other, op](unsigned, std::uint64_t begin, std::uint64_t end) {
                   if (op == set_op::union_or) {
                     for (std::uint64_t i = begin; i < end; ++i) words[i] |= other[i];
                   } else {
                     for (std::uint64_t i = begin; i < end; ++i) words[i] &= other[i];
                   }
                 });
  }

  std::uint64_t popcount() const override {
    const std::uint32_t* const words = words_.get();
    const unsigned parts = word_parts();
    std::vector<std::uint64_t> counts(parts);
    run_in_parts(parts, layout_.num_words(),
                 [words, &counts](unsigned part, std::uint64_t begin, std::uint64_t end) {
                   counts[part] = count_bits(words + begin, end - begin);
                 });
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  void read_words(std::uint32_t* out) const override {
    std::memcpy(out, words_.get(), layout_.size_bytes());
  }

  void write_words(const std::uint32_t* in) override {
    std::memcpy(words_.get(), in, layout_.size_bytes());
  }

  std::uint32_t* host_words() noexcept override { return words_.get(); }

 private:
  static const layout& checked(const layout& l) {
    if (const char* problem = layout_problem(l))
      throw invalid_argument(std::string("invalid layout: ") + problem);
    return l;
  }

  /// Threads worth using for `work` items when each should get at least `min_per_thread`.
  unsigned parts_for(std::uint64_t work, std::uint64_t min_per_thread) const {
    return static_cast<unsigned>(
        std::clamp<std::uint64_t>(work / min_per_thread, 1, num_threads_));
  }
  unsigned key_parts(const key_batch& keys) const {
    const std::uint64_t work = keys.is_string() ? string_work(keys, keys.count) : keys.count;
    return parts_for(work, min_keys_per_thread);
  }

  /// The kernels skip null keys; their found / is_new answers are false.
  static void clear_null_results(const key_batch& keys, bool* results) {
    if (keys.validity == nullptr) return;
    for (std::size_t i = 0; i < keys.count; ++i)
      if (!key_valid(keys.validity, keys.validity_bit, i)) results[i] = false;
  }
  unsigned word_parts() const { return parts_for(layout_.num_words(), min_words_per_thread); }

  template <class Hashes>
  range_job<Hashes> make_job(kernel_op op, Hashes hash_of, std::size_t begin, std::size_t end,
                             bool* results, const key_batch& keys) const {
    return {op,      hash_of,    begin, end, words_.get(), layout_.num_blocks, layout_.bits_per_key,
            0,       layout_.num_blocks, results, keys.validity, keys.validity_bit};
  }

  /// Calls fn(hash_of, kernel) with the hash source and kernel of the batch's key type.
  template <class Fn>
  std::uint64_t with_hashes(const key_batch& keys, const Fn& fn) const {
    require_host(keys);
    const auto* bytes = static_cast<const unsigned char*>(keys.data);
    if (keys.kind == key_kind::str32)
      return fn(cpu::string_hashes<std::int32_t>{
                    bytes, static_cast<const std::int32_t*>(keys.offsets), layout_.seed},
                kernels_.str32_keys);
    if (keys.kind == key_kind::str64)
      return fn(cpu::string_hashes<std::int64_t>{
                    bytes, static_cast<const std::int64_t*>(keys.offsets), layout_.seed},
                kernels_.str64_keys);
    if (keys.kind == key_kind::u32)
      return fn(key_hashes<std::uint32_t>{static_cast<const std::uint32_t*>(keys.data), layout_.seed},
                kernels_.u32_keys);
    return fn(key_hashes<std::uint64_t>{static_cast<const std::uint64_t*>(keys.data), layout_.seed},
              kernels_.u64_keys);
  }

  /// Runs `op` over the batch in `parts` contiguous key ranges; returns the summed count.
  std::uint64_t run_keys(kernel_op op, const key_batch& keys, bool* results,
                         unsigned parts) const {
    return with_hashes(keys, [&](auto hash_of, auto kernel) {
      std::vector<std::uint64_t> counts(parts);
      run_in_ranges(key_bounds(keys, parts), [&](unsigned part, std::uint64_t begin,
                                                 std::uint64_t end) {
        counts[part] = kernel(make_job(op, hash_of, begin, end, results, keys));
      });
      return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    });
  }

  /// Runs a writing `op` (add, add_new) over the batch: one thread in batch order,
  /// or several threads each owning a block range (see the top of the file).
  void run_owned(kernel_op op, const key_batch& keys, bool* results) {
    const unsigned parts = static_cast<unsigned>(
        std::min<std::uint64_t>(key_parts(keys), layout_.num_blocks));
    if (parts == 1) {
      run_keys(op, keys, results, 1);
      return;
    }
    with_hashes(keys, [&](auto hash_of, auto) {
      std::vector<std::uint64_t> hashes = scratch_hashes(std::min(keys.count, owned_chunk_keys));
      for (std::size_t chunk = 0; chunk < keys.count; chunk += owned_chunk_keys) {
        const std::size_t chunk_keys = std::min(keys.count - chunk, owned_chunk_keys);
        key_batch piece = keys;  // the chunk's keys, for a work-balanced hashing split
        piece.count = chunk_keys;
        if (keys.is_string())
          piece.offsets = static_cast<const unsigned char*>(keys.offsets) +
                          chunk * (keys.kind == key_kind::str32 ? 4 : 8);
        run_in_ranges(key_bounds(piece, parts), [&](unsigned, std::uint64_t begin,
                                                    std::uint64_t end) {
          for (std::size_t i = begin; i < end; ++i) hashes[i] = hash_of(chunk + i);
        });
        run_in_parts(parts, layout_.num_blocks,
                     [&](unsigned, std::uint64_t first_block, std::uint64_t end_block) {
                       range_job<stored_hashes> job =
                           make_job(op, stored_hashes{hashes.data()}, 0, chunk_keys,
                                    results == nullptr ? nullptr : results + chunk, keys);
                       job.validity_bit = keys.validity_bit + chunk;
                       job.first_block = first_block;
                       job.owned_blocks = end_block - first_block;
                       kernels_.stored(job);
                     });
      }
      return std::uint64_t{0};
    });
  }

  static std::vector<std::uint64_t> scratch_hashes(std::uint64_t count) {
    try {
      return std::vector<std::uint64_t>(count);
    } catch (const std::bad_alloc&) {
      const std::uint64_t bytes = count * sizeof(std::uint64_t);
      throw allocation_error("cannot allocate " + std::to_string(bytes) +
                                 " bytes of scratch hashes for add_new",
                             bytes);
    }
  }

  layout layout_;
  unsigned num_threads_;
  kernel_set kernels_;
  word_array words_;
};

}  // namespace

std::unique_ptr<backend_impl> make_cpu_backend(const layout& l, cpu_simd simd, unsigned threads,
                                               std::string* description, bool huge_pages) {
  const bool have_avx2 = cpu_has_avx2();
  if (simd == cpu_simd::avx2 && !have_avx2)
    throw invalid_argument(
        "cpu_simd::avx2 was requested but this CPU does not support AVX2; use "
        "cpu_simd::automatic or cpu_simd::scalar");
  const unsigned num_threads =
      threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  auto backend = std::make_unique<cpu_backend>(l, simd != cpu_simd::scalar && have_avx2,
                                               num_threads, huge_pages);
  if (description != nullptr) *description = backend->description();
  return backend;
}

}  // namespace detail
}  // namespace gbf
