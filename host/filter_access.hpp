// The file readers' access to a filter's insides (gbf::filter befriends this):
// a load allocates the filter first, through the checked allocation, and
// streams the file's words into it, instead of reading them into a vector and
// copying that (twice the filter's memory, unchecked: a 658 MB file was
// OOM-killed in a 1 GiB container).
#pragma once

#include <cstdint>

#include "gbf/filter.hpp"
#include "host/bloom_backend.hpp"

namespace gbf::detail {

struct filter_access {
  /// Replaces words [first, first + count) of `f` with host words (the caller checks the range).
  static void write_words(filter& f, std::uint64_t first, std::uint64_t count, const std::uint32_t* in) {
    f.impl_->write_words(first, count, in);
  }
  /// Restores the count stats() reports, as filter::from_words does.
  static void set_keys_added(filter& f, std::uint64_t keys_added) { f.keys_added_ = keys_added; }
};

}  // namespace gbf::detail
