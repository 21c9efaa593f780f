// The peers of bench/bench_cpu_peers.cpp behind one small interface, so that
// each peer's code compiles in a file of its own with the flags its project
// uses (fastfilter_cpp: -O3 -march=native -fno-strict-aliasing; Arrow: the
// prebuilt libparquet, which picks its AVX2 kernels at run time).
//
// A peer filter is driven the way its users call it: one Add / Find (or
// InsertHash / FindHash) per key in a plain loop, or the peer's own batch call
// where it ships one. The virtual call is per batch, never per key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gbf_bench {

/// One CPU Bloom filter under test, built for a fixed number of 32-byte blocks.
class peer_filter {
 public:
  virtual ~peer_filter() = default;
  /// Inserts keys[0, n).
  virtual void add(const std::uint64_t* keys, std::size_t n) = 0;
  /// found[i] = whether keys[i] may be in the filter.
  virtual void contains(const std::uint64_t* keys, std::size_t n, bool* found) const = 0;
  /// The bit array as 32-bit little-endian words, when the peer can hand it out
  /// (empty otherwise): compared with gbf's where the layouts are the same.
  virtual std::vector<std::uint32_t> words() const { return {}; }
};

/// How a peer row is built: its name, whether its add is the peer's batch call,
/// and a factory for a filter of `num_blocks` 32-byte blocks.
struct peer_row {
  std::string name;
  /// Rows whose contains is the same code as another row's (a batch-add twin)
  /// time add only.
  bool add_only = false;
  /// The peer computes the same bits as gbf (Parquet SBBF indexing with xxh64
  /// seed 0), so its words must equal gbf's.
  bool same_bits_as_gbf = false;
  /// Sizes the peer accepts: a power of two number of blocks, at most this many
  /// bytes (0: no limit).
  std::uint64_t max_bytes = 0;
  std::unique_ptr<peer_filter> (*make)(std::uint64_t num_blocks);
};

/// The fastfilter_cpp rows (bench_cpu_peers_fastfilter.cpp); empty unless built
/// with GBF_FASTFILTER_DIR.
std::vector<peer_row> fastfilter_rows();
/// The Arrow parquet::BlockSplitBloomFilter rows (bench_cpu_peers_arrow.cpp);
/// empty unless built with GBF_PARQUET_DIR.
std::vector<peer_row> arrow_rows();
/// Where the peers came from (commit / version), for the report header.
std::string fastfilter_source();
std::string arrow_source();

}  // namespace gbf_bench
