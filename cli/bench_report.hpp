// The report of a `gbf bench` run: the table on stdout, the JSON file and the
// gnuplot plot (docs/cpu-vs-gpu.md describes all three).
#pragma once

#include <string>
#include <vector>

#include "cli/bench_analysis.hpp"
#include "cli/bench_rows.hpp"
#include "gbf/backend.hpp"
#include "gbf/files.hpp"

namespace gbf::cli::bench {

/// The machine the rows ran on.
struct machine {
  std::string cpu_model;  ///< From /proc/cpuinfo ("unknown" when it does not say).
  unsigned hardware_threads = 0;
  bool avx2 = false;
  bool avx512 = false;
  gpu_status gpu;
};

/// This machine, with `gpu` from query_gpu().
machine this_machine(const gpu_status& gpu);

/// A run's results, as the report reads them.
struct results {
  std::vector<row> rows;
  std::vector<crossover> crossovers;
  std::vector<kind_ratio> ratios;    ///< counting/plain times (runs of both kinds).
  std::vector<std::string> skipped;  ///< Sizes or rows left out, and why.
};

/// The lines before the table: what runs where, and what was skipped so far.
void print_header(const sweep& run, const machine& m, const std::vector<std::string>& skipped);

/// Per (filter, kind, op): the rows by batch, the fits and the crossovers (the
/// kind is in the title when the run is not the plain kind alone).
void print_table(const sweep& run, const results& r);

/// With both kinds: per (filter, op, batch) the counting/plain time ratio of each
/// engine. Prints nothing otherwise.
void print_kind_ratios(const sweep& run, const results& r);

/// The whole run as one JSON document (machine, filters, rows, crossovers, skipped).
std::string json_report(const sweep& run, const machine& m, const results& r);

/// A gnuplot script drawing keys/s against batch size into `png`: one panel per
/// (filter, kind, op), one line per engine, the measured crossovers as red lines.
std::string gnuplot_script(const std::string& png, const sweep& run, const machine& m,
                           const results& r);

/// Writes `text` to `file` and renames it over its target, so that a reader never
/// sees half a report; io_error naming the path and the OS's reason.
void write_report_file(gbf::atomic_file& file, const std::string& text);

/// The gnuplot script written beside the PNG `png`: its name with .gp for .png.
std::string plot_script_path(const std::string& png);

/// Writes `script` to `script_file` (plot_script_path(png)) and runs gnuplot on
/// it; false, with a note on stderr, when gnuplot is missing or fails.
bool write_plot(const std::string& png, gbf::atomic_file& script_file, const std::string& script);

}  // namespace gbf::cli::bench
