#include "cli/bench_report.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/text.hpp"
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

}  // namespace

machine this_machine(const gpu_status& gpu) {
  machine m;
  m.cpu_model = cpu_model_name();
  m.hardware_threads = std::thread::hardware_concurrency();
  m.avx2 = cpu_has_avx2();
  m.gpu = gpu;
  return m;
}

void print_header(const sweep& run, const machine& m, const std::vector<std::string>& skipped) {
  std::printf("gbf bench: keys/s per backend, op, filter size and batch size (median of %u runs after a warm-up)\n",
              run.repeat);
  std::printf("cpu: %s, %u hardware threads, AVX2 %s; 'cpu' rows use %u threads\n", m.cpu_model.c_str(),
              m.hardware_threads, m.avx2 ? "yes" : "no", run.cpu_threads);
  std::printf("gpu: %s\n", m.gpu.available ? m.gpu.description.c_str()
                                           : ("none (" + m.gpu.description + "); CPU rows only").c_str());
  std::printf("layout: %s per filter below; contains rows fill the filter to its capacity at fpp %g\n",
              to_string(run.cases.front().shape).c_str(), run.fpp);
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
    for (const op o : run.ops) {
      std::printf("\n%s, %s filter (%s blocks of %u B", to_string(o), mib_text(c.mib).c_str(),
                  with_commas(c.shape.num_blocks).c_str(), c.shape.words_per_block * 4);
      if (o == op::contains)
        std::printf("; filled with %s keys, predicted FPR %.3f%%", with_commas(c.capacity).c_str(),
                    100 * c.predicted_fpr);
      std::printf(")\n");
      std::printf("  %-6s %-10s %10s %12s %8s %8s  %-18s %s\n", "batch", "backend", "time/call", "keys/s",
                  "vs cpu1", "vs CPU", o == op::contains ? "FPR meas/pred" : "FPR", "verify");
      for (const std::uint64_t b : run.batches) {
        for (const engine e : run.engines) {
          const row* w = find_row(r.rows, e, o, c.mib, b);
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
        const time_fit fit = fit_time(r.rows, e, o, c.mib);
        if (fit.valid())
          std::printf("  model %-10s t(n) = %s + n / %s keys/s\n", id_of(e), time_text(fit.fixed_s).c_str(),
                      human(fit.keys_per_s).c_str());
      }
      for (const crossover& x : r.crossovers) {
        if (x.operation != o || x.filter_mib != c.mib) continue;
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

std::string json_report(const sweep& run, const machine& m, const results& r) {
  std::ostringstream j;
  j << "{\n  \"tool\": \"gbf bench\",\n  \"statistic\": \"median\",\n  \"repeat\": " << run.repeat
    << ",\n  \"fpp\": " << json_number(run.fpp) << ",\n";
  j << "  \"machine\": {\"cpu_model\": " << json_string(m.cpu_model)
    << ", \"hardware_threads\": " << m.hardware_threads << ", \"cpu_threads\": " << run.cpu_threads
    << ", \"avx2\": " << (m.avx2 ? "true" : "false")
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
    j << (i ? ",\n    " : "\n    ") << "{\"backend\": " << json_string(id_of(w.backend))
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
    j << (i ? ",\n    " : "\n    ") << "{\"op\": " << json_string(to_string(x.operation))
      << ", \"filter_mib\": " << json_number(x.filter_mib)
      << ", \"gpu_backend\": " << (x.no_gpu ? "null" : json_string(id_of(x.gpu)))
      << ", \"batch\": " << (x.batch ? std::to_string(x.batch) : "null")
      << ", \"model_batch\": " << json_number(x.fitted_batch) << ", \"text\": " << json_string(x.text) << "}";
  }
  j << "\n  ],\n  \"skipped\": [";
  for (std::size_t i = 0; i < r.skipped.size(); ++i) j << (i ? ", " : "") << json_string(r.skipped[i]);
  j << "]\n}\n";
  return j.str();
}

std::string gnuplot_script(const std::string& png, const sweep& run, const machine& m,
                           const results& r) {
  const std::string title =
      m.cpu_model + (m.gpu.available ? " vs " + m.gpu.description : " (no GPU: " + m.gpu.description + ")");
  const std::size_t panels = run.cases.size() * run.ops.size();
  const std::size_t cols = run.ops.size();
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
    for (const op o : run.ops) {
      s << "unset arrow\nunset label\n";
      s << "set title " << json_string(std::string(to_string(o)) + ", " + mib_text(c.mib) + " filter")
        << " noenhanced\n";
      double label_y = 0.92;
      for (const crossover& x : r.crossovers) {
        if (x.operation != o || x.filter_mib != c.mib) continue;
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
          if (w.backend == e && w.operation == o && w.filter_mib == c.mib)
            data += std::to_string(w.batch) + " " + json_number(w.keys_per_s) + "\n";
        if (data.empty()) continue;
        const std::string block = "$d_" + std::to_string(ci) + "_" + to_string(o) + "_" +
                                  std::to_string(static_cast<int>(e));
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

void write_report_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw io_error("cannot write '" + tmp + "'", errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw io_error("cannot rename '" + tmp + "' to '" + path + "'", errno);
}

bool write_plot(const std::string& png, const std::string& script) {
  std::string gp = png;
  if (gp.size() > 4 && gp.compare(gp.size() - 4, 4, ".png") == 0) gp.resize(gp.size() - 4);
  gp += ".gp";
  write_report_file(gp, script);
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
