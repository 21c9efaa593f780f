// The cuckoo filter's table, one implementation for host and device: where a
// key's tag goes, how a bucket is read and compared, and the bounded eviction
// path every insert uses (docs/cuckoo.md).
//
// Table. num_buckets buckets of 32 bytes (one DRAM sector), each holding
// 256 / tag_bits slots: 32 slots of 8-bit tags, 16 of 16-bit tags (the
// default) or 8 of 32-bit tags. Slot s of a bucket is bits [s * f, (s + 1) * f)
// of the bucket read as a 256-bit little-endian integer, i.e. lane s % (64 / f)
// of the bucket's 64-bit word s / (64 / f). Tag 0 marks an empty slot.
//
// A key. h = xxh64 of the key's bytes with `seed` (gbf::hash_key, the hash
// every gbf filter uses). Its primary bucket is block_index(h, num_buckets) =
// ((h >> 32) * num_buckets) >> 32, its tag the low 32 bits of h mapped onto
// [1, 2^f - 1] by a multiply-shift (uniform over the non-zero tags, as
// RedisBloom's `hash % 255 + 1` is for 8-bit ones), and its alternate bucket
//
//   alternate(b, t) = (c(t) - b) mod num_buckets,  c(t) = (fmix32(t) * num_buckets) >> 32.
//
// Partial-key cuckoo hashing: the alternate depends only on the bucket and
// the tag, so a tag can move between its two buckets without its key. The
// classic rule, alternate = b XOR hash(t), needs a power-of-two bucket count
// (XOR of two indices below n can reach past n otherwise); b -> c - b mod n is
// an involution for every n (c - (c - b) = b), so the alternate's alternate is
// always the original and the table can have exactly the buckets sizing asks
// for. For a given tag, b -> alternate(b, t) is a bijection of the buckets; a
// key whose two buckets coincide (2b = c mod n, probability about 1/n) simply
// has one bucket.
//
// Eviction (cuckoo_find_chain below). When both buckets are full, an insert looks
// for a chain of at most max_kicks moves ending in a bucket with a free slot:
// at each level it tries up to cuckoo_lookahead victims, moving the first
// whose alternate bucket has room, else descends into one of them. The chain
// is then carried out from its far end back to the start, each move copying a
// tag into its other bucket before clearing the old slot, so every tag stays
// in the table throughout: a failed or abandoned chain loses nothing, and the
// keys reported inserted are present.
#pragma once

#include <cstdint>
#include <type_traits>

#include "gbf/detail/config.hpp"
#include "gbf/layout.hpp"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gbf's cuckoo table views pairs of 32-bit words as little-endian 64-bit words"
#endif

namespace gbf {

/// Bytes of one bucket: one 32-byte DRAM sector.
inline constexpr std::uint32_t cuckoo_bucket_bytes = 32;
/// 64-bit words of one bucket.
inline constexpr std::uint32_t cuckoo_bucket_words = cuckoo_bucket_bytes / 8;
/// Most buckets a table can have: bucket indices are 32-bit, and one short of
/// 2^32 so that no (bucket, tag) pair packed into 64 bits is all ones, the
/// GPU's sort sentinel.
inline constexpr std::uint64_t cuckoo_max_buckets = (std::uint64_t{1} << 32) - 1;
/// Longest eviction chain (moves) an insert may make: the chain is kept in
/// 12 bytes a move per thread, which on a GPU is local memory of every
/// resident thread (32 moves: 384 bytes).
inline constexpr std::uint32_t cuckoo_max_kicks_limit = 32;
/// RedisBloom's default MAXITERATIONS; see docs/cuckoo.md for why it suits 16- and 32-slot buckets.
inline constexpr std::uint32_t cuckoo_default_max_kicks = 20;
/// Victims whose alternate bucket an eviction level checks for room before descending.
inline constexpr std::uint32_t cuckoo_lookahead = 4;

/// A cuckoo filter's table geometry and hash.
struct cuckoo_layout {
  std::uint32_t tag_bits = 16;    ///< Bits per tag: 8, 16 or 32.
  std::uint64_t num_buckets = 1;  ///< 1 <= num_buckets <= 2^32 - 1.
  std::uint64_t seed = 0;         ///< xxh64 seed of the key hash.

  /// Slots per bucket: 32, 16 or 8.
  GBF_HD constexpr std::uint32_t slots_per_bucket() const { return 256 / tag_bits; }
  /// Slots in the table.
  GBF_HD constexpr std::uint64_t num_slots() const { return num_buckets * slots_per_bucket(); }
  /// Size of the table in bytes.
  GBF_HD constexpr std::uint64_t size_bytes() const { return num_buckets * cuckoo_bucket_bytes; }
  /// 32-bit words of the table (8 per bucket), the unit of files and words().
  GBF_HD constexpr std::uint64_t num_words() const { return num_buckets * 8; }

  friend GBF_HD constexpr bool operator==(const cuckoo_layout& a, const cuckoo_layout& b) {
    return a.tag_bits == b.tag_bits && a.num_buckets == b.num_buckets && a.seed == b.seed;
  }
  friend GBF_HD constexpr bool operator!=(const cuckoo_layout& a, const cuckoo_layout& b) {
    return !(a == b);
  }
};

/// Null when `l` is a possible table, else what is wrong with it.
GBF_HD constexpr const char* cuckoo_layout_problem(const cuckoo_layout& l) {
  if (l.tag_bits != 8 && l.tag_bits != 16 && l.tag_bits != 32) return "tag_bits must be 8, 16 or 32";
  if (l.num_buckets == 0) return "num_buckets must be at least 1";
  if (l.num_buckets > cuckoo_max_buckets) return "num_buckets must be at most 2^32 - 1";
  return nullptr;
}

/// A key's place in the table: its two buckets and its tag.
struct cuckoo_place {
  std::uint64_t bucket;     ///< Primary bucket.
  std::uint64_t alternate;  ///< The other bucket (may equal `bucket`).
  std::uint32_t tag;        ///< In [1, 2^tag_bits - 1].
};

namespace detail {

/// MurmurHash3's 32-bit finalizer: spreads a tag over the bucket range.
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t fmix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

/// A 64-bit word with `value` in the low bits of every f-bit lane.
template <std::uint32_t TagBits>
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t broadcast(std::uint64_t value) {
  return value * (~std::uint64_t{0} / ((std::uint64_t{1} << TagBits) - 1));
}

}  // namespace detail

/// The tag of hash `h` for f-bit tags: low 32 bits mapped onto [1, 2^f - 1].
GBF_HD GBF_FORCEINLINE constexpr std::uint32_t cuckoo_tag(std::uint64_t h, std::uint32_t tag_bits) {
  const std::uint64_t nonzero_tags =
      tag_bits >= 32 ? 0xffffffffULL : (std::uint64_t{1} << tag_bits) - 1;
  return static_cast<std::uint32_t>(((h & 0xffffffffULL) * nonzero_tags) >> 32) + 1;
}

/// The bucket paired with bucket `b` (< n) for tag `tag` in a table of `n` buckets.
GBF_HD GBF_FORCEINLINE constexpr std::uint64_t cuckoo_alternate(std::uint64_t b, std::uint32_t tag,
                                                                std::uint64_t n) {
  const std::uint64_t c = (static_cast<std::uint64_t>(detail::fmix32(tag)) * n) >> 32;
  return c >= b ? c - b : c + n - b;
}

/// Where the key of hash `h` lives in table `l`.
GBF_HD GBF_FORCEINLINE constexpr cuckoo_place cuckoo_place_of(std::uint64_t h,
                                                              const cuckoo_layout& l) {
  const std::uint64_t b = block_index(h, l.num_buckets);
  const std::uint32_t t = cuckoo_tag(h, l.tag_bits);
  return {b, cuckoo_alternate(b, t, l.num_buckets), t};
}

/// Bucket operations for f-bit tags on a bucket of four 64-bit words: SWAR
/// compares (every lane of a word at once), used by the GPU kernels and by the
/// CPU's portable path.
template <std::uint32_t TagBits>
struct cuckoo_bucket {
  static_assert(TagBits == 8 || TagBits == 16 || TagBits == 32, "tags are 8, 16 or 32 bits");
  static constexpr std::uint32_t tag_bits = TagBits;
  static constexpr std::uint32_t slots = 256 / TagBits;
  static constexpr std::uint32_t slots_per_word = 64 / TagBits;
  static constexpr std::uint64_t tag_mask = (std::uint64_t{1} << TagBits) - 1;
  static constexpr std::uint64_t lane_low = detail::broadcast<TagBits>(1);
  static constexpr std::uint64_t lane_high = lane_low << (TagBits - 1);

  /// Top bit of each lane of `x` that is zero, exactly (no borrow between lanes).
  GBF_HD GBF_FORCEINLINE static constexpr std::uint64_t zero_lanes(std::uint64_t x) {
    return ~(((x & ~lane_high) + ~lane_high) | x) & lane_high;
  }
  /// Top bit of each lane of `word` equal to `tag`.
  GBF_HD GBF_FORCEINLINE static constexpr std::uint64_t match_lanes(std::uint64_t word,
                                                                     std::uint32_t tag) {
    return zero_lanes(word ^ detail::broadcast<TagBits>(tag));
  }
  /// The tag in slot `s` of `words` (four words).
  GBF_HD GBF_FORCEINLINE static constexpr std::uint32_t tag_at(const std::uint64_t* words,
                                                               std::uint32_t s) {
    return static_cast<std::uint32_t>((words[s / slots_per_word] >> shift_of(s)) & tag_mask);
  }
  /// The tag of slot `s` in `word`, the bucket word that holds it.
  GBF_HD GBF_FORCEINLINE static constexpr std::uint32_t tag_at_word(std::uint64_t word,
                                                                    std::uint32_t s) {
    return static_cast<std::uint32_t>((word >> shift_of(s)) & tag_mask);
  }
  /// Bit position of slot s inside its word.
  GBF_HD GBF_FORCEINLINE static constexpr std::uint32_t shift_of(std::uint32_t s) {
    return (s % slots_per_word) * TagBits;
  }
  /// `word` with lane `s % slots_per_word` set to `tag`.
  GBF_HD GBF_FORCEINLINE static constexpr std::uint64_t with_tag(std::uint64_t word,
                                                                 std::uint32_t s,
                                                                 std::uint32_t tag) {
    const std::uint32_t shift = shift_of(s);
    return (word & ~(tag_mask << shift)) | (static_cast<std::uint64_t>(tag) << shift);
  }
  /// Copies of `tag` in the bucket.
  GBF_HD GBF_FORCEINLINE static std::uint32_t count(const std::uint64_t* words, std::uint32_t tag) {
    std::uint32_t n = 0;
    GBF_UNROLL
    for (std::uint32_t w = 0; w < cuckoo_bucket_words; ++w) n += popcount64(match_lanes(words[w], tag));
    return n;
  }
  /// Whether `tag` is in the bucket.
  GBF_HD GBF_FORCEINLINE static bool holds(const std::uint64_t* words, std::uint32_t tag) {
    std::uint64_t any = 0;
    GBF_UNROLL
    for (std::uint32_t w = 0; w < cuckoo_bucket_words; ++w) any |= match_lanes(words[w], tag);
    return any != 0;
  }
  /// The lowest slot holding `tag`, or `slots` when there is none (tag 0: the lowest empty slot).
  GBF_HD GBF_FORCEINLINE static std::uint32_t find(const std::uint64_t* words, std::uint32_t tag) {
    GBF_UNROLL
    for (std::uint32_t w = 0; w < cuckoo_bucket_words; ++w) {
      const std::uint64_t m = match_lanes(words[w], tag);
      if (m != 0) return w * slots_per_word + lowest_bit(m) / TagBits;
    }
    return slots;
  }
  /// Non-empty slots of the bucket.
  GBF_HD GBF_FORCEINLINE static std::uint32_t occupied(const std::uint64_t* words) {
    return slots - count(words, 0);
  }

  GBF_HD GBF_FORCEINLINE static std::uint32_t popcount64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(__popcll(x));
#else
    return static_cast<std::uint32_t>(__builtin_popcountll(x));
#endif
  }
  GBF_HD GBF_FORCEINLINE static std::uint32_t lowest_bit(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(__ffsll(static_cast<long long>(x)) - 1);
#else
    return static_cast<std::uint32_t>(__builtin_ctzll(x));
#endif
  }
};

/// One move of an eviction chain: the tag in `slot` of `bucket` goes to its alternate bucket.
struct cuckoo_move {
  std::uint32_t bucket;
  std::uint32_t slot;
  std::uint32_t tag;
};

/// Searches for an eviction chain from the full bucket `start` for an insert
/// of `tag`: writes at most `max_kicks` moves to `chain` (room for max_kicks)
/// and returns how many, the last one's tag going to a bucket with a free
/// slot; 0 when none was found within max_kicks levels. `load(b, words)`
/// reads bucket b's four words; the search only reads. Deterministic: the
/// victims tried depend only on the table's contents, `tag` and the level.
template <std::uint32_t TagBits, class LoadBucket>
GBF_HD std::uint32_t cuckoo_find_chain(const LoadBucket& load, std::uint64_t num_buckets,
                                       std::uint64_t start, std::uint32_t tag,
                                       std::uint32_t max_kicks, cuckoo_move* chain) {
  using bucket_ops = cuckoo_bucket<TagBits>;
  constexpr std::uint32_t slots = bucket_ops::slots;
  std::uint64_t b = start;
  for (std::uint32_t depth = 0; depth < max_kicks; ++depth) {
    std::uint64_t words[cuckoo_bucket_words];
    load(b, words);
    // Victims in a pseudo-random order of this tag and level: an odd stride
    // over a power-of-two slot count visits distinct slots.
    const std::uint32_t r = detail::fmix32(tag + 0x9e3779b9u * (depth + 1));
    const std::uint32_t stride = (r >> 16) | 1u;
    bool have_descent = false;
    cuckoo_move descent{};
    std::uint64_t descent_bucket = 0;
    for (std::uint32_t c = 0; c < cuckoo_lookahead; ++c) {
      const std::uint32_t s = (r + c * stride) & (slots - 1);
      bool on_chain = false;
      for (std::uint32_t i = 0; i < depth; ++i)
        on_chain |= chain[i].bucket == b && chain[i].slot == s;
      if (on_chain) continue;
      const std::uint32_t victim = bucket_ops::tag_at(words, s);
      const std::uint64_t a = cuckoo_alternate(b, victim, num_buckets);
      if (victim == 0 || a == b) continue;  // a victim with one bucket cannot move
      const cuckoo_move move{static_cast<std::uint32_t>(b), s, victim};
      std::uint64_t alt_words[cuckoo_bucket_words];
      load(a, alt_words);
      if (bucket_ops::find(alt_words, 0) < slots) {
        chain[depth] = move;
        return depth + 1;
      }
      if (!have_descent) {
        have_descent = true;
        descent = move;
        descent_bucket = a;
      }
    }
    if (!have_descent) return 0;
    chain[depth] = descent;
    b = descent_bucket;
  }
  return 0;
}

/// Inserts `tag` into bucket `bucket` or `alternate` of a table no other
/// thread touches (the CPU's inserts, and the GPU's deterministic tail): the
/// lowest free slot of the primary bucket, else of the alternate, else an
/// eviction chain from the primary, else one from the alternate. Returns the
/// number of moves made plus one, or 0 when no chain of at most max_kicks
/// moves exists (the table is then unchanged). `table` is the whole table as
/// 64-bit words; `chain` has room for max_kicks moves.
template <std::uint32_t TagBits>
GBF_HD std::uint32_t cuckoo_insert_exclusive(std::uint64_t* table, std::uint64_t num_buckets,
                                             std::uint64_t bucket, std::uint64_t alternate,
                                             std::uint32_t tag, std::uint32_t max_kicks,
                                             cuckoo_move* chain) {
  using bucket_ops = cuckoo_bucket<TagBits>;
  auto words_of = [table](std::uint64_t b) { return table + b * cuckoo_bucket_words; };
  auto place = [&](std::uint64_t b, std::uint32_t t) {
    std::uint64_t* w = words_of(b);
    const std::uint32_t s = bucket_ops::find(w, 0);
    if (s == bucket_ops::slots) return false;
    std::uint64_t& word = w[s / bucket_ops::slots_per_word];
    word = bucket_ops::with_tag(word, s, t);
    return true;
  };
  if (place(bucket, tag) || place(alternate, tag)) return 1;
  const auto load = [&](std::uint64_t b, std::uint64_t* out) {
    const std::uint64_t* w = words_of(b);
    for (std::uint32_t i = 0; i < cuckoo_bucket_words; ++i) out[i] = w[i];
  };
  for (int side = 0; side < 2; ++side) {
    const std::uint64_t start = side == 0 ? bucket : alternate;
    if (side == 1 && alternate == bucket) break;
    const std::uint32_t moves =
        cuckoo_find_chain<TagBits>(load, num_buckets, start, tag, max_kicks, chain);
    if (moves == 0) continue;
    // From the far end back: move i's tag joins its alternate bucket (where
    // move i + 1 just freed a slot, or the free slot the search found), then
    // its old slot takes the next tag along (the new tag for move 0).
    for (std::uint32_t i = moves; i-- > 0;) {
      const cuckoo_move& m = chain[i];
      place(cuckoo_alternate(m.bucket, m.tag, num_buckets), m.tag);
      std::uint64_t& word = words_of(m.bucket)[m.slot / bucket_ops::slots_per_word];
      word = bucket_ops::with_tag(word, m.slot, i == 0 ? tag : 0);
    }
    return moves + 1;
  }
  return 0;
}

/// Removes one copy of `tag` from bucket `bucket`, else from `alternate`, of a
/// table no other thread touches; returns whether it found one.
template <std::uint32_t TagBits>
GBF_HD bool cuckoo_remove_exclusive(std::uint64_t* table, std::uint64_t bucket,
                                    std::uint64_t alternate, std::uint32_t tag) {
  using bucket_ops = cuckoo_bucket<TagBits>;
  for (int side = 0; side < 2; ++side) {
    std::uint64_t* w = table + (side == 0 ? bucket : alternate) * cuckoo_bucket_words;
    const std::uint32_t s = bucket_ops::find(w, tag);
    if (s < bucket_ops::slots) {
      std::uint64_t& word = w[s / bucket_ops::slots_per_word];
      word = bucket_ops::with_tag(word, s, 0);
      return true;
    }
  }
  return false;
}

/// Calls f(std::integral_constant<std::uint32_t, TagBits>{}) for a runtime tag width.
template <class F>
decltype(auto) dispatch_tag_bits(std::uint32_t tag_bits, F&& f) {
  switch (tag_bits) {
    case 8: return f(std::integral_constant<std::uint32_t, 8>{});
    case 32: return f(std::integral_constant<std::uint32_t, 32>{});
    default: return f(std::integral_constant<std::uint32_t, 16>{});
  }
}

}  // namespace gbf
