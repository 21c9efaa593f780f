// The cuckoo table as the GPU kernels see it (cuckoo.cu, cuckoo_sorted.cu):
// vector loads of a bucket, and the lock-free insert and remove.
//
// Lock-free updates. A bucket is four 64-bit words; a tag changes by an
// atomicCAS of its word (8, 4 or 2 tags), retried while other lanes of the
// word change under it. Buckets an update reads come through L2 (__ldcg), which
// is where the atomics act, so a retry sees other SMs' writes.
//
// An insert that finds both buckets full searches an eviction chain
// (cuckoo_find_chain, the same search the CPU runs) and carries it out from
// its far end: each move first copies the tag into a free slot of its other
// bucket, then swaps the old slot from that tag to the next one along (an
// empty slot, or the new tag at the start). The tag being moved is in the
// table the whole time (briefly twice), so no key present before can go
// missing, whatever other threads do. When the copy finds no room, or the swap
// finds another tag in the slot (a concurrent move or remove), the move is
// undone (one copy of the tag removed from its bucket pair, see undo_copy) and
// the insert searches again, up to insert_attempts times; the moves already
// made stay made and are harmless.
// Two tags equal in the same bucket belong to keys with the same two buckets
// and tag, so removing "a" copy of a tag is always as good as removing "the" copy.
#pragma once

#include <cstdint>

#include "gbf/cuckoo_layout.hpp"

namespace gbf::detail::gpu::cuckoo {

/// Times a concurrent insert searches a chain again after a concurrent change broke one.
/// A batch that fills the table from empty to 90% at once has thousands of chains
/// crossing each other near the end: 4 attempts left one key of 29491 uninserted
/// on an H100 (GpuCuckoo.ConcurrentAddsAndRemovesAgreeWithTheMultisetModel).
inline constexpr int insert_attempts = 16;

/// Reads bucket `b` of `words` with two 16-byte non-coherent loads (for kernels that only read).
__device__ __forceinline__ void load_bucket_readonly(const std::uint64_t* words, std::uint64_t b,
                                                     std::uint64_t* out) {
  const auto* p = reinterpret_cast<const ulonglong2*>(words + b * cuckoo_bucket_words);
  const ulonglong2 lo = __ldg(p);
  const ulonglong2 hi = __ldg(p + 1);
  out[0] = lo.x;
  out[1] = lo.y;
  out[2] = hi.x;
  out[3] = hi.y;
}

/// Reads bucket `b` through L2 (coherent with the atomics of other SMs).
__device__ __forceinline__ void load_bucket_coherent(const std::uint64_t* words, std::uint64_t b,
                                                     std::uint64_t* out) {
  const auto* p = reinterpret_cast<const ulonglong2*>(words + b * cuckoo_bucket_words);
  const ulonglong2 lo = __ldcg(p);
  const ulonglong2 hi = __ldcg(p + 1);
  out[0] = lo.x;
  out[1] = lo.y;
  out[2] = hi.x;
  out[3] = hi.y;
}

/// A table many threads update at once.
template <std::uint32_t TagBits>
struct shared_table {
  using bucket_ops = cuckoo_bucket<TagBits>;
  std::uint64_t* words;
  std::uint64_t num_buckets;

  __device__ unsigned long long* word_of(std::uint64_t b, std::uint32_t s) const {
    return reinterpret_cast<unsigned long long*>(words + b * cuckoo_bucket_words +
                                                 s / bucket_ops::slots_per_word);
  }

  /// Puts `tag` into a free slot of bucket b (the lowest it sees); false when full.
  __device__ bool place(std::uint64_t b, std::uint32_t tag) const {
    std::uint64_t w[cuckoo_bucket_words];
    load_bucket_coherent(words, b, w);
    for (;;) {
      const std::uint32_t s = bucket_ops::find(w, 0);
      if (s == bucket_ops::slots) return false;
      const std::uint32_t wi = s / bucket_ops::slots_per_word;
      const unsigned long long seen =
          atomicCAS(word_of(b, s), w[wi], bucket_ops::with_tag(w[wi], s, tag));
      if (seen == w[wi]) return true;
      w[wi] = seen;  // another lane changed: look again with the word as it is now
    }
  }

  /// Sets slot s of bucket b from `expected` to `desired`; false when the slot
  /// no longer holds `expected`.
  __device__ bool swap(std::uint64_t b, std::uint32_t s, std::uint32_t expected,
                       std::uint32_t desired) const {
    unsigned long long* const word = word_of(b, s);
    unsigned long long old = __ldcg(word);
    for (;;) {
      if (bucket_ops::tag_at_word(old, s) != expected) return false;
      const unsigned long long seen = atomicCAS(word, old, bucket_ops::with_tag(old, s, desired));
      if (seen == old) return true;
      old = seen;
    }
  }

  /// Clears one copy of `tag` in bucket b; false when it holds none.
  __device__ bool remove_one(std::uint64_t b, std::uint32_t tag) const {
    std::uint64_t w[cuckoo_bucket_words];
    load_bucket_coherent(words, b, w);
    for (;;) {
      const std::uint32_t s = bucket_ops::find(w, tag);
      if (s == bucket_ops::slots) return false;
      const std::uint32_t wi = s / bucket_ops::slots_per_word;
      const unsigned long long seen =
          atomicCAS(word_of(b, s), w[wi], bucket_ops::with_tag(w[wi], s, 0));
      if (seen == w[wi]) return true;
      w[wi] = seen;
    }
  }

  /// Takes back the extra copy of `tag` that a failed move put into bucket `to`
  /// (its pair being {from, to}). Copies of a tag only move within its pair and
  /// are copied before they are erased, so the pair always holds the extra one:
  /// but another thread's move may have carried it, or another copy, from `to`
  /// back to `from` meanwhile, so either bucket's copy will do (equal tags in a
  /// pair are interchangeable). Removing from `to` alone left, when that copy had
  /// moved, one tag too many: a phantom entry (seen on an H100 as occupied slots
  /// = inserted keys + 1).
  /// The rounds are bounded so that a remove of the same tag running at the same
  /// time on another stream (which may take the pair's last copy) cannot hang it.
  __device__ void undo_copy(std::uint64_t from, std::uint64_t to, std::uint32_t tag) const {
    for (int round = 0; round < 1024; ++round)
      if (remove_one(to, tag) || remove_one(from, tag)) return;
  }

  /// Carries out chain[0, moves) from its far end (see the file comment);
  /// `done` counts the moves made. False when a concurrent change broke it.
  __device__ bool carry_out(const cuckoo_move* chain, std::uint32_t moves, std::uint32_t tag,
                            std::uint32_t& done) const {
    for (std::uint32_t i = moves; i-- > 0;) {
      const cuckoo_move m = chain[i];
      const std::uint64_t to = cuckoo_alternate(m.bucket, m.tag, num_buckets);
      if (!place(to, m.tag)) return false;
      // Two relaxed CASes on different words: without a fence a reader on
      // another SM may see the old slot cleared before the copy lands, and miss
      // a key that was present all along.
      __threadfence();
      if (!swap(m.bucket, m.slot, m.tag, i == 0 ? tag : 0)) {
        undo_copy(m.bucket, to, m.tag);
        return false;
      }
      ++done;
    }
    return true;
  }

  /// Inserts `tag` into bucket `b` or `alt`: a free slot of either, else an
  /// eviction chain of at most max_kicks moves. Returns whether it did; `moves`
  /// counts the tags it moved.
  __device__ bool insert(std::uint64_t b, std::uint64_t alt, std::uint32_t tag,
                         std::uint32_t max_kicks, std::uint32_t& moves) const {
    moves = 0;
    if (place(b, tag) || place(alt, tag)) return true;
    cuckoo_move chain[cuckoo_max_kicks_limit];
    const auto load = [this](std::uint64_t bucket, std::uint64_t* out) {
      load_bucket_coherent(words, bucket, out);
    };
    for (int attempt = 0; attempt < insert_attempts; ++attempt) {
      bool searched = false;
      for (int side = 0; side < 2; ++side) {
        const std::uint64_t start = side == 0 ? b : alt;
        if (side == 1 && alt == b) break;
        const std::uint32_t n =
            cuckoo_find_chain<TagBits>(load, num_buckets, start, tag, max_kicks, chain);
        if (n == 0) continue;
        searched = true;
        if (carry_out(chain, n, tag, moves)) return true;
        break;  // broken by another thread: search again from the top
      }
      if (!searched) return false;  // no chain within max_kicks from either bucket
      // A slot may have been freed meanwhile.
      if (place(b, tag) || place(alt, tag)) return true;
    }
    return false;
  }
};

}  // namespace gbf::detail::gpu::cuckoo
