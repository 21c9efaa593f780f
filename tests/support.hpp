// Helpers shared by the test files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace gbf::test {

/// `n` keys drawn from mt19937_64(seed): reproducible, and distinct with
/// overwhelming probability for 64-bit keys.
template <class Key = std::uint64_t>
std::vector<Key> random_keys(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Key> keys(n);
  for (Key& key : keys) key = static_cast<Key>(rng());
  return keys;
}

}  // namespace gbf::test
