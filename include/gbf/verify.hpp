// What a verify_contains call of any filter kind reports: the batch's answers
// recomputed on the CPU (the portable kernel, from a host copy of the bits)
// and compared with the ones given.
#pragma once

#include <cstdint>

namespace gbf {

/// Outcome of recomputing a batch's answers on the CPU.
struct verify_report {
  std::uint64_t keys_checked = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t first_mismatch = 0;  ///< Index of the first mismatch (valid when mismatches > 0).
  bool ok() const { return mismatches == 0; }
};

}  // namespace gbf
