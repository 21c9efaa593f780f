// gbf::counting_filter — a counting blocked Bloom filter: keys can be removed.
//
//   auto f = gbf::counting_filter::create(10'000'000, 0.01);   // GPU if present, else CPU
//   f.add(keys.data(), keys.size());
//   gbf::remove_report r = f.remove(gone.data(), gone.size()); // r.removed, r.refused
//   f.contains(queries.data(), queries.size(), hits);
//
// Every bit of gbf's blocked layout (gbf/layout.hpp) becomes a small saturating
// counter (gbf/counting_layout.hpp: 4 bits by default, or 8): add increments
// the counters of a key's bits, remove decrements them, contains tests that all
// are nonzero. The projection (counter != 0 -> bit set) is exactly the plain
// gbf::filter of the keys held, so sizing, the false-positive rate and Parquet
// export are the plain filter's; the price is c times its memory (4x with
// 4-bit counters). See docs/counting.md.
//
// Removing. A counting filter cannot tell a key it holds from a false
// positive, and removing a key it never held decrements other keys' counters:
// it can make them false negatives. remove() is therefore checked: a key is
// removed only when it tests present at its turn (keys of one batch in batch
// order, so removing twice a key added once refuses the second), and the
// refused keys are counted. remove_unchecked() decrements without testing,
// for callers who know every key is held; a key that is not may cause false
// negatives. A saturated counter (at 2^c - 1) never changes again, so
// overflow never causes a false negative.
//
// Keys, memory spaces, streams, `_async` calls, the errors of the calls that
// make a filter, and thread safety are as for gbf::filter (gbf/filter.hpp):
// 32/64-bit integers or Arrow strings, host or device pointers, results in the
// keys' memory space, one host thread per filter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"

namespace gbf {

/// A counting filter's occupancy and what it implies.
struct counting_stats {
  std::uint32_t counter_bits = 0;         ///< Bits per counter (4 or 8).
  std::uint64_t num_counters = 0;         ///< Counters: the layout's bit count.
  std::uint64_t nonzero_counters = 0;     ///< Counters above 0: the projection's bits set.
  std::uint64_t saturated_counters = 0;   ///< Counters stuck at 2^c - 1.
  double fill_ratio = 0;                  ///< nonzero_counters / num_counters.
  double estimated_keys = 0;              ///< Distinct keys held, inferred from the projection.
  double estimated_fpr = 0;               ///< Expected FPR at estimated_keys (the projection's).
  std::uint64_t keys_added = 0;           ///< Keys passed to add so far (duplicates included).
  std::uint64_t keys_removed = 0;         ///< Keys remove took out (an _async checked remove counts every key).
  std::uint64_t capacity = 0;             ///< Capacity it was sized for (0 when built from a layout).
  std::uint64_t size_bytes = 0;           ///< Bytes of the counter array.
  double bytes_per_key = 0;               ///< size_bytes / capacity, 0 when the capacity is unknown.
  /// Past capacity beyond the estimate's noise, as filter_stats::over_capacity.
  bool over_capacity = false;
};

/// What a checked remove did with a batch's non-null keys.
struct remove_report {
  std::uint64_t removed = 0;  ///< Keys that tested present at their turn and were removed.
  std::uint64_t refused = 0;  ///< Keys that did not test present: nothing was decremented.
};

namespace detail {
class counting_backend;
enum class counter_merge;
struct filter_access;  // the file readers' way in (host/filter_access.hpp)
}  // namespace detail

class counting_filter {
 public:
  /// A counting filter sized for `capacity` keys at false-positive rate `fpp`
  /// (the plain filter's size_for) with `counter_bits`-bit counters (4 or 8).
  static counting_filter create(std::uint64_t capacity, double fpp, const options& opts = {},
                                const shape& s = {},
                                std::uint32_t counter_bits = default_counter_bits);

  /// An empty counting filter of layout `l`; `capacity` (0 = unknown) feeds stats().
  /// Throws invalid_argument for a bad layout or counter width.
  explicit counting_filter(const gbf::layout& l, const options& opts = {},
                           std::uint64_t capacity = 0,
                           std::uint32_t counter_bits = default_counter_bits);

  /// A counting filter of layout `l` holding `counters` (num_counter_words(l, counter_bits)
  /// host words, e.g. from a file); the key counts restore what stats() reports.
  static counting_filter from_counters(const gbf::layout& l, std::uint32_t counter_bits,
                                       const std::uint32_t* counters, const options& opts = {},
                                       std::uint64_t capacity = 0, std::uint64_t keys_added = 0,
                                       std::uint64_t keys_removed = 0);

  /// Moves; the moved-from object may then only be assigned to or destroyed (any call
  /// that needs its bits throws invalid_argument; the noexcept accessors return stale values).
  counting_filter(counting_filter&&) noexcept;
  counting_filter& operator=(counting_filter&&) noexcept;
  counting_filter(const counting_filter&) = delete;
  counting_filter& operator=(const counting_filter&) = delete;
  ~counting_filter();

  /// A deep copy on backend `where`: same layout, same counters, same key counts.
  counting_filter copy_to(backend where, const options& opts = {}) const;

  /// The layout (geometry, hash, seed): that of the projection.
  const gbf::layout& layout() const noexcept { return layout_; }
  /// Bits per counter: 4 or 8.
  std::uint32_t counter_bits() const noexcept { return counter_bits_; }
  /// The backend holding the counters: cpu or gpu.
  backend where() const;
  /// One line naming the backend, e.g. "cpu (scalar, 2 threads)".
  const std::string& description() const noexcept { return description_; }
  /// Capacity the filter was sized for, 0 when unknown.
  std::uint64_t capacity() const noexcept { return capacity_; }

  // ---- Integer keys (host or device memory; results in the keys' memory space)

  /// Adds `n` keys: increments the counters of each key's bits (saturating). Adds and
  /// removes that throw part-way may have updated some counters (not the key counts):
  /// not safe to repeat (docs/counting.md).
  template <class Key>
  void add(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    add_keys(detail::erase(keys, n), {"add", stream, false});
  }
  /// Checked remove: removes each key that tests present at its turn (batch order),
  /// refuses the others; returns how many of each.
  template <class Key>
  remove_report remove(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys, n), nullptr, nullptr, {"remove", stream, false});
  }
  /// Checked remove that also sets removed[i] to whether key i was removed.
  template <class Key>
  remove_report remove_with_status(const Key* keys, std::size_t n, bool* removed,
                                   stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys, n), removed, nullptr,
                       {"remove_with_status", stream, false, true});
  }
  /// Decrements the counters of every key without testing it: only for keys known
  /// to be held (removing one that is not may cause false negatives).
  template <class Key>
  void remove_unchecked(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    remove_unchecked_keys(detail::erase(keys, n), {"remove_unchecked", stream, false});
  }
  /// found[i] = every counter of key i is nonzero (false means definitely absent).
  template <class Key>
  void contains(const Key* keys, std::size_t n, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys, n), found, {"contains", stream, false});
  }
  /// Number of the `n` keys that may be present.
  template <class Key>
  std::uint64_t count(const Key* keys, std::size_t n, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys, n), nullptr, {"count", stream, false});
  }
  /// Ascending indices of the keys that may be present (as gbf::filter::select).
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n), row_indices, nullptr, {"select", stream, false});
  }
  /// Null-aware select: `validity` is an Arrow bitmap in the keys' memory space.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, const std::uint8_t* validity,
                       std::uint64_t* row_indices, stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n, validity), row_indices, nullptr,
                       {"select", stream, false});
  }
  /// counts[i] = the smallest counter of key i (Hadoop's approximateCount): an upper
  /// bound on how many times it was added net of removes, until a counter saturates.
  template <class Key>
  void approximate_count(const Key* keys, std::size_t n, std::uint8_t* counts,
                         stream_t stream = nullptr) const {
    approximate_count_keys(detail::erase(keys, n), counts, {"approximate_count", stream, false});
  }

  // ---- Stream-ordered integer calls (GPU backend, device memory; else wrong_backend)

  /// Adds `n` device keys on `stream`; returns before the work finishes.
  template <class Key>
  void add_async(const Key* device_keys, std::size_t n, stream_t stream) {
    add_keys(detail::erase(device_keys, n), {"add_async", stream, true});
  }
  /// Stream-ordered checked remove; the number refused goes to `device_refused`
  /// (device memory, one uint64) unless it is null.
  template <class Key>
  void remove_async(const Key* device_keys, std::size_t n, stream_t stream,
                    std::uint64_t* device_refused = nullptr) {
    remove_keys(detail::erase(device_keys, n), nullptr, device_refused,
                {"remove_async", stream, true});
  }
  /// Stream-ordered unchecked remove.
  template <class Key>
  void remove_unchecked_async(const Key* device_keys, std::size_t n, stream_t stream) {
    remove_unchecked_keys(detail::erase(device_keys, n), {"remove_unchecked_async", stream, true});
  }
  /// Stream-ordered contains; `device_found` is device memory of n bools.
  template <class Key>
  void contains_async(const Key* device_keys, std::size_t n, bool* device_found,
                      stream_t stream) const {
    contains_keys(detail::erase(device_keys, n), device_found, {"contains_async", stream, true});
  }
  /// Stream-ordered count into device memory `device_count` (one uint64).
  template <class Key>
  void count_async(const Key* device_keys, std::size_t n, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys(detail::erase(device_keys, n), device_count, {"count_async", stream, true});
  }
  /// Stream-ordered select (as gbf::filter::select_async).
  template <class Key>
  void select_async(const Key* device_keys, std::size_t n, std::uint64_t* device_row_indices,
                    std::uint64_t* device_count, stream_t stream,
                    const std::uint8_t* device_validity = nullptr) const {
    select_keys(detail::erase(device_keys, n, device_validity), device_row_indices, device_count,
                {"select_async", stream, true});
  }

  // ---- Byte-string keys (string_keys): the same operations. Null keys are
  // skipped: not added, not removed nor refused, found false, count 0.

  /// Adds the non-null string keys.
  template <class Offset>
  void add(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    add_keys(detail::erase(keys), {"add", stream, false});
  }
  /// Checked remove of the non-null string keys.
  template <class Offset>
  remove_report remove(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys), nullptr, nullptr, {"remove", stream, false});
  }
  /// Checked remove; removed[i] = key i was removed (null keys: false).
  template <class Offset>
  remove_report remove_with_status(const string_keys<Offset>& keys, bool* removed,
                                   stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys), removed, nullptr,
                       {"remove_with_status", stream, false, true});
  }
  /// Unchecked remove of the non-null string keys.
  template <class Offset>
  void remove_unchecked(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    remove_unchecked_keys(detail::erase(keys), {"remove_unchecked", stream, false});
  }
  /// found[i] = key i may be present.
  template <class Offset>
  void contains(const string_keys<Offset>& keys, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys), found, {"contains", stream, false});
  }
  /// Number of the non-null keys that may be present.
  template <class Offset>
  std::uint64_t count(const string_keys<Offset>& keys, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys), nullptr, {"count", stream, false});
  }
  /// Ascending indices of the non-null keys that may be present.
  template <class Offset>
  std::uint64_t select(const string_keys<Offset>& keys, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys), row_indices, nullptr, {"select", stream, false});
  }
  /// counts[i] = the smallest counter of key i (0 for a null key).
  template <class Offset>
  void approximate_count(const string_keys<Offset>& keys, std::uint8_t* counts,
                         stream_t stream = nullptr) const {
    approximate_count_keys(detail::erase(keys), counts, {"approximate_count", stream, false});
  }
  /// Stream-ordered add of device string keys (a bad batch adds nothing; see gbf::filter).
  template <class Offset>
  void add_async(const string_keys<Offset>& device_keys, stream_t stream) {
    add_keys(detail::erase(device_keys), {"add_async", stream, true});
  }
  /// Stream-ordered checked remove of device string keys (a bad batch removes nothing).
  template <class Offset>
  void remove_async(const string_keys<Offset>& device_keys, stream_t stream,
                    std::uint64_t* device_refused = nullptr) {
    remove_keys(detail::erase(device_keys), nullptr, device_refused,
                {"remove_async", stream, true});
  }
  /// Stream-ordered unchecked remove of device string keys.
  template <class Offset>
  void remove_unchecked_async(const string_keys<Offset>& device_keys, stream_t stream) {
    remove_unchecked_keys(detail::erase(device_keys), {"remove_unchecked_async", stream, true});
  }
  /// Stream-ordered contains of device string keys.
  template <class Offset>
  void contains_async(const string_keys<Offset>& device_keys, bool* device_found,
                      stream_t stream) const {
    contains_keys(detail::erase(device_keys), device_found, {"contains_async", stream, true});
  }
  /// Stream-ordered count of device string keys.
  template <class Offset>
  void count_async(const string_keys<Offset>& device_keys, std::uint64_t* device_count,
                   stream_t stream) const {
    count_keys(detail::erase(device_keys), device_count, {"count_async", stream, true});
  }

  /// Waits for every _async call; throws invalid_argument for a bad _async string
  /// batch (which changed nothing). No-op on the CPU.
  void synchronize() const;

  /// Sets every counter to zero (keeps layout and capacity; resets the key counts).
  void clear();
  /// this += other, counter by counter, saturating; key counts add. A multiset sum, so
  /// f.merge(f) holds each key twice (the set kinds' merge with itself changes nothing).
  /// Throws layout_mismatch when the layouts or counter widths differ.
  void merge(const counting_filter& other);
  /// this = min(this, other), counter by counter: a key counted in both stays present
  /// (its projection is the AND of the two projections), so a key multiset's
  /// intersection; the key count becomes the smaller count of keys held (keys_added -
  /// keys_removed), keys_removed 0. Throws layout_mismatch as merge does.
  void intersect(const counting_filter& other);

  /// Counters, saturation, fill, estimated keys and FPR, bytes per key.
  counting_stats stats() const;
  /// The counter array as host words (num_counter_words of them; see counting_layout.hpp).
  std::vector<std::uint32_t> counters() const;
  /// Copies counter words [first, first + count) of counters() to host memory `out`,
  /// without the whole array's copy. Throws invalid_argument past the end.
  void copy_counters(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const;
  /// The plain filter with a bit set where a counter is nonzero, on this filter's
  /// backend: the same layout and bits as a gbf::filter of the keys held (exactly,
  /// while no counter has saturated), ready for gbf::save or Parquet export.
  filter projection() const;

 private:
  void add_keys(const detail::key_batch& keys, const detail::call_options& call);
  remove_report remove_keys(const detail::key_batch& keys, bool* removed,
                            std::uint64_t* device_refused, const detail::call_options& call);
  void remove_unchecked_keys(const detail::key_batch& keys, const detail::call_options& call);
  void contains_keys(const detail::key_batch& keys, bool* found,
                     const detail::call_options& call) const;
  std::uint64_t count_keys(const detail::key_batch& keys, std::uint64_t* device_count,
                           const detail::call_options& call) const;
  std::uint64_t select_keys(const detail::key_batch& keys, std::uint64_t* rows,
                            std::uint64_t* device_count, const detail::call_options& call) const;
  void approximate_count_keys(const detail::key_batch& keys, std::uint8_t* counts,
                              const detail::call_options& call) const;
  void combine(const counting_filter& other, detail::counter_merge op);
  /// keys_added - keys_removed, as far as the counts tell (0 when negative).
  std::uint64_t keys_held() const noexcept;
  friend struct detail::filter_access;

  gbf::layout layout_;
  std::uint32_t counter_bits_ = default_counter_bits;
  std::unique_ptr<detail::counting_backend> impl_;  ///< Null only once moved from.
  /// *impl_; invalid_argument once moved from.
  detail::counting_backend& impl() const;
  options options_;
  std::uint64_t capacity_ = 0;
  std::uint64_t keys_added_ = 0;
  std::uint64_t keys_removed_ = 0;
  std::string description_;
};

// ---- Files: the gbf container (version 2, kind counting; docs/counting.md)

/// What a counting filter file records besides the counters.
struct counting_file_metadata {
  gbf::layout l;                   ///< Geometry, hash and seed.
  std::uint32_t counter_bits = 0;  ///< 4 or 8.
  std::uint64_t capacity = 0;      ///< Keys it was sized for, 0 = unknown.
  double fpp = 0;                  ///< Target false-positive probability, 0 = unknown.
  std::uint64_t keys_added = 0;    ///< stats().keys_added when saved.
  std::uint64_t keys_removed = 0;  ///< stats().keys_removed when saved.
};

/// `f` in the gbf container (header, counters, checksum); `fpp` (0 = unknown) is recorded;
/// invalid_argument for an fpp neither 0 nor in (0, 1) (so for serialize_into and save).
std::vector<std::uint8_t> serialize(const counting_filter& f, double fpp = 0);
/// Bytes serialize(f) makes.
std::uint64_t serialized_size(const counting_filter& f);
/// serialize(f, fpp) into `out`, exactly serialized_size(f) bytes; invalid_argument otherwise.
void serialize_into(const counting_filter& f, std::uint8_t* out, std::size_t size, double fpp = 0);
/// Parses `size` bytes of a counting filter file; format_error naming the problem
/// (a file of another kind says which kind it holds); fills `metadata` if non-null.
counting_filter deserialize_counting(const std::uint8_t* data, std::size_t size,
                                     const options& opts = {},
                                     counting_file_metadata* metadata = nullptr);
/// Writes `f` to `path` atomically (temp file, fsync, rename), like gbf::save; io_error.
void save(const counting_filter& f, const std::string& path, double fpp = 0);
/// Reads and verifies the counting filter file at `path`; format_error, io_error.
counting_filter load_counting(const std::string& path, const options& opts = {},
                              counting_file_metadata* metadata = nullptr);
/// The header of the counting filter file at `path` and a size check, without
/// reading the counters or verifying the checksum; format_error, io_error.
counting_file_metadata read_counting_metadata(const std::string& path);

}  // namespace gbf
