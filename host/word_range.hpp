// Slices of a filter's words: the range check of the calls that copy a slice
// out (filter::copy_words, counting_filter::copy_counters,
// cuckoo_filter::copy_words, scaling_filter::copy_level_words), and the staged
// copy that moves a whole array a slice at a time (copy_to, loads, the CPU
// twin of verify).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

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

/// Words a step when a whole array moves through host memory: 4 MiB, few steps
/// for a GPU filter (one copy each) and small against any array worth streaming.
inline constexpr std::uint64_t staging_words = std::uint64_t{1} << 20;

/// Moves `n` words from read(first, count, out) to write(first, count, in) through
/// `staging`, a host buffer of at least min(staging_words, n) words: a copy between
/// two filters (two backends, or a GPU filter and its CPU twin) holds both arrays,
/// not a third. A caller that must not allocate part-way (a chain merge) passes
/// its own buffer.
template <class Read, class Write>
void copy_in_steps(std::uint64_t n, std::uint32_t* staging, Read&& read, Write&& write) {
  for (std::uint64_t first = 0; first < n; first += staging_words) {
    const std::uint64_t count = std::min(staging_words, n - first);
    read(first, count, staging);
    write(first, count, static_cast<const std::uint32_t*>(staging));
  }
}

/// copy_in_steps through a staging buffer of its own.
template <class Read, class Write>
void copy_in_steps(std::uint64_t n, Read&& read, Write&& write) {
  std::vector<std::uint32_t> staging(static_cast<std::size_t>(std::min(staging_words, n)));
  copy_in_steps(n, staging.data(), read, write);
}

/// copy_in_steps of the first `n` words of backend `from` into backend `to`
/// (read_words / write_words of a slice: the plain and cuckoo backends).
template <class From, class To>
void copy_backend_words(const From& from, To& to, std::uint64_t n) {
  copy_in_steps(
      n, [&from](std::uint64_t first, std::uint64_t count, std::uint32_t* out) { from.read_words(first, count, out); },
      [&to](std::uint64_t first, std::uint64_t count, const std::uint32_t* in) { to.write_words(first, count, in); });
}

}  // namespace gbf::detail
