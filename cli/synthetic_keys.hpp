// Distinct synthetic keys for the demo and the benchmark.
//
// SplitMix64's finalizer is a bijection on 64-bit integers, so keys made from
// distinct counters are distinct: a filter filled from one counter range and
// probed with another never sees an inserted probe key, which makes every hit
// a false positive and the measured FPR exact.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gbf::cli {

/// SplitMix64's output function of counter x (Steele, Lea, Flood 2014).
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// out[i] = splitmix64(first + i) for i < n, on `threads` threads (0 = all).
void make_distinct_keys(std::uint64_t* out, std::uint64_t first, std::size_t n,
                        unsigned threads = 0);

}  // namespace gbf::cli
