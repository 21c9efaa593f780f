#include "cli/bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "cli/text.hpp"
#include "gbf/counting_layout.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"

namespace gbf::cli::bench {
namespace {

std::string format(const char* spec, double v) {
  char text[64];
  std::snprintf(text, sizeof text, spec, v);
  return text;
}

/// 6.4e-6 -> "6.4 us", 0.0105 -> "10.50 ms", 1.5 -> "1.500 s".
std::string time_text(double s) {
  if (s >= 1) return format("%.3f s", s);
  if (s >= 1e-3) return format("%.2f ms", s * 1e3);
  return format("%.1f us", s * 1e6);
}

/// A JSON number, or null for NaN and infinities (which JSON cannot hold).
std::string json_number(double v) { return std::isfinite(v) ? format("%.9g", v) : "null"; }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

/// Whether tables name the kind: not in a run of the plain kind alone (the default).
bool names_kinds(const sweep& run) { return !(run.kinds.size() == 1 && run.kinds[0] == kind::plain); }

/// The (kind, op) panels of a run, in table order: the ops each kind has.
std::vector<std::pair<kind, op>> panels_of(const sweep& run) {
  std::vector<std::pair<kind, op>> out;
  for (const kind k : run.kinds)
    for (const op o : run.ops)
      if (has_op(k, o)) out.emplace_back(k, o);
  return out;
}

}  // namespace

machine this_machine(const gpu_status& gpu) {
  machine m;
  m.cpu_model = cpu_model_name();
  m.hardware_threads = std::thread::hardware_concurrency();
  m.avx2 = cpu_has_avx2();
  m.avx512 = cpu_has_avx512();
  m.gpu = gpu;
  return m;
}

void print_header(const sweep& run, const machine& m, const std::vector<std::string>& skipped) {
  std::printf("gbf bench: keys/s per backend, op, filter size and batch size (median of %u runs after a warm-up)\n",
              run.repeat);
  std::printf("cpu: %s, %u hardware threads, AVX2 %s, AVX-512 %s; 'cpu' rows use %u threads\n",
              m.cpu_model.c_str(), m.hardware_threads, m.avx2 ? "yes" : "no", m.avx512 ? "yes" : "no",
              run.cpu_threads);
  std::printf("gpu: %s\n", m.gpu.available ? m.gpu.description.c_str()
                                           : ("none (" + m.gpu.description + "); CPU rows only").c_str());
  std::printf("layout: %s per filter below; contains rows fill the filter to its capacity at fpp %g\n",
              to_string(run.cases.front().shape).c_str(), run.fpp);
  if (names_kinds(run)) {
    std::printf("kinds:");
    for (const kind k : run.kinds) std::printf(" %s", to_string(k));
    std::printf("  (plain: gbf::filter; counting: gbf::counting_filter of the same layout, %u-bit counters, "
                "%ux the bytes; remove rows fill it as contains rows do, then each timed call removes a batch "
                "an untimed add put in just before)\n",
                default_counter_bits, default_counter_bits);
  }
  std::printf("filters against this CPU's caches (read at run time):");
  for (const filter_case& c : run.cases)
    std::printf(" %s %s;", mib_text(c.mib).c_str(), c.where.c_str());
  std::printf("\n");
  std::printf("backends:");
  for (const engine e : run.engines) std::printf(" %s", id_of(e));
  std::printf("  (cpu1: 1 CPU thread; cpu: %u threads; gpu-device: keys in device memory; gpu-host: keys "
              "in host memory, transfers included)\n",
              run.cpu_threads);
  for (const std::string& s : skipped) std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

void print_table(const sweep& run, const results& r) {
  for (const filter_case& c : run.cases) {
    for (const auto& [k, o] : panels_of(run)) {
      std::printf("\n%s%s, %s filter (%s blocks of %u B", names_kinds(run) ? (std::string(to_string(k)) + " ").c_str() : "",
                  to_string(o), mib_text(c.mib).c_str(), with_commas(c.shape.num_blocks).c_str(),
                  c.shape.words_per_block * 4);
      if (k == kind::counting)
        std::printf("; %s of %u-bit counters", mib_text(static_cast<double>(c.shape.size_bytes()) * default_counter_bits / 1048576.0).c_str(),
                    default_counter_bits);
      if (o != op::add)
        std::printf("; filled with %s keys, predicted FPR %.3f%%", with_commas(c.capacity).c_str(),
                    100 * c.predicted_fpr);
      std::printf(")\n");
      std::printf("  %-6s %-10s %10s %12s %8s %8s  %-18s %s\n", "batch", "backend", "time/call", "keys/s",
                  "vs cpu1", "vs CPU", o == op::contains ? "FPR meas/pred" : "FPR", "verify");
      for (const std::uint64_t b : run.batches) {
        for (const engine e : run.engines) {
          const row* w = find_row(r.rows, k, e, o, c.mib, b);
          if (w == nullptr) continue;
          const std::string fpr = o == op::contains ? format("%.3f%%", 100 * w->measured_fpr) +
                                                          format(" / %.3f%%", 100 * w->predicted_fpr)
                                                    : "-";
          const std::string speed = std::isfinite(w->speedup) ? format("%.2fx", w->speedup) : "-";
          const std::string vs_cpu =
              std::isfinite(w->speedup_best_cpu) ? format("%.2fx", w->speedup_best_cpu) : "-";
          std::printf("  %-6s %-10s %10s %12s %8s %8s  %-18s %s\n", batch_text(b).c_str(), id_of(e),
                      time_text(w->time.median_s).c_str(), human(w->keys_per_s).c_str(), speed.c_str(),
                      vs_cpu.c_str(), fpr.c_str(), w->verification.c_str());
        }
      }
      for (const engine e : run.engines) {
        const time_fit fit = fit_time(r.rows, k, e, o, c.mib);
        if (fit.valid())
          std::printf("  model %-10s t(n) = %s + n / %s keys/s\n", id_of(e), time_text(fit.fixed_s).c_str(),
                      human(fit.keys_per_s).c_str());
      }
      for (const crossover& x : r.crossovers) {
        if (x.filter_kind != k || x.operation != o || x.filter_mib != c.mib) continue;
        if (x.no_gpu) {
          std::printf("  crossover: %s\n", x.text.c_str());
          continue;
        }
        std::printf("  crossover %-10s %s", id_of(x.gpu), x.text.c_str());
        if (std::isfinite(x.fitted_batch))
          std::printf(" (fits: from %s keys)",
                      with_commas(static_cast<std::uint64_t>(std::ceil(std::max(1.0, x.fitted_batch)))).c_str());
        std::printf("\n");
      }
    }
  }
}

void print_kind_ratios(const sweep& run, const results& r) {
  if (r.ratios.empty()) return;
  std::printf("\ncounting vs plain: time per call of the counting filter / the plain filter's (same layout, "
              "keys and batch; below 1 the counting filter is faster)\n");
  std::printf("  %-10s %-10s %-6s", "op", "filter", "batch");
  for (const engine e : run.engines) std::printf(" %10s", id_of(e));
  std::printf("\n");
  for (std::size_t i = 0; i < r.ratios.size();) {
    const kind_ratio& first = r.ratios[i];
    std::printf("  %-10s %-10s %-6s", to_string(first.operation), mib_text(first.filter_mib).c_str(),
                batch_text(first.batch).c_str());
    for (const engine e : run.engines) {
      std::string cell = "-";
      for (std::size_t j = i; j < r.ratios.size(); ++j) {
        const kind_ratio& x = r.ratios[j];
        if (x.operation != first.operation || x.filter_mib != first.filter_mib || x.batch != first.batch) break;
        if (x.backend == e) cell = format("%.2fx", x.counting_over_plain);
      }
      std::printf(" %10s", cell.c_str());
    }
    std::printf("\n");
    while (i < r.ratios.size() && r.ratios[i].operation == first.operation &&
           r.ratios[i].filter_mib == first.filter_mib && r.ratios[i].batch == first.batch)
      ++i;
  }
}

std::string json_report(const sweep& run, const machine& m, const results& r) {
  std::ostringstream j;
  j << "{\n  \"tool\": \"gbf bench\",\n  \"statistic\": \"median\",\n  \"repeat\": " << run.repeat
    << ",\n  \"fpp\": " << json_number(run.fpp) << ",\n";
  j << "  \"kinds\": [";
  for (std::size_t i = 0; i < run.kinds.size(); ++i) j << (i ? ", " : "") << json_string(to_string(run.kinds[i]));
  j << "], \"counter_bits\": " << default_counter_bits << ",\n";
  j << "  \"machine\": {\"cpu_model\": " << json_string(m.cpu_model)
    << ", \"hardware_threads\": " << m.hardware_threads << ", \"cpu_threads\": " << run.cpu_threads
    << ", \"avx2\": " << (m.avx2 ? "true" : "false") << ", \"avx512\": " << (m.avx512 ? "true" : "false")
    << ", \"gpu\": {\"available\": " << (m.gpu.available ? "true" : "false")
    << ", \"description\": " << json_string(m.gpu.description) << "}},\n";
  j << "  \"filters\": [";
  for (std::size_t i = 0; i < run.cases.size(); ++i) {
    const filter_case& c = run.cases[i];
    j << (i ? ",\n    " : "\n    ") << "{\"filter_mib\": " << json_number(c.mib)
      << ", \"bytes\": " << c.shape.size_bytes() << ", \"layout\": " << json_string(to_string(c.shape))
      << ", \"words_per_block\": " << c.shape.words_per_block << ", \"bits_per_key\": " << c.shape.bits_per_key
      << ", \"seed\": " << c.shape.seed << ", \"num_blocks\": " << c.shape.num_blocks
      << ", \"capacity\": " << c.capacity << ", \"predicted_fpr\": " << json_number(c.predicted_fpr) << "}";
  }
  j << "\n  ],\n  \"rows\": [";
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const row& w = r.rows[i];
    j << (i ? ",\n    " : "\n    ") << "{\"kind\": " << json_string(to_string(w.filter_kind))
      << ", \"backend\": " << json_string(id_of(w.backend))
      << ", \"op\": " << json_string(to_string(w.operation)) << ", \"filter_mib\": " << json_number(w.filter_mib)
      << ", \"filter_bytes\": " << w.filter_bytes << ", \"batch\": " << w.batch
      << ", \"seconds\": " << json_number(w.time.median_s) << ", \"best_seconds\": " << json_number(w.time.best_s)
      << ", \"calls_per_run\": " << w.time.calls_per_run << ", \"keys_per_s\": " << json_number(w.keys_per_s)
      << ", \"speedup_vs_cpu1\": " << json_number(w.speedup)
      << ", \"speedup_vs_best_cpu\": " << json_number(w.speedup_best_cpu);
    if (w.operation == op::contains)
      j << ", \"false_positives\": " << w.positives << ", \"measured_fpr\": " << json_number(w.measured_fpr)
        << ", \"predicted_fpr\": " << json_number(w.predicted_fpr);
    j << ", \"verification\": " << json_string(w.ok ? "ok" : "mismatch")
      << ", \"verification_detail\": " << json_string(w.ok ? w.checked : w.verification) << "}";
  }
  j << "\n  ],\n  \"crossover\": [";
  for (std::size_t i = 0; i < r.crossovers.size(); ++i) {
    const crossover& x = r.crossovers[i];
    j << (i ? ",\n    " : "\n    ") << "{\"kind\": " << json_string(to_string(x.filter_kind))
      << ", \"op\": " << json_string(to_string(x.operation)) << ", \"filter_mib\": " << json_number(x.filter_mib)
      << ", \"gpu_backend\": " << (x.no_gpu ? "null" : json_string(id_of(x.gpu)))
      << ", \"batch\": " << (x.batch ? std::to_string(x.batch) : "null")
      << ", \"model_batch\": " << json_number(x.fitted_batch) << ", \"text\": " << json_string(x.text) << "}";
  }
  j << "\n  ],\n  \"counting_vs_plain\": [";
  for (std::size_t i = 0; i < r.ratios.size(); ++i) {
    const kind_ratio& x = r.ratios[i];
    j << (i ? ",\n    " : "\n    ") << "{\"op\": " << json_string(to_string(x.operation))
      << ", \"filter_mib\": " << json_number(x.filter_mib) << ", \"backend\": " << json_string(id_of(x.backend))
      << ", \"batch\": " << x.batch << ", \"time_ratio\": " << json_number(x.counting_over_plain) << "}";
  }
  j << (r.ratios.empty() ? "" : "\n  ") << "],\n  \"skipped\": [";
  for (std::size_t i = 0; i < r.skipped.size(); ++i) j << (i ? ", " : "") << json_string(r.skipped[i]);
  j << "]\n}\n";
  return j.str();
}

std::string gnuplot_script(const std::string& png, const sweep& run, const machine& m,
                           const results& r) {
  const std::string title =
      m.cpu_model + (m.gpu.available ? " vs " + m.gpu.description : " (no GPU: " + m.gpu.description + ")");
  const std::size_t cols = panels_of(run).size();
  const std::size_t panels = run.cases.size() * cols;
  const std::size_t lines = (panels + cols - 1) / cols;
  std::ostringstream s;
  s << "# gbf bench plot: keys/s against batch size, one line per backend.\n"
    << "# Made by gbf bench; run `gnuplot this-file` to redraw.\n";
  s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n  set terminal pngcairo enhanced size "
    << 640 * cols << "," << 430 * lines + 40 << " font 'sans,9'\n} else {\n  set terminal png size "
    << 640 * cols << "," << 430 * lines + 40 << "\n}\n";
  s << "set output " << json_string(png) << "\n";
  s << "set logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\nset grid\n"
    << "set xlabel 'batch size (keys)'\nset ylabel 'keys/s'\nset key top left\n";
  s << "set multiplot layout " << lines << "," << cols << " title " << json_string("gbf bench: " + title)
    << " noenhanced\n";
  for (std::size_t ci = 0; ci < run.cases.size(); ++ci) {
    const filter_case& c = run.cases[ci];
    for (const auto& [k, o] : panels_of(run)) {
      s << "unset arrow\nunset label\n";
      s << "set title "
        << json_string((names_kinds(run) ? std::string(to_string(k)) + " " : std::string()) + to_string(o) + ", " +
                       mib_text(c.mib) + " filter")
        << " noenhanced\n";
      double label_y = 0.92;
      for (const crossover& x : r.crossovers) {
        if (x.filter_kind != k || x.operation != o || x.filter_mib != c.mib) continue;
        if (x.no_gpu) continue;  // said once, in the plot's title
        if (x.batch != 0) {
          s << "set arrow from " << x.batch << ", graph 0 to " << x.batch
            << ", graph 1 nohead dt 2 lw 1.5 lc rgb 'red'\n";
          s << "set label " << json_string(std::string(id_of(x.gpu)) + " wins from " + batch_text(x.batch))
            << " at " << x.batch << ", graph " << label_y << " offset 0.5,0 noenhanced textcolor rgb 'red'\n";
        } else {
          s << "set label " << json_string(std::string(id_of(x.gpu)) + ": " + x.text)
            << " at graph 0.03, graph " << label_y - 0.8 << " noenhanced textcolor rgb 'gray40'\n";
        }
        label_y -= 0.07;
      }
      std::string plot;
      for (const engine e : run.engines) {
        std::string data;
        for (const row& w : r.rows)
          if (w.filter_kind == k && w.backend == e && w.operation == o && w.filter_mib == c.mib)
            data += std::to_string(w.batch) + " " + json_number(w.keys_per_s) + "\n";
        if (data.empty()) continue;
        // Names of letters, digits and '_' only: "remove-unchecked" becomes "remove_unchecked".
        std::string op_name = to_string(o);
        std::replace(op_name.begin(), op_name.end(), '-', '_');
        const std::string block = "$d_" + std::to_string(ci) + "_" + (k == kind::plain ? "" : "counting_") +
                                  op_name + "_" + std::to_string(static_cast<int>(e));
        s << block << " << EOD\n" << data << "EOD\n";
        plot += (plot.empty() ? "plot " : ", ") + block + " using 1:2 with linespoints lw 2 title '" +
                id_of(e) + "'";
      }
      s << (plot.empty() ? "plot 1/0 notitle" : plot) << "\n";
    }
  }
  s << "unset multiplot\n";
  return s.str();
}

void write_report_file(gbf::atomic_file& file, const std::string& text) {
  file.write(text.data(), text.size());
  file.commit();
}

std::string plot_script_path(const std::string& png) {
  std::string gp = png;
  if (gp.size() > 4 && gp.compare(gp.size() - 4, 4, ".png") == 0) gp.resize(gp.size() - 4);
  return gp + ".gp";
}

bool write_plot(const std::string& png, gbf::atomic_file& script_file, const std::string& script) {
  const std::string gp = plot_script_path(png);
  write_report_file(script_file, script);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr,
                 "gbf bench: gnuplot not found, no PNG written; the plot script is %s "
                 "(install gnuplot-nox, e.g. scripts/setup.sh, then run: gnuplot %s)\n",
                 gp.c_str(), gp.c_str());
    return false;
  }
  if (std::system(("gnuplot " + shell_quote(gp)).c_str()) != 0) {
    std::fprintf(stderr, "gbf bench: gnuplot failed on %s; no PNG written\n", gp.c_str());
    return false;
  }
  std::fprintf(stderr, "gbf bench: plot written to %s (script %s)\n", png.c_str(), gp.c_str());
  return true;
}

}  // namespace gbf::cli::bench
