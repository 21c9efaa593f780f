// Where a filter lives and runs, for every filter kind: the backend choice,
// its options, and what the machine offers (a GPU, AVX2, AVX-512).
#pragma once

#include <cstddef>
#include <string>

struct CUstream_st;

namespace gbf {

/// A CUDA stream handle (the same type as cudaStream_t).
using stream_t = CUstream_st*;

/// Where a filter's bits live and its operations run. automatic: the GPU when
/// the machine has a usable one whose memory can hold the filter, else the CPU
/// (description() says why); gpu throws allocation_error where it cannot.
enum class backend { cpu, gpu, automatic };

/// Which CPU kernel runs: the portable scalar one, AVX2, AVX-512, or the best
/// available. avx512 adds to the AVX2 kernels a hash of eight integer keys at
/// once: the plain filter's kernels, which the scaling filter's levels and the
/// counting filter's probes share; the other kernels run AVX2 for it.
enum class cpu_simd { automatic, scalar, avx2, avx512 };

/// How a filter is placed and run.
struct options {
  /// A GPU filter lives on the device current when it is made and runs every call
  /// there, whatever the caller's cudaSetDevice since; keys in another GPU's
  /// memory throw invalid_argument.
  backend where = backend::automatic;
  cpu_simd simd = cpu_simd::automatic;  ///< CPU kernel; avx2 / avx512 throw invalid_argument where the CPU lacks it.
  unsigned cpu_threads = 0;             ///< CPU worker threads, 0 = all hardware threads.
  /// CPU arrays of 2 MiB or more in transparent huge pages (fewer TLB misses:
  /// ~1.2x on big filters; creation may take longer while the kernel compacts memory).
  bool cpu_huge_pages = true;
  /// Keys per pinned staging chunk for host batches, 0 = 4 Mi; more than 2^30 throws
  /// invalid_argument when a GPU filter is made.
  std::size_t gpu_chunk_keys = 0;
  unsigned gpu_streams = 0;             ///< Streams overlapping copy/kernel/copy, 0 = 3.
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

/// True when the running CPU (and OS) support the AVX-512 kernel (AVX-512 F and DQ).
bool cpu_has_avx512();

/// "cpu", "gpu" or "auto".
const char* to_string(backend b);

namespace detail {
/// How a public key operation was called (what every kind's backends receive).
struct call_options {
  const char* what = "";      ///< The operation, for error messages ("add", "contains_async", ...).
  stream_t stream = nullptr;  ///< GPU: the caller's stream (null: the filter's own); CPU: unused.
  bool async = false;         ///< Stream-ordered, returning before the work is done (GPU only).
  /// The call writes one answer per key (add_new, remove_with_status), so its array may
  /// not be null (a null one made add_new a plain add).
  bool answers = false;
};
}  // namespace detail

}  // namespace gbf
