// gbf::device_ref — a filter as a CUDA kernel sees it.
//
// A device_ref is a small, trivially copyable view (bit array pointer, block
// count, bits per key, seed) that a kernel receives by value and probes from
// any thread. It holds no memory: the owner (gbf::filter, or your own
// allocation) must outlive every kernel that uses it. gbf's own kernels are
// written against this same class, so a user kernel that fuses a probe (a join
// operator, say) runs exactly the library's logic.
//
// device_ref<W> may add and probe; device_ref<W, const std::uint32_t> only
// probes (what a const filter hands out), and a mutable view converts to it.
//
//   // Host: W must match the filter's layout (checked, throws invalid_argument).
//   gbf::device_ref<8> ref(f);                       // f: a gbf::filter on the GPU
//   gbf::device_ref<8, const std::uint32_t> probe_only(std::as_const(f));
//   // Device:
//   __global__ void probe(gbf::device_ref<8> ref, const std::uint64_t* keys, int* out, int n) {
//     int i = blockIdx.x * blockDim.x + threadIdx.x;
//     if (i < n) out[i] = ref.contains(keys[i]);
//   }
//
// Layout (gbf/layout.hpp is the single source of the math): a key's 64-bit
// xxh64 hash picks one block of W words; its k bits are spread over the
// block's words (block_masks). contains() reads the whole block with the
// widest vector loads its alignment allows: one 16-byte load per 4 words for
// W >= 4 (a W = 8 block is one 32-byte DRAM sector), 8 bytes for W = 2, 4 for
// W = 1. add() ORs each word's mask with atomicOr; the old value is never
// used, so the compiler emits the fire-and-forget RED instruction.
// add_hashes(warp, h, valid) adds a warp's 32 keys together, W lanes per key,
// so that each atomic instruction writes whole blocks (gbf's own add kernel for
// integer keys; the write pattern of cuCollections' cooperative add).
//
// Byte strings: hash_bytes / add_bytes / contains_bytes take a byte span and hash
// it with xxh64 (the filter's seed, no length prefix), one thread per string.
// Their cooperative overloads take a 32-thread tile (cooperative_groups::
// thread_block_tile<32>) whose lanes all pass the same span: the warp loads the
// string together (see warp_xxh64 below), every lane gets the hash, and one
// add or probe is done for the whole tile. Use them for long strings (gbf's
// own kernels switch at 256 bytes).
//
// Memory ordering: add() is relaxed. Kernels that add and probe concurrently
// get either answer for the keys being added (as with any concurrent set);
// a kernel launched after an add kernel in stream order sees all its bits.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "gbf/error.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"

namespace gbf {

class filter;  // gbf/filter.hpp: include it to view a filter (device_ref(filter&))

/// A warp as a cooperative group: the tile the cooperative string overloads take.
using warp_tile = cooperative_groups::thread_block_tile<32>;

/// xxh64 of `len` bytes at `data` (device memory, any alignment) with `seed`,
/// computed by the 32 lanes of `warp` together; all lanes pass the same
/// arguments and all get the hash, bit-identical to gbf::xxh64.
///
/// Why this shape: xxh64 keeps four 64-bit accumulators, each a strictly
/// sequential chain over the 32-byte stripes (acc = rotl(acc + in * P2, 31) * P1),
/// so no amount of threads shortens a string's dependency chain. What a warp
/// can share is everything else. Per step the warp covers 8 stripes (256
/// bytes): lane l loads the 8 bytes at 8l with aligned 32-bit loads and a
/// funnel shift (coalesced, never touching a 4-byte word without a byte of the
/// string) and premultiplies them by P2; then each accumulator chain takes the
/// 8 premultiplied words of its column through register shuffles, leaving one
/// add, rotate and multiply per stripe on the critical path instead of a load,
/// a byte assembly and two multiplies. Lanes l and l + 4j carry the same chain
/// (redundantly, so the warp never diverges); lanes 0..3 are gathered at the
/// end, and the last < 32 bytes (the spec's tail) are hashed by every lane.
__device__ inline std::uint64_t warp_xxh64(const warp_tile& warp, const void* data,
                                           std::size_t len, std::uint64_t seed) {
  using namespace detail;
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned lane = warp.thread_rank();
  std::uint64_t h;
  std::size_t done = 0;
  if (len >= 32) {
    std::uint64_t acc = xxh64_init_lane(seed, lane & 3);
    const std::size_t stripes = len / 32;
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const unsigned shift = static_cast<unsigned>(address & 3) * 8;
    const auto* aligned = reinterpret_cast<const std::uint32_t*>(address & ~std::uintptr_t{3});
    for (std::size_t first = 0; first < stripes; first += 8) {
      const unsigned step = stripes - first < 8 ? static_cast<unsigned>(stripes - first) : 8u;
      std::uint64_t product = 0;
      if (lane < 4 * step) {
        const std::uint32_t* w = aligned + first * 8 + 2 * lane;  // bytes first*32 + 8*lane
        const std::uint32_t w0 = w[0];
        const std::uint32_t w1 = w[1];
        std::uint32_t lo = w0;
        std::uint32_t hi = w1;
        if (shift != 0) {  // the 8 bytes straddle three aligned words
          const std::uint32_t w2 = w[2];
          lo = __funnelshift_r(w0, w1, shift);
          hi = __funnelshift_r(w1, w2, shift);
        }
        product = ((static_cast<std::uint64_t>(hi) << 32) | lo) * xxh_prime64_2;
      }
      for (unsigned s = 0; s < step; ++s) {
        const std::uint64_t in = warp.shfl(product, static_cast<int>(4 * s + (lane & 3)));
        acc = rotl64(acc + in, 31) * xxh_prime64_1;
      }
    }
    xxh64_lanes lanes{};
    lanes.v[0] = warp.shfl(acc, 0);
    lanes.v[1] = warp.shfl(acc, 1);
    lanes.v[2] = warp.shfl(acc, 2);
    lanes.v[3] = warp.shfl(acc, 3);
    h = xxh64_converge(lanes);
    done = stripes * 32;
  } else {
    h = seed + xxh_prime64_5;
  }
  h += static_cast<std::uint64_t>(len);
  return xxh64_finish(h, p + done, len - done);
}

template <std::uint32_t WordsPerBlock, class Word = std::uint32_t>
class device_ref {
  static_assert(WordsPerBlock == 1 || WordsPerBlock == 2 || WordsPerBlock == 4 ||
                    WordsPerBlock == 8 || WordsPerBlock == 16,
                "words per block must be 1, 2, 4, 8 or 16");
  static_assert(std::is_same_v<std::remove_const_t<Word>, std::uint32_t>,
                "Word is std::uint32_t (add and probe) or const std::uint32_t (probe only)");
  static constexpr bool can_add = !std::is_const_v<Word>;

 public:
  /// W: 32-bit words per block, fixed at compile time so the block lives in registers.
  static constexpr std::uint32_t words_per_block = WordsPerBlock;

  /// A view of the bit array `words` (device memory, l.num_words() words) of layout `l`.
  /// Throws invalid_argument when l is not a valid layout, when l.words_per_block is not
  /// WordsPerBlock, or when `words` is not aligned to a block (min(W, 4) * 4 bytes).
  __host__ device_ref(Word* words, const layout& l)
      : words_(words), num_blocks_(l.num_blocks), bits_per_key_(l.bits_per_key), seed_(l.seed) {
    if (const char* problem = layout_problem(l)) throw invalid_argument(problem);
    if (l.words_per_block != WordsPerBlock) {
      throw invalid_argument("device_ref<" + std::to_string(WordsPerBlock) +
                             "> cannot view a layout of " + std::to_string(l.words_per_block) +
                             " words per block");
    }
    if (reinterpret_cast<std::uintptr_t>(words) % vector_bytes != 0) {
      throw invalid_argument("device_ref: the bit array must be aligned to " +
                             std::to_string(vector_bytes) + " bytes for vector loads");
    }
  }

  /// A view of filter `f`'s bits (f on the GPU; wrong_backend otherwise). A const
  /// filter gives only a probe-only view.
  template <class Filter,
            std::enable_if_t<std::is_same_v<std::remove_const_t<Filter>, filter>, int> = 0>
  __host__ explicit device_ref(Filter& f) : device_ref(f.device_words(), f.layout()) {}

  /// A mutable view converts to a probe-only one.
  template <class Other, std::enable_if_t<std::is_const_v<Word> && !std::is_const_v<Other>, int> = 0>
  __host__ __device__ device_ref(const device_ref<WordsPerBlock, Other>& other)
      : words_(other.words()),
        num_blocks_(other.num_blocks()),
        bits_per_key_(other.bits_per_key()),
        seed_(other.seed()) {}

  /// The key's hash: xxh64 of its little-endian bytes with the filter's seed.
  template <class Key>
  __host__ __device__ __forceinline__ std::uint64_t hash(Key key) const {
    static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                  "gbf keys are 32- or 64-bit integers");
    if constexpr (sizeof(Key) == 4) {
      return hash_key(static_cast<std::uint32_t>(key), seed_);
    } else {
      return hash_key(static_cast<std::uint64_t>(key), seed_);
    }
  }

  /// A byte string's hash: xxh64 of its `len` bytes with the filter's seed.
  __host__ __device__ __forceinline__ std::uint64_t hash_bytes(const void* bytes,
                                                               std::size_t len) const {
    return hash_key(bytes, len, seed_);
  }
  /// The same hash computed by a whole warp (all lanes pass the same span).
  __device__ __forceinline__ std::uint64_t hash_bytes(const warp_tile& warp, const void* bytes,
                                                      std::size_t len) const {
    return warp_xxh64(warp, bytes, len, seed_);
  }

  /// Index of the block hash `h` falls in (< num_blocks <= 2^32).
  __host__ __device__ __forceinline__ std::uint64_t block_of(std::uint64_t h) const {
    return block_index(h, num_blocks_);
  }

  /// The W word masks of hash `h` (k bits in all, see block_masks).
  __host__ __device__ __forceinline__ void masks_of(std::uint64_t h,
                                                    std::uint32_t (&masks)[WordsPerBlock]) const {
    block_masks<WordsPerBlock>(h, bits_per_key_, masks);
  }

  /// Loads block `block` into `out` with vector loads (plain, coherent loads: the
  /// block may be written by other kernels between launches).
  __device__ __forceinline__ void load_block(std::uint64_t block,
                                             std::uint32_t (&out)[WordsPerBlock]) const {
    const std::uint32_t* first = words_ + block * WordsPerBlock;
    if constexpr (WordsPerBlock >= 4) {
      const auto* vectors = reinterpret_cast<const uint4*>(first);
#pragma unroll
      for (std::uint32_t v = 0; v < WordsPerBlock / 4; ++v) {
        const uint4 x = vectors[v];
        out[4 * v + 0] = x.x;
        out[4 * v + 1] = x.y;
        out[4 * v + 2] = x.z;
        out[4 * v + 3] = x.w;
      }
    } else if constexpr (WordsPerBlock == 2) {
      const uint2 x = *reinterpret_cast<const uint2*>(first);
      out[0] = x.x;
      out[1] = x.y;
    } else {
      out[0] = *first;
    }
  }

  /// ORs `bits` into block `block`, one atomicOr per nonzero word (the result is unused:
  /// a RED, no round trip).
  __device__ __forceinline__ void or_block(std::uint64_t block,
                                           const std::uint32_t (&bits)[WordsPerBlock]) const {
    static_assert(can_add, "a probe-only device_ref (const words) cannot add");
    std::uint32_t* first = words_ + block * WordsPerBlock;
#pragma unroll
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
      if (bits[w] != 0) atomicOr(first + w, bits[w]);
    }
  }

  /// True when every bit of `masks` is set in `block_words`.
  __device__ __forceinline__ static bool covers(const std::uint32_t (&block_words)[WordsPerBlock],
                                                const std::uint32_t (&masks)[WordsPerBlock]) {
    bool all = true;
#pragma unroll
    for (std::uint32_t w = 0; w < WordsPerBlock; ++w) all &= (block_words[w] & masks[w]) == masks[w];
    return all;
  }

  /// Sets the bits of the key with hash `h`.
  __device__ __forceinline__ void add_hash(std::uint64_t h) const {
    std::uint32_t masks[WordsPerBlock];
    masks_of(h, masks);
    or_block(block_of(h), masks);
  }

  /// Sets the bits of up to 32 keys, one per lane of `warp`: every lane calls it with
  /// its key's hash `h` and whether it has a key (`valid`). W lanes write each key: in
  /// round r, lane l ORs word l % W of the key of lane r * (32 / W) + l / W. One
  /// atomic instruction of the warp then covers 32 / W whole blocks (for W = 8, four
  /// 32-byte sectors) rather than 32 scattered words, W times fewer L2 requests than
  /// add_hash in every lane. The bits set are add_hash's: each lane computes its own
  /// key's block and masks once, as add_hash does, and the writing lanes fetch them
  /// by shuffles (W + 2 per round) rather than recomputing a word's probes per lane.
  __device__ __forceinline__ void add_hashes(const warp_tile& warp, std::uint64_t h,
                                             bool valid) const {
    static_assert(can_add, "a probe-only device_ref (const words) cannot add");
    constexpr std::uint32_t keys_per_round = 32 / WordsPerBlock;
    const std::uint32_t lane = warp.thread_rank();
    const std::uint32_t word = lane % WordsPerBlock;
    const std::uint32_t with_key = warp.ballot(valid);
    std::uint32_t masks[WordsPerBlock];
    masks_of(h, masks);
    const std::uint64_t block = block_of(h);
#pragma unroll
    for (std::uint32_t round = 0; round < WordsPerBlock; ++round) {
      const auto owner = static_cast<int>(round * keys_per_round + lane / WordsPerBlock);
      const std::uint64_t owner_block = warp.shfl(block, owner);
      // The owner's mask of this lane's word: every lane takes part in every shuffle.
      std::uint32_t mask = 0;
#pragma unroll
      for (std::uint32_t w = 0; w < WordsPerBlock; ++w) {
        const std::uint32_t owner_mask = warp.shfl(masks[w], owner);
        if (w == word) mask = owner_mask;
      }
      if (((with_key >> owner) & 1u) != 0 && mask != 0)
        atomicOr(words_ + owner_block * WordsPerBlock + word, mask);
    }
  }

  /// True when all bits of the key with hash `h` are set (false: definitely absent).
  __device__ __forceinline__ bool contains_hash(std::uint64_t h) const {
    std::uint32_t block_words[WordsPerBlock];
    load_block(block_of(h), block_words);
    std::uint32_t masks[WordsPerBlock];
    masks_of(h, masks);
    return covers(block_words, masks);
  }

  /// Sets the bits of `key` (a 32- or 64-bit integer).
  template <class Key>
  __device__ __forceinline__ void add(Key key) const {
    add_hash(hash(key));
  }

  /// True when `key` may be present; false means it was never added.
  template <class Key>
  __device__ __forceinline__ bool contains(Key key) const {
    return contains_hash(hash(key));
  }

  /// Sets the bits of the byte string [bytes, bytes + len).
  __device__ __forceinline__ void add_bytes(const void* bytes, std::size_t len) const {
    add_hash(hash_bytes(bytes, len));
  }
  /// True when the byte string [bytes, bytes + len) may be present.
  __device__ __forceinline__ bool contains_bytes(const void* bytes, std::size_t len) const {
    return contains_hash(hash_bytes(bytes, len));
  }
  /// Cooperative add: the warp hashes the string together, lane 0 sets its bits.
  __device__ __forceinline__ void add_bytes(const warp_tile& warp, const void* bytes,
                                            std::size_t len) const {
    const std::uint64_t h = hash_bytes(warp, bytes, len);
    if (warp.thread_rank() == 0) add_hash(h);
  }
  /// Cooperative probe: every lane gets the answer.
  __device__ __forceinline__ bool contains_bytes(const warp_tile& warp, const void* bytes,
                                                 std::size_t len) const {
    const std::uint64_t h = hash_bytes(warp, bytes, len);
    return warp.shfl(static_cast<int>(warp.thread_rank() == 0 ? contains_hash(h) : false), 0) != 0;
  }

  /// Device address of the bit array.
  __host__ __device__ Word* words() const { return words_; }
  /// Number of blocks.
  __host__ __device__ std::uint64_t num_blocks() const { return num_blocks_; }
  /// Bits set per key (k).
  __host__ __device__ std::uint32_t bits_per_key() const { return bits_per_key_; }
  /// xxh64 seed.
  __host__ __device__ std::uint64_t seed() const { return seed_; }

 private:
  // Bytes of the widest load of one block, hence the bit array's required alignment.
  static constexpr std::uint32_t vector_bytes =
      (WordsPerBlock < 4 ? WordsPerBlock : 4) * bytes_per_word;

  Word* words_;
  std::uint64_t num_blocks_;
  std::uint32_t bits_per_key_;
  std::uint64_t seed_;
};

// Kernels receive the view by value: it must stay a plain bundle of values.
static_assert(std::is_trivially_copyable_v<device_ref<8>> &&
                  std::is_trivially_copyable_v<device_ref<8, const std::uint32_t>>,
              "device_ref is passed to kernels by value");

}  // namespace gbf
