// The cuckoo filter kind as its two backends implement it: the same
// operations on the same table (gbf/cuckoo_layout.hpp), the CPU's in
// host/cpu/cuckoo_backend.cpp and the GPU's in host/gpu/cuckoo_backend.cpp.
// gbf::cuckoo_filter owns one and forwards to it after checking the caller's
// arguments (host/keys.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gbf/backend.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/keys.hpp"

namespace gbf::detail {

class cuckoo_backend {
 public:
  virtual ~cuckoo_backend() = default;

  /// cpu or gpu.
  virtual backend kind() const noexcept = 0;

  /// Inserts the non-null keys as `how` says; status[i] (in keys.space, may be
  /// null) per key. A synchronous call returns its totals; an async one zeros.
  virtual cuckoo_add_report add(const key_batch& keys, cuckoo_status* status,
                                const cuckoo_add_options& how, const call_options& call) = 0;
  /// Removes one copy of each non-null key's tag where found; removed[i] (may be
  /// null) per key. Returns how many were removed (0 for an async call).
  virtual std::uint64_t remove(const key_batch& keys, bool* removed,
                               const call_options& call) = 0;
  /// found[i] = key i is non-null and its tag is in one of its buckets.
  virtual void contains(const key_batch& keys, bool* found, const call_options& call) const = 0;
  /// Number of non-null keys found; an async call writes it to `device_count` and returns 0.
  virtual std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                              const call_options& call) const = 0;
  /// copies[i] = copies of key i's tag in its two buckets (0 for a null key).
  virtual void approximate_count(const key_batch& keys, std::uint8_t* copies,
                                 const call_options& call) const = 0;
  /// Ascending indices of the keys found to `rows`; returns how many (or, async,
  /// writes that to `device_count` and returns 0).
  virtual std::uint64_t select(const key_batch& keys, std::uint64_t* rows,
                               std::uint64_t* device_count, const call_options& call) const = 0;

  /// Empties the table and zeroes the counters.
  virtual void clear() = 0;
  /// Non-empty slots of the table.
  virtual std::uint64_t occupied_slots() const = 0;
  /// The counters (waits for _async work).
  virtual cuckoo_totals totals() const = 0;
  /// Replaces the counters (a filter restored from a file or copied).
  virtual void set_totals(const cuckoo_totals& totals) = 0;
  /// Copies the table's num_words words to host memory `out`.
  virtual void read_words(std::uint32_t* out) const = 0;
  /// Copies table words [first, first + count) to host memory `out` (the caller checks the range).
  virtual void read_words(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const = 0;
  /// Replaces table words [first, first + count) with host words `in` (the caller
  /// checks the range); a load streams the table in this way.
  virtual void write_words(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) = 0;
  /// Device address of the table; nullptr on the CPU.
  virtual const std::uint32_t* device_words() const = 0;
  /// Waits for every _async call's work; throws the deferred error of a bad
  /// _async string batch, its message starting with `what`. No-op on the CPU.
  virtual void synchronize(const char* what) const = 0;
};

/// CPU backend of table `l`, empty. `description` (may be null) receives e.g.
/// "cpu (avx2, 2 threads)"; simd = avx2 throws invalid_argument without AVX2.
std::unique_ptr<cuckoo_backend> make_cpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks,
                                                const options& opts, std::string* description);

/// GPU backend of table `l` on the current device, empty. Throws no_gpu without
/// a usable GPU (or in a build without CUDA), allocation_error when it does not fit.
std::unique_ptr<cuckoo_backend> make_gpu_cuckoo(const cuckoo_layout& l, std::uint32_t max_kicks,
                                                const options& opts, std::string* description);

}  // namespace gbf::detail
