// verify_contains, as every filter kind answers it: the caller's answers
// against a CPU twin's, key by key.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "gbf/backend.hpp"
#include "gbf/filter.hpp"
#include "host/keys.hpp"

namespace gbf::detail {

/// Options of the CPU twin verify_contains recomputes answers with: the scalar
/// reference kernel, and no huge pages (made, written and probed once: not
/// worth their allocation cost).
inline options scalar_twin_options() {
  options scalar;
  scalar.simd = cpu_simd::scalar;
  scalar.cpu_huge_pages = false;
  return scalar;
}

/// verify_contains as every kind answers it: checks the batch and `found`,
/// copies both to the host, has recompute(host_keys, expected) answer the keys
/// on the CPU, and counts where `found` disagrees.
template <class Recompute>
verify_report verify_answers(const key_batch& keys, const bool* found, const Recompute& recompute) {
  const key_batch batch = check_batch("verify_contains", keys);
  check_results("verify_contains", batch, found);
  if (batch.count == 0) return {};
  const host_copy host(batch);
  const std::vector<unsigned char> answers = answers_on_host(found, batch.count, batch.space);
  std::unique_ptr<bool[]> expected(new bool[batch.count]);
  recompute(host.batch, expected.get());
  verify_report report;
  report.keys_checked = batch.count;
  for (std::size_t i = 0; i < batch.count; ++i) {
    if (expected[i] != (answers[i] != 0)) {
      if (report.mismatches == 0) report.first_mismatch = i;
      ++report.mismatches;
    }
  }
  return report;
}

}  // namespace gbf::detail
