// `gbf bench`: the CPU-versus-GPU comparison (the README's main job).
//
// Runs add and contains over a grid of batch sizes and filter sizes on every
// backend (CPU 1 thread, CPU all threads, GPU with device-resident keys, GPU
// with keys in host memory) and reports keys/s, the speedup over CPU 1 thread,
// the measured FPR against the model's, a verification result per row, per
// backend a fit t(n) = a + n / R, and per (op, filter size) the batch size from
// which the GPU wins. See docs/cpu-vs-gpu.md.
//
// The parts: cli/bench.cpp runs the rows, cli/bench_analysis.* derives
// speedups, fits and crossovers, cli/bench_report.* prints the table and writes
// the JSON and the plot; cli/bench_rows.hpp holds the types they share.
#pragma once

#include <string>
#include <vector>

namespace gbf::cli {

struct bench_options {
  std::vector<std::string> batches;     ///< Batch sizes ("1e3", "100000"); empty = default set.
  std::vector<std::string> filter_mib;  ///< Filter sizes in MiB; empty = default set.
  std::vector<std::string> ops;         ///< "add", "contains"; empty = both.
  std::vector<std::string> backends;    ///< cpu1, cpu, gpu-device, gpu-host; empty = all available.
  unsigned repeat = 5;                  ///< Timed runs per row (the median is reported).
  double fpp = 0.01;                    ///< Fill level of contains rows: capacity at this FPR.
  unsigned threads = 0;                 ///< Threads of the "cpu" backend, 0 = all hardware threads.
  bool full = false;                    ///< The full sweep: batches 1e3..1e9, filters up to 4 GiB.
  std::string json;                     ///< Write the results as JSON here ("" = no).
  std::string plot;                     ///< Write a PNG plot here (gnuplot; "" = no).
};

/// Runs the benchmark, printing the table to stdout and progress to stderr.
/// Returns 0 when every row verified, 1 otherwise; throws usage_error for bad options.
int run_bench(const bench_options& opts);

}  // namespace gbf::cli
