// gbf::filter — a blocked Bloom filter on the GPU or the CPU, same bits on both.
//
//   auto f = gbf::filter::create(10'000'000, 0.01);   // GPU if present, else CPU
//   f.add(keys.data(), keys.size());                   // host or device pointer
//   f.contains(queries.data(), queries.size(), hits);  // hits: bool per key
//
// Keys are 32- or 64-bit integers (signed or unsigned; they hash their
// little-endian bytes) or byte strings in the Arrow layout (gbf/keys.hpp:
// string_keys, which hash their bytes; see docs/string-keys.md). Key and
// result pointers may be host or device memory (the two must be in the same
// space); host batches of any size stream to the GPU through fixed pinned
// staging buffers.
//
// Streams (GPU filters). Every key operation takes an optional CUDA stream.
// The synchronous calls run on it (or, without one, on the filter's own
// stream, after the work already queued on the legacy default stream) and
// return when their work is done. The `_async` variants take device pointers,
// run on the stream given and return before the work finishes, never
// synchronizing, like CUB. A CPU filter ignores the stream of a synchronous
// call and refuses `_async` calls (wrong_backend).
//
// Errors of every call that makes a filter (the factories, constructors,
// copy_to, load, deserialize): invalid_argument for a bad layout or option (a
// cpu_simd the CPU lacks, a null words pointer), no_gpu for backend::gpu where
// no GPU is usable, allocation_error when the bits cannot be allocated.
//
// A filter object is not thread-safe: drive one filter from one host thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/error.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"
#include "gbf/verify.hpp"

namespace gbf {

class block_bits;  // gbf/block_bits.hpp

/// One line describing `l`, e.g. "8 words/block, 8 bits/key, seed 0, xxh64, 4096 blocks (128.0 KiB)".
std::string to_string(const layout& l);

/// A filter's occupancy and what it implies.
struct filter_stats {
  std::uint64_t bits_set = 0;     ///< Popcount of the bit array.
  std::uint64_t num_bits = 0;     ///< Size of the bit array in bits.
  double fill_ratio = 0;          ///< bits_set / num_bits.
  double estimated_keys = 0;      ///< Distinct keys inferred from bits_set.
  double estimated_fpr = 0;       ///< Expected FPR at estimated_keys.
  std::uint64_t keys_added = 0;   ///< Keys passed to add/add_new so far (duplicates included).
  std::uint64_t capacity = 0;     ///< Capacity it was sized for (0 when built from a layout).
  /// estimated_keys > capacity + 3 estimate_standard_error(layout, capacity): past
  /// capacity beyond the estimate's noise, so the FPR is climbing past its target.
  /// Raised at 1.1x capacity and not at 0.9x from ~10^3 keys at fpp <= 0.01, 10^4 up to 0.3.
  bool over_capacity = false;
};

namespace detail {
class bloom_backend;
enum class set_op;
struct filter_access;  // the file readers' way in (host/filter_access.hpp)
}  // namespace detail

class filter {
 public:
  /// A filter sized for `capacity` keys at false-positive rate `fpp` (see size_for).
  static filter create(std::uint64_t capacity, double fpp, const options& opts = {},
                       const shape& s = {});

  /// An empty filter of explicit layout `l`; `capacity` (0 = unknown) feeds stats().
  explicit filter(const gbf::layout& l, const options& opts = {}, std::uint64_t capacity = 0);

  /// A filter of layout `l` holding `words` (l.num_words() host words, e.g. from a file);
  /// `keys_added` restores the count stats() reports.
  static filter from_words(const gbf::layout& l, const std::uint32_t* words,
                           const options& opts = {}, std::uint64_t capacity = 0,
                           std::uint64_t keys_added = 0);

  /// Moves; the moved-from object may then only be assigned to or destroyed (any call
  /// that needs its bits throws invalid_argument; the noexcept accessors return stale values).
  filter(filter&&) noexcept;
  filter& operator=(filter&&) noexcept;
  filter(const filter&) = delete;
  filter& operator=(const filter&) = delete;
  ~filter();

  /// A deep copy of this filter on backend `where`: same layout, same bits.
  filter copy_to(backend where, const options& opts = {}) const;

  /// The layout (geometry, hash, seed).
  const gbf::layout& layout() const noexcept { return layout_; }
  /// The backend holding the bits: cpu or gpu, never automatic.
  backend where() const;
  /// One line naming the backend and why it was chosen, e.g. "cpu (avx2, 16 threads); auto: no GPU (...)".
  const std::string& description() const noexcept { return description_; }
  /// Capacity the filter was sized for, 0 when unknown.
  std::uint64_t capacity() const noexcept { return capacity_; }

  // ---- Integer keys (host or device memory; results in the keys' memory space)

  /// Adds `n` keys.
  template <class Key>
  void add(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    add_keys(detail::erase(keys, n), nullptr, {"add", stream, false});
  }
  /// Adds `n` keys and sets is_new[i] to whether key i was absent before it was added
  /// (in batch order: a repeated key is new only the first time, as BF.MADD reports).
  template <class Key>
  void add_new(const Key* keys, std::size_t n, bool* is_new, stream_t stream = nullptr) {
    add_keys(detail::erase(keys, n), is_new, {"add_new", stream, false, true});
  }
  /// Sets found[i] to whether key i may be present (false means definitely absent).
  template <class Key>
  void contains(const Key* keys, std::size_t n, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys, n), found, {"contains", stream, false});
  }
  /// Number of the `n` keys that may be present.
  template <class Key>
  std::uint64_t count(const Key* keys, std::size_t n, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys, n), nullptr, {"count", stream, false});
  }

  /// Join prefilter: writes to `row_indices`, in ascending order, the index i of every
  /// key that may be present, and returns how many it wrote (a semi-join reduction:
  /// rows not written are definitely absent). `row_indices` has room for n indices and
  /// lives in the keys' memory space. On the CPU: the probe and a branch-free
  /// compaction per thread, then an ordered copy. On the GPU: device keys are probed
  /// and compacted on the device (cub::DeviceSelect::Flagged over row numbers); host
  /// keys stream through the pipeline and are compacted on the host.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n), row_indices, nullptr, {"select", stream, false});
  }
  /// Null-aware select: `validity` is an Arrow bitmap (bit i of key i, LSB first, in the
  /// keys' memory space; null = all valid). Null keys are never selected.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, const std::uint8_t* validity,
                       std::uint64_t* row_indices, stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n, validity), row_indices, nullptr,
                       {"select", stream, false});
  }

  // ---- Stream-ordered integer calls (GPU backend, device memory; else wrong_backend)

  /// Adds `n` device keys on `stream`; returns before the work finishes.
  template <class Key>
  void add_async(const Key* device_keys, std::size_t n, stream_t stream) {
    add_keys(detail::erase(device_keys, n), nullptr, {"add_async", stream, true});
  }
  /// Stream-ordered contains; `device_found` is device memory of n bools.
  template <class Key>
  void contains_async(const Key* device_keys, std::size_t n, bool* device_found,
                      stream_t stream) const {
    contains_keys(detail::erase(device_keys, n), device_found, {"contains_async", stream, true});
  }
  /// Stream-ordered count; the result lands in device memory `device_count` (one uint64).
  template <class Key>
  void count_async(const Key* device_keys, std::size_t n, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys(detail::erase(device_keys, n), device_count, {"count_async", stream, true});
  }
  /// Stream-ordered select: ascending row indices to `device_row_indices` (room for n)
  /// and their number to `device_count` (device memory, one uint64); the count stays
  /// on the device, as with CUB. `device_validity` (may be null) is an Arrow bitmap in
  /// device memory.
  template <class Key>
  void select_async(const Key* device_keys, std::size_t n, std::uint64_t* device_row_indices,
                    std::uint64_t* device_count, stream_t stream,
                    const std::uint8_t* device_validity = nullptr) const {
    select_keys(detail::erase(device_keys, n, device_validity), device_row_indices, device_count,
                {"select_async", stream, true});
  }

  /// Recomputes `found` (answers for `keys`, host or device memory) on the CPU from
  /// a host copy of the bits and reports every disagreement.
  template <class Key>
  verify_report verify_contains(const Key* keys, std::size_t n, const bool* found) const {
    return verify_keys(detail::erase(keys, n), found);
  }

  // ---- Byte-string keys (string_keys): the same operations, same semantics.
  // Null keys are skipped: not added, found / is_new false, not counted, and not
  // in keys_added (except for add_async, which cannot read a device bitmap
  // without synchronizing and counts every key).

  /// Adds the non-null string keys (host or device memory).
  template <class Offset>
  void add(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    add_keys(detail::erase(keys), nullptr, {"add", stream, false});
  }
  /// Adds the keys; is_new[i] = key i was absent before (batch order, as add_new above).
  template <class Offset>
  void add_new(const string_keys<Offset>& keys, bool* is_new, stream_t stream = nullptr) {
    add_keys(detail::erase(keys), is_new, {"add_new", stream, false, true});
  }
  /// found[i] = key i may be present (results in the keys' memory space).
  template <class Offset>
  void contains(const string_keys<Offset>& keys, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys), found, {"contains", stream, false});
  }
  /// Number of the non-null keys that may be present.
  template <class Offset>
  std::uint64_t count(const string_keys<Offset>& keys, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys), nullptr, {"count", stream, false});
  }
  /// Ascending indices of the non-null keys that may be present (see select above);
  /// `row_indices` has room for keys.count indices, in the keys' memory space.
  template <class Offset>
  std::uint64_t select(const string_keys<Offset>& keys, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys), row_indices, nullptr, {"select", stream, false});
  }
  /// Stream-ordered add of device-resident string keys (GPU backend only). The
  /// offsets are checked on the device before any bit is written; a bad batch
  /// adds nothing, and synchronize() or the next synchronous key operation on
  /// this filter (any key type) throws invalid_argument naming the first bad index.
  template <class Offset>
  void add_async(const string_keys<Offset>& device_keys, stream_t stream) {
    add_keys(detail::erase(device_keys), nullptr, {"add_async", stream, true});
  }
  /// Stream-ordered contains (a bad batch answers all false; see add_async).
  template <class Offset>
  void contains_async(const string_keys<Offset>& device_keys, bool* device_found,
                      stream_t stream) const {
    contains_keys(detail::erase(device_keys), device_found, {"contains_async", stream, true});
  }
  /// Stream-ordered count into device memory `device_count` (a bad batch counts 0).
  template <class Offset>
  void count_async(const string_keys<Offset>& device_keys, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys(detail::erase(device_keys), device_count, {"count_async", stream, true});
  }
  /// Recomputes `found` for string keys on the CPU (see verify_contains above).
  template <class Offset>
  verify_report verify_contains(const string_keys<Offset>& keys, const bool* found) const {
    return verify_keys(detail::erase(keys), found);
  }

  /// Waits for every _async call on this filter; throws invalid_argument when one of
  /// them was a string batch with bad offsets (it wrote nothing). No-op on the CPU.
  void synchronize() const;

  /// Sets every bit to zero (keeps layout and capacity; resets keys_added).
  void clear();
  /// this |= other (union); keys_added sums (overlap counts twice: the bits cannot tell),
  /// except that f.merge(f) changes nothing (x | x = x, the same keys; so for every set
  /// kind: filter, block_bits, scaling_filter). Throws layout_mismatch when the layouts differ.
  void merge(const filter& other);
  /// this |= bits (keys' bits gathered without a filter, gbf/block_bits.hpp); keys_added
  /// adds bits.keys_added(). Costs the bits' bytes, not the filter's (on the GPU: copied
  /// over in steps of 2^20 blocks and scattered by a kernel). Throws layout_mismatch
  /// when bits.layout() differs.
  void merge(const block_bits& bits);
  /// this &= other (intersection; may hold false positives of both). Throws layout_mismatch.
  /// keys_added becomes the smaller count. stats().estimated_keys of the result overstates
  /// the common keys (bits of keys of only one side that the other's keys also set):
  /// estimate them as a.estimated + b.estimated - (a | b).estimated instead.
  void intersect(const filter& other);
  /// this ^= other (Hadoop's xor): the bits set in exactly one. Not a filter of either
  /// key set; the delta between two versions of a filter (v1 ^ (v1 ^ v2) = v2). Resets
  /// keys_added (no count survives it). Throws layout_mismatch.
  void symmetric_difference(const filter& other);

  /// Popcount of the bit array.
  std::uint64_t bits_set() const;
  /// Fill ratio, estimated distinct keys and FPR, and the over-capacity flag.
  filter_stats stats() const;
  /// The bit array as host words (num_words of them, word i of block b at b * W + i).
  std::vector<std::uint32_t> words() const;
  /// Copies words [first, first + count) of words() to host memory `out`, without the
  /// whole array's copy (saves stream a filter this way). Throws invalid_argument past the end.
  void copy_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const;
  /// Device address of the bit array (GPU backend; wrong_backend on the CPU), for
  /// custom kernels, which may read and write it (see gbf::device_ref).
  std::uint32_t* device_words();
  /// Device address of the bit array, for kernels that only read it.
  const std::uint32_t* device_words() const;

 private:
  // One path per operation for every key type (detail::erase describes the batch).
  void add_keys(const detail::key_batch& keys, bool* is_new, const detail::call_options& call);
  void contains_keys(const detail::key_batch& keys, bool* found,
                     const detail::call_options& call) const;
  std::uint64_t count_keys(const detail::key_batch& keys, std::uint64_t* device_count,
                           const detail::call_options& call) const;
  std::uint64_t select_keys(const detail::key_batch& keys, std::uint64_t* rows,
                            std::uint64_t* device_count, const detail::call_options& call) const;
  verify_report verify_keys(const detail::key_batch& keys, const bool* found) const;
  void combine(const filter& other, detail::set_op op);
  friend struct detail::filter_access;

  gbf::layout layout_;
  std::unique_ptr<detail::bloom_backend> impl_;  ///< Null only once moved from.
  /// *impl_; invalid_argument once moved from.
  detail::bloom_backend& impl() const;
  std::uint64_t capacity_ = 0;
  std::uint64_t keys_added_ = 0;
  std::string description_;
};

}  // namespace gbf
