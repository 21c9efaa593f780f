// The scaling chain on the CPU: one word array per level (host/cpu/memory.hpp),
// the chain probe of host/cpu/scaling_kernels.hpp for every read, and the
// plain filter's add_new kernel over stored hashes for the slices of an add.
//
// Threads. Probes (contains, count, select, and the add's probe_all and
// drop_present) split the keys into contiguous ranges, one per thread, each
// compacting its own range in place before the ranges move down in order (as
// the plain filter's select). A slice's add_new splits by block: the slice is
// partitioned by block owner (host/cpu/owned_blocks.hpp, as the counting
// filter's writes) and each thread applies the hashes of its blocks in slice
// order, so the answers are the sequential ones and no two threads write a
// word. The results do not depend on the thread count
// (tests/unit/test_scaling.cpp checks it).
//
// An add runs in pieces of piece_keys keys, one after another, bounding the
// scratch (hashes and positions of the candidates: 13 bytes a key).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gbf/error.hpp"
#include "host/backend.hpp"
#include "host/cpu/bloom_kernels.hpp"
#include "host/cpu/memory.hpp"
#include "host/cpu/owned_blocks.hpp"
#include "host/cpu/scaling_kernels.hpp"
#include "host/cpu/threads.hpp"
#include "host/keys.hpp"
#include "host/scaling_backend.hpp"

namespace gbf::detail {
namespace {

constexpr std::size_t piece_keys = std::size_t{1} << 22;

void require_host(const key_batch& keys) {
  if (keys.space == memory_space::device)
    throw invalid_argument(
        "keys are in device memory but this chain uses the CPU backend; copy them to the "
        "host or use the GPU backend");
}

template <class T>
std::vector<T> scratch(std::size_t count, const char* what) {
  try {
    return std::vector<T>(count);
  } catch (const std::bad_alloc&) {
    const std::uint64_t bytes = std::uint64_t{count} * sizeof(T);
    throw allocation_error("cannot allocate " + std::to_string(bytes) + " bytes of " + what,
                           bytes);
  }
}

class cpu_scaling final : public scaling_backend {
 public:
  cpu_scaling(const shape& s, cpu::cpu_isa isa, unsigned num_threads, bool huge_pages)
      : shape_(s),
        num_threads_(num_threads),
        huge_pages_(huge_pages),
        kernels_(cpu::select_kernels(s.words_per_block, isa)),
        chain_kernels_(cpu::select_chain_kernels(s.words_per_block, isa != cpu::cpu_isa::scalar)) {}

  std::string description() const {
    return std::string("cpu (") + kernels_.isa + ", " + std::to_string(num_threads_) +
           (num_threads_ == 1 ? " thread)" : " threads)");
  }

  backend kind() const noexcept override { return backend::cpu; }

  void push_level(const layout& l) override {
    levels_.push_back({l, cpu::allocate_words(l.size_bytes(), huge_pages_, "a chain level")});
    views_.push_back({levels_.back().words.get(), l.num_blocks});
  }

  void pop_level() noexcept override {
    views_.pop_back();
    levels_.pop_back();
  }

  std::uint64_t add(const key_batch& keys, bool* is_new, const call_options& call,
                    const scaling_config& config, std::vector<scaling_level>& levels) override {
    require_sync(call);
    require_host(keys);
    std::uint64_t inserted = 0;
    for (std::size_t first = 0; first < keys.count; first += piece_keys) {
      steps s(*this, slice(keys, first, std::min(piece_keys, keys.count - first)),
              is_new == nullptr ? nullptr : is_new + first);
      inserted += fill(s, config, levels);
    }
    return inserted;
  }

  void contains(const key_batch& keys, bool* found, const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    run_keys(cpu::chain_op::contains, keys, found, nullptr);
  }

  std::uint64_t count(const key_batch& keys, std::uint64_t*, const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    return run_keys(cpu::chain_op::count, keys, nullptr, nullptr);
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t*,
                       const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    return run_keys(cpu::chain_op::select, keys, nullptr, rows);
  }

  std::uint64_t popcount(std::size_t level) const override {
    const level_memory& m = levels_.at(level);
    const std::uint32_t* const words = m.words.get();
    const unsigned parts = word_parts(m.l);
    std::vector<std::uint64_t> counts(parts);
    cpu::run_in_parts(parts, m.l.num_words(),
                      [words, &counts](unsigned part, std::uint64_t begin, std::uint64_t end) {
                        counts[part] = cpu::count_set_bits(words + begin, end - begin);
                      });
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  void read_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                  std::uint32_t* out) const override {
    std::memcpy(out, levels_.at(level).words.get() + first, count * sizeof(std::uint32_t));
  }

  void write_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                   const std::uint32_t* in) override {
    std::memcpy(levels_.at(level).words.get() + first, in, count * sizeof(std::uint32_t));
  }

  void or_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                const std::uint32_t* in) override {
    level_memory& m = levels_.at(level);
    std::uint32_t* const words = m.words.get() + first;
    cpu::run_in_parts(word_parts(m.l), count,
                      [words, in](unsigned, std::uint64_t begin, std::uint64_t end) {
                        for (std::uint64_t i = begin; i < end; ++i) words[i] |= in[i];
                      });
  }

  void begin_trial() override {
    level_memory& newest = levels_.back();
    cpu::word_array copy =
        cpu::allocate_words(newest.l.size_bytes(), huge_pages_, "the trial copy of a level");
    std::memcpy(copy.get(), newest.words.get(), newest.l.size_bytes());
    kept_ = std::move(newest.words);
    newest.words = std::move(copy);
    views_.back().words = newest.words.get();
  }

  void end_trial(bool keep) noexcept override {
    if (!keep) {
      levels_.back().words = std::move(kept_);
      views_.back().words = levels_.back().words.get();
    }
    kept_.reset();
  }

  void synchronize(const char*) const override {}

 private:
  struct level_memory {
    layout l;
    cpu::word_array words;
  };

  /// Keys [first, first + count) of a batch as a batch of their own.
  static key_batch slice(const key_batch& keys, std::size_t first, std::size_t count) {
    key_batch piece = keys;
    piece.count = count;
    piece.validity_bit = keys.validity_bit + first;
    if (keys.is_string()) {
      // Offsets index the caller's whole data buffer, so only the offsets move.
      piece.offsets = static_cast<const unsigned char*>(keys.offsets) + first * offset_bytes(keys.kind);
    } else {
      piece.data = static_cast<const unsigned char*>(keys.data) + first * key_bytes(keys.kind);
    }
    return piece;
  }

  unsigned key_parts(const key_batch& keys) const {
    return cpu::parts_for(cpu::key_work(keys, keys.count), cpu::min_keys_per_thread, num_threads_);
  }
  unsigned word_parts(const layout& l) const {
    return cpu::parts_for(l.num_words(), cpu::min_words_per_thread, num_threads_);
  }

  template <class Hashes>
  cpu::chain_job<Hashes> job(cpu::chain_op op, Hashes hash_of, std::size_t begin, std::size_t end,
                             const std::uint8_t* validity, std::size_t validity_bit,
                             const cpu::chain_level_view* levels, std::size_t num_levels) const {
    cpu::chain_job<Hashes> j{};
    j.op = op;
    j.hash_of = hash_of;
    j.begin = begin;
    j.end = end;
    j.validity = validity;
    j.validity_bit = validity_bit;
    j.levels = levels;
    j.num_levels = num_levels;
    j.bits_per_key = shape_.bits_per_key;
    return j;
  }

  /// Moves the runs [bounds[p], bounds[p] + counts[p]) of `arrays` down to follow one
  /// another from `to`; returns the total. Runs only move left, so in order is safe.
  template <class... Arrays>
  static std::size_t join_runs(const std::vector<std::uint64_t>& bounds,
                               const std::vector<std::uint64_t>& counts, std::size_t to,
                               Arrays*... arrays) {
    std::size_t total = to;
    for (std::size_t part = 0; part < counts.size(); ++part) {
      if (counts[part] != 0 && total != bounds[part])
        (std::memmove(arrays + total, arrays + bounds[part], counts[part] * sizeof(*arrays)), ...);
      total += counts[part];
    }
    return total - to;
  }

  /// contains / count / select over a batch, in key ranges on threads.
  std::uint64_t run_keys(cpu::chain_op op, const key_batch& keys, bool* found,
                         std::uint64_t* rows) const {
    const unsigned parts = key_parts(keys);
    const std::vector<std::uint64_t> bounds = cpu::key_bounds(keys, parts);
    std::vector<std::uint64_t> counts(parts);
    cpu::with_hashes(keys, shape_.seed, [&](auto hash_of) {
      const auto kernel = cpu::chain_kernel_for<decltype(hash_of)>(chain_kernels_);
      cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
        auto j = job(op, hash_of, begin, end, keys.validity, keys.validity_bit, views_.data(),
                     views_.size());
        j.results = found;
        j.rows = rows;
        counts[part] = kernel(j);
      });
    });
    if (op == cpu::chain_op::select) return join_runs(bounds, counts, 0, rows);
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  /// The steps of fill on one piece of a batch (host/scaling_backend.hpp).
  class steps final : public fill_steps {
   public:
    steps(cpu_scaling& chain, const key_batch& keys, bool* is_new)
        : chain_(chain), keys_(keys), is_new_(is_new) {}

    std::size_t probe_all() override {
      if (is_new_ != nullptr) std::fill(is_new_, is_new_ + keys_.count, false);
      hashes_ = scratch<std::uint64_t>(keys_.count, "candidate hashes");
      positions_ = scratch<std::uint32_t>(keys_.count, "candidate positions");
      const unsigned parts = chain_.key_parts(keys_);
      const std::vector<std::uint64_t> bounds = cpu::key_bounds(keys_, parts);
      std::vector<std::uint64_t> counts(parts);
      cpu::with_hashes(keys_, chain_.shape_.seed, [&](auto hash_of) {
        const auto kernel = cpu::chain_kernel_for<decltype(hash_of)>(chain_.chain_kernels_);
        cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
          auto j = chain_.job(cpu::chain_op::absent, hash_of, begin, end, keys_.validity,
                              keys_.validity_bit, chain_.views_.data(), chain_.views_.size());
          j.out_hashes = hashes_.data();
          j.out_positions = positions_.data();
          counts[part] = kernel(j);
        });
      });
      return size_ = join_runs(bounds, counts, 0, hashes_.data(), positions_.data());
    }

    std::uint64_t add_slice(std::size_t level, std::size_t first, std::size_t n) override {
      const layout& l = chain_.levels_[level].l;
      std::unique_ptr<bool[]> slice_new(new bool[n]);
      const cpu::stored_hashes hashes{hashes_.data() + first};
      const auto parts = static_cast<unsigned>(std::min<std::uint64_t>(
          {cpu::parts_for(n, cpu::min_keys_per_thread, chain_.num_threads_), l.num_blocks,
           cpu::max_block_owners}));
      const auto job_for = [&](cpu::stored_hashes of, std::size_t count, bool* answers) {
        const cpu::key_range<cpu::stored_hashes> range{of, 0, count, l.num_blocks, nullptr, 0};
        return cpu::bloom_job<cpu::stored_hashes>{cpu::kernel_op::add_new, range,
                                                  chain_.levels_[level].words.get(),
                                                  l.bits_per_key, answers, nullptr};
      };
      if (parts == 1) {
        chain_.kernels_.stored(job_for(hashes, n, slice_new.get()));
      } else {
        const auto split = [](std::uint64_t, std::uint64_t count, unsigned streams) {
          return cpu::even_bounds(streams, count);
        };
        cpu::partition_by_owner(
            hashes, n, nullptr, 0, split, parts, l.num_blocks, chain_.owned_scratch_,
            "a scaling filter add", [&](unsigned, const cpu::owned_share& share) {
              chain_.kernels_.stored(job_for(share.hashes, share.count, share.answers));
              share.publish_answers(slice_new.get());
            });
      }
      std::uint64_t added = 0;
      for (std::size_t j = 0; j < n; ++j) {
        added += slice_new[j] ? 1 : 0;
        if (is_new_ != nullptr) is_new_[positions_[first + j]] = slice_new[j];
      }
      return added;
    }

    std::size_t drop_present(std::size_t level, std::size_t first) override {
      const std::size_t n = size_ - first;
      std::uint64_t* const hashes = hashes_.data() + first;
      std::uint32_t* const positions = positions_.data() + first;
      const unsigned parts = cpu::parts_for(n, cpu::min_keys_per_thread, chain_.num_threads_);
      const std::vector<std::uint64_t> bounds = cpu::even_bounds(parts, n);
      std::vector<std::uint64_t> counts(parts);
      cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
        auto j = chain_.job(cpu::chain_op::absent, cpu::stored_hashes{hashes}, begin, end, nullptr,
                            0, &chain_.views_[level], 1);
        j.out_hashes = hashes;
        j.out_positions = positions;
        j.in_positions = positions;
        counts[part] = chain_.chain_kernels_.stored(j);
      });
      // The kept candidates start at hashes_[first]; move them to the front.
      const std::size_t kept = join_runs(bounds, counts, 0, hashes, positions);
      std::memmove(hashes_.data(), hashes, kept * sizeof(std::uint64_t));
      std::memmove(positions_.data(), positions, kept * sizeof(std::uint32_t));
      return size_ = kept;
    }

    std::size_t drop_repeats() override {
      // Candidate indices ordered by (hash, index): the first of each run of equal
      // hashes is the earliest candidate with that hash.
      std::vector<std::uint32_t> order = scratch<std::uint32_t>(size_, "a deduplication order");
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(), [this](std::uint32_t a, std::uint32_t b) {
        return hashes_[a] != hashes_[b] ? hashes_[a] < hashes_[b] : a < b;
      });
      std::vector<unsigned char> keep = scratch<unsigned char>(size_, "deduplication flags");
      for (std::size_t t = 0; t < size_; ++t)
        keep[order[t]] = t == 0 || hashes_[order[t]] != hashes_[order[t - 1]];
      std::size_t kept = 0;
      for (std::size_t j = 0; j < size_; ++j) {
        hashes_[kept] = hashes_[j];
        positions_[kept] = positions_[j];
        kept += keep[j];
      }
      return size_ = kept;
    }

    void open_level(const layout& l) override { chain_.push_level(l); }

   private:
    cpu_scaling& chain_;
    key_batch keys_;
    bool* is_new_;
    std::vector<std::uint64_t> hashes_;
    std::vector<std::uint32_t> positions_;
    std::size_t size_ = 0;  // candidates (set by probe_all, drop_present, drop_repeats)
  };

  shape shape_;
  unsigned num_threads_;
  bool huge_pages_;
  cpu::kernel_set kernels_;
  cpu::chain_kernel_set chain_kernels_;
  std::vector<level_memory> levels_;
  std::vector<cpu::chain_level_view> views_;  // levels_, as the probe loop sees them
  cpu::word_array kept_;                      // the original newest level during a trial
  cpu::owned_scratch owned_scratch_;          // threaded slices' partition, kept between adds
};

}  // namespace

std::unique_ptr<scaling_backend> make_cpu_scaling(const shape& s, const options& opts,
                                                  std::string* description) {
  const cpu::cpu_isa isa = cpu::pick_cpu_isa(opts.simd);
  const unsigned num_threads =
      opts.cpu_threads != 0 ? opts.cpu_threads : std::max(1u, std::thread::hardware_concurrency());
  auto chain = std::make_unique<cpu_scaling>(s, isa, num_threads, opts.cpu_huge_pages);
  if (description != nullptr) *description = chain->description();
  return chain;
}

}  // namespace gbf::detail
