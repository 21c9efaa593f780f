// Which thread owns a block when threads split a filter's blocks into
// contiguous ranges (the plain filter's partitioned add), as a function of the
// block and, equally, of a hash's high half.
#pragma once

#include <cstdint>

namespace gbf::detail::cpu {

__extension__ typedef unsigned __int128 uint128;  // GCC and Clang; -Wpedantic-clean

/// The least hash high half x = h >> 32 whose block, (x * num_blocks) >> 32,
/// is `block` or later: that block is >= b exactly when x * num_blocks >= b *
/// 2^32, so x = ceil(b * 2^32 / num_blocks) (2^32 for b = num_blocks: no
/// hash). A test on x alone (no multiply) then gives every hash of a block the
/// block's side of the bound. In 128 bits: b * 2^32 passes 2^64 for b = 2^32.
inline std::uint64_t first_hash_high_of_block(std::uint64_t block, std::uint64_t num_blocks) {
  const uint128 scaled = static_cast<uint128>(block) << 32;
  return static_cast<std::uint64_t>((scaled + num_blocks - 1) / num_blocks);
}

/// Which of `parts` threads owns block b of num_blocks: floor(b * parts /
/// num_blocks) without a division per key (a 64-bit fixed-point reciprocal,
/// rounded down, so the owner is always < parts). It depends on the block only
/// and is monotone in it, so each thread owns one contiguous block range.
struct block_owner {
  std::uint64_t reciprocal;  // floor(2^64 * parts / num_blocks), at most 2^64 - 1
  unsigned parts;

  block_owner(unsigned parts_, std::uint64_t num_blocks) : parts(parts_) {
    const uint128 r = (static_cast<uint128>(parts_) << 64) / num_blocks;
    reciprocal = r > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(r);
  }

  /// The owner of `block`.
  unsigned operator()(std::uint64_t block) const {
    return static_cast<unsigned>((static_cast<uint128>(block) * reciprocal) >> 64);
  }

  /// The first block owned by o or a later owner (0 <= o <= parts; num_blocks
  /// when there is none): the least b with b * reciprocal >= o * 2^64.
  std::uint64_t first_block(unsigned o, std::uint64_t num_blocks) const {
    const uint128 b = ((static_cast<uint128>(o) << 64) + reciprocal - 1) / reciprocal;
    return b < num_blocks ? static_cast<std::uint64_t>(b) : num_blocks;
  }

  /// The same boundary in hash space (first_hash_high_of_block), so that an
  /// owner test on a hash's high half gives every hash of a block the block's owner.
  std::uint64_t first_hash_high(unsigned o, std::uint64_t num_blocks) const {
    return first_hash_high_of_block(first_block(o, num_blocks), num_blocks);
  }
};

}  // namespace gbf::detail::cpu
