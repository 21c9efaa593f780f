// The scaling chain as its two backends implement it (host/cpu/scaling_backend.cpp,
// host/gpu/scaling_backend.cpp), the growth rule, and the add's control loop,
// which both backends share: they supply the steps on their memory, the loop
// decides what each step does. gbf::scaling_filter (host/scaling_filter.cpp)
// owns a backend and the levels' bookkeeping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/keys.hpp"
#include "gbf/layout.hpp"
#include "gbf/scaling_filter.hpp"

namespace gbf::detail {

/// Levels a chain may open. Capacities grow geometrically and each level's fpp
/// shrinks geometrically, so memory, not this bound, ends a real chain.
inline constexpr std::size_t max_scaling_levels = 64;

/// Bits per key a level may spend (512 bytes): a level sized past it for its
/// tightened target is not opened (plan_level), so a chain's memory stays within
/// 512 bytes per key of its capacity however far the targets tighten.
inline constexpr double max_level_bits_per_key = 4096;

/// Nullptr when `c` is a valid config, else a sentence naming the problem.
const char* config_problem(const scaling_config& c);

/// Level `index` of a chain made from `c`: capacity initial * expansion^index,
/// target fpp (1 - r) r^index (non-scaling: fpp), layout size_for(capacity, fpp,
/// shape), no keys. Throws filter_full (fits 0) naming the level when it cannot
/// exist: past max_scaling_levels, a capacity past 2^64, an fpp that underflows,
/// a size past 2^32 blocks, or more than max_level_bits_per_key bits per key.
scaling_level plan_level(const scaling_config& c, std::size_t index);

/// Capacity of level `index` under `c`, or 0 when it passes 2^64.
std::uint64_t level_capacity(const scaling_config& c, std::size_t index);

/// What one piece of an add does, on one backend's memory. The piece's
/// "candidates" are (hash, position) pairs of its keys, in batch order.
class fill_steps {
 public:
  virtual ~fill_steps() = default;
  /// Hashes the piece's keys once and makes the candidates the non-null keys absent
  /// from every level; is_new (when asked for) becomes false for every key. Returns
  /// how many candidates there are.
  virtual std::size_t probe_all() = 0;
  /// add_new of candidates [first, first + n) into level `level` in their order; sets
  /// is_new at their positions; returns how many were new.
  virtual std::uint64_t add_slice(std::size_t level, std::size_t first, std::size_t n) = 0;
  /// Keeps, in order, the candidates from `first` on that are absent from level
  /// `level`, renumbered from 0; returns how many.
  virtual std::size_t drop_present(std::size_t level, std::size_t first) = 0;
  /// Keeps the first candidate of each hash (a later one has the same bits in every
  /// level, so it is never new); returns how many remain.
  virtual std::size_t drop_repeats() = 0;
  /// Appends an empty level of layout `l`.
  virtual void open_level(const layout& l) = 0;
};

/// The add of one piece of a batch, with sequential semantics: exactly what
/// inserting its keys one by one would do (host/scaling_filter.cpp gives the
/// argument). `levels` is updated (keys counted, levels opened); a non-scaling
/// chain's only level takes every new key (the caller has checked it may).
/// Returns the keys inserted.
std::uint64_t fill(fill_steps& steps, const scaling_config& config,
                   std::vector<scaling_level>& levels);

class scaling_backend {
 public:
  virtual ~scaling_backend() = default;

  /// cpu or gpu.
  virtual backend kind() const noexcept = 0;
  /// Appends an empty level of layout `l` (the chain's W, k and seed).
  virtual void push_level(const layout& l) = 0;
  /// Removes the newest level: undoes push_level for a merge that cannot finish.
  virtual void pop_level() noexcept = 0;

  /// Runs fill over the batch, piece by piece in batch order, updating `levels`;
  /// is_new (may be null) in keys.space. Synchronous. Returns the keys inserted.
  virtual std::uint64_t add(const key_batch& keys, bool* is_new, const call_options& call,
                            const scaling_config& config, std::vector<scaling_level>& levels) = 0;
  /// found[i] = key i is non-null and present in some level.
  virtual void contains(const key_batch& keys, bool* found, const call_options& call) const = 0;
  /// Number of non-null keys present in some level (async: to device_count, returns 0).
  virtual std::uint64_t count(const key_batch& keys, std::uint64_t* device_count,
                              const call_options& call) const = 0;
  /// Ascending indices of those keys to `rows` (async: their number to device_count).
  virtual std::uint64_t select(const key_batch& keys, std::uint64_t* rows,
                               std::uint64_t* device_count, const call_options& call) const = 0;

  /// Popcount of level `level`.
  virtual std::uint64_t popcount(std::size_t level) const = 0;
  /// Copies words [first, first + count) of level `level` to host memory `out` (the
  /// caller checks the range).
  virtual void read_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                          std::uint32_t* out) const = 0;
  /// Replaces words [first, first + count) of level `level` with host words `in` (the
  /// caller checks the range).
  virtual void write_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                           const std::uint32_t* in) = 0;
  /// Words [first, first + count) of level `level` |= host words `in` (the caller
  /// checks the range; `first` a multiple of 4, as bloom_backend::combine_host).
  virtual void or_words(std::size_t level, std::uint64_t first, std::uint64_t count,
                        const std::uint32_t* in) = 0;

  /// A trial for a non-scaling add: the newest level is replaced by a copy of itself,
  /// the original kept aside untouched. end_trial(true) keeps the copy (and its new
  /// bits); end_trial(false) puts the original back.
  virtual void begin_trial() = 0;
  virtual void end_trial(bool keep) noexcept = 0;

  /// Waits for every _async call; throws a bad _async string batch's error. CPU: no-op.
  virtual void synchronize(const char* what) const = 0;
};

/// A CPU chain of shape `s` with no level yet; `description` (may be null) gets e.g.
/// "cpu (avx2, 2 threads)". invalid_argument for simd = avx2 where the CPU lacks it.
std::unique_ptr<scaling_backend> make_cpu_scaling(const shape& s, const options& opts,
                                                  std::string* description);

/// A GPU chain of shape `s` with no level yet, on the current device; no_gpu without one.
std::unique_ptr<scaling_backend> make_gpu_scaling(const shape& s, const options& opts,
                                                  std::string* description);

}  // namespace gbf::detail
