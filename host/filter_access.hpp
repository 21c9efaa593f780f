// The file readers' access to a filter's insides (every filter kind befriends
// this): a load allocates the filter first, through the checked allocation,
// and streams the file's words into it, instead of reading them into a vector
// and copying that (twice the filter's memory, unchecked: a 658 MB file was
// OOM-killed in a 1 GiB container).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "host/bloom_backend.hpp"
#include "host/counting_backend.hpp"
#include "host/cuckoo_backend.hpp"
#include "host/scaling_backend.hpp"

namespace gbf::detail {

// The writes replace a slice of the array; the caller checks the range.
struct filter_access {
  static void write_words(filter& f, std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
    f.impl().write_words(first, count, in);
  }
  /// Restores the count stats() reports, as filter::from_words does.
  static void set_keys_added(filter& f, std::uint64_t keys_added) { f.keys_added_ = keys_added; }
  /// stats().keys_added without stats()' count of every bit (a save needs only this).
  static std::uint64_t keys_added(const filter& f) { return f.keys_added_; }
  /// The bit array of a CPU filter; nullptr on the GPU (device_words() there).
  static std::uint32_t* host_words(filter& f) { return f.impl().host_words(); }

  static void write_counters(counting_filter& f, std::uint64_t first, std::uint64_t count,
                             const std::uint32_t* in) {
    f.impl().write_counters(first, count, in);
  }
  /// stats().keys_added and keys_removed without stats()' census of every counter.
  static std::uint64_t keys_added(const counting_filter& f) { return f.keys_added_; }
  static std::uint64_t keys_removed(const counting_filter& f) { return f.keys_removed_; }
  /// Restores the counts stats() reports, as counting_filter::from_counters does.
  static void set_counts(counting_filter& f, std::uint64_t keys_added, std::uint64_t keys_removed) {
    f.keys_added_ = keys_added;
    f.keys_removed_ = keys_removed;
  }

  static void write_words(cuckoo_filter& f, std::uint64_t first, std::uint64_t count,
                          const std::uint32_t* in) {
    f.impl().write_words(first, count, in);
  }
  /// Restores the counters, as cuckoo_filter::from_words does.
  static void set_totals(cuckoo_filter& f, const cuckoo_totals& totals) { f.impl().set_totals(totals); }

  /// scaling_filter::from_levels' chain, every level zeroed; invalid_argument as there.
  static scaling_filter zeroed_chain(const scaling_config& config,
                                     const std::vector<scaling_level>& levels, const options& opts) {
    return scaling_filter::with_zeroed_levels(config, levels, opts);
  }
  /// A chain over `chain`, a backend already holding `levels` (tests wrap a real
  /// backend in one that fails on cue).
  static scaling_filter adopt_chain(const scaling_config& config, std::vector<scaling_level> levels,
                                    std::unique_ptr<scaling_backend> chain) {
    return scaling_filter(config, std::move(levels), std::move(chain), "adopted");
  }
  static void write_words(scaling_filter& f, std::size_t level, std::uint64_t first,
                          std::uint64_t count, const std::uint32_t* in) {
    f.impl().write_words(level, first, count, in);
  }
};

}  // namespace gbf::detail
