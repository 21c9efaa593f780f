// gbf::block_bits: a batch's bits as the blocks it touches (include/gbf/block_bits.hpp).
#include "gbf/block_bits.hpp"

#include <algorithm>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/backend.hpp"
#include "host/counts.hpp"
#include "host/cpu/key_loop.hpp"
#include "host/keys.hpp"
#include "host/layout_text.hpp"

namespace gbf {
namespace {

using detail::key_batch;

constexpr const char* add_what = "block_bits::add";

/// Bits of a radix-sort digit: 2^11 counters (16 KiB) stay in L1, and three
/// passes cover the 32 bits of the largest block index.
constexpr unsigned digit_bits = 11;
constexpr std::uint32_t digit_mask = (1u << digit_bits) - 1;

[[noreturn]] void out_of_memory(const char* what, std::uint64_t bytes) {
  throw allocation_error(std::string(what) + ": cannot allocate " + detail::format_bytes(bytes) +
                             " for the blocks of the keys",
                         bytes);
}

/// Orders `hashes` by block: an LSD radix sort on block_index(h, num_blocks),
/// which needs only as many 11-bit passes as the largest index has bits (none
/// for one block). Stable, so equal blocks keep add order (which no caller
/// needs, but it makes the output deterministic). allocation_error, with the
/// hashes as they were, when the scratch cannot be had.
void sort_by_block(std::vector<std::uint64_t>& hashes, const layout& l) {
  unsigned index_bits = 0;
  while (index_bits < 64 && (l.num_blocks - 1) >> index_bits != 0) ++index_bits;
  if (index_bits == 0) return;
  std::vector<std::uint64_t> scratch;
  std::vector<std::size_t> counts;
  try {
    scratch.resize(hashes.size());
    counts.resize(std::size_t{1} << digit_bits);
  } catch (const std::bad_alloc&) {
    out_of_memory("block_bits", hashes.size() * sizeof(std::uint64_t));
  }
  for (unsigned shift = 0; shift < index_bits; shift += digit_bits) {
    const auto digit = [&](std::uint64_t h) {
      return static_cast<std::size_t>((block_index(h, l.num_blocks) >> shift) & digit_mask);
    };
    std::fill(counts.begin(), counts.end(), std::size_t{0});
    for (const std::uint64_t h : hashes) ++counts[digit(h)];
    std::size_t start = 0;
    for (std::size_t& c : counts) start += std::exchange(c, start);
    for (const std::uint64_t h : hashes) scratch[counts[digit(h)]++] = h;
    hashes.swap(scratch);
  }
}

/// Appends one block index and W words for each run of equal blocks in `sorted`
/// (hashes ordered by block), the words the OR of the run's masks.
template <std::uint32_t WordsPerBlock>
void or_runs(const std::vector<std::uint64_t>& sorted, const layout& l,
             std::vector<std::uint32_t>& blocks, std::vector<std::uint32_t>& words) {
  std::uint64_t current = ~std::uint64_t{0};
  std::uint32_t* row = nullptr;
  for (const std::uint64_t h : sorted) {
    const std::uint64_t block = block_index(h, l.num_blocks);
    if (block != current) {
      current = block;
      blocks.push_back(static_cast<std::uint32_t>(block));
      words.resize(words.size() + WordsPerBlock);
      row = words.data() + words.size() - WordsPerBlock;
    }
    std::uint32_t masks[WordsPerBlock];
    block_masks<WordsPerBlock>(h, l.bits_per_key, masks);
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) row[w] |= masks[w];
  }
}

/// The union of two sorted block lists and their words (W per block).
void merge_sorted(std::uint32_t words_per_block, const std::vector<std::uint32_t>& a_blocks,
                  const std::vector<std::uint32_t>& a_words, const std::vector<std::uint32_t>& b_blocks,
                  const std::vector<std::uint32_t>& b_words, std::vector<std::uint32_t>& blocks,
                  std::vector<std::uint32_t>& words) {
  blocks.reserve(a_blocks.size() + b_blocks.size());
  words.reserve((a_blocks.size() + b_blocks.size()) * words_per_block);
  std::size_t i = 0;
  std::size_t j = 0;
  const auto append = [&](std::uint32_t block, const std::uint32_t* row) {
    blocks.push_back(block);
    words.insert(words.end(), row, row + words_per_block);
  };
  while (i < a_blocks.size() || j < b_blocks.size()) {
    if (j == b_blocks.size() || (i < a_blocks.size() && a_blocks[i] < b_blocks[j])) {
      append(a_blocks[i], &a_words[i * words_per_block]);
      ++i;
    } else if (i == a_blocks.size() || b_blocks[j] < a_blocks[i]) {
      append(b_blocks[j], &b_words[j * words_per_block]);
      ++j;
    } else {
      append(a_blocks[i], &a_words[i * words_per_block]);
      std::uint32_t* row = &words[words.size() - words_per_block];
      for (std::uint32_t w = 0; w < words_per_block; ++w) row[w] |= b_words[j * words_per_block + w];
      ++i;
      ++j;
    }
  }
}

}  // namespace

block_bits::block_bits(const gbf::layout& l) : layout_(l) {
  if (const char* problem = layout_problem(l))
    throw invalid_argument(std::string("block_bits: invalid layout: ") + problem);
}

block_bits block_bits::from_blocks(const gbf::layout& l, std::vector<std::uint32_t> blocks,
                                   std::vector<std::uint32_t> words, std::uint64_t keys_added) {
  block_bits bits(l);
  const std::uint32_t words_per_block = l.words_per_block;
  const std::string what = "block_bits::from_blocks: ";
  if (words.size() != blocks.size() * words_per_block)
    throw invalid_argument(what + std::to_string(words.size()) + " words for " +
                           std::to_string(blocks.size()) + " blocks of " +
                           std::to_string(words_per_block) + " words (" +
                           std::to_string(blocks.size() * words_per_block) + " expected)");
  const auto at = [&](std::size_t i) {
    return what + "blocks[" + std::to_string(i) + "] = " + std::to_string(blocks[i]);
  };
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i] >= l.num_blocks)
      throw invalid_argument(at(i) + " is past the filter's " + std::to_string(l.num_blocks) + " blocks");
    if (i > 0 && blocks[i] <= blocks[i - 1])
      throw invalid_argument(at(i) + " does not follow blocks[" + std::to_string(i - 1) + "] = " +
                             std::to_string(blocks[i - 1]) + " (blocks must ascend, each once)");
    const std::uint32_t* row = &words[i * words_per_block];
    if (std::all_of(row, row + words_per_block, [](std::uint32_t w) { return w == 0; }))
      throw invalid_argument(at(i) + " has no bit set (only blocks with bits are listed)");
  }
  bits.blocks_ = std::move(blocks);
  bits.words_ = std::move(words);
  bits.keys_added_ = keys_added;
  return bits;
}

block_bits::block_bits(const block_bits& other) : layout_(other.layout_) {
  const std::lock_guard<std::mutex> lock(other.pending_mutex_);
  blocks_ = other.blocks_;
  words_ = other.words_;
  pending_ = other.pending_;
  keys_added_ = other.keys_added_;
}

block_bits& block_bits::operator=(const block_bits& other) {
  if (&other != this) *this = block_bits(other);
  return *this;
}

block_bits::block_bits(block_bits&& other) noexcept
    : layout_(other.layout_),
      blocks_(std::move(other.blocks_)),
      words_(std::move(other.words_)),
      pending_(std::move(other.pending_)),
      keys_added_(std::exchange(other.keys_added_, 0)) {
  other.blocks_.clear();
  other.words_.clear();
  other.pending_.clear();
}

block_bits& block_bits::operator=(block_bits&& other) noexcept {
  if (&other != this) {
    layout_ = other.layout_;
    blocks_ = std::move(other.blocks_);
    words_ = std::move(other.words_);
    pending_ = std::move(other.pending_);
    keys_added_ = std::exchange(other.keys_added_, 0);
    other.blocks_.clear();
    other.words_.clear();
    other.pending_.clear();
  }
  return *this;
}

const std::vector<std::uint32_t>& block_bits::blocks() const {
  merge_pending();
  return blocks_;
}

const std::vector<std::uint32_t>& block_bits::words() const {
  merge_pending();
  return words_;
}

std::uint64_t block_bits::size_bytes() const {
  merge_pending();
  return (blocks_.size() + words_.size()) * sizeof(std::uint32_t);
}

void block_bits::add_keys(const key_batch& keys) {
  const key_batch batch = detail::check_batch(add_what, keys);
  if (batch.count == 0) return;
  if (batch.space != detail::memory_space::host)
    throw invalid_argument(std::string(add_what) +
                           ": the keys are in device memory; block_bits hashes host keys (copy them "
                           "to the host, or add them to a GPU filter)");
  const std::uint64_t valid = detail::count_valid(batch);
  const std::lock_guard<std::mutex> lock(pending_mutex_);
  const std::size_t needed = pending_.size() + valid;
  try {
    // Doubling, as push_back would: one add's exact size would copy the
    // pending hashes again on every small add.
    if (needed > pending_.capacity()) pending_.reserve(std::max<std::size_t>(needed, 2 * pending_.capacity()));
  } catch (const std::bad_alloc&) {
    out_of_memory(add_what, needed * sizeof(std::uint64_t));
  }
  detail::cpu::with_hashes(batch, layout_.seed, [&](auto hash_of) {
    for (std::size_t i = 0; i < batch.count; ++i)
      if (detail::key_valid(batch.validity, batch.validity_bit, i)) pending_.push_back(hash_of(i));
  });
  keys_added_ = detail::saturating_add(keys_added_, valid);
  // A merge costs O(blocks held + hashes pending); waiting until the hashes
  // are as many as the blocks makes each key's share O(1), however small the
  // batches. The wait costs 8 bytes a hash (16 with the vector's doubling), at
  // most 2x the blocks' own 4 (1 + W) bytes each.
  if (pending_.size() >= blocks_.size()) {
    try {
      merge_pending_locked();
    } catch (const allocation_error&) {
      // The hashes stay pending, their bits still held; the next read retries
      // the merge and reports the failure if memory is still short.
    }
  }
}

void block_bits::merge_pending() const {
  const std::lock_guard<std::mutex> lock(pending_mutex_);
  merge_pending_locked();
}

void block_bits::merge_pending_locked() const {
  if (pending_.empty()) return;
  sort_by_block(pending_, layout_);
  const std::vector<std::uint64_t>& sorted = pending_;
  std::vector<std::uint32_t> new_blocks;
  std::vector<std::uint32_t> new_words;
  try {
    switch (layout_.words_per_block) {
      case 1: or_runs<1>(sorted, layout_, new_blocks, new_words); break;
      case 2: or_runs<2>(sorted, layout_, new_blocks, new_words); break;
      case 4: or_runs<4>(sorted, layout_, new_blocks, new_words); break;
      case 8: or_runs<8>(sorted, layout_, new_blocks, new_words); break;
      default: or_runs<16>(sorted, layout_, new_blocks, new_words); break;
    }
    if (!blocks_.empty()) {
      std::vector<std::uint32_t> blocks;
      std::vector<std::uint32_t> words;
      merge_sorted(layout_.words_per_block, blocks_, words_, new_blocks, new_words, blocks, words);
      new_blocks.swap(blocks);
      new_words.swap(words);
    }
  } catch (const std::bad_alloc&) {
    out_of_memory("block_bits", (blocks_.size() + sorted.size()) * (1 + layout_.words_per_block) *
                                    sizeof(std::uint32_t));
  }
  blocks_ = std::move(new_blocks);
  words_ = std::move(new_words);
  pending_.clear();
  pending_.shrink_to_fit();
}

void block_bits::merge(const block_bits& other) {
  if (other.layout_ != layout_)
    throw layout_mismatch("cannot merge block_bits of different layouts (" +
                          detail::layout_differences(layout_, other.layout_) +
                          "): " + to_string(layout_) + " vs " + to_string(other.layout_));
  if (&other == this) return;  // x | x = x; keys_added stays, as filter::merge(self) keeps it
  // The other's pending hashes are its bits too (its reads merge them); ours may stay pending.
  const std::vector<std::uint32_t>& other_blocks = other.blocks();
  const std::vector<std::uint32_t>& other_words = other.words();
  std::vector<std::uint32_t> blocks;
  std::vector<std::uint32_t> words;
  try {
    merge_sorted(layout_.words_per_block, blocks_, words_, other_blocks, other_words, blocks, words);
  } catch (const std::bad_alloc&) {
    out_of_memory("block_bits::merge", (blocks_.size() + other_blocks.size()) *
                                           (1 + layout_.words_per_block) * sizeof(std::uint32_t));
  }
  blocks_ = std::move(blocks);
  words_ = std::move(words);
  keys_added_ = detail::saturating_add(keys_added_, other.keys_added_);
}

}  // namespace gbf
