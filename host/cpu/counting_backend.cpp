// The counting filter on the CPU: the counter array in host memory
// (host/cpu/memory.hpp), the kernels of host/cpu/counting_kernels.hpp (AVX2
// for W >= 8 when the CPU has it and options::simd allows, as the plain
// filter's), and threads for big batches (host/cpu/threads.hpp).
//
// Beside the counters it keeps their projection, a plain CPU filter of the
// same layout (bit set <=> counter nonzero), which every write keeps exact
// (counting_kernels.hpp). contains, count and select are that plain filter's:
// a probe reads one 32-byte block, not the two 64-byte lines of a block's
// 4-bit counters, and costs what a plain probe does. The price is the plain
// filter's memory again: 5x the plain filter in all with 4-bit counters, not
// 4x (docs/counting.md).
//
// Threads. Reads (contains, count, select, approximate_count) split the batch
// by key range. Writes (add, both removes) split the blocks instead
// (host/cpu/owned_blocks.hpp): the batch is partitioned by block owner, and
// each thread applies the keys of its own blocks in batch order, so a checked
// remove answers exactly as one thread walking the batch would, and no
// counter word has two writers.
// Adds and unchecked removes would be exact in any order (saturating
// increments commute, as do floored decrements below the maximum), but the
// ownership split also spares them atomic read-modify-writes, which on x86
// drain the store buffer and stop a core overlapping its cache misses.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "host/bloom_backend.hpp"
#include "host/counting_backend.hpp"
#include "host/cpu/counting_kernels.hpp"
#include "host/cpu/isa.hpp"
#include "host/cpu/memory.hpp"
#include "host/cpu/owned_blocks.hpp"
#include "host/cpu/threads.hpp"

namespace gbf::detail {
namespace {

using cpu::counting_job;
using cpu::counting_op;
using cpu::key_range;
using cpu::stored_hashes;

void require_host(const key_batch& keys) {
  if (keys.space == memory_space::device)
    throw invalid_argument(
        "keys are in device memory but this counting filter uses the CPU backend; copy them "
        "to the host or use the GPU backend");
}

/// Answers of null keys, which the kernels skip: false / 0.
template <class T>
void clear_null_results(const key_batch& keys, T* results) {
  if (keys.validity == nullptr || results == nullptr) return;
  for (std::size_t i = 0; i < keys.count; ++i)
    if (!key_valid(keys.validity, keys.validity_bit, i)) results[i] = T{};
}

class cpu_counting final : public counting_backend {
 public:
  cpu_counting(const layout& l, std::uint32_t counter_bits, unsigned num_threads,
               bool use_avx2, const options& opts)
      : layout_(l),
        counter_bits_(counter_bits),
        num_threads_(num_threads),
        use_avx2_(use_avx2),
        counters_(cpu::allocate_words(counter_bytes(l, counter_bits), opts.cpu_huge_pages,
                                      "the CPU counting filter's counters")),
        probe_kernels_(cpu_bloom_kernels(l, opts)),
        projection_(make_cpu_bloom(l, with_threads(opts, num_threads), nullptr)) {}

  /// e.g. "cpu (avx2 counters, avx512 probes, 16 threads)": the kernels that run
  /// for this layout (the probes' are the projection's, a plain filter's).
  std::string description() const {
    const std::string counters =
        cpu::avx2_counters(layout_.words_per_block, use_avx2_) ? "avx2" : "scalar";
    return "cpu (" + counters + " counters, " + probe_kernels_ + " probes, " +
           std::to_string(num_threads_) + (num_threads_ == 1 ? " thread)" : " threads)");
  }

  backend kind() const noexcept override { return backend::cpu; }

  void add(const key_batch& keys, const call_options& call) override {
    prepare(keys, call);
    run_owned(counting_op::add, keys, nullptr);
  }

  std::uint64_t remove(const key_batch& keys, bool* removed, std::uint64_t*,
                       const call_options& call) override {
    prepare(keys, call);
    clear_null_results(keys, removed);
    return run_owned(counting_op::remove_checked, keys, removed);
  }

  void remove_unchecked(const key_batch& keys, const call_options& call) override {
    prepare(keys, call);
    run_owned(counting_op::remove_unchecked, keys, nullptr);
  }

  void contains(const key_batch& keys, bool* found, const call_options& call) const override {
    prepare(keys, call);
    projection_->contains(keys, found, call);
  }

  std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                      const call_options& call) const override {
    prepare(keys, call);
    return projection_->count(keys, device_count, call);
  }

  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t* device_count,
                       const call_options& call) const override {
    prepare(keys, call);
    return projection_->select(keys, rows, device_count, call);
  }

  void approximate_count(const key_batch& keys, std::uint8_t* counts,
                         const call_options& call) const override {
    prepare(keys, call);
    clear_null_results(keys, counts);
    run_keys(counting_op::approximate_count, keys, nullptr, counts);
  }

  void clear() override {
    std::memset(counters_.get(), 0, counter_bytes(layout_, counter_bits_));
    projection_->clear();
  }

  void merge(const counting_backend& other, counter_merge op) override {
    const auto* cpu_other = dynamic_cast<const cpu_counting*>(&other);
    if (cpu_other == nullptr || cpu_other->layout_ != layout_ ||
        cpu_other->counter_bits_ != counter_bits_)
      throw invalid_argument(std::string(op == counter_merge::sum ? "merge" : "intersect") +
                             " needs another CPU counting filter of the same layout");
    if (cpu_other == this && op == counter_merge::min) return;  // min(x, x) = x
    // x + x reads each word before it writes it: no copy needed.
    merge_host(0, num_counter_words(layout_, counter_bits_), cpu_other->counters_.get(), op);
  }

  void merge_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* other_counters,
                  counter_merge op) override {
    std::uint32_t* const counters = counters_.get() + first;
    const std::uint32_t* const other = other_counters;
    const std::uint32_t c = counter_bits_;
    cpu::run_in_parts(word_parts(), count,
                      [counters, other, c, op](unsigned, std::uint64_t begin, std::uint64_t end) {
                        if (op == counter_merge::sum) {
                          for (std::uint64_t i = begin; i < end; ++i)
                            counters[i] = add_fields_saturating(counters[i], other[i], c);
                        } else {
                          for (std::uint64_t i = begin; i < end; ++i)
                            counters[i] = min_fields(counters[i], other[i], c);
                        }
                      });
    // The plain words the slice touches (as write_counters).
    derive_projection(projection_->host_words(), first / c, (first + count + c - 1) / c);
  }

  counter_census census() const override {
    const std::uint32_t* const counters = counters_.get();
    const unsigned parts = word_parts();
    std::vector<counter_census> partial(parts);
    cpu::run_in_parts(parts, num_counter_words(layout_, counter_bits_),
                      [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
                        partial[part] = counter_bits_ == 4 ? census_of<4>(counters, begin, end)
                                                           : census_of<8>(counters, begin, end);
                      });
    counter_census total;
    for (const counter_census& p : partial) {
      total.nonzero += p.nonzero;
      total.saturated += p.saturated;
    }
    return total;
  }

  void read_counters(std::uint32_t* out) const override {
    std::memcpy(out, counters_.get(), counter_bytes(layout_, counter_bits_));
  }

  void read_counters(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    std::memcpy(out, counters_.get() + first, count * sizeof(std::uint32_t));
  }

  void write_counters(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    std::memcpy(counters_.get() + first, in, count * sizeof(std::uint32_t));
    // Plain word i projects counter words i * c .. i * c + c - 1: re-derive every plain
    // word the slice touches. A word split between two slices is derived again by
    // the second, so once every slice is written each word saw its final counters.
    const std::uint32_t c = counter_bits_;
    derive_projection(projection_->host_words(), first / c, (first + count + c - 1) / c);
  }

  void project(std::uint32_t* words) const override { projection_->read_words(words); }

 private:
  /// Options of the projection: the counting filter's, with its thread count.
  static options with_threads(options opts, unsigned num_threads) {
    opts.cpu_threads = num_threads;
    return opts;
  }

  /// Nonzero and saturated counters of counter words [begin, end). The width is a
  /// constant, so the field masks of a run of words vectorize; count_set_bits then
  /// counts them with POPCNT where the CPU has it (a __builtin_popcount per word
  /// was a libgcc call, and a runtime width kept the loop scalar: 130 ms for the
  /// census of 263 MB of counters).
  template <std::uint32_t C>
  static counter_census census_of(const std::uint32_t* counters, std::uint64_t begin, std::uint64_t end) {
    constexpr std::uint64_t run = 1024;
    std::uint32_t nonzero[run];
    std::uint32_t saturated[run];
    counter_census sum;
    for (std::uint64_t first = begin; first < end; first += run) {
      const std::uint64_t n = std::min(run, end - first);
      for (std::uint64_t i = 0; i < n; ++i) {
        nonzero[i] = nonzero_fields(counters[first + i], C);
        saturated[i] = saturated_fields(counters[first + i], C);
      }
      sum.nonzero += cpu::count_set_bits(nonzero, n);
      sum.saturated += cpu::count_set_bits(saturated, n);
    }
    return sum;
  }

  // Plain word i (word w of block B, i = B * W + w) has its counters in counter
  // words i * c .. i * c + c - 1 (counting_layout.hpp). Derives plain words
  // [first, end).
  void derive_projection(std::uint32_t* words, std::uint64_t first, std::uint64_t end) const {
    const std::uint32_t* const counters = counters_.get();
    const std::uint32_t c = counter_bits_;
    // Threads split the counter words read, as every whole-array pass here does.
    const unsigned parts = cpu::parts_for((end - first) * c, cpu::min_words_per_thread, num_threads_);
    cpu::run_in_parts(parts, end - first,
                      [=](unsigned, std::uint64_t begin, std::uint64_t stop) {
                        for (std::uint64_t i = first + begin; i < first + stop; ++i) {
                          std::uint32_t bits = 0;
                          for (std::uint32_t j = 0; j < c; ++j)
                            bits |= projected_bits(counters[i * c + j], j, c);
                          words[i] = bits;
                        }
                      });
  }

  void synchronize(const char*) const override {}

  static void prepare(const key_batch& keys, const call_options& call) {
    require_sync(call);
    require_host(keys);
  }

  unsigned key_parts(const key_batch& keys) const {
    return cpu::parts_for(cpu::key_work(keys, keys.count), cpu::min_keys_per_thread, num_threads_);
  }
  unsigned word_parts() const {
    return cpu::parts_for(num_counter_words(layout_, counter_bits_), cpu::min_words_per_thread,
                          num_threads_);
  }

  /// The kernel of this filter's W and c for hash source `Hashes`.
  template <class Hashes>
  cpu::counting_kernel<Hashes> kernel_for() const {
    return cpu::counting_kernel_for<Hashes>(layout_.words_per_block, counter_bits_, use_avx2_);
  }

  template <class Hashes>
  counting_job<Hashes> job(counting_op op, Hashes hash_of, std::size_t begin, std::size_t end,
                           const key_batch& keys) const {
    key_range<Hashes> range{hash_of, begin, end, layout_.num_blocks, keys.validity,
                            keys.validity_bit};
    return {op,           range, counters_.get(), layout_.bits_per_key,
            counter_bits_, projection_->host_words(), nullptr, nullptr};
  }

  /// Runs a reading `op` over the batch in contiguous key ranges; returns the summed tally.
  std::uint64_t run_keys(counting_op op, const key_batch& keys, bool* results,
                         std::uint8_t* counts) const {
    const unsigned parts = key_parts(keys);
    return cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = kernel_for<decltype(hash_of)>();
      std::vector<std::uint64_t> tallies(parts);
      cpu::run_in_ranges(cpu::key_bounds(keys, parts), [&](unsigned part, std::uint64_t begin,
                                                           std::uint64_t end) {
        counting_job<decltype(hash_of)> j = job(op, hash_of, begin, end, keys);
        j.results = results;
        j.counts = counts;
        tallies[part] = kernel(j);
      });
      return std::accumulate(tallies.begin(), tallies.end(), std::uint64_t{0});
    });
  }

  /// Runs a writing `op` over the batch: one thread in batch order, or threads
  /// owning block ranges (see the top of the file). Returns the summed tally.
  std::uint64_t run_owned(counting_op op, const key_batch& keys, bool* results) {
    const auto parts = static_cast<unsigned>(std::min<std::uint64_t>(
        {key_parts(keys), layout_.num_blocks, cpu::max_block_owners}));
    if (parts == 1) {
      return cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
        counting_job<decltype(hash_of)> j = job(op, hash_of, 0, keys.count, keys);
        j.results = results;
        return kernel_for<decltype(hash_of)>()(j);
      });
    }
    const auto kernel = kernel_for<stored_hashes>();
    std::vector<std::uint64_t> tallies(parts);
    cpu::run_block_owned(
        keys, layout_.seed, parts, layout_.num_blocks, owned_scratch_, "a counting filter write",
        [&](unsigned part, const cpu::owned_share& share) {
          // A share's keys are all owned and none is null: the dense loop.
          counting_job<stored_hashes> j = job(op, share.hashes, 0, share.count, keys);
          j.keys.validity = nullptr;
          j.results = results == nullptr ? nullptr : share.answers;
          tallies[part] += kernel(j);
          if (results != nullptr) share.publish_answers(results);
        });
    return std::accumulate(tallies.begin(), tallies.end(), std::uint64_t{0});
  }

  layout layout_;
  std::uint32_t counter_bits_;
  unsigned num_threads_;
  bool use_avx2_;  ///< the AVX2 counter kernel for W >= 8 (as the projection's probes)
  cpu::word_array counters_;
  const char* probe_kernels_;  ///< the projection's kernels (cpu_bloom_kernels)
  std::unique_ptr<bloom_backend> projection_;  ///< The plain CPU filter the counters project to.
  cpu::owned_scratch owned_scratch_;  ///< threaded writes' partition, kept between calls
};

}  // namespace

std::unique_ptr<counting_backend> make_cpu_counting(const layout& l, std::uint32_t counter_bits,
                                                    const options& opts, std::string* description) {
  if (const char* problem = counting_layout_problem(l, counter_bits))
    throw invalid_argument(std::string("invalid counting filter layout: ") + problem);
  const bool use_avx2 = cpu::pick_cpu_isa(opts.simd) != cpu::cpu_isa::scalar;
  const unsigned num_threads =
      opts.cpu_threads != 0 ? opts.cpu_threads : std::max(1u, std::thread::hardware_concurrency());
  auto backend = std::make_unique<cpu_counting>(l, counter_bits, num_threads, use_avx2, opts);
  if (description != nullptr) *description = backend->description();
  return backend;
}

}  // namespace gbf::detail
