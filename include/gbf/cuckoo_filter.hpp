// gbf::cuckoo_filter — a cuckoo filter with RedisBloom's CF semantics on the
// GPU or the CPU, same table layout and hashing on both (docs/cuckoo.md).
//
//   auto f = gbf::cuckoo_filter::create(10'000'000, 0.001);  // GPU if present, else CPU
//   f.add(keys.data(), keys.size());                          // CF.ADD; throws filter_full
//   f.contains(queries.data(), queries.size(), hits);         // CF.MEXISTS
//   f.remove(keys.data(), 1000);                              // CF.DEL, one copy per key
//
// A key's tag (8, 16 or 32 bits) lives in one of two 32-byte buckets
// (gbf/cuckoo_layout.hpp): a query reads two sectors, an insert may move
// other tags between their two buckets (at most max_kicks moves), a remove
// clears one copy. Unlike a Bloom filter it can forget keys and count them;
// at 20 bits per key its FPR (16-bit tags, 80% load) matches gbf's Bloom
// filter's, and wider tags take it far lower (docs/cuckoo.md, measured).
//
// Keys, memory spaces, streams and _async calls work as for gbf::filter
// (gbf/filter.hpp): 32/64-bit integers or Arrow strings, host or device
// memory, results in the keys' space, an optional stream on every synchronous
// call, _async variants for device keys on a GPU filter (a CPU filter refuses
// them with wrong_backend). Null string keys are skipped: not added, not
// removed, not found.
//
// What is deterministic. contains, count, approximate_count and select only
// read. remove is order-independent: the table after a batch of removes does
// not depend on their order or on threads. Inserts are not: on the GPU,
// placement::fastest runs them concurrently (lock-free CAS on 64-bit words),
// so which slot a tag takes, and which of several tags a full bucket evicts,
// depend on thread timing; on the CPU it inserts in batch order. Either way
// every key reported inserted is present afterwards. placement::deterministic
// makes the table a function of the table before the call and the batch's
// keys, identical on CPU and GPU (see cuckoo_placement).
//
// The calls that make a filter throw as gbf::filter's do (gbf/filter.hpp). A
// filter object is not thread-safe: drive one filter from one host thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/cuckoo_layout.hpp"
#include "gbf/error.hpp"
#include "gbf/keys.hpp"
#include "gbf/verify.hpp"

namespace gbf {

/// What create() takes besides capacity and fpp.
struct cuckoo_shape {
  /// Tag width: 8, 16 or 32 bits; 0 lets cuckoo_size_for pick the one with the smallest table.
  std::uint32_t tag_bits = 0;
  /// Most moves one insert may make (RedisBloom's MAXITERATIONS), 1 to cuckoo_max_kicks_limit.
  std::uint32_t max_kicks = cuckoo_default_max_kicks;
  std::uint64_t seed = 0;  ///< xxh64 seed of the key hash.
};

/// Load factor (occupied / total slots) up to which inserts never fail, for
/// `tag_bits`-bit tags with the default max_kicks: measured with margin
/// (docs/cuckoo.md); the sizing target. 0 for an unknown width.
double cuckoo_max_load(std::uint32_t tag_bits);

/// Expected false-positive rate of table `l` holding `keys` tags:
/// 1 - (1 - 1 / (2^f - 1))^(2 * slots * load), the chance that one of the
/// tags in an absent key's two buckets equals its tag; invalid_argument for an invalid `l`.
double cuckoo_expected_fpr(const cuckoo_layout& l, std::uint64_t keys);

/// The smallest table for `capacity` keys at false-positive rate `fpp`: per tag
/// width, the load is cuckoo_max_load or lower where fpp needs it; the width
/// with the fewest bytes wins (ties: the wider tags). Throws invalid_argument
/// for capacity 0, fpp outside (0, 1), a bad shape, or more than 2^32 - 1 buckets.
cuckoo_layout cuckoo_size_for(std::uint64_t capacity, double fpp, const cuckoo_shape& s = {});

/// Bits of table per key when `keys` keys are stored; 0 for 0 keys.
double cuckoo_bits_per_key(const cuckoo_layout& l, std::uint64_t keys);

/// One line describing `l`, e.g. "16-bit tags, 16 slots/bucket, seed 0, 4096 buckets (128.0 KiB)".
std::string to_string(const cuckoo_layout& l);

/// What an insert did with one key.
enum class cuckoo_status : std::uint8_t {
  skipped = 0,   ///< A null key: nothing done.
  inserted = 1,  ///< Its tag is in the table.
  present = 2,   ///< unique adds only: it tested present already (CF.ADDNX answers 0); nothing done.
  failed = 3,    ///< No room within max_kicks moves: not inserted, and every earlier key still present.
};

/// How an add places a batch's tags.
enum class cuckoo_placement : std::uint8_t {
  /// GPU: one thread per key, lock-free; the table depends on thread timing.
  /// CPU: one key after another in batch order.
  fastest,
  /// Both backends, the same table: the batch (in pieces of
  /// cuckoo_deterministic_piece_keys keys) is sorted by (primary bucket, tag);
  /// each bucket takes its keys' tags into its free slots in that order; the
  /// rest go, sorted by (alternate bucket, tag), to their alternate buckets'
  /// free slots; the few left evict, one after another in the first order.
  /// The result depends on the table before and each piece's keys as a
  /// multiset, not on their order, threads or backend. On a GPU filter, host
  /// batches are cut into pieces at gpu_chunk_keys (so equal CPU tables need
  /// the default 4 Mi, and string chunks are also cut by bytes). Slower than
  /// fastest on the GPU: the tail is one thread.
  deterministic,
};

/// Keys per piece of a deterministic add (the GPU's default pinned chunk).
inline constexpr std::size_t cuckoo_deterministic_piece_keys = std::size_t{1} << 22;

/// Options of an add.
struct cuckoo_add_options {
  /// CF.ADDNX: insert only keys that test absent; in batch order, so a key equal
  /// (same buckets and tag) to an earlier key of the batch is present.
  bool unique = false;
  cuckoo_placement placement = cuckoo_placement::fastest;
};

/// Totals of one synchronous add.
struct cuckoo_add_report {
  std::uint64_t inserted = 0;
  std::uint64_t present = 0;
  std::uint64_t failed = 0;
};

/// A cuckoo filter's occupancy and history (CF.INFO).
struct cuckoo_stats {
  std::uint64_t occupied_slots = 0;  ///< Tags in the table (duplicates included).
  std::uint64_t num_slots = 0;       ///< Slots in the table.
  double load_factor = 0;            ///< occupied_slots / num_slots.
  double max_load = 0;               ///< cuckoo_max_load of its tag width.
  double estimated_fpr = 0;          ///< cuckoo_expected_fpr at occupied_slots.
  std::uint64_t capacity = 0;        ///< Keys it was sized for, 0 = unknown.
  std::uint64_t keys_added = 0;      ///< Keys inserted so far (CF.INFO "items inserted").
  std::uint64_t keys_removed = 0;    ///< Keys removed so far (CF.INFO "items deleted").
  std::uint64_t evictions = 0;       ///< Tags moved by inserts so far.
  std::uint64_t failed_inserts = 0;  ///< Keys refused for want of room so far.
  /// load_factor > max_load (inserts may now fail), or occupied_slots > capacity when the
  /// capacity is known (its FPR is past what it was sized for).
  bool over_capacity = false;
};

/// The counters a cuckoo filter keeps besides its table (saved in its file).
struct cuckoo_totals {
  std::uint64_t keys_added = 0;
  std::uint64_t keys_removed = 0;
  std::uint64_t evictions = 0;
  std::uint64_t failed_inserts = 0;
};

namespace detail {
class cuckoo_backend;
struct filter_access;  // the file readers' way in (host/filter_access.hpp)
}  // namespace detail

class cuckoo_filter {
 public:
  /// A filter sized for `capacity` keys at false-positive rate `fpp` (cuckoo_size_for).
  static cuckoo_filter create(std::uint64_t capacity, double fpp, const options& opts = {},
                              const cuckoo_shape& s = {});

  /// An empty filter of table `l`; `capacity` (0 = unknown) feeds stats().
  explicit cuckoo_filter(const cuckoo_layout& l, const options& opts = {},
                         std::uint64_t capacity = 0,
                         std::uint32_t max_kicks = cuckoo_default_max_kicks);

  /// A filter of table `l` holding `words` (l.num_words() host words, e.g. from a file).
  static cuckoo_filter from_words(const cuckoo_layout& l, const std::uint32_t* words,
                                  const options& opts = {}, std::uint64_t capacity = 0,
                                  std::uint32_t max_kicks = cuckoo_default_max_kicks,
                                  const cuckoo_totals& totals = {});

  /// Moves; the moved-from object may then only be assigned to or destroyed (any call
  /// that needs its bits throws invalid_argument; the noexcept accessors return stale values).
  cuckoo_filter(cuckoo_filter&&) noexcept;
  cuckoo_filter& operator=(cuckoo_filter&&) noexcept;
  cuckoo_filter(const cuckoo_filter&) = delete;
  cuckoo_filter& operator=(const cuckoo_filter&) = delete;
  ~cuckoo_filter();

  /// A deep copy on backend `where`: same table, counters and settings.
  cuckoo_filter copy_to(backend where, const options& opts = {}) const;

  /// The table's geometry and hash.
  const cuckoo_layout& layout() const noexcept { return layout_; }
  /// Most moves one insert may make.
  std::uint32_t max_kicks() const noexcept { return max_kicks_; }
  /// The backend holding the table: cpu or gpu.
  backend where() const;
  /// One line naming the backend, e.g. "cpu (avx2, 2 threads)".
  const std::string& description() const noexcept { return description_; }
  /// Capacity the filter was sized for, 0 when unknown.
  std::uint64_t capacity() const noexcept { return capacity_; }

  // ---- Integer keys (host or device memory; results in the keys' memory space)

  /// CF.ADD for `n` keys (a key added twice is stored twice). Throws
  /// filter_full, naming how many keys were not inserted, when some found no
  /// room; the others are inserted.
  template <class Key>
  void add(const Key* keys, std::size_t n, stream_t stream = nullptr) {
    add_all(detail::erase(keys, n), {"add", stream, false});
  }
  /// Adds `n` keys as `how` says; status[i] (may be null) says what happened to
  /// key i. Never throws filter_full: failures are in the status and the report.
  /// A null status is written typed, `static_cast<cuckoo_status*>(nullptr)` (a bare
  /// nullptr would as well name the stream of the throwing add above).
  template <class Key>
  cuckoo_add_report add(const Key* keys, std::size_t n, cuckoo_status* status,
                        const cuckoo_add_options& how = {}, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys, n), status, how, {"add", stream, false});
  }
  /// CF.DEL for `n` keys: removes one copy of each key's tag where one is found
  /// (removed[i], may be null, says whether). Returns how many were removed; the
  /// others were refused (not present). Removing a key that was never added is
  /// unsafe: when it collides with a present key's tag (probability: the FPR),
  /// that key's tag goes and it becomes a false negative.
  template <class Key>
  std::uint64_t remove(const Key* keys, std::size_t n, bool* removed = nullptr,
                       stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys, n), removed, {"remove", stream, false});
  }
  /// found[i] = key i may be present (CF.MEXISTS).
  template <class Key>
  void contains(const Key* keys, std::size_t n, bool* found, stream_t stream = nullptr) const {
    contains_keys(detail::erase(keys, n), found, {"contains", stream, false});
  }
  /// Number of the `n` keys that may be present.
  template <class Key>
  std::uint64_t count(const Key* keys, std::size_t n, stream_t stream = nullptr) const {
    return count_keys(detail::erase(keys, n), nullptr, {"count", stream, false});
  }
  /// CF.COUNT: copies[i] = copies of key i's tag in its two buckets (at most
  /// 2 * slots_per_bucket = 64, so one byte), an upper bound of its adds minus removes.
  template <class Key>
  void approximate_count(const Key* keys, std::size_t n, std::uint8_t* copies,
                         stream_t stream = nullptr) const {
    copies_keys(detail::erase(keys, n), copies, {"approximate_count", stream, false});
  }
  /// Ascending indices of the keys that may be present (as gbf::filter::select).
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n), row_indices, nullptr, {"select", stream, false});
  }
  /// Null-aware select: `validity` is an Arrow bitmap in the keys' memory space; null
  /// keys are never selected.
  template <class Key>
  std::uint64_t select(const Key* keys, std::size_t n, const std::uint8_t* validity,
                       std::uint64_t* row_indices, stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys, n, validity), row_indices, nullptr,
                       {"select", stream, false});
  }

  // ---- Stream-ordered integer calls (GPU backend, device memory; else wrong_backend)

  /// Adds device keys on `stream`, returning before the work finishes; failures
  /// show in device_status (may be null) and in stats().failed_inserts.
  template <class Key>
  void add_async(const Key* device_keys, std::size_t n, stream_t stream,
                 cuckoo_status* device_status = nullptr, const cuckoo_add_options& how = {}) {
    add_keys(detail::erase(device_keys, n), device_status, how, {"add_async", stream, true});
  }
  /// Stream-ordered remove; device_removed (may be null) is device memory of n bools.
  template <class Key>
  void remove_async(const Key* device_keys, std::size_t n, stream_t stream,
                    bool* device_removed = nullptr) {
    remove_keys(detail::erase(device_keys, n), device_removed, {"remove_async", stream, true});
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
  /// Stream-ordered approximate_count into device memory `device_copies` (n bytes).
  template <class Key>
  void approximate_count_async(const Key* device_keys, std::size_t n, std::uint8_t* device_copies,
                               stream_t stream) const {
    copies_keys(detail::erase(device_keys, n), device_copies,
                {"approximate_count_async", stream, true});
  }
  /// Stream-ordered select: indices to `device_row_indices`, their number to `device_count`;
  /// `device_validity` (may be null) is an Arrow bitmap in device memory.
  template <class Key>
  void select_async(const Key* device_keys, std::size_t n, std::uint64_t* device_row_indices,
                    std::uint64_t* device_count, stream_t stream,
                    const std::uint8_t* device_validity = nullptr) const {
    select_keys(detail::erase(device_keys, n, device_validity), device_row_indices, device_count,
                {"select_async", stream, true});
  }

  // ---- Byte-string keys (string_keys): the same operations, same semantics.

  /// CF.ADD for the non-null keys; throws filter_full as add above.
  template <class Offset>
  void add(const string_keys<Offset>& keys, stream_t stream = nullptr) {
    add_all(detail::erase(keys), {"add", stream, false});
  }
  /// Adds the non-null keys as `how` says; status[i] (may be null) per key.
  template <class Offset>
  cuckoo_add_report add(const string_keys<Offset>& keys, cuckoo_status* status,
                        const cuckoo_add_options& how = {}, stream_t stream = nullptr) {
    return add_keys(detail::erase(keys), status, how, {"add", stream, false});
  }
  /// CF.DEL for the non-null keys (see remove above).
  template <class Offset>
  std::uint64_t remove(const string_keys<Offset>& keys, bool* removed = nullptr,
                       stream_t stream = nullptr) {
    return remove_keys(detail::erase(keys), removed, {"remove", stream, false});
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
  /// CF.COUNT per key (0 for null keys).
  template <class Offset>
  void approximate_count(const string_keys<Offset>& keys, std::uint8_t* copies,
                         stream_t stream = nullptr) const {
    copies_keys(detail::erase(keys), copies, {"approximate_count", stream, false});
  }
  /// Ascending indices of the non-null keys that may be present.
  template <class Offset>
  std::uint64_t select(const string_keys<Offset>& keys, std::uint64_t* row_indices,
                       stream_t stream = nullptr) const {
    return select_keys(detail::erase(keys), row_indices, nullptr, {"select", stream, false});
  }
  /// Stream-ordered add of device string keys (bad offsets: see gbf::filter::add_async).
  template <class Offset>
  void add_async(const string_keys<Offset>& device_keys, stream_t stream,
                 cuckoo_status* device_status = nullptr, const cuckoo_add_options& how = {}) {
    add_keys(detail::erase(device_keys), device_status, how, {"add_async", stream, true});
  }
  /// Stream-ordered remove of device string keys.
  template <class Offset>
  void remove_async(const string_keys<Offset>& device_keys, stream_t stream,
                    bool* device_removed = nullptr) {
    remove_keys(detail::erase(device_keys), device_removed, {"remove_async", stream, true});
  }
  /// Stream-ordered contains of device string keys.
  template <class Offset>
  void contains_async(const string_keys<Offset>& device_keys, bool* device_found,
                      stream_t stream) const {
    contains_keys(detail::erase(device_keys), device_found, {"contains_async", stream, true});
  }

  /// Recomputes `found` (answers for `keys`, host or device memory) on the CPU
  /// from a host copy of the table; the report says how many disagree and the first.
  template <class Key>
  verify_report verify_contains(const Key* keys, std::size_t n, const bool* found) const {
    return verify_keys(detail::erase(keys, n), found);
  }
  /// verify_contains for string keys.
  template <class Offset>
  verify_report verify_contains(const string_keys<Offset>& keys, const bool* found) const {
    return verify_keys(detail::erase(keys), found);
  }

  /// Waits for every _async call; throws invalid_argument for a bad _async string batch.
  void synchronize() const;

  /// Empties the table (keeps layout, capacity and max_kicks; zeroes the counters).
  void clear();
  /// this += other: every tag of `other` inserted into this table, so this holds both
  /// filters' keys (a multiset union: a key in both is held twice, and f.merge(f) holds
  /// each of its keys twice, reading the tags as they were). A key's two buckets
  /// and its tag depend only on the key and the layout, so a tag moves between equal
  /// layouts without its key. Deterministic (the same table on CPU and GPU); the key
  /// counts add up (the other's evictions and failed inserts stay its own). Throws
  /// layout_mismatch when the layouts differ; filter_full, changing nothing, when the
  /// tags do not all fit (more than the free slots, or one finds no slot within
  /// max_kicks moves: the merge stops there); allocation_error when the host copy of
  /// the table (size_bytes) cannot be made.
  void merge(const cuckoo_filter& other);
  /// Occupancy, expected FPR and the counters (CF.INFO).
  cuckoo_stats stats() const;
  /// The counters alone.
  cuckoo_totals totals() const;
  /// The table as host words (8 per bucket: see gbf/cuckoo_layout.hpp).
  std::vector<std::uint32_t> words() const;
  /// Copies table words [first, first + count) of words() to host memory `out`, without
  /// the whole table's copy. Throws invalid_argument past the end.
  void copy_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const;
  /// Device address of the table (GPU backend; wrong_backend on the CPU).
  const std::uint32_t* device_words() const;

 private:
  void add_all(const detail::key_batch& keys, const detail::call_options& call);
  cuckoo_add_report add_keys(const detail::key_batch& keys, cuckoo_status* status,
                             const cuckoo_add_options& how, const detail::call_options& call);
  std::uint64_t remove_keys(const detail::key_batch& keys, bool* removed,
                            const detail::call_options& call);
  void contains_keys(const detail::key_batch& keys, bool* found,
                     const detail::call_options& call) const;
  std::uint64_t count_keys(const detail::key_batch& keys, std::uint64_t* device_count,
                           const detail::call_options& call) const;
  void copies_keys(const detail::key_batch& keys, std::uint8_t* copies,
                   const detail::call_options& call) const;
  std::uint64_t select_keys(const detail::key_batch& keys, std::uint64_t* rows,
                            std::uint64_t* device_count, const detail::call_options& call) const;
  verify_report verify_keys(const detail::key_batch& keys, const bool* found) const;
  friend struct detail::filter_access;

  cuckoo_layout layout_;
  std::uint32_t max_kicks_ = cuckoo_default_max_kicks;
  std::unique_ptr<detail::cuckoo_backend> impl_;  ///< Null only once moved from.
  /// *impl_; invalid_argument once moved from.
  detail::cuckoo_backend& impl() const;
  std::uint64_t capacity_ = 0;
  std::string description_;
};

// ---- Files: the gbf version-2 container, kind cuckoo (docs/cuckoo.md)

/// What a cuckoo filter file records besides the table.
struct cuckoo_file_metadata {
  cuckoo_layout l;
  std::uint32_t max_kicks = cuckoo_default_max_kicks;
  std::uint64_t capacity = 0;  ///< 0 = unknown.
  double fpp = 0;              ///< Target fpp, 0 = unknown.
  cuckoo_totals totals;
};

/// `f` in the gbf container (header, words, checksum); `fpp` (0 = unknown) is recorded;
/// invalid_argument for an fpp neither 0 nor in (0, 1) (so for serialize_into and save).
std::vector<std::uint8_t> serialize(const cuckoo_filter& f, double fpp = 0);
/// Bytes serialize(f) makes.
std::uint64_t serialized_size(const cuckoo_filter& f);
/// serialize(f, fpp) into `out`, exactly serialized_size(f) bytes; invalid_argument otherwise.
void serialize_into(const cuckoo_filter& f, std::uint8_t* out, std::size_t size, double fpp = 0);
/// Parses `size` bytes of a cuckoo filter file; throws format_error; fills `metadata` if non-null.
cuckoo_filter deserialize_cuckoo(const std::uint8_t* data, std::size_t size,
                                 const options& opts = {},
                                 cuckoo_file_metadata* metadata = nullptr);
/// Writes `f` to `path` atomically (temp file, fsync, rename); io_error.
void save(const cuckoo_filter& f, const std::string& path, double fpp = 0);
/// Reads and verifies the cuckoo filter file at `path`; format_error, io_error.
cuckoo_filter load_cuckoo(const std::string& path, const options& opts = {},
                          cuckoo_file_metadata* metadata = nullptr);

}  // namespace gbf
