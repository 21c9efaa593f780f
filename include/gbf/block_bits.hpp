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
// radix sort, O(n)), OR each block's masks, merge into the blocks held. add()
// only hashes: the hashes wait until they are as many as the blocks held (or
// until the blocks are read), so that a partition added in many small batches
// costs O(keys) in all, not O(blocks held) per batch (a read after every add
// brings that cost back). Const calls are safe from several threads at once.
// Errors: invalid_argument for a bad layout or bad keys (null pointers, bad
// string offsets, keys in device memory), layout_mismatch when merging bits of
// another layout, allocation_error when memory runs out (nothing changes then).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gbf/keys.hpp"
#include "gbf/layout.hpp"

namespace gbf {

class block_bits {
 public:
  /// No bits, for filters of layout `l`. Throws invalid_argument for a bad layout.
  explicit block_bits(const gbf::layout& l);
  /// Copies (the copy holds the same bits and count).
  block_bits(const block_bits& other);
  block_bits& operator=(const block_bits& other);
  /// Moves; the moved-from bits are empty (no blocks, keys_added 0), of the same layout.
  block_bits(block_bits&& other) noexcept;
  block_bits& operator=(block_bits&& other) noexcept;

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
  /// this |= other; keys_added sums, except that bits merged into themselves stay as
  /// they were (x | x = x, as filter::merge). O(blocks of both): merge many parts as a
  /// tree (pairs, then pairs of those), not one by one into a growing whole. Throws
  /// layout_mismatch when the layouts differ.
  void merge(const block_bits& other);

  /// The layout the bits belong to.
  const gbf::layout& layout() const noexcept { return layout_; }
  /// Ascending, distinct indices of the blocks with a bit set. The first read after
  /// add() merges the keys' pending hashes (allocation_error when that runs out of
  /// memory); the vectors stay valid until the next non-const call.
  const std::vector<std::uint32_t>& blocks() const;
  /// layout().words_per_block words for each of blocks(), in its order (as blocks()).
  const std::vector<std::uint32_t>& words() const;
  /// Non-null keys added (duplicates included), plus those of merged bits.
  std::uint64_t keys_added() const noexcept { return keys_added_; }
  /// Bytes of blocks() and words(): 4 (1 + W) per block (as blocks()).
  std::uint64_t size_bytes() const;

 private:
  void add_keys(const detail::key_batch& keys);
  /// Merges pending_ into blocks_ and words_. Const (with a lock) because reads
  /// call it: the bits an object holds do not change, only their form.
  void merge_pending() const;
  void merge_pending_locked() const;

  gbf::layout layout_;
  /// The bits, as blocks() and words() give them, less those of pending_.
  mutable std::vector<std::uint32_t> blocks_;
  mutable std::vector<std::uint32_t> words_;
  /// Hashes of keys added since the last merge, in add order.
  mutable std::vector<std::uint64_t> pending_;
  /// Serialises merge_pending() of concurrent reads; each object has its own.
  mutable std::mutex pending_mutex_;
  std::uint64_t keys_added_ = 0;
};

}  // namespace gbf
