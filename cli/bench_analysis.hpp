// The analysis of `gbf bench` rows: speedups, time fits and the CPU/GPU crossover.
//
// Everything is per filter kind (plain, counting): rows of different kinds
// are never compared here (the counting/plain ratios are cli/bench_report's).
//
// Fits. Per (kind, engine, op, filter size): t(n) = a + n / R through the smallest
// and the largest measured batch (a: the fixed cost of a call: launch,
// synchronisation, thread start-up; R: the asymptotic keys/s).
//
// Crossover. Per (kind, op, filter size) and GPU engine: the smallest measured batch
// from which the GPU is faster than the best CPU row at every larger measured
// batch. Beside it, from the fits: the GPU beats a CPU engine from
// n* = (a_gpu - a_cpu) / (1 / R_cpu - 1 / R_gpu) when R_gpu > R_cpu, and the
// fitted crossover is the largest n* over the CPU engines.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench_rows.hpp"
#include "gbf/backend.hpp"

namespace gbf::cli::bench {

/// t(n) = fixed_s + n / keys_per_s.
struct time_fit {
  double fixed_s = NAN;     ///< a, seconds (clamped at 0).
  double keys_per_s = NAN;  ///< R.
  bool valid() const { return std::isfinite(fixed_s) && std::isfinite(keys_per_s); }
};

/// The fit through the smallest and the largest batch of (k, e, o, mib); invalid
/// when fewer than two batches were measured or the larger one was not slower.
time_fit fit_time(const std::vector<row>& rows, kind k, engine e, op o, double mib);

/// Where the GPU starts to win, for one (kind, op, filter size, GPU engine).
struct crossover {
  kind filter_kind = kind::plain;
  op operation = op::add;
  double filter_mib = 0;
  engine gpu = engine::gpu_device;
  bool no_gpu = false;        ///< The machine has no GPU (one crossover per (kind, op, filter) then).
  std::uint64_t batch = 0;    ///< Measured: the GPU wins from this batch on; 0 = not in range.
  double fitted_batch = NAN;  ///< From the fits: n*; NaN when the fits say the GPU never wins.
  std::string text;           ///< The measured crossover in words.
};

/// The counting filter's time per call over the plain filter's, at one
/// (op, filter size, engine, batch) where both kinds ran.
struct kind_ratio {
  op operation = op::add;
  double filter_mib = 0;
  engine backend = engine::cpu1;
  std::uint64_t batch = 0;
  double counting_over_plain = NAN;  ///< counting median_s / plain median_s.
};

/// Every (filter, op, batch, engine) of the run, in that order, that has both a
/// plain and a counting row (none when the run has one kind).
std::vector<kind_ratio> counting_vs_plain(const std::vector<row>& rows, const sweep& run);

/// Sets every row's speedup over cpu1 and, for GPU rows, over the best CPU row
/// at the same (kind, op, filter, batch).
void set_speedups(std::vector<row>& rows);

/// One crossover per (filter, kind, op) of the run (ops the kind has) and GPU
/// engine in it (or one per (filter, kind, op) saying why not, without a GPU),
/// in that order.
std::vector<crossover> find_crossovers(const std::vector<row>& rows, const sweep& run,
                                       const gpu_status& gpu);

}  // namespace gbf::cli::bench
