// Sizing: from what users know (capacity n, target false-positive rate) to a
// layout, using the exact expected FPR of the blocked layout rather than the
// classic Bloom formula, which underestimates a blocked filter's FPR.
//
// Model. With n keys in B blocks, the keys in one block are ~ Poisson(n / B).
// Word w of a block gets c_w probes per key (k / W for the split layout), so a
// block holding j keys has put m = j c_w independent uniform probes into it;
// X_w, its number of set bits, is the occupancy of 32 bins after m balls. An
// absent key's own c_w probes there all hit set bits with probability
// (X_w / 32)^c_w, the words filling independently given j:
//   fpr_block(j) = prod_w E[(X_w / 32)^c_w | m = j c_w]
// and the filter's FPR is E_j[fpr_block(j)] = sum_j Pois(j) fpr_block(j).
// For c_w = 1 the word term is 1 - (31/32)^j. For c_w > 1 it exceeds
// (1 - (31/32)^(j c_w))^c_w, the shortcut that treats the query's probes as
// c_w distinct bits set independently: probes may coincide and the fill
// varies (Jensen). That shortcut undershot the FPR of k > W layouts, by up to
// 80% (1/32 at fpp 1%; 2-6% for 1/4, 2/6, 4/8, 8/16; docs/layout.md).
// This is the standard blocked-filter analysis (Putze, Sanders, Singler 2007,
// "Cache-, Hash- and Space-Efficient Bloom Filters"), specialised to words,
// and the real probe bits follow it (tests/unit/test_promises.cpp measures every
// (W, k) class).
#pragma once

#include <cstdint>

#include "gbf/layout.hpp"

namespace gbf {

/// The shape of a filter apart from its size: block width, bits per key, seed.
struct shape {
  std::uint32_t words_per_block = 8;  ///< W, one of 1, 2, 4, 8, 16.
  std::uint32_t bits_per_key = 8;     ///< k, W <= k <= 32.
  std::uint64_t seed = 0;             ///< xxh64 seed.
};

/// Expected FPR of `l` holding `num_keys` distinct keys (exact Poisson model above):
/// in [0, 1]; 0 for num_keys <= 0 or NaN, 1 for +infinity (a full filter's estimate);
/// invalid_argument for an invalid `l` (layout_problem), as for the two estimates below.
double expected_fpr(const layout& l, double num_keys);

/// Smallest layout of shape `s` whose expected FPR at `capacity` keys is <= `fpp`.
/// Throws invalid_argument for capacity 0, fpp not in (0, 1) or NaN, a bad shape,
/// or a filter that would need more than 2^32 blocks.
layout size_for(std::uint64_t capacity, double fpp, const shape& s = {});

/// Bits per key of the classic (unblocked) Bloom filter for `fpp`: -ln(fpp) / ln(2)^2;
/// invalid_argument for an fpp outside (0, 1).
double classic_bits_per_key(double fpp);

/// Bits per key `l` spends at `capacity` keys: l.num_bits() / capacity; invalid_argument
/// for capacity 0.
double bits_per_key_at(const layout& l, std::uint64_t capacity);

/// Estimated distinct keys in a filter of layout `l` with `bits_set` bits set,
/// inverting E[unset bits] = sum_w (1 - q_w)^n, q_w = (1 - (31/32)^c_w) / num_blocks.
/// Returns +infinity for a full filter.
double estimate_distinct_keys(const layout& l, std::uint64_t bits_set);

/// Standard deviation of estimate_distinct_keys over random sets of `num_keys`
/// distinct keys in `l` (exact covariances of the bits, then the delta method);
/// 0 for num_keys <= 0, +infinity for +infinity.
double estimate_standard_error(const layout& l, double num_keys);

}  // namespace gbf
