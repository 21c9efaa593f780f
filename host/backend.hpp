// What every filter kind's backends share: how a key operation is called, the
// word-wise set operations, and placing a backend (CPU or GPU) by options.
#pragma once

#include <cstdint>
#include <string>

#include "gbf/backend.hpp"

namespace gbf::detail {

/// Word-wise operation of merge (union), intersect and symmetric_difference.
enum class set_op { union_or, intersect_and, symmetric_xor };

/// Throws wrong_backend naming `what` when an _async call reaches a CPU filter.
void require_sync(const call_options& call);

/// The backend `opts` asks for: cpu, gpu, or (automatic) the GPU when
/// query_gpu() finds one, else the CPU; for automatic, `reason` receives why
/// ("auto: no GPU (no CUDA driver)"); an explicit choice leaves it untouched.
backend resolve(const options& opts, std::string* reason);

/// "1.5 GiB", "256.0 KiB", "96 B": a byte count for people (one decimal above bytes).
std::string format_bytes(std::uint64_t bytes);

}  // namespace gbf::detail
