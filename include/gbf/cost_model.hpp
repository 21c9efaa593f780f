// gbf::cost_model — what the automatic backend believes a call costs on the CPU
// and on the GPU, so that it can send each host batch where it finishes first.
//
// A filter created with backend::automatic on a machine with a GPU keeps its
// bits on the GPU and, once small host batches make it worth the copy, a CPU
// mirror of them (docs/cpu-vs-gpu.md, "The automatic backend"). Each host
// batch then runs where the model says it is cheaper:
//
//   seconds = fixed_s + keys / keys_per_s + string_bytes / bytes_per_s
//
// The model is fitted by `gbf bench` on the machine at hand and cached in a
// small text file (default_path()); without that file the built-in defaults
// apply, which are estimates from the performance model, not measurements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gbf {

/// Time of one call: a fixed part plus a part per key and per string byte.
struct call_cost {
  double fixed_s = 0;      ///< Seconds per call whatever its size (launches, copies' latency, thread wake-up).
  double keys_per_s = 1;   ///< Asymptotic keys per second for integer keys.
  double bytes_per_s = 1;  ///< String bytes hashed (CPU) or moved (GPU) per second; unused for integer keys.

  /// Predicted seconds for a call of `keys` keys holding `string_bytes` bytes of string data.
  double seconds(double keys, double string_bytes = 0) const {
    return fixed_s + keys / keys_per_s + string_bytes / bytes_per_s;
  }
};

/// Costs measured at one filter size: CPU and GPU (keys in host memory) for adds and probes.
struct cost_point {
  std::uint64_t filter_bytes = 0;  ///< The filter size these costs were measured at.
  call_cost cpu_add, cpu_probe;    ///< CPU backend (the mirror's thread count).
  call_cost gpu_add, gpu_probe;    ///< GPU backend, keys in host memory (transfers included).
};

/// The cost of copying the whole bit array between host and device memory.
struct copy_cost {
  double fixed_s = 20e-6;          ///< Seconds per copy.
  double bytes_per_s = 12e9;       ///< Bytes per second.
  double seconds(double bytes) const { return fixed_s + bytes / bytes_per_s; }
};

/// Costs per filter size; a filter uses the point nearest its size (in log scale).
struct cost_model {
  std::vector<cost_point> points;  ///< Sorted by filter_bytes, at least one.
  copy_cost copy;                  ///< Mirror copies (host <-> device).
  std::string source;              ///< "built-in defaults" or the file it was loaded from.

  /// The built-in estimates (see docs/cpu-vs-gpu.md for their derivation).
  static cost_model defaults();
  /// Reads a model written by save(); throws io_error (unreadable) or format_error (naming the line).
  static cost_model load(const std::string& path);
  /// The model the automatic backend uses: load(default_path()) when that file exists, else
  /// defaults(). A file that exists but does not parse falls back to defaults and says why in `source`.
  static cost_model for_automatic_backend();
  /// $GBF_COST_MODEL, else $XDG_CACHE_HOME/gbf/cost-model, else $HOME/.cache/gbf/cost-model.
  static std::string default_path();

  /// Writes the model atomically (temp file, fsync, rename), creating the parent directory;
  /// `comment` goes in a leading "#" line. Throws io_error or invalid_argument (an invalid model).
  void save(const std::string& path, const std::string& comment = "") const;
  /// The point nearest `filter_bytes` in log scale.
  const cost_point& at(std::uint64_t filter_bytes) const;
  /// Empty when the model is usable, else what is wrong ("points[1].gpu_add.keys_per_s is 0").
  std::string problem() const;
};

}  // namespace gbf
