// The range check of the calls that copy a slice of a filter's words out
// (filter::copy_words, counting_filter::copy_counters, cuckoo_filter::copy_words).
#pragma once

#include <cstdint>
#include <string>

#include "gbf/error.hpp"

namespace gbf::detail {

/// Throws invalid_argument "<what>: words [first, first + count) pass the filter's N"
/// unless the slice lies within `total` words, or "<what>: out is null".
inline void check_word_range(const char* what, std::uint64_t first, std::uint64_t count,
                             std::uint64_t total, const void* out) {
  if (first > total || count > total - first)
    throw invalid_argument(std::string(what) + ": words [" + std::to_string(first) + ", " +
                           std::to_string(first) + " + " + std::to_string(count) + ") pass the filter's " +
                           std::to_string(total));
  if (count > 0 && out == nullptr) throw invalid_argument(std::string(what) + ": out is null");
}

}  // namespace gbf::detail
