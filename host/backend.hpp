// What every filter kind's backends share: how a key operation is called, the
// word-wise set operations, and placing a backend (CPU or GPU) by options.
#pragma once

#include <cstdint>
#include <string>

#include "gbf/backend.hpp"
#include "gbf/error.hpp"

namespace gbf::detail {

/// Word-wise operation of merge (union), intersect and symmetric_difference.
enum class set_op { union_or, intersect_and, symmetric_xor };

/// Throw invalid_argument when the value is none of its enum's (an enum holds any
/// value of its type: a cast, an uninitialised field, a bad FFI call).
void check_listed(cpu_simd simd);
void check_listed(backend where);

/// Throws wrong_backend naming `what` when an _async call reaches a CPU filter.
void require_sync(const call_options& call);

/// The backend `opts` asks for: cpu, gpu, or (automatic) the GPU when
/// query_gpu() finds one, else the CPU; for automatic, `reason` receives why
/// ("auto: no GPU (no CUDA driver)"); an explicit choice leaves it untouched.
/// invalid_argument when opts.where or opts.simd is none of its enum's values.
backend resolve(const options& opts, std::string* reason);

/// place() with the choice made: `resolved` and `reason` as resolve() gave them for a
/// caller who asked for `asked` (apart so that the fallback is tested without a GPU).
template <class MakeGpu, class MakeCpu>
auto place_resolved(backend asked, backend resolved, const std::string& reason,
                    std::string& description, MakeGpu&& make_gpu, MakeCpu&& make_cpu)
    -> decltype(make_cpu()) {
  const auto with_reason = [&](auto impl, const std::string& why) {
    if (!why.empty()) description += "; " + why;
    return impl;
  };
  if (resolved != backend::gpu) return with_reason(make_cpu(), reason);
  try {
    return with_reason(make_gpu(), reason);
  } catch (const allocation_error& e) {
    // By now the GPU backend's partial allocations are released (unwinding is done).
    if (asked != backend::automatic) throw;
    return with_reason(make_cpu(), "auto: GPU present but it could not hold this filter (" +
                                       std::string(e.what()) + "), so the CPU");
  }
}

/// A filter's backend where `opts` asks (resolve): make_gpu() or make_cpu(), each making
/// it and writing `description`, to which the reason for an automatic choice is added.
/// backend::automatic falls back to the CPU when the GPU's memory cannot hold the filter
/// (allocation_error from make_gpu): it means the best place that works, and only an
/// explicit backend::gpu fails for want of GPU memory. Errors: make_cpu's, and make_gpu's
/// other than that allocation_error.
template <class MakeGpu, class MakeCpu>
auto place(const options& opts, std::string& description, MakeGpu&& make_gpu, MakeCpu&& make_cpu)
    -> decltype(make_cpu()) {
  std::string reason;
  const backend resolved = resolve(opts, &reason);
  return place_resolved(opts.where, resolved, reason, description, make_gpu, make_cpu);
}

/// "1.5 GiB", "256.0 KiB", "96 B": a byte count for people (one decimal above bytes).
std::string format_bytes(std::uint64_t bytes);

}  // namespace gbf::detail
