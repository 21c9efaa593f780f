// The cuckoo filter on the CPU: the table in host memory
// (host/cpu/memory.hpp), probes by the kernels of host/cpu/cuckoo_kernels.hpp
// (SWAR or AVX2, chosen once per filter), threads for big read-only batches.
//
// Threads. contains, count, approximate_count and select only read: a batch of
// at least 2 * min_keys_per_thread keys is split by key range. add and remove
// run on one thread in batch order: an insert may move tags of other buckets,
// so no split of the buckets keeps threads apart, and one thread in batch
// order is what makes the CPU's fastest placement deterministic.
//
// Deterministic placement (cuckoo_placement::deterministic) is the algorithm
// the GPU runs in parallel (kernels/cuckoo_sorted.cu), written here step by
// step on one thread with the same sorts, so the two tables are equal.
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
#include "host/counts.hpp"
#include "host/cpu/cuckoo_kernels.hpp"
#include "host/cpu/isa.hpp"
#include "host/cpu/memory.hpp"
#include "host/cpu/threads.hpp"
#include "host/cuckoo_backend.hpp"

namespace gbf::detail {
namespace {

void require_host(const key_batch& keys) {
  if (keys.space == memory_space::device)
    throw invalid_argument(
        "keys are in device memory but this cuckoo filter uses the CPU backend; copy them to "
        "the host or use the GPU backend");
}

template <class Hashes>
cpu::probe_kernel<Hashes> probe_for(const cpu::probe_set& set);
template <>
cpu::probe_kernel<cpu::key_hashes<std::uint32_t>> probe_for(const cpu::probe_set& set) {
  return set.u32_keys;
}
template <>
cpu::probe_kernel<cpu::key_hashes<std::uint64_t>> probe_for(const cpu::probe_set& set) {
  return set.u64_keys;
}
template <>
cpu::probe_kernel<cpu::string_hashes<std::int32_t>> probe_for(const cpu::probe_set& set) {
  return set.str32_keys;
}
template <>
cpu::probe_kernel<cpu::string_hashes<std::int64_t>> probe_for(const cpu::probe_set& set) {
  return set.str64_keys;
}

/// A key of a deterministic piece as the sorts see it: the sort key, then its
/// position in the piece (which breaks ties, as the GPU's stable radix sort does).
struct sort_entry {
  std::uint64_t key;
  std::uint32_t position;
  friend bool operator<(const sort_entry& a, const sort_entry& b) {
    return a.key != b.key ? a.key < b.key : a.position < b.position;
  }
};

/// (bucket, tag) as one 64-bit sort key: bucket indices and tags are below 2^32.
std::uint64_t bucket_tag_key(std::uint64_t bucket, std::uint32_t tag) {
  return bucket << 32 | tag;
}

class cpu_cuckoo final : public cuckoo_backend {
 public:
  cpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks, bool use_avx2, unsigned threads,
             bool huge_pages)
      : layout_(l),
        max_kicks_(max_kicks),
        num_threads_(threads),
        probes_(cpu::select_probe_kernels(l.tag_bits, use_avx2)),
        words_(cpu::allocate_words(l.size_bytes(), huge_pages, "the CPU cuckoo table")) {}

  std::string description() const {
    return std::string("cpu (") + probes_.isa + ", " + std::to_string(num_threads_) +
           (num_threads_ == 1 ? " thread)" : " threads)");
  }

  backend kind() const noexcept override { return backend::cpu; }

  cuckoo_add_report add(const key_batch& keys, cuckoo_status* status,
                        const cuckoo_add_options& how, const call_options& call) override {
    require_sync(call);
    require_host(keys);
    if (status != nullptr) std::memset(status, 0, keys.count);  // skipped until placed
    cuckoo_add_report report;
    dispatch_tag_bits(layout_.tag_bits, [&](auto bits) {
      constexpr std::uint32_t F = decltype(bits)::value;
      cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
        if (how.placement == cuckoo_placement::deterministic) {
          for (std::size_t first = 0; first < keys.count; first += cuckoo_deterministic_piece_keys) {
            const std::size_t n = std::min(keys.count - first, cuckoo_deterministic_piece_keys);
            add_piece_deterministic<F>(hash_of, keys, first, n, status, how.unique, report);
          }
        } else {
          add_in_order<F>(hash_of, keys, status, how.unique, report);
        }
      });
    });
    totals_.keys_added = saturating_add(totals_.keys_added, report.inserted);
    totals_.failed_inserts = saturating_add(totals_.failed_inserts, report.failed);
    return report;
  }

  std::uint64_t remove(const key_batch& keys, bool* removed, const call_options& call) override {
    require_sync(call);
    require_host(keys);
    if (removed != nullptr) std::memset(removed, 0, keys.count);
    std::uint64_t done = 0;
    std::uint64_t* const table = table_words();
    dispatch_tag_bits(layout_.tag_bits, [&](auto bits) {
      constexpr std::uint32_t F = decltype(bits)::value;
      cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
        cpu::for_each_place(hash_of, 0, keys.count, keys.validity, keys.validity_bit, layout_,
                            table, [&](std::size_t i, const cuckoo_place& p) {
                              const bool ok =
                                  cuckoo_remove_exclusive<F>(table, p.bucket, p.alternate, p.tag);
                              if (removed != nullptr) removed[i] = ok;
                              done += ok ? 1 : 0;
                            });
      });
    });
    totals_.keys_removed = saturating_add(totals_.keys_removed, done);
    return done;
  }

  void contains(const key_batch& keys, bool* found, const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    clear_null_results(keys, found);
    run_probes(cpu::probe_op::contains, keys, found, nullptr, nullptr);
  }

  std::uint64_t count(const key_batch& keys, std::uint64_t*, const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    return run_probes(cpu::probe_op::count, keys, nullptr, nullptr, nullptr);
  }

  void approximate_count(const key_batch& keys, std::uint8_t* copies,
                         const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    if (keys.validity != nullptr) std::memset(copies, 0, keys.count);
    run_probes(cpu::probe_op::copies, keys, nullptr, copies, nullptr);
  }

  // Per-thread compaction in place, then the runs move down in thread order
  // (as the Bloom backend's select does).
  std::uint64_t select(const key_batch& keys, std::uint64_t* rows, std::uint64_t*,
                       const call_options& call) const override {
    require_sync(call);
    require_host(keys);
    const unsigned parts = key_parts(keys);
    const std::vector<std::uint64_t> bounds = cpu::key_bounds(keys, parts);
    std::vector<std::uint64_t> counts(parts);
    cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = probe_for<decltype(hash_of)>(probes_);
      cpu::run_in_ranges(bounds, [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
        counts[part] = kernel(job(cpu::probe_op::select, hash_of, begin, end, keys, nullptr,
                                  nullptr, rows));
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

  void clear() override {
    std::memset(words_.get(), 0, layout_.size_bytes());
    totals_ = {};
  }

  std::uint64_t occupied_slots() const override {
    const std::uint64_t* const table = table_words();
    const unsigned parts = cpu::parts_for(layout_.num_buckets * cuckoo_bucket_words,
                                          cpu::min_words_per_thread, num_threads_);
    std::vector<std::uint64_t> counts(parts);
    dispatch_tag_bits(layout_.tag_bits, [&](auto bits) {
      using bucket_ops = cuckoo_bucket<decltype(bits)::value>;
      cpu::run_in_parts(parts, layout_.num_buckets,
                        [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
                          std::uint64_t n = 0;
                          for (std::uint64_t b = begin; b < end; ++b)
                            n += bucket_ops::occupied(table + b * cuckoo_bucket_words);
                          counts[part] = n;
                        });
    });
    return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  }

  cuckoo_totals totals() const override { return totals_; }
  void set_totals(const cuckoo_totals& totals) override { totals_ = totals; }

  void read_words(std::uint32_t* out) const override {
    std::memcpy(out, words_.get(), layout_.size_bytes());
  }
  void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const override {
    std::memcpy(out, words_.get() + first, count * sizeof(std::uint32_t));
  }
  void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) override {
    std::memcpy(words_.get() + first, in, count * sizeof(std::uint32_t));
  }
  const std::uint32_t* device_words() const override { return nullptr; }
  void synchronize(const char*) const override {}

 private:
  std::uint64_t* table_words() const { return reinterpret_cast<std::uint64_t*>(words_.get()); }

  unsigned key_parts(const key_batch& keys) const {
    return cpu::parts_for(cpu::key_work(keys, keys.count), cpu::min_keys_per_thread, num_threads_);
  }

  static void clear_null_results(const key_batch& keys, bool* results) {
    if (keys.validity == nullptr || results == nullptr) return;
    for (std::size_t i = 0; i < keys.count; ++i)
      if (!key_valid(keys.validity, keys.validity_bit, i)) results[i] = false;
  }

  template <class Hashes>
  cpu::probe_job<Hashes> job(cpu::probe_op op, Hashes hash_of, std::size_t begin, std::size_t end,
                             const key_batch& keys, bool* found, std::uint8_t* copies,
                             std::uint64_t* rows) const {
    return {op, hash_of, begin, end, keys.validity, keys.validity_bit, layout_, table_words(),
            found, copies, rows};
  }

  std::uint64_t run_probes(cpu::probe_op op, const key_batch& keys, bool* found,
                           std::uint8_t* copies, std::uint64_t* rows) const {
    const unsigned parts = key_parts(keys);
    return cpu::with_hashes(keys, layout_.seed, [&](auto hash_of) {
      const auto kernel = probe_for<decltype(hash_of)>(probes_);
      std::vector<std::uint64_t> counts(parts);
      cpu::run_in_ranges(cpu::key_bounds(keys, parts),
                         [&](unsigned part, std::uint64_t begin, std::uint64_t end) {
                           counts[part] = kernel(job(op, hash_of, begin, end, keys, found, copies, rows));
                         });
      return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
    });
  }

  /// Inserts one tag; returns inserted or failed and counts the moves.
  template <std::uint32_t F>
  cuckoo_status insert_one(const cuckoo_place& p) {
    const std::uint32_t r = cuckoo_insert_exclusive<F>(table_words(), layout_.num_buckets,
                                                       p.bucket, p.alternate, p.tag, max_kicks_,
                                                       chain_);
    if (r == 0) return cuckoo_status::failed;
    totals_.evictions = saturating_add(totals_.evictions, r - 1);
    return cuckoo_status::inserted;
  }

  static void tally(cuckoo_add_report& report, cuckoo_status s) {
    report.inserted += s == cuckoo_status::inserted;
    report.present += s == cuckoo_status::present;
    report.failed += s == cuckoo_status::failed;
  }

  /// placement::fastest on the CPU: each key in batch order.
  template <std::uint32_t F, class Hashes>
  void add_in_order(const Hashes& hash_of, const key_batch& keys, cuckoo_status* status,
                    bool unique, cuckoo_add_report& report) {
    using bucket_ops = cuckoo_bucket<F>;
    std::uint64_t* const table = table_words();
    cpu::for_each_place(hash_of, 0, keys.count, keys.validity, keys.validity_bit, layout_, table,
                        [&](std::size_t i, const cuckoo_place& p) {
                          const bool present =
                              unique && (bucket_ops::holds(table + p.bucket * cuckoo_bucket_words, p.tag) ||
                                         bucket_ops::holds(table + p.alternate * cuckoo_bucket_words, p.tag));
                          const cuckoo_status s = present ? cuckoo_status::present : insert_one<F>(p);
                          if (status != nullptr) status[i] = s;
                          tally(report, s);
                        });
  }

  /// placement::deterministic for keys [first, first + n) of the batch (see
  /// cuckoo_placement and kernels/cuckoo_sorted.cu, which runs the same steps).
  template <std::uint32_t F, class Hashes>
  void add_piece_deterministic(const Hashes& hash_of, const key_batch& keys, std::size_t first,
                               std::size_t n, cuckoo_status* status, bool unique,
                               cuckoo_add_report& report) {
    using bucket_ops = cuckoo_bucket<F>;
    std::uint64_t* const table = table_words();
    std::vector<cuckoo_place> places(n);
    std::vector<cuckoo_status> outcome(n, cuckoo_status::skipped);
    std::vector<sort_entry> entries;
    entries.reserve(n);
    for (std::size_t j = 0; j < n; ++j) {
      if (!key_valid(keys.validity, keys.validity_bit, first + j)) continue;
      places[j] = cuckoo_place_of(hash_of(first + j), layout_);
      entries.push_back({0, static_cast<std::uint32_t>(j)});
    }
    const auto bucket_words = [table](std::uint64_t b) { return table + b * cuckoo_bucket_words; };

    // Unique adds: a key present before the piece is present; among keys with
    // the same buckets and tag (the same (smaller bucket, tag)), only the first
    // in batch order may be inserted, and the others share its fate. They differ
    // at most in which bucket is their primary: the first is placed as any of
    // them whose primary is the smaller bucket, so that which of them comes first
    // does not change the table (kernels/cuckoo_sorted.cu's dedupe does the same).
    std::vector<std::uint32_t> representative;
    if (unique) {
      for (sort_entry& e : entries) {
        const cuckoo_place& p = places[e.position];
        e.key = bucket_tag_key(std::min(p.bucket, p.alternate), p.tag);
      }
      std::sort(entries.begin(), entries.end());
      representative.assign(n, 0);
      std::vector<sort_entry> candidates;
      for (std::size_t k = 0; k < entries.size(); ++k) {
        const std::uint32_t j = entries[k].position;
        const bool head = k == 0 || entries[k - 1].key != entries[k].key;
        representative[j] = head ? j : representative[entries[k - 1].position];
        if (!head) {
          cuckoo_place& first_place = places[representative[j]];
          if (first_place.bucket > first_place.alternate && places[j].bucket < places[j].alternate)
            first_place = places[j];
          continue;
        }
        const cuckoo_place& p = places[j];
        if (bucket_ops::holds(bucket_words(p.bucket), p.tag) ||
            bucket_ops::holds(bucket_words(p.alternate), p.tag)) {
          outcome[j] = cuckoo_status::present;
        } else {
          candidates.push_back({0, j});
        }
      }
      std::sort(candidates.begin(), candidates.end());  // back to batch order
      entries = std::move(candidates);
    }

    // Round 1: by (primary bucket, tag); each bucket's free slots, lowest first.
    for (sort_entry& e : entries) e.key = bucket_tag_key(places[e.position].bucket, places[e.position].tag);
    std::sort(entries.begin(), entries.end());
    const std::vector<sort_entry> first_order = entries;
    std::vector<sort_entry> pending = fill_runs<F>(entries, places, outcome);
    // Round 2: the rest by (alternate bucket, tag).
    for (sort_entry& e : pending)
      e.key = bucket_tag_key(places[e.position].alternate, places[e.position].tag);
    std::sort(pending.begin(), pending.end());
    fill_runs<F>(pending, places, outcome);
    // Round 3: what is left evicts, one key after another in round 1's order.
    for (const sort_entry& e : first_order)
      if (outcome[e.position] == cuckoo_status::skipped) outcome[e.position] = insert_one<F>(places[e.position]);

    for (std::size_t j = 0; j < n; ++j) {
      if (unique && key_valid(keys.validity, keys.validity_bit, first + j) &&
          representative[j] != j) {
        const cuckoo_status head = outcome[representative[j]];
        outcome[j] = head == cuckoo_status::failed ? cuckoo_status::failed : cuckoo_status::present;
      }
      if (status != nullptr) status[first + j] = outcome[j];
      tally(report, outcome[j]);
    }
  }

  /// One placement round over `sorted` (runs of equal bucket = key >> 32): each
  /// run's tags take its bucket's free slots in order; returns the keys that did
  /// not fit (in `sorted`'s order). Placed keys' outcome becomes inserted.
  template <std::uint32_t F>
  std::vector<sort_entry> fill_runs(const std::vector<sort_entry>& sorted,
                                    const std::vector<cuckoo_place>& places,
                                    std::vector<cuckoo_status>& outcome) {
    using bucket_ops = cuckoo_bucket<F>;
    std::uint64_t* const table = table_words();
    std::vector<sort_entry> rest;
    for (std::size_t k = 0; k < sorted.size();) {
      const std::uint64_t b = sorted[k].key >> 32;
      std::uint64_t* const w = table + b * cuckoo_bucket_words;
      for (; k < sorted.size() && sorted[k].key >> 32 == b; ++k) {
        const std::uint32_t s = bucket_ops::find(w, 0);
        if (s == bucket_ops::slots) {
          rest.push_back(sorted[k]);
          continue;
        }
        std::uint64_t& word = w[s / bucket_ops::slots_per_word];
        word = bucket_ops::with_tag(word, s, places[sorted[k].position].tag);
        outcome[sorted[k].position] = cuckoo_status::inserted;
      }
    }
    return rest;
  }

  cuckoo_layout layout_;
  std::uint32_t max_kicks_;
  unsigned num_threads_;
  cpu::probe_set probes_;
  cpu::word_array words_;
  cuckoo_totals totals_;
  cuckoo_move chain_[cuckoo_max_kicks_limit];
};

}  // namespace

std::unique_ptr<cuckoo_backend> make_cpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks,
                                                const options& opts, std::string* description) {
  if (const char* problem = cuckoo_layout_problem(l))
    throw invalid_argument(std::string("invalid cuckoo layout: ") + problem);
  const bool use_avx2 = cpu::pick_cpu_isa(opts.simd) != cpu::cpu_isa::scalar;
  const unsigned threads =
      opts.cpu_threads != 0 ? opts.cpu_threads : std::max(1u, std::thread::hardware_concurrency());
  auto backend =
      std::make_unique<cpu_cuckoo>(l, max_kicks, use_avx2, threads, opts.cpu_huge_pages);
  if (description != nullptr) *description = backend->description();
  return backend;
}

}  // namespace gbf::detail
