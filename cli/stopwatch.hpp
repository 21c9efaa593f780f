// Wall-clock timing shared by the gbf subcommands that measure (bench, demo).
#pragma once

#include <chrono>

namespace gbf::cli {

/// Seconds `work()` takes on the steady clock.
template <class F>
double seconds_of(F&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace gbf::cli
