// The CPU batch loop every filter kind's kernels share: where a key's hash
// comes from, and the walk that hashes a group of keys, prefetches their
// blocks and then visits them, so that a core overlaps the cache misses of a
// filter larger than its caches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "gbf/hash.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "host/cpu/block_owner.hpp"

namespace gbf::detail::cpu {

/// Hash of key i of a caller's integer batch.
template <class Key>
struct key_hashes {
  const Key* keys;
  std::uint64_t seed;
  std::uint64_t operator()(std::size_t i) const { return hash_key(keys[i], seed); }
};

/// Hash of string key i: xxh64 of bytes [offsets[i], offsets[i+1]) of data
/// (offsets already checked). Long strings cost their length; the loop hashes a
/// group of keys before visiting any, so their blocks' misses still overlap.
template <class Offset>
struct string_hashes {
  const unsigned char* data;
  const Offset* offsets;
  std::uint64_t seed;
  std::uint64_t operator()(std::size_t i) const {
    const auto begin = static_cast<std::size_t>(offsets[i]);
    const auto end = static_cast<std::size_t>(offsets[i + 1]);
    return hash_key(data + begin, end - begin, seed);
  }
};

/// Hashes computed by an earlier pass (threads that hash once and visit later).
struct stored_hashes {
  const std::uint64_t* hashes;
  std::uint64_t operator()(std::size_t i) const { return hashes[i]; }
};

/// Calls fn(hashes) with the hash source of a host batch's key kind.
template <class Fn>
decltype(auto) with_hashes(const key_batch& keys, std::uint64_t seed, Fn&& fn) {
  const auto* bytes = static_cast<const unsigned char*>(keys.data);
  switch (keys.kind) {
    case key_kind::str32:
      return fn(string_hashes<std::int32_t>{bytes, static_cast<const std::int32_t*>(keys.offsets), seed});
    case key_kind::str64:
      return fn(string_hashes<std::int64_t>{bytes, static_cast<const std::int64_t*>(keys.offsets), seed});
    case key_kind::u32:
      return fn(key_hashes<std::uint32_t>{static_cast<const std::uint32_t*>(keys.data), seed});
    case key_kind::u64:
    default:
      return fn(key_hashes<std::uint64_t>{static_cast<const std::uint64_t*>(keys.data), seed});
  }
}

/// Keys [begin, end) of a batch, as one thread walks them.
template <class Hashes>
struct key_range {
  Hashes hash_of;
  std::size_t begin;
  std::size_t end;
  std::uint64_t num_blocks;
  /// Arrow validity bitmap (null: every key valid); key i's bit is validity_bit + i.
  /// Null keys are skipped: never visited.
  const std::uint8_t* validity;
  std::size_t validity_bit;
};

/// Blocks [first, first + count) of a filter: the ones a thread writes when
/// threads split a filter's blocks between them (for_each_owned_key).
struct block_span {
  std::uint64_t first;
  std::uint64_t count;
};

/// The hashes h whose high half x = h >> 32 has first <= x < first + count.
struct high_span {
  std::uint64_t first;
  std::uint64_t count;
};

/// The hashes whose block, block_index(h, num_blocks), lies in `blocks`: from
/// the first high half of the span's first block to that of the block past it
/// (first_hash_high_of_block, host/cpu/block_owner.hpp).
inline high_span owned_high_span(block_span blocks, std::uint64_t num_blocks) {
  const std::uint64_t first = first_hash_high_of_block(blocks.first, num_blocks);
  return {first, first_hash_high_of_block(blocks.first + blocks.count, num_blocks) - first};
}

/// How many keys ahead of the one being visited the loop hashes and prefetches.
/// A filter larger than the caches costs one DRAM miss per key; keeping many
/// misses in flight all the time (not a group at a time, which drains to zero
/// before each next group) is what lets one core overlap them. A core tracks
/// 16 to 24 L1 misses at once on recent x86 (AMD Zen 3: 24), but a prefetch is
/// only useful if it lands before its key is visited: the distance must cover
/// a miss's latency (170-240 ns on the 2-vCPU EPYC) at the loop's own pace,
/// and it runs faster the more misses it overlaps. 40 measured 20-30% faster
/// than 24 there beyond L2, for add and contains alike, and no slower in L2
/// (docs/cpu.md has the misses in flight this reaches). (On a Zen 5 EPYC this
/// walk ran 15-30% faster at 64-96, but there the AVX-512 tiled walk below
/// runs instead; 40 stays for the cores that run this one.)
inline constexpr std::size_t prefetch_distance = 40;

/// What a pass does to the blocks it visits: a writing pass over stored hashes
/// prefetches further ahead (stored_write_distance).
enum class block_access { read, write };

/// How many keys ahead the tiled walk (eight keys hashed at once with
/// AVX-512, below) and the owned walk prefetch. They visit a key beyond the
/// caches in 2.5-3 ns instead of 5-7, so covering a miss's ~160 ns takes more
/// keys than the one-key walk's 40. Reads and writes now share it: on the
/// 2-vCPU AMD EPYC (Zen 5), 128 MiB filter, 10^7 keys, best of 5, ns/key,
/// add / contains at 40: 5.1 / 5.4-5.7; 64: 4.2-4.4 / 4.1-4.2; 96: 3.4 /
/// 4.4-4.5; 128: 3.2-3.3 / 4.5 (session 13, when contains stayed at 64);
/// once the walk also prefetched the batch's own lines (key_prefetch_distance)
/// contains ran 3.68-3.73 at 64, 2.91-2.96 at 96, 2.56-2.61 at 128 and
/// 2.53-2.85 at 192 (16 MiB, 10^6 keys: 1.33-1.55 / 1.26-1.30 / 1.25-1.26 /
/// 1.23-1.24; 512 KiB 1.02-1.08 at every distance; session 15, docs/cpu.md).
/// A multiple of 8: a tile never wraps the ring.
inline constexpr std::size_t tiled_prefetch_distance = 128;

/// How far ahead a writing pass over stored hashes (the threaded add's apply
/// of its partition) prefetches: it hashes nothing, so it reaches the next
/// key sooner than the hashing walk and needs more keys to cover a miss. On
/// the Zen 5 EPYC, 2-thread add, 10^6 keys, 16 / 128 MiB filter, ns/key: at
/// 40, 3.0 / 3.8-3.9; 96: 2.5 / 3.2; 128: 2.6 / 3.2 (two rounds each).
inline constexpr std::size_t stored_write_distance = 96;

/// How many keys ahead of the ones it hashes a walk that hashes eight keys at
/// once asks for the batch's own lines. The walk reads the keys in order, but
/// between two tiles it waits on the blocks' misses, and the hardware's stream
/// prefetcher did not run far enough ahead: on the 2-vCPU Zen 5 EPYC, 10^6
/// keys, 16 MiB filter, ns/key, one thread's add 1.33-1.46 without, 1.19-1.27
/// with it (128 MiB, 10^7 keys: 2.98-3.08 against 2.53-2.62; contains
/// 3.96-4.01 against 3.74-3.77); two threads' owned walks, each reading the
/// whole batch: 1.56-1.61 without, 1.19-1.26 at 128 keys ahead, 1.12-1.14 at
/// 512 (docs/cpu.md).
inline constexpr std::size_t key_prefetch_distance = 512;

/// The keys a group-at-a-time loop (the scaling chain's probes, the cuckoo table's,
/// Parquet pruning) hashes and prefetches before it visits the first of them.
inline constexpr std::size_t prefetch_group = 16;

namespace key_loop_detail {

/// Prefetches the 64-byte lines of [first, first + bytes).
inline void prefetch_lines(const void* first, std::size_t bytes) {
  const auto* line = static_cast<const char*>(first);
  for (std::size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(line + offset);
}

/// Every key of [begin, end) visited in order, key i hashed and prefetched
/// while key i - prefetch_distance is visited (a software pipeline: a ring of
/// the last prefetch_distance hashes and block addresses).
template <std::size_t Distance, class Hashes, class AddressOf, class Visit>
inline void for_each_dense_key(const key_range<Hashes>& range, const AddressOf& address_of,
                               const Visit& visit, std::size_t prefetch_bytes) {
  constexpr std::size_t d = Distance;
  using address = decltype(address_of(std::uint64_t{0}));
  std::uint64_t ring_hash[d];
  address ring_block[d];
  // Locals, not range.*: a visit's SIMD store may alias anything, which would
  // make the compiler reload these from the range each key.
  const Hashes hash_of = range.hash_of;
  const std::uint64_t num_blocks = range.num_blocks;
  const std::size_t begin = range.begin;
  const std::size_t end = range.end;
  const std::size_t warm_end = end - begin > d ? begin + d : end;
  std::size_t i = begin;
  std::size_t slot = 0;
  for (; i < warm_end; ++i, ++slot) {
    const std::uint64_t h = hash_of(i);
    const address a = address_of(block_index(h, num_blocks));
    prefetch_lines(a, prefetch_bytes);
    ring_hash[slot] = h;
    ring_block[slot] = a;
  }
  slot = 0;
  for (; i < end; ++i) {
    // The slot holds key i - d; it then takes key i.
    visit(i - d, ring_hash[slot], ring_block[slot]);
    const std::uint64_t h = hash_of(i);
    const address a = address_of(block_index(h, num_blocks));
    prefetch_lines(a, prefetch_bytes);
    ring_hash[slot] = h;
    ring_block[slot] = a;
    slot = slot + 1 == d ? 0 : slot + 1;
  }
  // The last min(d, end - begin) keys, oldest first.
  const std::size_t left = i - begin < d ? i - begin : d;
  for (std::size_t j = end - left; j < end; ++j) {
    visit(j, ring_hash[slot], ring_block[slot]);
    slot = slot + 1 == d ? 0 : slot + 1;
  }
}

/// for_each_dense_key for a range with nulls: the ring holds the last Distance
/// non-null keys (index, hash, block), each visited, in batch order, as the
/// Distance-th non-null key after it is prefetched. The loop it replaced hashed
/// 16 keys, prefetched their blocks in one burst and visited them: Arrow strings
/// with 1% nulls ran at 30 M keys/s against 69-107 without nulls.
template <std::size_t Distance, class Hashes, class AddressOf, class Visit>
inline void for_each_valid_key(const key_range<Hashes>& range, const AddressOf& address_of,
                               const Visit& visit, std::size_t prefetch_bytes) {
  constexpr std::size_t d = Distance;
  using address = decltype(address_of(std::uint64_t{0}));
  std::size_t ring_index[d];
  std::uint64_t ring_hash[d];
  address ring_block[d];
  const Hashes hash_of = range.hash_of;
  const std::uint64_t num_blocks = range.num_blocks;
  const std::uint8_t* const validity = range.validity;
  const std::size_t validity_bit = range.validity_bit;
  std::size_t slot = 0;    // where the next key goes: the oldest entry once the ring is full
  std::size_t queued = 0;  // entries in the ring, at most d
  for (std::size_t i = range.begin; i < range.end; ++i) {
    if (!key_valid(validity, validity_bit, i)) continue;
    const std::uint64_t h = hash_of(i);
    const address a = address_of(block_index(h, num_blocks));
    prefetch_lines(a, prefetch_bytes);
    if (queued == d) {
      visit(ring_index[slot], ring_hash[slot], ring_block[slot]);
    } else {
      ++queued;
    }
    ring_index[slot] = i;
    ring_hash[slot] = h;
    ring_block[slot] = a;
    slot = slot + 1 == d ? 0 : slot + 1;
  }
  // The last `queued` keys, oldest first: with a full ring the oldest is at `slot`.
  std::size_t oldest = queued == d ? slot : 0;
  for (std::size_t left = queued; left > 0; --left) {
    visit(ring_index[oldest], ring_hash[oldest], ring_block[oldest]);
    oldest = oldest + 1 == d ? 0 : oldest + 1;
  }
}

/// Whether a hash source also hashes eight consecutive keys at a time:
/// hash8(i, num_blocks, hashes, blocks) (host/cpu/hash_x8.hpp).
template <class Hashes, class = void>
struct hashes_eight : std::false_type {};
template <class Hashes>
struct hashes_eight<Hashes, std::void_t<decltype(std::declval<const Hashes&>().hash8(
                                std::size_t{}, std::uint64_t{}, nullptr, nullptr))>>
    : std::true_type {};

/// for_each_dense_key for a source that hashes eight keys at once: the same
/// ring, filled a tile of eight keys at a time (their hashes and blocks from
/// one hash8), each key of the tile then visiting the key d behind it. Key x
/// always sits in slot (x - begin) mod d, as in the one-key walk: d is a
/// multiple of 8 and a tile never wraps.
template <class Hashes, class AddressOf, class Visit>
inline void for_each_dense_key_x8(const key_range<Hashes>& range, const AddressOf& address_of,
                                  const Visit& visit, std::size_t prefetch_bytes) {
  constexpr std::size_t d = tiled_prefetch_distance;
  constexpr std::size_t tile = 8;
  static_assert(d % tile == 0, "a tile of the ring must not wrap");
  using address = decltype(address_of(std::uint64_t{0}));
  std::uint64_t ring_hash[d];
  address ring_block[d];
  alignas(64) std::uint64_t tile_hash[tile];
  alignas(64) std::uint64_t tile_block[tile];
  const Hashes hash_of = range.hash_of;
  const std::uint64_t num_blocks = range.num_blocks;
  const std::size_t begin = range.begin;
  const std::size_t end = range.end;
  const std::size_t total = end - begin;
  const std::size_t tiles_end = begin + total / tile * tile;
  std::size_t i = begin;  // the next key to hash
  std::size_t slot = 0;
  for (; i < tiles_end && slot < d; i += tile, slot += tile) {
    hash_of.hash8(i, num_blocks, tile_hash, tile_block);
    for (std::size_t j = 0; j < tile; ++j) {
      const address a = address_of(tile_block[j]);
      prefetch_lines(a, prefetch_bytes);
      ring_hash[slot + j] = tile_hash[j];
      ring_block[slot + j] = a;
    }
  }
  if (slot == d) slot = 0;
  for (; i < tiles_end; i += tile) {
    hash_of.prefetch(i + key_prefetch_distance);
    hash_of.hash8(i, num_blocks, tile_hash, tile_block);
    // Unrolled: GCC keeps the 8 visits as a loop otherwise, which measured
    // 1.25 / 1.35 ns a key (add / contains, 512 KiB) against 1.04 / 1.07.
#pragma GCC unroll 8
    for (std::size_t j = 0; j < tile; ++j) {
      visit(i + j - d, ring_hash[slot + j], ring_block[slot + j]);
      const address a = address_of(tile_block[j]);
      prefetch_lines(a, prefetch_bytes);
      ring_hash[slot + j] = tile_hash[j];
      ring_block[slot + j] = a;
    }
    slot = slot + tile == d ? 0 : slot + tile;
  }
  // The last total mod 8 keys, one at a time (their slots do not wrap either).
  for (; i < end; ++i, ++slot) {
    if (total >= d) visit(i - d, ring_hash[slot], ring_block[slot]);
    const std::uint64_t h = hash_of(i);
    const address a = address_of(block_index(h, num_blocks));
    prefetch_lines(a, prefetch_bytes);
    ring_hash[slot] = h;
    ring_block[slot] = a;
  }
  const std::size_t left = total < d ? total : d;
  slot = total < d ? 0 : total % d;
  for (std::size_t j = end - left; j < end; ++j) {
    visit(j, ring_hash[slot], ring_block[slot]);
    slot = slot + 1 == d ? 0 : slot + 1;
  }
}

/// Whether a hash source also hashes eight keys and keeps those of a block
/// span: hash8_owned (host/cpu/hash_x8.hpp).
template <class Hashes, class = void>
struct hashes_owned : std::false_type {};
template <class Hashes>
struct hashes_owned<Hashes, std::void_t<decltype(std::declval<const Hashes&>().hash8_owned(
                                std::size_t{}, high_span{}, 0u, nullptr, nullptr))>>
    : std::true_type {};

/// The validity bits of keys i..i + 7 (all eight exist), key i's at first_bit, as bits 0..7.
inline unsigned valid_lanes(const std::uint8_t* validity, std::size_t first_bit) {
  if (validity == nullptr) return 0xffu;
  const std::size_t byte = first_bit / 8;
  const unsigned shift = first_bit % 8;
  unsigned bits = validity[byte] >> shift;
  // The eight bits reach into the next byte only when they do not start a byte.
  if (shift != 0) bits |= static_cast<unsigned>(validity[byte + 1]) << (8 - shift);
  return bits & 0xffu;
}

}  // namespace key_loop_detail

/// How many tiles of eight keys for_each_owned_key hashes between two rounds
/// of visits. Each tile keeps a varying number of keys (about 8 / T of T
/// threads'), so a loop that visited after every tile would mispredict its
/// exit every tile; visiting after a group of 16 tiles costs that once per
/// 128 keys (2-vCPU Zen 5 EPYC, 16 MiB filter, 10^6 keys, 2 threads, a
/// throwaway harness: 2.9 ns/key visiting after every tile, 1.4 after every
/// 4, 1.2 after every 16; docs/cpu.md).
inline constexpr std::size_t owned_group_tiles = 16;

/// Calls visit(i, hash, block_address) (or visit(hash, block_address), where
/// the visit takes no index: the walk then keeps none) for each non-null key
/// i of the range whose block lies in `owned`, in batch order, with the
/// blocks of the owned keys ahead prefetched: the walk of a thread that owns
/// a block range and reads the whole batch (the plain filter's two-thread
/// add). Keys are hashed eight at a time and the kept ones compressed into a
/// ring; after each group of tiles each new ring entry's block is prefetched
/// as the entry the prefetch distance behind it is visited.
template <class Hashes, class AddressOf, class Visit>
void for_each_owned_key(const key_range<Hashes>& range, block_span owned,
                        const AddressOf& address_of, const Visit& visit,
                        std::size_t prefetch_bytes = 64) {
  static_assert(key_loop_detail::hashes_owned<Hashes>::value,
                "the owned walk needs a source that hashes eight keys at once");
  constexpr std::size_t d = tiled_prefetch_distance;
  constexpr std::size_t tile = 8;
  constexpr std::size_t group = owned_group_tiles * tile;
  // Entries not yet visited: at most d after a round of visits, one group more
  // before the next, and a tile writes 8 slots from the newest entry on; so a
  // capacity of d + group + tile keeps every write off unvisited entries.
  constexpr std::size_t capacity = 512;
  static_assert(capacity >= d + group + tile && (capacity & (capacity - 1)) == 0,
                "the ring must hold a group beyond the prefetch distance, in a power of two");
  // A tile written at a slot near the end spills into the tile slots past it,
  // which are then copied to the front.
  std::uint64_t ring_hash[capacity + tile];
  std::uint64_t ring_block[capacity];
  std::uint64_t ring_index[capacity + tile];
  // add needs no index (keeping one costs a compress and a store a tile: 5% of
  // a 2-thread add at 16 MiB); add with is_new answers by it.
  using address = decltype(address_of(std::uint64_t{0}));
  constexpr bool keeps_index =
      std::is_invocable_v<const Visit&, std::size_t, std::uint64_t, address>;
  const Hashes hash_of = range.hash_of;
  const std::uint64_t num_blocks = range.num_blocks;
  const std::uint8_t* const validity = range.validity;
  const std::size_t validity_bit = range.validity_bit;
  const std::size_t end = range.end;
  const high_span owned_high = owned_high_span(owned, num_blocks);
  // Ring positions counted from the walk's start: pushed >= prefetched >= visited.
  // A tile pushes hashes (and indices); the round after a group adds their blocks.
  std::size_t pushed = 0, prefetched = 0, visited = 0;
  const auto visit_position = [&](std::size_t position) {
    const std::size_t slot = position % capacity;
    if constexpr (keeps_index) {
      visit(static_cast<std::size_t>(ring_index[slot]), ring_hash[slot],
            address_of(ring_block[slot]));
    } else {
      visit(ring_hash[slot], address_of(ring_block[slot]));
    }
  };
  for (std::size_t i = range.begin; i < end;) {
    const std::size_t group_end = end - i > group ? i + group : end;
    for (; group_end - i >= tile; i += tile) {
      const std::size_t slot = pushed % capacity;
      hash_of.prefetch(i + key_prefetch_distance);
      const unsigned lanes = key_loop_detail::valid_lanes(validity, validity_bit + i);
      const unsigned kept = hash_of.hash8_owned(i, owned_high, lanes, ring_hash + slot,
                                                keeps_index ? ring_index + slot : nullptr);
      if (slot + kept > capacity) {
        for (std::size_t j = 0; j < tile; ++j) {
          ring_hash[j] = ring_hash[capacity + j];
          if constexpr (keeps_index) ring_index[j] = ring_index[capacity + j];
        }
      }
      pushed += kept;
    }
    for (; i < group_end; ++i) {  // the batch's last keys, fewer than a tile
      if (!key_valid(validity, validity_bit, i)) continue;
      const std::uint64_t h = hash_of(i);
      if ((h >> 32) - owned_high.first >= owned_high.count) continue;
      const std::size_t slot = pushed++ % capacity;
      ring_hash[slot] = h;
      if constexpr (keeps_index) ring_index[slot] = i;
    }
    // One visit per prefetch, as in the tiled walk: a group's prefetches in one
    // burst, then its visits, made the walk of a thread owning half the blocks
    // about 17% (16 MiB) and 25% (128 MiB) slower (docs/cpu.md, session 16).
    while (prefetched < pushed) {
      const std::size_t slot = prefetched % capacity;
      ring_block[slot] = block_index(ring_hash[slot], num_blocks);
      key_loop_detail::prefetch_lines(address_of(ring_block[slot]), prefetch_bytes);
      ++prefetched;
      if (prefetched - visited > d) visit_position(visited++);
    }
  }
  for (; visited < pushed; ++visited) visit_position(visited);
}

/// Calls visit(i, hash, block_address) for each non-null key i of the range,
/// in batch order (sequential semantics rely on it), with
/// the blocks of the keys ahead prefetched. `address_of(block)` is where a
/// block starts; the loop prefetches `prefetch_bytes` from there (a kind whose
/// blocks span several 64-byte lines, as the counting filter's do, asks for
/// all of them).
template <block_access Access = block_access::read, class Hashes, class AddressOf, class Visit>
void for_each_key(const key_range<Hashes>& range, const AddressOf& address_of,
                  const Visit& visit, std::size_t prefetch_bytes = 64) {
  if (range.begin >= range.end) return;
  constexpr bool applies_stored = std::is_same_v<Hashes, stored_hashes> && Access == block_access::write;
  constexpr std::size_t distance = applies_stored ? stored_write_distance : prefetch_distance;
  if (range.validity != nullptr) {
    key_loop_detail::for_each_valid_key<distance>(range, address_of, visit, prefetch_bytes);
  } else if constexpr (key_loop_detail::hashes_eight<Hashes>::value) {
    key_loop_detail::for_each_dense_key_x8(range, address_of, visit, prefetch_bytes);
  } else {
    key_loop_detail::for_each_dense_key<distance>(range, address_of, visit, prefetch_bytes);
  }
}

}  // namespace gbf::detail::cpu
