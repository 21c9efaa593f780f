// gbf::scaling_filter — a Bloom filter that grows past its capacity and keeps
// its false-positive promise: a chain of plain gbf filters ("levels"), each
// larger and stricter than the one before (Almeida et al., "Scalable Bloom
// Filters", 2007; RedisBloom's BF.RESERVE ... EXPANSION / NONSCALING).
//
//   auto f = gbf::scaling_filter::create(1'000, 0.01);   // grows by 2x levels
//   f.add(keys.data(), keys.size());                      // any number of keys
//   f.contains(queries.data(), queries.size(), hits);     // FPR <= 1% however far it grew
//
// The rule. Level i holds capacity_i = initial * expansion^i keys at target
// fpp_i = fpp (1 - r) r^i (r: the tightening ratio, default 0.5), sized like a
// plain filter (size_for) of the chain's shape (W, k, seed). The targets sum to
// fpp, and a key absent from the chain is a false positive when it is one in
// some level, so the chain's FPR stays at or below sum_i fpp_i < fpp at any
// size. With r = 0.5 this is RedisBloom's rule (level 0 at fpp / 2, each next
// level at half the previous one). r = 1 gives up the bound: every level at
// fpp (Hadoop's DynamicBloomFilter with expansion 1: levels of one size). A non-scaling chain has one level at the
// whole fpp and refuses (filter_full) an add that would pass its capacity,
// before writing anything.
//
// Adds count new keys as RedisBloom does, in batch order: a key already
// present in some level (or made present by an earlier key of the batch) is
// not inserted again; the other keys fill the newest level up to its capacity,
// then the next level opens (only when a key needs it) and the batch goes on
// there. Every level shares the chain's hash and seed, so a key is hashed once
// and probed in every level with the same bit masks; contains, count and
// select probe all levels in one pass (one kernel launch on the GPU).
//
// Keys, memory spaces, streams, nulls and the errors of the calls that make a
// filter are as for gbf::filter (gbf/filter.hpp).
// add and add_new are synchronous (opening a level allocates memory and needs
// the count of new keys on the host); contains, count and select also come as
// stream-ordered _async calls on the GPU. A chain is not thread-safe: drive one
// from one host thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "gbf/sizing.hpp"

namespace gbf {

/// How a chain grows.
struct scaling_policy {
  /// Level i + 1 takes `expansion` times the keys of level i (RedisBloom EXPANSION), >= 1.
  std::uint32_t expansion = 2;
  /// r in (0, 1): level i's target fpp is fpp (1 - r) r^i. Closer to 1 spends fewer bits
  /// on deep levels and more on level 0 (docs/scaling.md measures the trade).
  /// r = 1: every level at fpp, no bound: the chain's FPR is 1 - (1 - fpp)^levels, about
  /// levels x fpp (Hadoop's DynamicBloomFilter, with expansion 1).
  double tightening = 0.5;
  /// One level at the whole fpp that never grows: an add that would pass its capacity
  /// throws filter_full and writes nothing (RedisBloom NONSCALING).
  bool non_scaling = false;
};

/// What a chain is made from.
struct scaling_config {
  std::uint64_t initial_capacity = 0;  ///< Keys level 0 takes, >= 1.
  double fpp = 0.01;                   ///< Bound on the chain's false-positive rate, in (0, 1).
  scaling_policy policy;
  shape s;                             ///< W, k and seed of every level.
};

/// One level of a chain.
struct scaling_level {
  layout l;                    ///< Its geometry; W, k, seed and hash are the chain's.
  std::uint64_t capacity = 0;  ///< Keys it takes before the next level opens.
  double fpp = 0;              ///< The target it was sized for.
  std::uint64_t keys = 0;      ///< New keys inserted into it.
};

/// A level's occupancy.
struct scaling_level_stats {
  scaling_level level;
  std::uint64_t bits_set = 0;  ///< Popcount of its bit array.
  double fill_ratio = 0;       ///< bits_set / its bits.
  double fpr = 0;              ///< Expected FPR of the level at its key count (sizing model).
};

/// A chain's occupancy; the first five fields are RedisBloom's BF.INFO.
struct scaling_stats {
  std::uint64_t capacity = 0;       ///< Sum of the levels' capacities ("Capacity").
  std::uint64_t size_bytes = 0;     ///< Bytes of the levels' bit arrays ("Size").
  std::size_t num_levels = 0;       ///< Levels opened ("Number of filters").
  std::uint64_t keys_inserted = 0;  ///< New keys inserted, all levels ("Number of items inserted").
  std::uint32_t expansion = 0;      ///< "Expansion rate"; 0 for a non-scaling chain (RedisBloom: nil).
  double fpp = 0;                   ///< The target the chain stays under.
  /// 1 - prod_i (1 - fpr_i): the chain's expected FPR now, the levels' false positives taken
  /// as independent (nearly so for k = W; for k > W an over-estimate). Always <= sum_i fpr_i.
  double compound_fpr = 0;
  std::vector<scaling_level_stats> levels;  ///< Oldest first.
};

namespace detail {
class scaling_backend;
struct filter_access;  // the file readers' way in (host/filter_access.hpp)
}  // namespace detail

class scaling_filter {
 public:
  /// A chain whose level 0 takes `initial_capacity` keys; compound FPR <= `fpp` (r < 1).
  /// Throws invalid_argument for capacity 0, fpp outside (0, 1), tightening outside
  /// (0, 1], expansion 0, a bad shape or a level 0 that cannot be sized.
  static scaling_filter create(std::uint64_t initial_capacity, double fpp,
                               const scaling_policy& policy = {}, const options& opts = {},
                               const shape& s = {});
  /// The same from a config.
  static scaling_filter create(const scaling_config& config, const options& opts = {});

  /// A chain of `levels` (oldest first) holding `words[i]` (levels[i].l.num_words() host words
  /// each), as load does. Throws invalid_argument when the levels do not follow `config`'s rule
  /// (capacities initial * expansion^i, W/k/seed, key counts within capacity, every level but
  /// the newest full, one level when non-scaling).
  static scaling_filter from_levels(const scaling_config& config,
                                    const std::vector<scaling_level>& levels,
                                    const std::vector<const std::uint32_t*>& words,
                                    const options& opts = {});

  /// Moves; the moved-from object may then only be assigned to or destroyed (any call
  /// that needs its bits throws invalid_argument; the noexcept accessors return stale values).
  scaling_filter(scaling_filter&&) noexcept;
  scaling_filter& operator=(scaling_filter&&) noexcept;
  scaling_filter(const scaling_filter&) = delete;
  scaling_filter& operator=(const scaling_filter&) = delete;
  ~scaling_filter();

  /// A deep copy on backend `where`: same levels, same bits.
  scaling_filter copy_to(backend where, const options& opts = {}) const;

  /// What the chain was made from.
  const scaling_config& config() const noexcept { return config_; }
  /// Its levels, oldest first (at least one).
  const std::vector<scaling_level>& levels() const noexcept { return levels_; }
  /// New keys inserted, all levels.
  std::uint64_t keys_inserted() const noexcept;
  /// cpu or gpu.
  backend where() const;
  /// The backend and why it was chosen, as gbf::filter::description.
  const std::string& description() const noexcept { return description_; }

  // ---- Integer keys (host or device memory; results in the keys' memory space)

  /// Inserts the keys that are new to the chain (see the file comment); returns how many.
  /// Non-scaling: throws filter_full, inserting nothing, when they would pass capacity.
  /// Scaling: when a level cannot open mid-batch (plan limits), throws filter_full with
  /// not_inserted = the batch's keys not in the chain; the keys inserted before stay.
  /// When its memory cannot be had, allocation_error, whose message says the same.
  template <class Key>
  std::uint64_t add(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys, n), nullptr, {"add", stream, false});
  }
  /// add, and is_new[i] = key i was inserted (absent from the chain before it, in batch
  /// order; false for nulls and repeats). Unspecified when the add throws.
  template <class Key>
  std::uint64_t add_new(const Key* keys, std::size_t n, bool* is_new, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys, n), is_new, {"add_new", stream, false, true});
  }
  /// found[i] = key i may be present in some level (false: definitely absent).
  template <class Key>
  void contains(const Key* keys, std::size_t n, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys, n), found, {"contains", stream, false});
  }
  /// Number of the `n` keys that may be present.
  template <class Key>
  std::uint64_t count(const Key* keys, std::size_t n, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys, n), nullptr, {"count", stream, false});
  }
  /// Ascending indices of the keys that may be present, to `row_indices` (room for n, in
  /// the keys' memory space); returns how many (a join prefilter, as gbf::filter::select).
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

  // ---- Stream-ordered integer calls (GPU, device memory; else wrong_backend)

  /// Stream-ordered contains; `device_found` holds n bools.
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
  /// Stream-ordered select: rows to `device_row_indices`, their number to `device_count`.
  template <class Key>
  void select_async(const Key* device_keys, std::size_t n, std::uint64_t* device_row_indices,
                    std::uint64_t* device_count, stream_t stream,
                    const std::uint8_t* device_validity = nullptr) const {
    select_keys(detail::erase(device_keys, n, device_validity), device_row_indices,
                       device_count, {"select_async", stream, true});
  }

  /// Recomputes `found` (answers for `keys`) on the CPU from host copies of the levels.
  template <class Key>
  verify_report verify_contains(const Key* keys, std::size_t n, const bool* found) const {
    return verify_keys(detail::erase(keys, n), found);
  }

  // ---- Byte-string keys (string_keys): the same operations; nulls are skipped.

  /// Inserts the new non-null keys; returns how many.
  template <class Offset>
  std::uint64_t add(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys), nullptr, {"add", stream, false});
  }
  /// add, with is_new[i] = key i was inserted.
  template <class Offset>
  std::uint64_t add_new(const string_keys<Offset>& keys, bool* is_new, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys), is_new, {"add_new", stream, false, true});
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
  /// Stream-ordered contains of device string keys (a batch with bad offsets answers false
  /// and synchronize() reports it, as gbf::filter).
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
  /// Recomputes `found` for string keys on the CPU.
  template <class Offset>
  verify_report verify_contains(const string_keys<Offset>& keys, const bool* found) const {
    return verify_keys(detail::erase(keys), found);
  }

  /// Waits for every _async call; throws invalid_argument for a bad _async string batch.
  void synchronize() const;

  /// this |= other, level by level. Defined when the configs are equal (else
  /// layout_mismatch naming the difference) and every merged level stays within its
  /// capacity counting keys conservatively (keys_a + keys_b, as if the chains shared
  /// none); otherwise throws filter_full and changes nothing, since an overfull level
  /// would break the FPR promise. Levels only `other` has are copied. A merge that
  /// fails later (memory, CUDA) changes no level or count, though an interrupted OR may
  /// have set bits (false positives only). Merging a chain into itself changes nothing
  /// and is not refused (x | x = x, its keys its own); a copy of it is another chain.
  void merge(const scaling_filter& other);

  /// Level occupancy, compound FPR and the BF.INFO fields.
  scaling_stats stats() const;
  /// Level `level`'s bit array as host words; invalid_argument past the newest level.
  std::vector<std::uint32_t> level_words(std::size_t level) const;
  /// Copies words [first, first + count) of level_words(level) to host memory `out`,
  /// without the level's whole copy. Throws invalid_argument past the end.
  void copy_level_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                        std::uint32_t* out) const;

 private:
  scaling_filter(const scaling_config& config, std::vector<scaling_level> levels,
                 std::unique_ptr<detail::scaling_backend> impl, std::string description);
  /// from_levels' chain with every level zeroed, for the caller to fill.
  static scaling_filter with_zeroed_levels(const scaling_config& config,
                                           const std::vector<scaling_level>& levels,
                                           const options& opts);
  friend struct detail::filter_access;

  std::uint64_t add_keys(const detail::key_batch& keys, bool* is_new,
                         const detail::call_options& call);
  std::uint64_t add_bounded(const detail::key_batch& keys, bool* is_new,
                            const detail::call_options& call);
  void contains_keys(const detail::key_batch& keys, bool* found,
                     const detail::call_options& call) const;
  std::uint64_t count_keys(const detail::key_batch& keys, std::uint64_t* device_count,
                           const detail::call_options& call) const;
  std::uint64_t select_keys(const detail::key_batch& keys, std::uint64_t* rows,
                            std::uint64_t* device_count, const detail::call_options& call) const;
  verify_report verify_keys(const detail::key_batch& keys, const bool* found) const;

  scaling_config config_;
  std::vector<scaling_level> levels_;
  std::unique_ptr<detail::scaling_backend> impl_;  ///< Null only once moved from.
  /// *impl_; invalid_argument once moved from.
  detail::scaling_backend& impl() const;
  std::string description_;
};

/// The chain in the gbf file format (version-2 container, kind scaling; docs/scaling.md).
std::vector<std::uint8_t> serialize(const scaling_filter& f);
/// Bytes serialize(f) makes.
std::uint64_t serialized_size(const scaling_filter& f);
/// serialize(f) into `out`, exactly serialized_size(f) bytes; invalid_argument otherwise.
void serialize_into(const scaling_filter& f, std::uint8_t* out, std::size_t size);
/// Parses `size` bytes of a scaling-chain file; format_error naming the problem.
scaling_filter deserialize_scaling_filter(const std::uint8_t* data, std::size_t size,
                                          const options& opts = {});
/// Writes `f` to `path` atomically (temp file, fsync, rename), all levels in one
/// checksummed file; io_error.
void save(const scaling_filter& f, const std::string& path);
/// Reads and verifies a scaling-chain file; format_error, io_error.
scaling_filter load_scaling_filter(const std::string& path, const options& opts = {});

}  // namespace gbf
