// Writing a CPU batch with threads that each own a slice of the blocks, for
// the counting filter's add and removes and the scaling filter's add_new
// slices, whose writes (and answers) must be exact without atomics. (The
// plain filter's add partitions too, with the partition hidden in the
// apply's cache misses: host/cpu/bloom_backend.cpp.)
//
// Blocks are independent, so owner o of T owns a contiguous block range
// (block_owner). A chunk of the batch is partitioned by owner in three
// parallel steps, each on T threads:
//   1. thread p hashes the keys of its key range once and counts its keys of
//      each owner (per stream: a quarter of the range, see partition_streams);
//   2. the counts give every (owner, stream) pair its place: owner o's bucket
//      holds stream 0's keys of o, then stream 1's, ... (so in batch order),
//      and each thread moves its hashes and key indices there;
//   3. owner o runs the kernel over its bucket: exactly the keys of its
//      blocks in batch order, which is what one thread walking the batch does
//      to those blocks, with the one-thread loop's deep prefetch (every key of
//      a bucket is owned, none null).
// No thread reads more than its share of the keys, so the cost per key does
// not grow with T (an earlier design had every thread read every hash of the
// batch and keep its own: two threads were slower than one once the kernels
// were vectorised). Chunks run one after another, which keeps batch order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gbf/error.hpp"
#include "gbf/keys.hpp"
#include "host/cpu/block_owner.hpp"
#include "host/cpu/key_loop.hpp"
#include "host/cpu/threads.hpp"

namespace gbf::detail::cpu {

/// Keys partitioned at a time: their scratch (23 bytes a key) stays near 6 MiB
/// whatever the batch size, so a filter's first threaded write does not pay
/// many page faults for it (a chunk's three thread starts are tens of
/// microseconds against the milliseconds its 2^18 keys take).
inline constexpr std::uint64_t owned_chunk_keys = std::uint64_t{1} << 18;

/// Owners a partition serves (an owner is 16 bits in the scratch).
inline constexpr unsigned max_block_owners = 1024;
/// The owner of a null key in the scratch.
inline constexpr std::uint16_t null_owner = max_block_owners;

/// The partition's arrays, kept between calls by their user (a fresh
/// multi-MiB allocation per call costs a page fault per 4 KiB).
class owned_scratch {
 public:
  /// Room for `keys` keys a chunk; allocation_error naming `what` when it does not fit.
  void reserve(std::uint64_t keys, const char* what) {
    if (keys <= capacity_) return;
    try {
      hashes_.reset(new std::uint64_t[keys]);
      owner_.reset(new std::uint16_t[keys]);
      sorted_.reset(new std::uint64_t[keys]);
      index_.reset(new std::uint32_t[keys]);
      answers_.reset(new bool[keys]);
      capacity_ = keys;
    } catch (const std::bad_alloc&) {
      *this = owned_scratch{};
      const std::uint64_t bytes = keys * bytes_per_key;
      throw allocation_error("cannot allocate " + std::to_string(bytes) +
                                 " bytes of scratch for " + what,
                             bytes);
    }
  }

  static constexpr std::uint64_t bytes_per_key = 8 + 2 + 8 + 4 + 1;
  std::uint64_t* hashes() const { return hashes_.get(); }  ///< in key order
  std::uint16_t* owner() const { return owner_.get(); }    ///< of hashes()[i]
  std::uint64_t* sorted() const { return sorted_.get(); }  ///< by owner
  std::uint32_t* index() const { return index_.get(); }    ///< chunk index of sorted()[j]
  bool* answers() const { return answers_.get(); }         ///< answer of sorted()[j]

 private:
  std::uint64_t capacity_ = 0;
  std::unique_ptr<std::uint64_t[]> hashes_;
  std::unique_ptr<std::uint16_t[]> owner_;
  std::unique_ptr<std::uint64_t[]> sorted_;
  std::unique_ptr<std::uint32_t[]> index_;
  std::unique_ptr<bool[]> answers_;
};

/// One owner's share of one chunk: the hashes of its keys in batch order;
/// key j of the share is key first + index[j] of the batch, and its answer,
/// if the pass gives one, goes to answers[j].
struct owned_share {
  stored_hashes hashes;
  const std::uint32_t* index;
  bool* answers;
  std::size_t first;
  std::size_t count;

  /// Moves the share's answers to their keys' places: results[first + index[j]].
  void publish_answers(bool* results) const {
    for (std::size_t j = 0; j < count; ++j) results[first + index[j]] = answers[j];
  }
};

/// Key streams a thread interleaves in the partition's two passes. Counting
/// keys per owner and placing them both bump a per-owner counter in memory,
/// and two keys in a row of one owner wait on each other's store (measured:
/// most of the partition's time on 2 threads); four contiguous sub-ranges
/// walked one key each in turn are four independent chains.
inline constexpr unsigned partition_streams = 4;

/// Calls step(stream, i) for every i of the `partition_streams` ranges
/// [bounds[s], bounds[s + 1]), each range in order, the ranges in turn.
template <class Step>
inline void interleave_streams(const std::uint64_t* bounds, const Step& step) {
  constexpr unsigned n = partition_streams;
  std::uint64_t next[n], end[n], common = ~std::uint64_t{0};
  for (unsigned s = 0; s < n; ++s) {
    next[s] = bounds[s];
    end[s] = bounds[s + 1];
    common = std::min(common, end[s] - next[s]);
  }
  for (std::uint64_t k = 0; k < common; ++k)
    for (unsigned s = 0; s < n; ++s) step(s, next[s] + k);
  for (unsigned s = 0; s < n; ++s)
    for (std::uint64_t i = next[s] + common; i < end[s]; ++i) step(s, i);
}

// The partition's two passes over one thread's streams (chunk-relative key
// indices). Every value they use lives in a local: a store through one of
// the arrays may alias any variable the compiler cannot prove local, which
// would be reloaded every key, and the counters and cursors are local arrays
// (at most max_block_owners per stream), copied in and out once.

/// Pass 1: hashes[i] and owner[i] for the keys of the streams
/// [bounds[s], bounds[s + 1]) (null keys: owner null_owner), and
/// counts[s * parts + o] = how many of stream s's keys owner o owns.
template <class Hashes>
void count_owners(const Hashes hash_of, const std::uint8_t* const validity,
                  const std::size_t validity_bit, const std::uint64_t chunk,
                  const block_owner owner_of, const std::uint64_t num_blocks,
                  const std::uint64_t* bounds, std::uint64_t* const hashes,
                  std::uint16_t* const owner, std::uint64_t* counts) {
  const unsigned parts = owner_of.parts;
  std::uint32_t count[partition_streams * max_block_owners];
  std::fill(count, count + partition_streams * parts, 0u);
  interleave_streams(bounds, [&](unsigned s, std::uint64_t i) {
    if (!key_valid(validity, validity_bit, i)) {
      owner[i] = null_owner;
      return;
    }
    const std::uint64_t h = hash_of(chunk + i);
    const unsigned o = owner_of(block_index(h, num_blocks));
    hashes[i] = h;
    owner[i] = static_cast<std::uint16_t>(o);
    ++count[s * parts + o];
  });
  std::copy(count, count + partition_streams * parts, counts);
}

/// Pass 2: each key of the streams moved to its owner's bucket:
/// sorted[j] = its hash, index[j] = i, from place[s * parts + o] on.
inline void place_by_owner(const unsigned parts, const std::uint64_t* bounds,
                           const std::uint64_t* const hashes, const std::uint16_t* const owner,
                           const std::uint64_t* place, std::uint64_t* const sorted,
                           std::uint32_t* const index) {
  std::uint32_t next[partition_streams * max_block_owners];
  std::copy(place, place + partition_streams * parts, next);
  interleave_streams(bounds, [&](unsigned s, std::uint64_t i) {
    const unsigned o = owner[i];
    if (o == null_owner) return;
    const std::uint32_t j = next[s * parts + o]++;
    sorted[j] = hashes[i];
    index[j] = static_cast<std::uint32_t>(i);
  });
}

/// Runs visit(owner, share) for every owner and chunk of a batch of `count`
/// keys whose hashes come from `hash_of` (key i valid per the Arrow bitmap
/// `validity` from bit `validity_bit`, null: all; null keys are dropped), on
/// `parts` threads owning even slices of `num_blocks` blocks (see the file
/// comment). split(chunk, n, streams) cuts keys [chunk, chunk + n) into
/// `streams` ranges of equal work (bounds relative to the chunk). `what`
/// names the operation in an allocation error.
template <class Hashes, class Split, class Visit>
void partition_by_owner(const Hashes& hash_of, std::uint64_t count, const std::uint8_t* validity,
                        std::size_t validity_bit, const Split& split, unsigned parts,
                        std::uint64_t num_blocks, owned_scratch& scratch, const char* what,
                        const Visit& visit) {
  if (parts > max_block_owners)
    throw invalid_argument("a block-owned pass takes at most " +
                           std::to_string(max_block_owners) + " threads");
  scratch.reserve(std::min<std::uint64_t>(count, owned_chunk_keys), what);
  const block_owner owner_of(parts, num_blocks);
  const unsigned streams = parts * partition_streams;
  // counts[s * parts + o]: keys of stream s owned by o; then where they go.
  std::vector<std::uint64_t> counts(std::size_t{streams} * parts);
  std::vector<std::uint64_t> owner_bounds(parts + 1);
  std::uint64_t* const hashes = scratch.hashes();
  std::uint16_t* const owner = scratch.owner();
  std::uint64_t* const sorted = scratch.sorted();
  std::uint32_t* const index = scratch.index();
  for (std::uint64_t chunk = 0; chunk < count; chunk += owned_chunk_keys) {
    const std::uint64_t chunk_keys = std::min(count - chunk, owned_chunk_keys);
    // Thread p walks streams [p * partition_streams, (p + 1) * partition_streams).
    const std::vector<std::uint64_t> bounds = split(chunk, chunk_keys, streams);
    const std::size_t chunk_validity_bit = validity_bit + chunk;
    run_in_parts(parts, parts, [&](unsigned p, std::uint64_t, std::uint64_t) {
      count_owners(hash_of, validity, chunk_validity_bit, chunk, owner_of, num_blocks,
                   bounds.data() + std::size_t{p} * partition_streams, hashes, owner,
                   counts.data() + std::size_t{p} * partition_streams * parts);
    });
    // Owner-major places: o's bucket is stream 0's keys of o, stream 1's, ...
    std::uint64_t at = 0;
    for (unsigned o = 0; o < parts; ++o) {
      owner_bounds[o] = at;
      for (unsigned s = 0; s < streams; ++s) {
        const std::uint64_t n = counts[std::size_t{s} * parts + o];
        counts[std::size_t{s} * parts + o] = at;
        at += n;
      }
    }
    owner_bounds[parts] = at;
    run_in_parts(parts, parts, [&](unsigned p, std::uint64_t, std::uint64_t) {
      place_by_owner(parts, bounds.data() + std::size_t{p} * partition_streams, hashes, owner,
                     counts.data() + std::size_t{p} * partition_streams * parts, sorted, index);
    });
    run_in_ranges(owner_bounds, [&](unsigned o, std::uint64_t begin, std::uint64_t end) {
      visit(o, owned_share{stored_hashes{sorted + begin}, index + begin,
                           scratch.answers() + begin, chunk, end - begin});
    });
  }
}

/// partition_by_owner over the host batch `keys` hashed with `seed`, its
/// string keys split by bytes as well as by count (key_bounds).
template <class Visit>
void run_block_owned(const key_batch& keys, std::uint64_t seed, unsigned parts,
                     std::uint64_t num_blocks, owned_scratch& scratch, const char* what,
                     const Visit& visit) {
  const auto split = [&keys](std::uint64_t chunk, std::uint64_t n, unsigned streams) {
    key_batch piece = keys;
    piece.count = n;
    if (keys.is_string())
      piece.offsets =
          static_cast<const unsigned char*>(keys.offsets) + chunk * offset_bytes(keys.kind);
    return key_bounds(piece, streams);
  };
  with_hashes(keys, seed, [&](auto hash_of) {
    partition_by_owner(hash_of, keys.count, keys.validity, keys.validity_bit, split, parts,
                       num_blocks, scratch, what, visit);
  });
}

}  // namespace gbf::detail::cpu
