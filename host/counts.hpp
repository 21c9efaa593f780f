// Key counters (keys_added, a scaling level's keys) saturate at 2^64 - 1: a file may
// hold any count (one written at the maximum, by design or damage with a valid
// checksum), and adding to it must not wrap to the small number stats() would report.
#pragma once

#include <cstdint>
#include <limits>

namespace gbf::detail {

/// a + b, or 2^64 - 1 where that would wrap.
constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

}  // namespace gbf::detail
