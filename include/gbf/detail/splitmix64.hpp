// SplitMix64 (Steele, Lea, Flood 2014): the one source of distinct synthetic
// keys for gbf's CLI, benchmarks and tests, on the host and the device.
//
// Its finalizer is a bijection on 64-bit integers, so keys made from distinct
// counters are distinct: a filter filled from one counter range and probed
// with another never sees an inserted probe key, which makes every hit a false
// positive and a measured FPR exact.
#pragma once

#include <cstdint>

#include "gbf/detail/config.hpp"

namespace gbf::detail {

/// The golden-ratio increment of SplitMix64's state.
inline constexpr std::uint64_t splitmix64_gamma = 0x9E3779B97F4A7C15ULL;

/// SplitMix64's finalizer (a bijection on 64 bits).
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// SplitMix64's output for counter x: the finalizer of x + gamma.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t splitmix64(std::uint64_t x) {
  return splitmix64_mix(x + splitmix64_gamma);
}

/// The SplitMix64 generator from `state` (its seed).
struct splitmix64_stream {
  std::uint64_t state = 0;
  GBF_HD std::uint64_t next() {
    state += splitmix64_gamma;
    return splitmix64_mix(state);
  }
};

}  // namespace gbf::detail
