// The plain Bloom filter on the CPU: the bit array in host memory
// (host/cpu/memory.hpp), the kernels of host/cpu/bloom_kernels.hpp chosen once
// per filter, and threads for big batches (host/cpu/threads.hpp).
//
// Threads. A batch of at least 2 * min_keys_per_thread keys is split over
// threads. contains and count only read, so they split by key range.
//
// add (with or without is_new) writes, and partitions the batch by block
// range instead, so that no two threads ever write the same block. Per chunk of
// the batch, two rounds of threads:
//   1. thread p takes a key range (contiguous, equal work), hashes each key once
//      and sorts the hashes of its range into T buckets by owner, stably (owner
//      o owns a contiguous block range, o = floor(b * T / B) through a
//      fixed-point reciprocal; partition_fused / partition_sorted).
//   2. thread o applies, in p order, bucket o of every range: the keys of its
//      blocks in batch order, which is what the sequential loop does to those
//      blocks (add with is_new must answer exactly as that loop would:
//      bloom_backend.hpp). No two threads write the same word, so plain (SIMD)
//      ORs are safe, and each key is hashed and visited once in all.
// A small filter (at most private_copy_max_bytes) takes a cheaper road for
// plain add: threads 1..T-1 each add their key range into a zeroed private
// copy of the bit array (it stays in their core's cache), thread 0 into the
// filter, and then the copies are ORed in, split by word range. OR commutes, so
// the bits are the sequential loop's; add with is_new, whose answers depend on
// batch order, keeps the partition. In cache the partition's extra pass over
// the hashes is most of a key's cost (the private copies double the keys/s of
// 2 threads where the partition gave 1.1-1.2x: docs/cpu.md).
//
// The earlier design (every thread reads the hashes of the whole batch and
// keeps the keys of its blocks) cost each thread a pass over all keys, so 2
// threads ran slower than 1 (issue 13). Its cost now: one more write and read
// of each hash, and the hash no longer overlaps the probe's miss. Lock-free add (atomic fetch_or
// over key ranges) is the alternative: a lock-prefixed OR per word drains the
// store buffer and stops a core overlapping its cache misses
// (bench/bench_cpu_peers.cpp measures it beside this design;
// docs/cpu.md has the numbers).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gbf/error.hpp"
#include "host/bloom_backend.hpp"
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

namespace detail {
namespace {

using cpu::bloom_job;
using cpu::kernel_op;
using cpu::kernel_set;
using cpu::key_range;
using cpu::stored_hashes;

__extension__ typedef unsigned __int128 uint128;  // GCC and Clang; -Wpedantic-clean

/// add's threads partition a chunk of keys at a time; chunks run one after
/// another, which keeps batch order. Each chunk costs two rounds of threads
/// (a start and a join each): on a shared, loaded machine a round waits for
/// its last thread to be scheduled, so a batch takes about 8 chunks, at
/// least 2^18 keys (round 1's scratch then stays in the last-level cache
/// until round 2 reads it) and at most 2^23 cells of 8 bytes: `columns` is the
/// owner columns (partition_fused) or 2 (partition_sorted's hashes and
/// sorted copy), so scratch stays near 64 MiB, 104 MiB with is_new (5 more
/// bytes a cell), whatever the batch size.
constexpr std::uint64_t min_chunk_keys = std::uint64_t{1} << 18;
constexpr std::uint64_t max_chunk_cells = std::uint64_t{1} << 23;
constexpr std::uint64_t chunks_per_batch = 8;

inline std::uint64_t chunk_keys_for(std::uint64_t batch, unsigned columns) {
  const std::uint64_t most = std::max(min_chunk_keys, max_chunk_cells / columns);
  return std::min(batch, std::clamp(batch / chunks_per_batch, min_chunk_keys, most));
}

/// Largest filter whose plain add uses per-thread private copies (see the top
/// of the file): about a core's L2, and so cheap to zero and merge next to
/// the batches that start threads (>= 2 * min_keys_per_thread keys).
constexpr std::uint64_t private_copy_max_bytes = std::uint64_t{1} << 20;

/// ... and the most memory all private copies may take together (many threads).
constexpr std::uint64_t private_copies_max_total_bytes = std::uint64_t{64} << 20;

/// Owners up to which round 1 keeps one cursor per owner in registers
/// (partition_fused); beyond, it counting-sorts (partition_sorted).
constexpr unsigned max_fused_owners = 4;

/// Owners are bytes in round 1's scratch.
constexpr unsigned max_add_threads = 256;

/// Which of `parts` threads owns block b of num_blocks: floor(b * parts /
/// num_blocks) without a division per key (a 64-bit fixed-point reciprocal,
/// rounded down, so the owner is always < parts). It depends on the block only
/// and is monotone in it, so each thread owns one contiguous block range.
struct block_owner {
  std::uint64_t reciprocal;  // floor(2^64 * parts / num_blocks), at most 2^64 - 1
  block_owner(unsigned parts, std::uint64_t num_blocks) {
    const uint128 r = (static_cast<uint128>(parts) << 64) / num_blocks;
    reciprocal = r > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(r);
  }
  unsigned operator()(std::uint64_t block) const {
    return static_cast<unsigned>((static_cast<uint128>(block) * reciprocal) >> 64);
  }
};

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

class cpu_bloom final : public bloom_backend {
 public:
  cpu_bloom(const layout& l, bool use_avx2, unsigned num_threads, bool huge_pages)
      : layout_(l),
        num_threads_(num_threads),
        kernels_(cpu::select_kernels(l.words_per_block, use_avx2)),
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
    combine_host(cpu_other->words_.get(), op);
  }

  void combine_host(const std::uint32_t* other, set_op op) override {
    std::uint32_t* const words = words_.get();
    cpu::run_in_parts(word_parts(), layout_.num_words(),
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
    cpu::run_in_parts(parts, layout_.num_words(),
                      [words, &counts](unsigned part, std::uint64_t begin, std::uint64_t end) {
                        counts[part] = cpu::count_set_bits(words + begin, end - begin);
                      });
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  void read_words(std::uint32_t* out) const override {
    std::memcpy(out, words_.get(), layout_.size_bytes());
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
    key_range<Hashes> range{hash_of,           begin,         end,
                            layout_.num_blocks, 0,            layout_.num_blocks,
                            keys.validity,     keys.validity_bit};
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
    if (op == kernel_op::add && layout_.size_bytes() <= private_copy_max_bytes &&
        layout_.size_bytes() * (parts - 1) <= private_copies_max_total_bytes) {
      add_with_private_copies(keys, parts);
      return;
    }
    const bool answers = results != nullptr;
    const bool few = parts <= max_fused_owners;
    const std::uint64_t chunk_cap = chunk_keys_for(keys.count, few ? parts : 2);
    scratch_.reserve(chunk_cap, few ? parts : 1, !few, answers);
    const block_owner owner_of(parts, layout_.num_blocks);
    // Bucket (p, o): the keys of range p that owner o applies, in batch order.
    // Few owners: owner o has a column of its own (sorted + o * column) and
    // bucket (p, o) is [bounds[p], bucket_end[p * parts + o]) of it. Many: one
    // column, range p's buckets fill [bounds[p], bounds[p + 1]) in owner order.
    std::vector<std::uint64_t> bucket_end(std::size_t{parts} * parts);
    cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      for (std::uint64_t chunk = 0; chunk < keys.count; chunk += chunk_cap) {
        const std::uint64_t chunk_keys = std::min(keys.count - chunk, chunk_cap);
        key_batch piece = keys;  // the chunk's keys, for a work-balanced hashing split
        piece.count = chunk_keys;
        if (keys.is_string())
          piece.offsets = static_cast<const unsigned char*>(keys.offsets) +
                          chunk * offset_bytes(keys.kind);
        const std::vector<std::uint64_t> bounds = cpu::key_bounds(piece, parts);
        cpu::run_in_ranges(bounds, [&](unsigned p, std::uint64_t begin, std::uint64_t end) {
          std::uint64_t* const ends = bucket_end.data() + std::size_t{p} * parts;
          switch (few ? parts : 0) {
            case 2: partition_fused<2>(hash_of, keys, chunk, begin, end, owner_of, ends, answers); break;
            case 3: partition_fused<3>(hash_of, keys, chunk, begin, end, owner_of, ends, answers); break;
            case 4: partition_fused<4>(hash_of, keys, chunk, begin, end, owner_of, ends, answers); break;
            default: partition_sorted(hash_of, keys, chunk, begin, end, owner_of, parts, ends, answers);
          }
        });
        std::vector<std::uint64_t> owners(parts + 1);
        std::iota(owners.begin(), owners.end(), 0u);
        cpu::run_in_ranges(owners, [&](unsigned o, std::uint64_t, std::uint64_t) {
          const std::size_t column = few ? std::size_t{o} * scratch_.column : 0;
          std::uint64_t* const sorted = scratch_.sorted.get() + column;
          for (unsigned p = 0; p < parts; ++p) {
            const std::uint64_t begin =
                few || o == 0 ? bounds[p] : bucket_end[std::size_t{p} * parts + o - 1];
            const std::uint64_t end = bucket_end[std::size_t{p} * parts + o];
            if (begin == end) continue;
            // Dense stored hashes: no nulls (round 1 dropped them), every block.
            bool* const answer = answers ? scratch_.answers.get() + column : nullptr;
            bloom_job<stored_hashes> owned =
                job(op, stored_hashes{sorted}, begin, end, answer, nullptr, keys);
            owned.keys.validity = nullptr;
            kernels_.stored(owned);
            if (answers) {
              const std::uint32_t* const index = scratch_.index.get() + column;
              for (std::uint64_t j = begin; j < end; ++j) results[chunk + index[j]] = answer[j];
            }
          }
        });
      }
    });
  }

  /// Plain add on `parts` threads of a small filter: key range p goes into
  /// private copy p - 1 (range 0 into the filter), then word range p of every
  /// copy is ORed into the filter by thread p.
  void add_with_private_copies(const key_batch& keys, unsigned parts) {
    const std::uint64_t bytes = layout_.size_bytes();
    while (private_copies_.size() < parts - 1)
      private_copies_.push_back(
          cpu::allocate_words(bytes, false, "a thread's private copy of a small CPU filter"));
    cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = kernel_for<decltype(hash_of)>(kernels_);
      cpu::run_in_ranges(cpu::key_bounds(keys, parts), [&](unsigned part, std::uint64_t begin,
                                                           std::uint64_t end) {
        bloom_job<decltype(hash_of)> j = job(kernel_op::add, hash_of, begin, end, nullptr, nullptr, keys);
        if (part != 0) {
          j.words = private_copies_[part - 1].get();
          std::memset(j.words, 0, bytes);
        }
        kernel(j);
      });
    });
    std::uint32_t* const words = words_.get();
    cpu::run_in_parts(parts, layout_.num_words(), [&](unsigned, std::uint64_t begin, std::uint64_t end) {
      for (unsigned copy = 0; copy + 1 < parts; ++copy) {
        const std::uint32_t* const other = private_copies_[copy].get();
        for (std::uint64_t i = begin; i < end; ++i) words[i] |= other[i];
      }
    });
  }

  /// Round 1 of a partitioned add with Parts owners, keys [begin, end) of the
  /// chunk at `chunk`: hashes each non-null key once and appends it (and, for
  /// is_new, its index in the chunk) to its owner's column, from row `begin`
  /// on. Branch-free: every key is written to every column, and only its
  /// owner's cursor moves; the Parts cursors stay in registers. (A cursor
  /// array, sorted[next[o]++] = h, stores to addresses known late and then
  /// loads the next cursor, which the core often mispredicts as dependent:
  /// measured at several ns a key on a 2-core EPYC, more than the add itself.)
  template <unsigned Parts, class Hashes>
  void partition_fused(const Hashes& hash_of, const key_batch& keys, std::uint64_t chunk,
                       std::uint64_t begin, std::uint64_t end, const block_owner owner_of,
                       std::uint64_t* ends, bool answers) {
    std::uint64_t* column[Parts];
    std::uint32_t* index[Parts];
    std::uint64_t cursor[Parts];
    for (unsigned o = 0; o < Parts; ++o) {
      column[o] = scratch_.sorted.get() + std::size_t{o} * scratch_.column;
      index[o] = answers ? scratch_.index.get() + std::size_t{o} * scratch_.column : nullptr;
      cursor[o] = begin;
    }
    const std::uint64_t num_blocks = layout_.num_blocks;
    const auto append = [&](std::uint64_t i, std::uint64_t h, auto with_index) {
      const unsigned mine = owner_of(block_index(h, num_blocks));
      for (unsigned o = 0; o < Parts; ++o) {
        column[o][cursor[o]] = h;
        if constexpr (decltype(with_index)::value) index[o][cursor[o]] = static_cast<std::uint32_t>(i);
        cursor[o] += mine == o ? 1 : 0;
      }
    };
    const auto run = [&](auto with_index) {
      if (keys.validity == nullptr) {
        for (std::uint64_t i = begin; i < end; ++i) append(i, hash_of(chunk + i), with_index);
      } else {
        for (std::uint64_t i = begin; i < end; ++i)
          if (key_valid(keys.validity, keys.validity_bit, chunk + i))
            append(i, hash_of(chunk + i), with_index);
      }
    };
    if (answers)
      run(std::true_type{});
    else
      run(std::false_type{});
    for (unsigned o = 0; o < Parts; ++o) ends[o] = cursor[o];
  }

  /// Round 1 with more owners than partition_fused serves: hashes the non-null
  /// keys of [begin, end) into scratch_.hashes and their owners into
  /// scratch_.owner, then counting-sorts them (stably) into scratch_.sorted
  /// [begin, ..) by owner; ends[o] = where owner o's bucket ends.
  template <class Hashes>
  void partition_sorted(const Hashes& hash_of, const key_batch& keys, std::uint64_t chunk,
                        std::uint64_t begin, std::uint64_t end, const block_owner owner_of,
                        unsigned parts, std::uint64_t* ends, bool answers) {
    std::uint64_t* const hashes = scratch_.hashes.get();
    std::uint8_t* const owner = scratch_.owner.get();
    std::uint64_t* const sorted = scratch_.sorted.get();
    std::uint32_t* const index = scratch_.index.get();
    const std::uint64_t num_blocks = layout_.num_blocks;
    // hashes/owner[begin, valid_end): the non-null keys; original: their indices.
    std::vector<std::uint32_t> original;
    std::uint64_t valid_end = begin;
    for (std::uint64_t i = begin; i < end; ++i) {
      if (!key_valid(keys.validity, keys.validity_bit, chunk + i)) continue;
      const std::uint64_t h = hash_of(chunk + i);
      if (answers) original.push_back(static_cast<std::uint32_t>(i));
      owner[valid_end] = static_cast<std::uint8_t>(owner_of(block_index(h, num_blocks)));
      hashes[valid_end++] = h;
    }
    std::vector<std::uint64_t> next(parts, 0);
    for (std::uint64_t i = begin; i < valid_end; ++i) ++next[owner[i]];
    std::uint64_t at = begin;
    for (unsigned o = 0; o < parts; ++o) {
      const std::uint64_t count = next[o];
      next[o] = at;
      at += count;
      ends[o] = at;
    }
    for (std::uint64_t i = begin; i < valid_end; ++i) {
      const std::uint64_t j = next[owner[i]]++;
      sorted[j] = hashes[i];
      if (answers) index[j] = original[i - begin];
    }
  }

  /// add's partition arrays, kept between calls: a fresh multi-MiB allocation
  /// per call costs a page fault per 4 KiB, a sizeable share of a batch's time.
  struct partition_scratch {
    std::uint64_t column = 0;                 ///< rows of one owner's column
    std::unique_ptr<std::uint64_t[]> sorted;  ///< hashes by owner: columns x column rows
    std::unique_ptr<std::uint32_t[]> index;   ///< is_new: key index in the chunk of sorted[j]
    std::unique_ptr<bool[]> answers;          ///< is_new: answer of sorted[j]
    std::unique_ptr<std::uint64_t[]> hashes;  ///< partition_sorted: hashes in key order
    std::unique_ptr<std::uint8_t[]> owner;    ///< partition_sorted: owner of hashes[i]
    std::uint64_t sorted_size = 0, answers_size = 0, sort_size = 0;

    /// Room for `columns` columns of `rows` rows, with is_new's arrays when
    /// `need_answers`, and partition_sorted's when `need_sort`.
    void reserve(std::uint64_t rows, unsigned columns, bool need_sort, bool need_answers) {
      const std::uint64_t cells = rows * columns;
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
        if (need_sort && sort_size < rows) {
          hashes.reset(new std::uint64_t[rows]);
          owner.reset(new std::uint8_t[rows]);
          sort_size = rows;
        }
      } catch (const std::bad_alloc&) {
        *this = partition_scratch{};
        const std::uint64_t bytes = cells * (8 + (need_answers ? 5 : 0)) + (need_sort ? rows * 9 : 0);
        throw allocation_error("cannot allocate " + std::to_string(bytes) +
                                   " bytes of scratch for a threaded add",
                               bytes);
      }
      column = rows;
    }
  };

  layout layout_;
  unsigned num_threads_;
  kernel_set kernels_;
  cpu::word_array words_;
  partition_scratch scratch_;
  std::vector<cpu::word_array> private_copies_;  ///< add_with_private_copies' arrays, kept between calls.
};

}  // namespace

std::unique_ptr<bloom_backend> make_cpu_bloom(const layout& l, const options& opts,
                                              std::string* description) {
  if (const char* problem = layout_problem(l))
    throw invalid_argument(std::string("invalid layout: ") + problem);
  const bool have_avx2 = cpu_has_avx2();
  if (opts.simd == cpu_simd::avx2 && !have_avx2)
    throw invalid_argument(
        "cpu_simd::avx2 was requested but this CPU does not support AVX2; use "
        "cpu_simd::automatic or cpu_simd::scalar");
  const unsigned num_threads =
      opts.cpu_threads != 0 ? opts.cpu_threads : std::max(1u, std::thread::hardware_concurrency());
  auto backend = std::make_unique<cpu_bloom>(l, opts.simd != cpu_simd::scalar && have_avx2,
                                             num_threads, opts.cpu_huge_pages);
  if (description != nullptr) *description = backend->description();
  return backend;
}

}  // namespace detail
}  // namespace gbf
