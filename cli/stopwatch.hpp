// Wall-clock timing shared by the gbf subcommands that measure (bench, demo, join).
#pragma once

#include <chrono>

namespace gbf::cli {

/// A steady clock started at construction.
class stopwatch {
 public:
  /// Seconds since construction or the last lap().
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  /// Starts again from now.
  void restart() { start_ = std::chrono::steady_clock::now(); }
  /// seconds(), then starts again from now.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Seconds `work()` takes on the steady clock.
template <class F>
double seconds_of(F&& work) {
  const stopwatch clock;
  work();
  return clock.seconds();
}

}  // namespace gbf::cli
