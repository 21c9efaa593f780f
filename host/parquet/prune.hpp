// Row-group pruning behind gbf::parquet::pruner: the filters of every row group
// packed end to end, and the two backends that probe them (host/parquet/
// prune_cpu.cpp, host/gpu/parquet_prune.cpp + kernels/parquet_prune.cu).
//
// The question, for keys i and row groups g: may key i be in g? It is when g
// has no filter (num_blocks 0) or when every bit of i's hash is set in g's
// filter (the default layout: W = 8, k = 8, Parquet's SBBF). The keys reach
// the backends already in the column's encoding (an INT32 column's keys as
// 4-byte integers, the unrepresentable ones null), so the hash of a key is
// the one the launch layer and the CPU key loop compute for it.
//
// Both backends answer
//   may_hold[g] = some non-null key may be in g;
//   per_key:    key_offsets[i + 1] - key_offsets[i] = how many g key i may be in,
//               row_groups[key_offsets[i] ..] = those g, ascending.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/keys.hpp"
#include "gbf/parquet.hpp"
#include "host/cpu/memory.hpp"

namespace gbf::detail::parquet {

/// Words per block of every Parquet filter (the SBBF's 256-bit block).
inline constexpr std::uint32_t sbbf_words = 8;

/// The row groups' filters, end to end: row group g's words are
/// words[word_offset[g] .. word_offset[g] + 8 * num_blocks[g]). Every offset is a
/// multiple of 8 words and the array is 64-byte aligned, so each block is
/// aligned to its 32 bytes (the AVX2 and uint4 loads rely on it).
struct packed_filters {
  cpu::word_array words;
  std::uint64_t num_words = 0;
  std::vector<std::uint64_t> word_offset;
  std::vector<std::uint32_t> num_blocks;  ///< 0: no filter, the row group may hold any key.

  std::size_t count() const { return num_blocks.size(); }
};

/// The CPU backend: keys split over `threads` threads (0 = all), each taking
/// tiles of keys it hashes once and probing every filter for the whole tile
/// (a tile's hashes stay in L2 while one filter's blocks are read, so each
/// filter is fetched from memory once per tile, not once per key). Host keys.
void cpu_prune(const packed_filters& filters, const key_batch& keys, bool per_key,
               unsigned threads, bool use_avx2, gbf::parquet::prune_result& out);

/// The GPU backend: the packed filters in device memory, probed by one launch
/// per batch chunk over all (key, filter) pairs (per_key: a count launch, a scan,
/// a fill launch).
class gpu_prune_backend {
 public:
  virtual ~gpu_prune_backend() = default;
  /// Same contract as cpu_prune; the keys are in host memory (copied in chunks).
  virtual void prune(const key_batch& host_keys, bool per_key,
                     gbf::parquet::prune_result& out) const = 0;
};

/// Uploads `filters` to the current GPU; no_gpu in a build without CUDA or on a
/// machine without a GPU, allocation_error when they do not fit.
std::unique_ptr<gpu_prune_backend> make_gpu_pruner(const packed_filters& filters);

}  // namespace gbf::detail::parquet
