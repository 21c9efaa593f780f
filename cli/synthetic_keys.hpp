// Distinct synthetic keys for the demo and the benchmark: SplitMix64 over
// counters (gbf/detail/splitmix64.hpp), a bijection, so keys made from
// disjoint counter ranges never collide and every probe hit of a key never
// added is a false positive.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gbf::cli {

/// out[i] = gbf::detail::splitmix64(first + i) for i < n, on `threads` threads (0 = all).
void make_distinct_keys(std::uint64_t* out, std::uint64_t first, std::size_t n,
                        unsigned threads = 0);

}  // namespace gbf::cli
