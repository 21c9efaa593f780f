// What a `gbf bench` run produces, shared by its three parts: the runner
// (cli/bench.cpp) fills rows, the analysis (cli/bench_analysis.hpp) derives
// speedups, fits and crossovers from them, the report (cli/bench_report.hpp)
// prints and writes them.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/text.hpp"
#include "gbf/layout.hpp"

namespace gbf::cli::bench {

/// What a row times. remove and remove_unchecked run on the counting kind only.
enum class op { add, contains, remove, remove_unchecked };

/// The op's name in --ops, the table and the JSON ("add", "remove-unchecked", ...).
inline const char* to_string(op o) {
  switch (o) {
    case op::add: return "add";
    case op::contains: return "contains";
    case op::remove: return "remove";
    case op::remove_unchecked: return "remove-unchecked";
  }
  return "?";
}

/// Whether `o` takes keys out of the filter.
inline bool is_remove(op o) { return o == op::remove || o == op::remove_unchecked; }

/// The filter a row runs on: the plain gbf::filter or the gbf::counting_filter of
/// the same layout (4-bit counters: 4x the bytes).
enum class kind { plain, counting };

/// The kind's name in --kinds, the table and the JSON.
inline const char* to_string(kind k) { return k == kind::plain ? "plain" : "counting"; }

/// Whether kind `k` has rows of op `o`: a plain Bloom filter cannot remove keys.
inline bool has_op(kind k, op o) { return k == kind::counting || !is_remove(o); }

/// What a row runs on: the CPU backend on 1 thread or on --threads threads, or
/// the GPU backend with keys and answers in device memory or in host memory.
enum class engine { cpu1, cpu, gpu_device, gpu_host };

/// Every engine, in the order rows run and print.
inline constexpr engine all_engines[] = {engine::cpu1, engine::cpu, engine::gpu_device,
                                         engine::gpu_host};

/// The engine's name in --backends, the table and the JSON ("cpu1", "gpu-host", ...).
inline const char* id_of(engine e) {
  switch (e) {
    case engine::cpu1: return "cpu1";
    case engine::cpu: return "cpu";
    case engine::gpu_device: return "gpu-device";
    case engine::gpu_host: return "gpu-host";
  }
  return "?";
}

inline bool is_gpu(engine e) { return e == engine::gpu_device || e == engine::gpu_host; }
/// The CPU engines: references for verification, and what GPU rows are compared with.
inline bool is_cpu(engine e) { return !is_gpu(e); }

/// One filter size of the sweep.
struct filter_case {
  double mib = 0;              ///< The size asked for (--filter-mib).
  layout shape;                ///< The default layout with that many bytes.
  std::uint64_t capacity = 0;  ///< Keys contains rows fill it with: the most --fpp allows.
  double predicted_fpr = 0;    ///< expected_fpr(shape, capacity).
  std::string where;           ///< Against this CPU's caches: "in L2", "beyond the LLC (4.0x)", ...
};

/// The time of one call, from --repeat runs.
struct timing {
  double median_s = 0;
  double best_s = 0;
  std::uint64_t calls_per_run = 1;  ///< Calls per timed run (small batches repeat to last 10 ms).
};

/// One (kind, engine, op, filter size, batch size) measurement.
struct row {
  kind filter_kind = kind::plain;
  engine backend = engine::cpu1;
  op operation = op::add;
  double filter_mib = 0;
  std::uint64_t filter_bytes = 0;
  std::uint64_t batch = 0;
  timing time;
  double keys_per_s = 0;          ///< batch / time.median_s.
  double speedup = NAN;           ///< Over cpu1 at the same (kind, op, filter, batch).
  double speedup_best_cpu = NAN;  ///< GPU rows: over the faster of cpu1 and cpu there.
  std::uint64_t positives = 0;    ///< contains rows: false positives (no probe key was added).
  double measured_fpr = NAN;
  double predicted_fpr = NAN;
  bool ok = true;
  std::string verification;  ///< "ok" or what went wrong.
  std::string checked;       ///< What was compared.
};

/// The row of (k, e, o, mib, b), or null when it was not measured.
inline const row* find_row(const std::vector<row>& rows, kind k, engine e, op o, double mib,
                           std::uint64_t b) {
  for (const row& r : rows)
    if (r.filter_kind == k && r.backend == e && r.operation == o && r.filter_mib == mib &&
        r.batch == b)
      return &r;
  return nullptr;
}

/// A batch size as the table prints it: powers of ten from 1000 as "1e6", others grouped.
inline std::string batch_text(std::uint64_t n) {
  const double e = std::log10(static_cast<double>(n));
  if (n >= 1000 && std::fabs(e - std::round(e)) < 1e-9) return "1e" + std::to_string(std::lround(e));
  return with_commas(n);
}

/// What a run covers: its grid and how it times and fills.
struct sweep {
  std::vector<filter_case> cases;      ///< Ascending size.
  std::vector<kind> kinds{kind::plain};  ///< Plain before counting.
  std::vector<op> ops;                 ///< A kind runs those it has (has_op).
  std::vector<engine> engines;         ///< In all_engines order.
  std::vector<std::uint64_t> batches;  ///< Ascending.
  unsigned repeat = 5;                 ///< Timed runs per row.
  double fpp = 0.01;                   ///< Fill level of contains rows.
  unsigned cpu_threads = 1;            ///< Threads of the "cpu" engine.
};

}  // namespace gbf::cli::bench
