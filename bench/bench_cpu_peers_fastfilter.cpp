// Lemire's fastfilter_cpp split-block Bloom filters as peers of gbf's CPU
// backend (bench/bench_cpu_peers.cpp). Compiled only with GBF_FASTFILTER_DIR
// (its src/ folder), with the flags of fastfilter_cpp's own benchmarks.
//
// Two classes, both the Impala split-block layout of gbf's default (8 x 32-bit
// words, one bit per word from the same eight odd multipliers as Parquet):
//   SimdBlockFilter       power-of-two block count; block = hash & mask, the
//                         bits from hash >> log2(blocks).
//   SimdBlockFilterFixed  any block count; block = ((hash >> 32) * blocks) >> 32,
//                         the bits from the low 32 bits: with xxh64 seed 0 this
//                         is exactly Parquet's SBBF, so its words must equal gbf's.
// Each with the hash it ships (SimpleMixSplit: murmur3's 64-bit finalizer of
// key + a random seed, 2 multiplies) and with xxh64 as gbf computes it (gbf
// must use xxh64 for Parquet compatibility: 5 multiplies). SimdBlockFilterFixed
// also ships a batch add, AddAll, which buckets hashes by region of the filter
// before applying them (cache-friendlier than one Add per key).
#include <climits>
#include <stdexcept>
#include <cstring>
#include <vector>

using std::vector;  // simd-block-fixed-fpp.h names vector unqualified

#include "bench/bench_cpu_peers.hpp"
#include "bloom/simd-block-fixed-fpp.h"
#include "bloom/simd-block.h"
#include "gbf/hash.hpp"

#ifndef GBF_BENCH_FASTFILTER_COMMIT
#define GBF_BENCH_FASTFILTER_COMMIT "unknown"
#endif

namespace gbf_bench {
namespace {

/// xxh64 of the key's 8 little-endian bytes, seed 0: gbf's key hash.
struct xxh64_hash {
  std::uint64_t operator()(std::uint64_t key) const { return gbf::hash_key(key, 0); }
};

int log2_exact(std::uint64_t v) { return 63 - __builtin_clzll(v); }

template <class Hash>
class simd_block final : public peer_filter {
 public:
  // The constructor takes log2 of the bytes.
  explicit simd_block(std::uint64_t num_blocks) : f_(log2_exact(num_blocks * 32)) {}
  void add(const std::uint64_t* keys, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) f_.Add(keys[i]);
  }
  void contains(const std::uint64_t* keys, std::size_t n, bool* found) const override {
    for (std::size_t i = 0; i < n; ++i) found[i] = f_.Find(keys[i]);
  }

 private:
  SimdBlockFilter<Hash> f_;
};

/// The bucket array of a SimdBlockFilterFixed (its first data member after the
/// bucket count), to compare bits with gbf.
struct fixed_layout {
  int bucket_count;
  std::uint32_t (*directory)[8];
};

template <class Hash, bool BatchAdd>
class simd_block_fixed final : public peer_filter {
 public:
  // The constructor takes "bits" and makes bits / 24 buckets.
  explicit simd_block_fixed(std::uint64_t num_blocks)
      : f_(static_cast<int>(num_blocks * 24)), num_blocks_(num_blocks) {}
  void add(const std::uint64_t* keys, std::size_t n) override {
    if constexpr (BatchAdd) {
      f_.AddAll(keys, 0, n);
    } else {
      for (std::size_t i = 0; i < n; ++i) f_.Add(keys[i]);
    }
  }
  void contains(const std::uint64_t* keys, std::size_t n, bool* found) const override {
    for (std::size_t i = 0; i < n; ++i) found[i] = f_.Find(keys[i]);
  }
  std::vector<std::uint32_t> words() const override {
    fixed_layout view;
    std::memcpy(&view, &f_, sizeof view);
    if (static_cast<std::uint64_t>(view.bucket_count) != num_blocks_) return {};
    std::vector<std::uint32_t> out(num_blocks_ * 8);
    std::memcpy(out.data(), view.directory, out.size() * 4);
    return out;
  }

 private:
  SimdBlockFilterFixed<Hash> f_;
  std::uint64_t num_blocks_;
};

template <class Filter>
std::unique_ptr<peer_filter> make(std::uint64_t num_blocks) {
  return std::make_unique<Filter>(num_blocks);
}

}  // namespace

std::vector<peer_row> fastfilter_rows() {
  using mix = hashing::SimpleMixSplit;
  // SimdBlockFilterFixed holds its bucket count in an int and is built from
  // bits = 24 * blocks, also an int.
  const std::uint64_t fixed_max = (std::uint64_t{INT_MAX} / 24) * 32;
  return {
      {"fastfilter SimdBlockFilter, murmur mix", false, false, 0,
       &make<simd_block<mix>>},
      {"fastfilter SimdBlockFilter, xxh64", false, false, 0, &make<simd_block<xxh64_hash>>},
      {"fastfilter SimdBlockFilterFixed, murmur mix", false, false, fixed_max,
       &make<simd_block_fixed<mix, false>>},
      {"fastfilter SimdBlockFilterFixed, xxh64", false, true, fixed_max,
       &make<simd_block_fixed<xxh64_hash, false>>},
      {"fastfilter SimdBlockFilterFixed AddAll, murmur mix", true, false, fixed_max,
       &make<simd_block_fixed<mix, true>>},
      {"fastfilter SimdBlockFilterFixed AddAll, xxh64", true, true, fixed_max,
       &make<simd_block_fixed<xxh64_hash, true>>},
  };
}

std::string fastfilter_source() {
  return std::string("fastfilter_cpp commit ") + GBF_BENCH_FASTFILTER_COMMIT;
}

}  // namespace gbf_bench
