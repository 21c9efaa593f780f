#include "cli/bench_analysis.hpp"

#include <algorithm>

namespace gbf::cli::bench {

time_fit fit_time(const std::vector<row>& rows, kind k, engine e, op o, double mib) {
  const row* first = nullptr;
  const row* last = nullptr;
  for (const row& r : rows) {
    if (r.filter_kind != k || r.backend != e || r.operation != o || r.filter_mib != mib) continue;
    if (first == nullptr || r.batch < first->batch) first = &r;
    if (last == nullptr || r.batch > last->batch) last = &r;
  }
  time_fit fit;
  if (first == nullptr || first == last || last->time.median_s <= first->time.median_s) return fit;
  fit.keys_per_s = static_cast<double>(last->batch - first->batch) /
                   (last->time.median_s - first->time.median_s);
  fit.fixed_s =
      std::max(0.0, first->time.median_s - static_cast<double>(first->batch) / fit.keys_per_s);
  return fit;
}

void set_speedups(std::vector<row>& rows) {
  for (row& r : rows) {
    if (const row* base = find_row(rows, r.filter_kind, engine::cpu1, r.operation, r.filter_mib, r.batch))
      r.speedup = r.keys_per_s / base->keys_per_s;
    if (is_cpu(r.backend)) continue;
    double best_cpu = 0;
    for (const engine e : {engine::cpu1, engine::cpu})
      if (const row* c = find_row(rows, r.filter_kind, e, r.operation, r.filter_mib, r.batch))
        best_cpu = std::max(best_cpu, c->keys_per_s);
    if (best_cpu > 0) r.speedup_best_cpu = r.keys_per_s / best_cpu;
  }
}

std::vector<kind_ratio> counting_vs_plain(const std::vector<row>& rows, const sweep& run) {
  std::vector<kind_ratio> out;
  for (const filter_case& c : run.cases)
    for (const op o : run.ops)
      for (const std::uint64_t b : run.batches)
        for (const engine e : run.engines) {
          const row* plain = find_row(rows, kind::plain, e, o, c.mib, b);
          const row* counting = find_row(rows, kind::counting, e, o, c.mib, b);
          if (plain == nullptr || counting == nullptr) continue;
          kind_ratio x;
          x.operation = o;
          x.filter_mib = c.mib;
          x.backend = e;
          x.batch = b;
          x.counting_over_plain = counting->time.median_s / plain->time.median_s;
          out.push_back(x);
        }
  return out;
}

namespace {

/// Smallest batch from which `gpu` beats the best CPU row at every larger batch
/// (0: it does not win at the largest); `measured` says whether any batch had both.
std::uint64_t measured_crossover(const std::vector<row>& rows, kind k, engine gpu, op o, double mib,
                                 const std::vector<engine>& cpus,
                                 const std::vector<std::uint64_t>& batches, bool* measured) {
  std::uint64_t from = 0;
  *measured = false;
  for (auto it = batches.rbegin(); it != batches.rend(); ++it) {
    const row* g = find_row(rows, k, gpu, o, mib, *it);
    double best_cpu = 0;
    for (const engine c : cpus)
      if (const row* r = find_row(rows, k, c, o, mib, *it)) best_cpu = std::max(best_cpu, r->keys_per_s);
    if (g == nullptr || best_cpu == 0) continue;
    *measured = true;
    if (g->keys_per_s <= best_cpu) break;
    from = *it;
  }
  return from;
}

/// The largest n* over `cpus` (see the header); NaN when a fit is missing or a
/// CPU engine's rate is not below the GPU's.
double fitted_crossover(const std::vector<row>& rows, kind k, engine gpu, op o, double mib,
                        const std::vector<engine>& cpus) {
  const time_fit g = fit_time(rows, k, gpu, o, mib);
  double n_star = 0;
  for (const engine c : cpus) {
    const time_fit f = fit_time(rows, k, c, o, mib);
    if (!g.valid() || !f.valid() || g.keys_per_s <= f.keys_per_s) return NAN;
    n_star = std::max(n_star, (g.fixed_s - f.fixed_s) / (1 / f.keys_per_s - 1 / g.keys_per_s));
  }
  return n_star;
}

}  // namespace

std::vector<crossover> find_crossovers(const std::vector<row>& rows, const sweep& run,
                                       const gpu_status& gpu) {
  std::vector<engine> cpus;
  for (const engine e : run.engines)
    if (is_cpu(e)) cpus.push_back(e);
  std::vector<crossover> out;
  for (const filter_case& c : run.cases) {
    for (const kind k : run.kinds) {
      for (const op o : run.ops) {
        if (!has_op(k, o)) continue;
        if (!gpu.available) {
          crossover x;
          x.filter_kind = k;
          x.operation = o;
          x.filter_mib = c.mib;
          x.no_gpu = true;
          x.text = "no GPU: " + gpu.description;
          out.push_back(x);
          continue;
        }
        for (const engine g : {engine::gpu_device, engine::gpu_host}) {
          if (std::find(run.engines.begin(), run.engines.end(), g) == run.engines.end()) continue;
          crossover x;
          x.filter_kind = k;
          x.operation = o;
          x.filter_mib = c.mib;
          x.gpu = g;
          if (cpus.empty()) {
            x.text = "no CPU row to compare with (--backends)";
            out.push_back(x);
            continue;
          }
          bool measured = false;
          x.batch = measured_crossover(rows, k, g, o, c.mib, cpus, run.batches, &measured);
          x.fitted_batch = fitted_crossover(rows, k, g, o, c.mib, cpus);
          x.text = !measured        ? "not measured"
                   : x.batch == 0   ? "GPU never wins in the measured range"
                                    : "GPU faster than the best CPU row from batch " + batch_text(x.batch);
          out.push_back(x);
        }
      }
    }
  }
  return out;
}

}  // namespace gbf::cli::bench
