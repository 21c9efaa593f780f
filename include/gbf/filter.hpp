// gbf::filter — a blocked Bloom filter on the GPU or the CPU, same bits on both.
//
//   auto f = gbf::filter::create(10'000'000, 0.01);   // GPU if present (+ CPU mirror), else CPU
//   f.add(keys.data(), keys.size());                   // host or device pointer
//   f.contains(queries.data(), queries.size(), hits);  // hits: bool per key
//
// Keys are 32- or 64-bit integers (signed or unsigned; they hash their
// little-endian bytes) or byte strings in the Arrow layout (string_keys: they
// hash their bytes; see docs/string-keys.md). Key and result pointers may be host or device memory
// (the two must be in the same space); host batches of any size stream to the
// GPU through fixed pinned staging buffers. The `_async` variants take device
// pointers and a CUDA stream and are stream-ordered like CUB: they return
// before the work finishes and never synchronize.
//
// A filter object is not thread-safe: drive one filter from one host thread
// (const calls included: an automatic filter's probes may update its mirror).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "gbf/cost_model.hpp"
#include "gbf/error.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"

struct CUstream_st;

namespace gbf {

/// A CUDA stream handle (the same type as cudaStream_t); nullptr is the default stream.
using stream_t = CUstream_st*;

/// Where a filter's bits live and its operations run.
enum class backend { cpu, gpu, automatic };

/// Which CPU kernel runs: the portable scalar one, AVX2, or the best available.
enum class cpu_simd { automatic, scalar, avx2 };

/// How a filter is placed and run.
struct options {
  /// automatic: on a machine with a usable GPU, the bits live on the GPU and a CPU
  /// mirror serves the host batches the cost model says the CPU finishes first
  /// (see cost_model.hpp); without a GPU, the CPU. A GPU filter lives on the device
  /// current when it is made and runs every call there, whatever the caller's
  /// cudaSetDevice since; keys in another GPU's memory throw invalid_argument.
  backend where = backend::automatic;
  cpu_simd simd = cpu_simd::automatic;  ///< CPU kernel; avx2 throws where the CPU lacks it.
  unsigned cpu_threads = 0;             ///< CPU worker threads, 0 = all hardware threads.
  /// CPU bit arrays of 2 MiB or more in transparent huge pages (fewer TLB misses:
  /// ~1.2x on big filters; creation may take longer while the kernel compacts memory).
  bool cpu_huge_pages = true;
  std::size_t gpu_chunk_keys = 0;       ///< Keys per pinned staging chunk for host batches, 0 = 4 Mi.
  unsigned gpu_streams = 0;             ///< Streams overlapping copy/kernel/copy, 0 = 3.
  /// Costs the automatic backend routes by; empty = cost_model::for_automatic_backend().
  std::optional<cost_model> costs;
};

/// Whether a usable GPU exists and, when not, why (e.g. "no CUDA driver").
struct gpu_status {
  bool available = false;
  std::string description;  ///< GPU name and memory, or the reason there is none.
};

/// Probes the CUDA runtime once; never throws. A missing driver reads as "no GPU".
gpu_status query_gpu();

/// True when the running CPU supports the AVX2 kernel.
bool cpu_has_avx2();

/// One line describing `l`, e.g. "8 words/block, 8 bits/key, seed 0, xxh64, 4096 blocks (128 KiB)".
std::string to_string(const layout& l);

/// "cpu", "gpu" or "auto".
const char* to_string(backend b);

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

/// How an automatic filter shared its work between the GPU and its CPU mirror.
/// All zero (mirrored false) for a filter on one backend.
struct dispatch_stats {
  bool mirrored = false;            ///< Host batches are routed between the GPU and a CPU mirror.
  std::uint64_t cpu_batches = 0;    ///< Batches run on the CPU mirror.
  std::uint64_t gpu_batches = 0;    ///< Batches run on the GPU (device keys and _async calls included).
  std::uint64_t copies_to_cpu = 0;  ///< Whole bit-array copies GPU -> mirror.
  std::uint64_t copies_to_gpu = 0;  ///< Whole bit-array copies mirror -> GPU.
  std::uint64_t replays = 0;        ///< Logged adds replayed on the copy that had missed them.
  std::string mirror_note;          ///< Why the mirror is off, when it is (e.g. too big for host memory).
};

/// Outcome of recomputing a batch's answers on the CPU.
struct verify_report {
  std::uint64_t keys_checked = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t first_mismatch = 0;  ///< Index of the first mismatch (valid when mismatches > 0).
  bool ok() const { return mismatches == 0; }
};

/// Byte-string keys in the Apache Arrow layout: key i is bytes [offsets[i], offsets[i+1]) of data.
///
/// Offsets need not start at 0 (a sliced Arrow array); they must be >= 0, must not
/// decrease and must not pass data_bytes, else every operation throws
/// invalid_argument naming the first bad index and leaves the filter unchanged.
/// A key's hash is xxh64 of its bytes with the filter's seed (no length prefix),
/// as Parquet hashes BYTE_ARRAY values. Null keys (validity bit 0) are never
/// added, never found (found / is_new false) and never counted.
template <class Offset>  // std::int32_t (Arrow String) or std::int64_t (LargeString)
struct string_keys {
  const void* data = nullptr;              ///< Concatenated key bytes (host or device memory).
  std::size_t data_bytes = 0;              ///< Bytes at data; an offset past it is an error.
  const Offset* offsets = nullptr;         ///< count + 1 non-decreasing offsets, in data's memory space.
  std::size_t count = 0;                   ///< Number of keys.
  const std::uint8_t* validity = nullptr;  ///< Optional Arrow validity bitmap (bit i, LSB first; 0 = null).
};

namespace detail {
class backend_impl;
struct key_batch;
/// u32/u64: integer keys; str32/str64: string_keys with int32/int64 offsets.
enum class key_kind { u32, u64, str32, str64 };
template <class Key>
constexpr key_kind key_kind_of() {
  static_assert(std::is_integral_v<Key> && (sizeof(Key) == 4 || sizeof(Key) == 8),
                "gbf keys are 32- or 64-bit integers");
  return sizeof(Key) == 4 ? key_kind::u32 : key_kind::u64;
}

/// Any batch of keys with its key type as a runtime value: integers (offsets null)
/// or strings (offsets of width given by kind). What the public templates hand to
/// the one non-template path of each operation.
struct key_input {
  const void* data = nullptr;
  std::size_t data_bytes = 0;
  const void* offsets = nullptr;
  std::size_t count = 0;
  const std::uint8_t* validity = nullptr;
  key_kind kind = key_kind::u64;
};
template <class Key>
key_input erase(const Key* keys, std::size_t n, const std::uint8_t* validity = nullptr) {
  return {keys, 0, nullptr, n, validity, key_kind_of<Key>()};
}
template <class Offset>
key_input erase(const string_keys<Offset>& keys) {
  static_assert(std::is_same_v<Offset, std::int32_t> || std::is_same_v<Offset, std::int64_t>,
                "string_keys offsets are std::int32_t (Arrow String) or std::int64_t (LargeString)");
  return {keys.data,  keys.data_bytes, keys.offsets, keys.count, keys.validity,
          std::is_same_v<Offset, std::int32_t> ? key_kind::str32 : key_kind::str64};
}
}  // namespace detail

class filter {
 public:
  /// A filter sized for `capacity` keys at false-positive rate `fpp` (see size_for).
  static filter create(std::uint64_t capacity, double fpp, const options& opts = {},
                       const shape& s = {});

  /// An empty filter of explicit layout `l`; `capacity` (0 = unknown) feeds stats().
  explicit filter(const layout& l, const options& opts = {}, std::uint64_t capacity = 0);

  /// A filter of layout `l` holding `words` (l.num_words() host words, e.g. from a file);
  /// `keys_added` restores the count stats() reports.
  static filter from_words(const layout& l, const std::uint32_t* words, const options& opts = {},
                           std::uint64_t capacity = 0, std::uint64_t keys_added = 0);

  filter(filter&&) noexcept;
  filter& operator=(filter&&) noexcept;
  filter(const filter&) = delete;
  filter& operator=(const filter&) = delete;
  ~filter();

  /// A deep copy of this filter on backend `where` (cpu or gpu): same layout, same bits.
  filter copy_to(backend where, const options& opts = {}) const;

  /// The layout (geometry, hash, seed).
  const layout& get_layout() const noexcept { return layout_; }
  /// The backend holding the bits: cpu or gpu, never automatic (an automatic filter
  /// with a CPU mirror answers gpu; dispatch() says where its batches ran).
  backend where() const noexcept;
  /// One line naming the backend and why it was chosen, e.g. "cpu (avx2, 16 threads): no GPU: ...".
  const std::string& backend_description() const noexcept { return description_; }
  /// Capacity the filter was sized for, 0 when unknown.
  std::uint64_t capacity() const noexcept { return capacity_; }
  /// Where an automatic filter ran its batches so far (see dispatch_stats).
  dispatch_stats dispatch() const;

  /// Adds `n` keys (host or device memory).
  template <class Key>
  void add(const Key* keys, std::size_t n) {
    add_keys(detail::erase(keys, n));
  }
  /// Adds `n` keys and sets is_new[i] to whether key i was absent before it was added
  /// (in batch order: a repeated key is new only the first time, as BF.MADD reports).
  template <class Key>
  void add_new(const Key* keys, std::size_t n, bool* is_new) {
    add_new_keys(detail::erase(keys, n), is_new);
  }
  /// Sets found[i] to whether key i may be present (false means definitely absent).
  template <class Key>
  void contains(const Key* keys, std::size_t n, bool* found) const {
    contains_keys(detail::erase(keys, n), found);
  }
  /// Number of the `n` keys that may be present.
  template <class Key>
  std::uint64_t count(const Key* keys, std::size_t n) const {
    return count_keys(detail::erase(keys, n));
  }

  /// Join prefilter: writes to `row_indices`, in ascending order, the index i of every
  /// key that may be present, and returns how many it wrote (a semi-join reduction:
  /// rows not written are definitely absent). `row_indices` has room for n indices and
  /// lives in the keys' memory space. On the CPU: the probe and a branch-free
  /// compaction per thread, then an ordered copy. On the GPU: device keys are probed
  /// and compacted on the device (cub::DeviceSelect::Flagged over row numbers); host
  /// keys stream through the pipeline and are compacted on the host.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, std::uint64_t* row_indices) const {
    return select_keys(detail::erase(keys, n), row_indices);
  }
  /// Null-aware select: `validity` is an Arrow bitmap (bit i of key i, LSB first, in the
  /// keys' memory space; null = all valid). Null keys are never selected.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, const std::uint8_t* validity,
                       std::uint64_t* row_indices) const {
    return select_keys(detail::erase(keys, n, validity), row_indices);
  }
  /// Stream-ordered select of device keys (GPU backend only): ascending row indices to
  /// `device_row_indices` (room for n) and their number to `device_count` (device
  /// memory, one uint64). Returns before the work finishes; the count stays on the
  /// device, as with CUB. `device_validity` (may be null) is an Arrow bitmap in device memory.
  template <class Key>
  void select_async(const Key* device_keys, std::size_t n, std::uint64_t* device_row_indices,
                    std::uint64_t* device_count, stream_t stream,
                    const std::uint8_t* device_validity = nullptr) const {
    select_keys_async(detail::erase(device_keys, n, device_validity), device_row_indices,
                      device_count, stream);
  }

  /// Stream-ordered add of device-resident keys (GPU backend only; throws wrong_backend).
  template <class Key>
  void add_async(const Key* device_keys, std::size_t n, stream_t stream) {
    add_keys_async(detail::erase(device_keys, n), stream);
  }
  /// Stream-ordered contains; `device_found` is device memory of n bools.
  template <class Key>
  void contains_async(const Key* device_keys, std::size_t n, bool* device_found,
                      stream_t stream) const {
    contains_keys_async(detail::erase(device_keys, n), device_found, stream);
  }
  /// Stream-ordered count; the result lands in device memory `device_count` (one uint64).
  template <class Key>
  void count_async(const Key* device_keys, std::size_t n, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys_async(detail::erase(device_keys, n), device_count, stream);
  }

  /// Recomputes `found` (answers for `keys`, host or device memory) on the CPU from
  /// a host copy of the bits and reports every disagreement.
  template <class Key>
  verify_report verify_contains(const Key* keys, std::size_t n, const bool* found) const {
    return verify_keys(detail::erase(keys, n), found);
  }

  // Byte-string keys (string_keys above): the same operations, same semantics.
  // Null keys are skipped: not added, found / is_new false, not counted, and not
  // in keys_added (except for add_async, which cannot read a device bitmap
  // without synchronizing and counts every key).

  /// Adds the non-null string keys (host or device memory).
  template <class Offset>
  void add(const string_keys<Offset>& keys) {
    add_keys(detail::erase(keys));
  }
  /// Adds the keys; is_new[i] = key i was absent before (batch order, as add_new above).
  template <class Offset>
  void add_new(const string_keys<Offset>& keys, bool* is_new) {
    add_new_keys(detail::erase(keys), is_new);
  }
  /// found[i] = key i may be present (results in the keys' memory space).
  template <class Offset>
  void contains(const string_keys<Offset>& keys, bool* found) const {
    contains_keys(detail::erase(keys), found);
  }
  /// Number of the non-null keys that may be present.
  template <class Offset>
  std::uint64_t count(const string_keys<Offset>& keys) const {
    return count_keys(detail::erase(keys));
  }
  /// Ascending indices of the non-null keys that may be present (see select above);
  /// `row_indices` has room for keys.count indices, in the keys' memory space.
  template <class Offset>
  std::uint64_t select(const string_keys<Offset>& keys, std::uint64_t* row_indices) const {
    return select_keys(detail::erase(keys), row_indices);
  }
  /// Stream-ordered add of device-resident string keys (GPU backend only). The
  /// offsets are checked on the device before any bit is written; a bad batch
  /// adds nothing, and synchronize() or the next synchronous key operation on
  /// this filter (any key type) throws invalid_argument naming the first bad index.
  template <class Offset>
  void add_async(const string_keys<Offset>& device_keys, stream_t stream) {
    add_keys_async(detail::erase(device_keys), stream);
  }
  /// Stream-ordered contains (a bad batch answers all false; see add_async).
  template <class Offset>
  void contains_async(const string_keys<Offset>& device_keys, bool* device_found,
                      stream_t stream) const {
    contains_keys_async(detail::erase(device_keys), device_found, stream);
  }
  /// Stream-ordered count into device memory `device_count` (a bad batch counts 0).
  template <class Offset>
  void count_async(const string_keys<Offset>& device_keys, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys_async(detail::erase(device_keys), device_count, stream);
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
  /// this |= other (union). Throws layout_mismatch when the layouts differ.
  void merge(const filter& other);
  /// this &= other (intersection; may hold false positives of both). Throws layout_mismatch.
  void intersect(const filter& other);

  /// Popcount of the bit array.
  std::uint64_t bits_set() const;
  /// Fill ratio, estimated distinct keys and FPR, and the over-capacity flag.
  filter_stats stats() const;
  /// The bit array as host words (num_words of them, word i of block b at b * W + i).
  std::vector<std::uint32_t> words() const;
  /// Device address of the bit array (GPU backend only), for custom kernels, which may
  /// read and write it. On an automatic filter it first brings the GPU copy up to date
  /// and drops the CPU mirror: from then on every call runs on the GPU copy.
  const std::uint32_t* device_words() const;

 private:
  // One path per operation for every key type (detail::erase describes the batch).
  void add_keys(const detail::key_input& keys);
  void add_new_keys(const detail::key_input& keys, bool* is_new);
  void contains_keys(const detail::key_input& keys, bool* found) const;
  std::uint64_t count_keys(const detail::key_input& keys) const;
  std::uint64_t select_keys(const detail::key_input& keys, std::uint64_t* rows) const;
  void select_keys_async(const detail::key_input& keys, std::uint64_t* rows, std::uint64_t* count,
                         stream_t stream) const;
  void add_keys_async(const detail::key_input& keys, stream_t stream);
  void contains_keys_async(const detail::key_input& keys, bool* found, stream_t stream) const;
  void count_keys_async(const detail::key_input& keys, std::uint64_t* count,
                        stream_t stream) const;
  verify_report verify_keys(const detail::key_input& keys, const bool* found) const;
  /// Recomputes contains for a host batch on a scalar CPU copy of the bits.
  verify_report verify_on_cpu(const detail::key_batch& host_batch, const bool* host_found) const;
  void combine(const filter& other, bool is_union);

  layout layout_;
  std::unique_ptr<detail::backend_impl> impl_;
  std::uint64_t capacity_ = 0;
  std::uint64_t keys_added_ = 0;
  std::string description_;
};

}  // namespace gbf
