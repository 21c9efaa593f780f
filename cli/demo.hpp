// `gbf demo`: build a filter on every backend, probe it, compare keys/s.
#pragma once

#include <cstdint>

#include "gbf/filter.hpp"

namespace gbf::cli {

struct demo_options {
  std::uint64_t keys = 10'000'000;    ///< Keys added (also the filter's capacity).
  std::uint64_t probes = 100'000'000; ///< Absent keys probed.
  double fpp = 0.01;                  ///< Target false-positive rate.
  unsigned threads = 0;               ///< CPU threads for the multi-threaded row, 0 = all.
  backend where = backend::automatic; ///< cpu: CPU rows only; gpu: GPU rows only; auto: all.
  bool verify = true;                 ///< Recompute the GPU's answers on the CPU.
};

/// Runs the demo, printing a table to stdout; returns the process exit code
/// (0 when every backend agrees and nothing inserted was missed).
int run_demo(const demo_options& opts);

}  // namespace gbf::cli
