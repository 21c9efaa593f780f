// The interface every backend implements: the same operations on the same
// bits. gbf::filter owns one backend_impl and forwards to it; the CPU backend
// (host/cpu_backend.cpp) and the CUDA backend (host/cuda_backend.cpp) are the
// two implementations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gbf/detail/config.hpp"
#include "gbf/filter.hpp"
#include "gbf/layout.hpp"

namespace gbf::detail {

/// Where a caller's key or result array lives.
enum class memory_space { host, device };

/// A caller's batch of keys. `space` says where `data` (and the matching result
/// array, and for strings the offsets and validity) live; backends never copy it
/// to find out.
///
/// Integer keys (u32, u64): `data` holds `count` keys. String keys (str32,
/// str64): key i is bytes [offsets[i], offsets[i+1]) of `data`, offsets being
/// int32 or int64 as `kind` says; gbf::filter has checked them (0 <= offsets[0],
/// non-decreasing, offsets[count] <= data_bytes) for host batches, the GPU
/// backend checks device ones. `validity` (may be null) is an Arrow bitmap whose
/// bit validity_bit + i is key i's (0 = null: skipped).
struct key_batch {
  const void* data = nullptr;
  std::size_t count = 0;
  key_kind kind = key_kind::u64;
  memory_space space = memory_space::host;
  // String keys only.
  const void* offsets = nullptr;
  std::size_t data_bytes = 0;
  // String keys, and integer keys of select / select_async (the other integer
  // operations never set it).
  const std::uint8_t* validity = nullptr;
  std::size_t validity_bit = 0;

  bool is_string() const noexcept {
    return kind == key_kind::str32 || kind == key_kind::str64;
  }
};

/// Offsets of a string batch read as int64 (offsets[i] of either width).
inline std::int64_t offset_at(const key_batch& keys, std::size_t i) {
  return keys.kind == key_kind::str32 ? static_cast<const std::int32_t*>(keys.offsets)[i]
                                      : static_cast<const std::int64_t*>(keys.offsets)[i];
}

/// Whether key i of a batch with a validity bitmap (or none) is non-null.
GBF_HD inline bool key_valid(const std::uint8_t* validity, std::size_t bit, std::size_t i) {
  if (validity == nullptr) return true;
  const std::size_t b = bit + i;
  return ((validity[b >> 3] >> (b & 7)) & 1u) != 0;
}

/// The first bad offset rule, shared by the host check and the GPU validation
/// kernel: index i is bad when offsets[i] > data_bytes, or i = 0 and offsets[0] < 0,
/// or i > 0 and offsets[i] < offsets[i-1]. Returns the sentence gbf::filter throws,
/// e.g. "string keys: offsets[17] = 40 < offsets[16] = 52 (offsets must not decrease)".
/// `previous` is offsets[i-1] (ignored for i = 0).
std::string bad_offset_message(std::size_t index, std::int64_t value, std::int64_t previous,
                               std::size_t data_bytes);

/// Keys below which one more CPU thread costs more than it saves (thread start is
/// ~10 us): the CPU backend runs batches under 2 * min_keys_per_thread on one thread.
constexpr std::uint64_t min_keys_per_thread = std::uint64_t{1} << 16;

/// Word-wise set operation applied by combine: union (OR) or intersection (AND).
enum class set_op { union_or, intersect_and };

class backend_impl {
 public:
  virtual ~backend_impl() = default;

  /// cpu or gpu.
  virtual backend kind() const noexcept = 0;
  /// The layout this backend holds.
  virtual const layout& get_layout() const noexcept = 0;

  /// Sets the bits of every key.
  virtual void add(const key_batch& keys) = 0;
  /// Sets the bits of every key; is_new[i] = key i was absent before it was added,
  /// in batch order (sequential semantics: a key made present by an earlier key
  /// of the same batch, itself included, is not new). is_new is in keys.space.
  virtual void add_new(const key_batch& keys, bool* is_new) = 0;
  /// found[i] = all bits of key i are set. found is in keys.space.
  virtual void contains(const key_batch& keys, bool* found) const = 0;
  /// Number of keys whose bits are all set.
  virtual std::uint64_t count(const key_batch& keys) const = 0;
  /// Writes the ascending indices of the non-null keys whose bits are all set to
  /// `rows` (room for keys.count, in keys.space) and returns how many. Validity
  /// applies to every key kind here.
  virtual std::uint64_t select(const key_batch& keys, std::uint64_t* rows) const = 0;

  /// Zeroes the bit array.
  virtual void clear() = 0;
  /// this = this op other; `other` has the same kind and layout (checked by the caller).
  virtual void combine(const backend_impl& other, set_op op) = 0;
  /// this = this op words, `words` being num_words host words of the same layout.
  virtual void combine_host(const std::uint32_t* words, set_op op) = 0;
  /// Popcount of the bit array.
  virtual std::uint64_t popcount() const = 0;
  /// Copies the num_words words to host memory `out`.
  virtual void read_words(std::uint32_t* out) const = 0;
  /// Replaces the bit array with num_words host words from `in`.
  virtual void write_words(const std::uint32_t* in) = 0;

  // GPU-only operations. The CPU backend keeps these defaults, which throw wrong_backend.
  virtual void add_async(const key_batch& keys, stream_t stream);
  virtual void contains_async(const key_batch& keys, bool* found, stream_t stream) const;
  virtual void count_async(const key_batch& keys, std::uint64_t* count, stream_t stream) const;
  /// select on the caller's stream; the number of rows goes to device memory `count`.
  virtual void select_async(const key_batch& keys, std::uint64_t* rows, std::uint64_t* count,
                            stream_t stream) const;
  virtual const std::uint32_t* device_words() const;
  /// Waits for every _async call's work; throws the deferred error of a bad _async
  /// string batch, its message starting with `what` (the operation that reports it).
  virtual void synchronize(const char* /*what*/) const {}

  /// The CPU backend's own bit array (num_words host words), nullptr on a GPU:
  /// lets a mirror copy straight into it or out of it.
  virtual std::uint32_t* host_words() noexcept { return nullptr; }
  /// A backend of kind `where` holding this filter's current bits, or nullptr:
  /// itself when it is of that kind; an automatic filter first brings that copy
  /// up to date. What gbf::filter::combine hands to another filter's combine.
  virtual const backend_impl* current_on(backend where) const {
    return where == kind() ? this : nullptr;
  }
  /// How an automatic filter routed its batches (all zero for a plain backend).
  virtual dispatch_stats dispatch() const { return {}; }
};

/// CPU backend of layout `l`, zeroed. `threads` = 0 means all hardware threads;
/// simd = avx2 throws invalid_argument where the CPU lacks AVX2. `description`
/// receives e.g. "cpu (avx2, 16 threads)". `huge_pages`: see options::cpu_huge_pages.
std::unique_ptr<backend_impl> make_cpu_backend(const layout& l, cpu_simd simd, unsigned threads,
                                               std::string* description, bool huge_pages = true);

/// CUDA backend of layout `l` on the current device, zeroed. Host batches
/// stream through `streams` slots of `chunk_keys` keys each (0 = defaults, see
/// gbf::options). Throws no_gpu when there is no usable GPU (or gbf was built
/// without CUDA), allocation_error when the bit array does not fit.
/// `description` receives e.g. "gpu (NVIDIA H100 80GB HBM3, 79.1 GiB)".
std::unique_ptr<backend_impl> make_gpu_backend(const layout& l, std::size_t chunk_keys,
                                               unsigned streams, std::string* description);

/// Copies `bytes` from device memory `src` to host memory `dst` (synchronous).
void copy_device_to_host(void* dst, const void* src, std::size_t bytes);

/// Whether `p` points to device memory (device or managed allocations). Host
/// memory, pinned host memory and any pointer when no GPU exists answer host.
memory_space locate(const void* p);

}  // namespace gbf::detail
