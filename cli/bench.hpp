// `gbf bench`: the CPU-versus-GPU comparison (the README's main job).
//
// Runs add and contains (and, for the counting filter, remove) over a grid of
// batch sizes and filter sizes, for the plain filter and/or the counting filter
// of the same layout (--kinds), on every backend (CPU 1 thread, CPU all
// threads, GPU with device-resident keys, GPU with keys in host memory) and
// reports keys/s, the speedup over CPU 1 thread, the measured FPR against the
// model's, a verification result per row, per backend a fit t(n) = a + n / R,
// per (kind, op, filter size) the batch size from which the GPU wins, and with
// both kinds the counting/plain time ratios. See docs/cpu-vs-gpu.md and
// docs/counting.md.
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
  std::vector<std::string> kinds;       ///< "plain", "counting"; empty = plain.
  std::vector<std::string> ops;         ///< add, contains, remove, remove-unchecked (counting only); empty = add, contains.
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
