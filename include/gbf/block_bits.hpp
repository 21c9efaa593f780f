// gbf::block_bits — the bits a batch of keys sets, held as the blocks it touches.
//
//   gbf::block_bits part(shape);          // shape: the layout of the filter to build
//   part.add(keys.data(), keys.size());   // host keys; no filter-sized memory
//   send(part.blocks(), part.words());    // (1 + W) * 4 bytes per touched block
//   ...
//   auto got = gbf::block_bits::from_blocks(shape, blocks, words);  // checked
//   f.merge(got);                         // f |= the keys' bits (f of layout shape)
//
// A partition of n keys sets bits in at most n of a filter's B blocks. A filter
// of its own costs 4 W B bytes however few keys it holds; block_bits costs
// 4 (1 + W) bytes per block it touches, so a distributed build's partition
// (and every merge of partitions until their union fills the filter) moves and
// holds O(keys) bytes, not O(filter). The bits are exactly those filter::add sets:
// the same hash and block math (gbf/layout.hpp), on any backend.
//
// The work is one thread's: hash the batch, sort the hashes by block (an LSD
// radix sort, O(n)), OR each block's masks, merge into the blocks held.
// Errors: invalid_argument for a bad layout or bad keys (null pointers, bad
// string offsets, keys in device memory), layout_mismatch when merging bits of
// another layout, allocation_error when memory runs out (nothing changes then).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf {

class block_bits {
 public:
  /// No bits, for filters of layout `l`. Throws invalid_argument for a bad layout.
  explicit block_bits(const gbf::layout& l);

  /// Bits of layout `l` from their parts (as blocks() and words() give them): `blocks`
  /// ascending, distinct and below l.num_blocks, `words` W per block, no block all
  /// zero; `keys_added` is the count merge() passes on. invalid_argument names the
  /// first entry that breaks a rule.
  static block_bits from_blocks(const gbf::layout& l, std::vector<std::uint32_t> blocks,
                                std::vector<std::uint32_t> words, std::uint64_t keys_added = 0);

  /// Sets the bits of the `n` host keys (32- or 64-bit integers, as filter::add).
  template <class Key>
  void add(const Key* keys, std::size_t n) {
    add_keys(detail::erase(keys, n));
  }
  /// Sets the bits of the non-null host string keys.
  template <class Offset>
  void add(const string_keys<Offset>& keys) {
    add_keys(detail::erase(keys));
  }
  /// this |= other; keys_added sums. Throws layout_mismatch when the layouts differ.
  void merge(const block_bits& other);

  /// The layout the bits belong to.
  const gbf::layout& layout() const noexcept { return layout_; }
  /// Ascending, distinct indices of the blocks with a bit set.
  const std::vector<std::uint32_t>& blocks() const noexcept { return blocks_; }
  /// layout().words_per_block words for each of blocks(), in its order.
  const std::vector<std::uint32_t>& words() const noexcept { return words_; }
  /// Non-null keys added (duplicates included), plus those of merged bits.
  std::uint64_t keys_added() const noexcept { return keys_added_; }
  /// Bytes of blocks() and words(): 4 (1 + W) per block.
  std::uint64_t size_bytes() const noexcept {
    return (blocks_.size() + words_.size()) * sizeof(std::uint32_t);
  }

 private:
  void add_keys(const detail::key_batch& keys);

  gbf::layout layout_;
  std::vector<std::uint32_t> blocks_;
  std::vector<std::uint32_t> words_;
  std::uint64_t keys_added_ = 0;
};

}  // namespace gbf
