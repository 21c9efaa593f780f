// The counting filter kind as its two backends implement it: the same
// operations on the same counters (gbf/counting_layout.hpp), the CPU's in
// host/cpu/counting_backend.cpp and the GPU's in host/gpu/counting_backend.cpp.
// gbf::counting_filter owns one and forwards to it after checking the
// caller's arguments (host/keys.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gbf/backend.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "host/backend.hpp"

namespace gbf::detail {

/// Counters of a whole array: how many are nonzero, how many saturated.
struct counter_census {
  std::uint64_t nonzero = 0;
  std::uint64_t saturated = 0;
};

/// How merge combines two counters: their saturating sum (a union of the key
/// multisets) or their minimum (an intersection).
enum class counter_merge { sum, min };

class counting_backend {
 public:
  virtual ~counting_backend() = default;

  /// cpu or gpu.
  virtual backend kind() const noexcept = 0;

  /// Increments (saturating) the counters of every non-null key's bits.
  virtual void add(const key_batch& keys, const call_options& call) = 0;
  /// Checked remove: in batch order, each non-null key whose counters are all
  /// nonzero at its turn has them decremented (saturated ones stay); the others
  /// are refused. With `removed` (in keys.space), removed[i] = key i was removed
  /// (null keys: false). Returns the number refused; an async call writes it to
  /// device memory `device_refused` instead (when not null) and returns 0.
  virtual std::uint64_t remove(const key_batch& keys, bool* removed,
                               std::uint64_t* device_refused, const call_options& call) = 0;
  /// Decrements (floored at 0, saturated ones stay) the counters of every non-null key.
  virtual void remove_unchecked(const key_batch& keys, const call_options& call) = 0;
  /// found[i] = key i is non-null and all its counters are nonzero.
  virtual void contains(const key_batch& keys, bool* found, const call_options& call) const = 0;
  /// Number of non-null keys whose counters are all nonzero (async: to device_count, returns 0).
  virtual std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                              const call_options& call) const = 0;
  /// Ascending indices of the keys contains finds, as bloom_backend::select.
  virtual std::uint64_t select(const key_batch& keys, std::uint64_t* rows,
                               std::uint64_t* device_count, const call_options& call) const = 0;
  /// counts[i] = the smallest counter of key i's bits (0 for a null key).
  virtual void approximate_count(const key_batch& keys, std::uint8_t* counts,
                                 const call_options& call) const = 0;

  /// Zeroes the counters.
  virtual void clear() = 0;
  /// this = op(this, other) counter-wise: sum (saturating) or min; `other` has the
  /// same kind, layout and counter width (checked by the caller).
  virtual void merge(const counting_backend& other, counter_merge op) = 0;
  /// The same for counter words [first, first + count) against `count` host counter
  /// words of the same layout (a slice at a time, as bloom_backend::combine_host).
  virtual void merge_host(std::uint64_t first, std::uint64_t count, const std::uint32_t* counters,
                          counter_merge op) = 0;
  /// Nonzero and saturated counters.
  virtual counter_census census() const = 0;
  /// Copies the counter words to host memory `out`.
  virtual void read_counters(std::uint32_t* out) const = 0;
  /// Copies counter words [first, first + count) to host memory `out` (the caller checks the range).
  virtual void read_counters(std::uint64_t first, std::uint64_t count, std::uint32_t* out) const = 0;
  /// Replaces counter words [first, first + count) with host words `in` (the caller
  /// checks the range); a load streams the counters in this way.
  virtual void write_counters(std::uint64_t first, std::uint64_t count, const std::uint32_t* in) = 0;
  /// Writes the projection's num_words plain words (bit = counter != 0) to `words`:
  /// host memory on the CPU, device memory on the GPU.
  virtual void project(std::uint32_t* words) const = 0;
  /// Waits for every _async call; throws the deferred error of a bad _async
  /// string batch, its message starting with `what`. No-op on the CPU.
  virtual void synchronize(const char* what) const = 0;
};

/// CPU backend of layout `l` with `counter_bits`-bit counters, zeroed. `description`
/// (may be null) receives e.g. "cpu (scalar, 16 threads)".
std::unique_ptr<counting_backend> make_cpu_counting(const layout& l, std::uint32_t counter_bits,
                                                    const options& opts, std::string* description);

/// GPU backend on the current device, zeroed. Throws no_gpu when there is no usable
/// GPU (or gbf was built without CUDA), allocation_error when the counters do not fit.
std::unique_ptr<counting_backend> make_gpu_counting(const layout& l, std::uint32_t counter_bits,
                                                    const options& opts, std::string* description);

}  // namespace gbf::detail
