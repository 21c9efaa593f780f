// `gbf bench`: CPU versus GPU over a grid of batch sizes and filter sizes.
//
// For every filter size (an exact layout of that many bytes) and every backend:
//   add rows      the filter is cleared, then a batch of keys is added; every
//                 added key must be found afterwards and the bits must equal
//                 those a CPU built from the same keys;
//   contains rows the filter is filled with `capacity` keys (the most its size
//                 holds at --fpp, found by bisection on expected_fpr), then a
//                 batch of keys that were never added is probed: every hit is a
//                 false positive, compared with expected_fpr(layout, capacity).
// Keys are SplitMix64's finalizer (a bijection) over disjoint counter ranges, so
// fill keys, add keys and probe keys are distinct. Each row is timed as the
// median of --repeat runs after a warm-up; a run repeats the call until it
// lasts at least 10 ms (small batches), and reports the time of one call.
//
// Verification. The first backend to produce a result (CPU 1 thread by
// default) is the reference: later backends must hold the same bits after the
// same adds and the same fill, and give the same answers. A GPU row never
// takes its reference from a GPU: without a CPU row it is built on the CPU.
// GPU contains rows are also recomputed on the CPU with filter::verify_contains.
//
// Crossover. Per (op, filter size) and GPU variant: the smallest measured batch
// from which the GPU is faster than the best CPU row at every larger measured
// batch. Cost model (reported beside it, what an automatic backend would use):
// t(n) = a + n / R per backend, fitted through the smallest and the largest
// measured batch (a: fixed cost of a call, R: asymptotic keys/s); the GPU wins
// from n* = (a_gpu - a_cpu) / (1 / R_cpu - 1 / R_gpu) when R_gpu > R_cpu.
#include "cli/bench.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/stopwatch.hpp"
#include "cli/synthetic_keys.hpp"
#include "cli/text.hpp"
#include "gbf/cost_model.hpp"
#include "gbf/filter.hpp"
#include "host/backend.hpp"
#if defined(GBF_HAS_CUDA)
#include "host/gpu/runtime.hpp"
#endif

namespace gbf::cli {
namespace {

// ---------------------------------------------------------------------------
// Keys, timing, digests
// ---------------------------------------------------------------------------

// Disjoint counter ranges: fill keys [0, capacity), add keys, probe keys.
constexpr std::uint64_t add_base = 1ULL << 48;
constexpr std::uint64_t probe_base = 1ULL << 49;

struct timing {
  double median_s = 0;  ///< Median time of one call.
  double best_s = 0;    ///< Best time of one call.
  std::uint64_t calls_per_run = 1;
};

/// One warm-up call, then `repeat` runs of enough calls to last >= 10 ms each.
template <class F>
timing time_op(F&& op, unsigned repeat) {
  constexpr double min_run_s = 0.010;
  const double warm = seconds_of(op);
  timing t;
  if (warm < min_run_s)
    t.calls_per_run = static_cast<std::uint64_t>(
        std::min(1e6, std::ceil(min_run_s / std::max(warm, 1e-7))));
  std::vector<double> per_call;
  for (unsigned r = 0; r < repeat; ++r) {
    per_call.push_back(seconds_of([&] {
                         for (std::uint64_t c = 0; c < t.calls_per_run; ++c) op();
                       }) /
                       static_cast<double>(t.calls_per_run));
  }
  std::sort(per_call.begin(), per_call.end());
  t.best_s = per_call.front();
  t.median_s = per_call[per_call.size() / 2];
  return t;
}

std::uint64_t digest(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = bytes;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = splitmix64(h ^ w);
  }
  for (; i < bytes; ++i) h = splitmix64(h ^ p[i]);
  return h;
}

std::uint64_t bits_digest(const filter& f) {
  const std::vector<std::uint32_t> w = f.words();
  return digest(w.data(), w.size() * sizeof(std::uint32_t));
}

// ---------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string human_rate(double v) {
  if (v >= 1e9) return fmt("%.2f G", v / 1e9);
  if (v >= 1e6) return fmt("%.1f M", v / 1e6);
  if (v >= 1e3) return fmt("%.1f k", v / 1e3);
  return fmt("%.0f ", v);
}

std::string human_time(double s) {
  if (s >= 1) return fmt("%.3f s", s);
  if (s >= 1e-3) return fmt("%.2f ms", s * 1e3);
  return fmt("%.1f us", s * 1e6);
}

std::string human_batch(std::uint64_t n) {
  const double e = std::log10(static_cast<double>(n));
  if (n >= 1000 && std::fabs(e - std::round(e)) < 1e-9) return "1e" + std::to_string(std::lround(e));
  return with_commas(n);
}

std::string mib_text(double mib) { return fmt("%g MiB", mib); }

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt("%.9g", v);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

std::uint64_t parse_count(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= 1) || v > 1e12 ||
      v != std::floor(v))
    throw usage_error("--batches: '" + text + "' is not a whole number of keys in [1, 1e12]");
  return static_cast<std::uint64_t>(v);
}

double parse_mib(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v > 0) || v > 128 * 1024)
    throw usage_error("--filter-mib: '" + text + "' is not a size in MiB in (0, 131072]");
  return v;
}

enum class op { add, contains };
const char* to_string(op o) { return o == op::add ? "add" : "contains"; }

// automatic: backend::automatic with host keys (on a GPU machine, the GPU plus a
// CPU mirror routed by the cost model; without one, the CPU).
enum class engine { cpu1, cpu, gpu_device, gpu_host, automatic };
const char* id_of(engine e) {
  switch (e) {
    case engine::cpu1: return "cpu1";
    case engine::cpu: return "cpu";
    case engine::gpu_device: return "gpu-device";
    case engine::gpu_host: return "gpu-host";
    case engine::automatic: return "auto";
  }
  return "?";
}
bool is_gpu(engine e) { return e == engine::gpu_device || e == engine::gpu_host; }
/// The engines whose results are references and whose rows the GPU rows are compared with.
bool is_cpu(engine e) { return e == engine::cpu1 || e == engine::cpu; }

// ---------------------------------------------------------------------------
// Machine
// ---------------------------------------------------------------------------

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "unknown" : line.substr(start);
      }
    }
  }
  return "unknown";
}

/// MemAvailable in bytes (0 when unknown).
std::uint64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

/// Free device memory in bytes (0 without CUDA).
std::uint64_t device_free_bytes() {
#if defined(GBF_HAS_CUDA)
  std::size_t free_bytes = 0;
  std::size_t total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) return free_bytes;
#endif
  return 0;
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

struct row {
  engine backend = engine::cpu1;
  op operation = op::add;
  double filter_mib = 0;
  std::uint64_t filter_bytes = 0;
  std::uint64_t batch = 0;
  timing time;
  double keys_per_s = 0;
  double speedup = NAN;           ///< Over cpu1 at the same (op, filter, batch).
  double speedup_best_cpu = NAN;  ///< GPU and auto rows: over the faster of cpu1 and cpu there.
  std::uint64_t positives = 0;
  double measured_fpr = NAN;
  double predicted_fpr = NAN;
  bool ok = true;
  std::string verification;  ///< "ok" or what went wrong.
  std::string checked;       ///< What was compared.
  std::string routing;       ///< auto rows: where the automatic filter ran this row's calls.
  std::string routed_by;     ///< auto rows with a GPU: the cost model the routing used.
};

struct filter_case {
  double mib = 0;
  layout shape;
  std::uint64_t capacity = 0;
  double predicted_fpr = 0;
};

struct crossover {
  op operation = op::add;
  double filter_mib = 0;
  engine gpu = engine::gpu_device;
  std::uint64_t batch = 0;  ///< 0 = none.
  std::string text;
  double model_batch = NAN;  ///< Cost-model crossover (NaN = none).
};

struct fit {
  double fixed_s = NAN;  ///< a
  double rate = NAN;     ///< R, keys/s
};

/// Largest capacity whose expected FPR in `l` stays <= fpp (bisection).
std::uint64_t capacity_for(const layout& l, double fpp) {
  std::uint64_t lo = 0;
  std::uint64_t hi = l.num_bits();
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (expected_fpr(l, static_cast<double>(mid)) <= fpp)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

struct reference {
  std::string by;
  std::uint64_t value = 0;
};

/// Where an automatic filter ran the calls between two dispatch snapshots, e.g.
/// "auto ran 12 calls on the CPU, 1 on the GPU; 1 copy to the CPU".
std::string routing_text(const dispatch_stats& before, const dispatch_stats& after) {
  if (!after.mirrored) return "auto ran everything on its one backend";
  std::string text = "auto ran " + with_commas(after.cpu_batches - before.cpu_batches) + " calls on the CPU, " +
                     with_commas(after.gpu_batches - before.gpu_batches) + " on the GPU";
  const std::uint64_t to_cpu = after.copies_to_cpu - before.copies_to_cpu;
  const std::uint64_t to_gpu = after.copies_to_gpu - before.copies_to_gpu;
  const std::uint64_t replays = after.replays - before.replays;
  if (to_cpu) text += "; " + with_commas(to_cpu) + " cop" + (to_cpu == 1 ? "y" : "ies") + " to the CPU";
  if (to_gpu) text += "; " + with_commas(to_gpu) + " cop" + (to_gpu == 1 ? "y" : "ies") + " to the GPU";
  if (replays) text += "; " + with_commas(replays) + " log replay" + (replays == 1 ? "" : "s");
  if (!after.mirror_note.empty()) text += "; " + after.mirror_note;
  return text;
}

std::optional<cost_model> fit_cost_model(const std::vector<row>& rows, const std::vector<filter_case>& cases,
                                         std::string* why);

class bench {
 public:
  bench(const bench_options& opts, std::vector<std::uint64_t> batches, std::vector<filter_case> cases,
        std::vector<op> ops, std::vector<engine> engines, const gpu_status& gpu)
      : opts_(opts), batches_(std::move(batches)), cases_(std::move(cases)), ops_(std::move(ops)),
        engines_(std::move(engines)), gpu_(gpu) {
    const std::uint64_t max_batch = batches_.empty() ? 0 : batches_.back();
    gen_threads_ = std::max(1u, std::thread::hardware_concurrency());
    add_keys_.resize(max_batch);
    probe_keys_.resize(max_batch);
    found_.reset(new bool[max_batch]);
    make_distinct_keys(add_keys_.data(), add_base, max_batch, gen_threads_);
    make_distinct_keys(probe_keys_.data(), probe_base, max_batch, gen_threads_);
  }

  std::vector<row> rows;
  std::vector<std::string> skipped;

  void run() {
    for (const filter_case& c : cases_) {
      add_refs_.clear();
      contains_refs_.clear();
      fill_ref_.reset();
      for (const engine e : engines_) run_engine(c, e);
    }
  }

 private:
  options options_of(engine e) const {
    options o;
    o.where = is_gpu(e) ? backend::gpu : e == engine::automatic ? backend::automatic : backend::cpu;
    if (e == engine::cpu1) o.cpu_threads = 1;
    if (e == engine::cpu || e == engine::automatic) o.cpu_threads = opts_.threads;
    if (e == engine::automatic) o.costs = auto_costs_;
    return o;
  }

  void fill(filter& f, const filter_case& c) const {
    std::vector<std::uint64_t> chunk(std::min<std::uint64_t>(c.capacity, 1ULL << 24));
    for (std::uint64_t start = 0; start < c.capacity; start += chunk.size()) {
      const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), c.capacity - start));
      make_distinct_keys(chunk.data(), start, m, gen_threads_);
      f.add(chunk.data(), m);
    }
  }

  /// The reference for `key` in `refs`, computed on the CPU by `make` when absent.
  template <class Make>
  const reference& reference_for(std::map<std::uint64_t, reference>& refs, std::uint64_t key,
                                 engine e, std::uint64_t value, Make&& make) {
    auto it = refs.find(key);
    if (it != refs.end()) return it->second;
    if (!is_cpu(e)) return refs.emplace(key, reference{"cpu", make()}).first->second;
    return refs.emplace(key, reference{id_of(e), value}).first->second;
  }

  void check(row& r, bool ok, const std::string& problem) {
    if (!ok) {
      r.ok = false;
      r.verification = r.verification == "ok" ? problem : r.verification + "; " + problem;
    }
  }

  void note(const std::string& text) {
    std::fprintf(stderr, "gbf bench: %s\n", text.c_str());
    skipped.push_back(text);
  }

  void run_engine(const filter_case& c, engine e) {
    if (is_gpu(e) || (e == engine::automatic && gpu_.available)) {
      const std::uint64_t free_bytes = device_free_bytes();
      if (free_bytes < c.shape.size_bytes() + (64ULL << 20)) {
        note(std::string("skipped ") + id_of(e) + " with the " + mib_text(c.mib) + " filter: " +
             "needs " + with_commas(c.shape.size_bytes() >> 20) + " MiB of device memory, " +
             with_commas(free_bytes >> 20) + " MiB free");
        return;
      }
    }
    std::fprintf(stderr, "gbf bench: %s, %s filter\n", id_of(e), mib_text(c.mib).c_str());
    if (e == engine::automatic && gpu_.available) choose_auto_costs(c);
    filter f(c.shape, options_of(e), c.capacity);
    for (const op o : ops_) {
      if (o == op::contains) {
        f.clear();
        fill(f, c);
        const std::uint64_t d = bits_digest(f);
        if (!fill_ref_) {
          if (!is_cpu(e)) {
            filter cpu(c.shape, options_of(engine::cpu), c.capacity);
            fill(cpu, c);
            fill_ref_ = reference{"cpu", bits_digest(cpu)};
          } else {
            fill_ref_ = reference{id_of(e), d};
          }
        }
        fill_ok_ = d == fill_ref_->value;
        // No false negatives among (a sample of) the fill keys.
        const std::size_t sample = static_cast<std::size_t>(std::min<std::uint64_t>(c.capacity, 1ULL << 20));
        std::vector<std::uint64_t> keys(sample);
        make_distinct_keys(keys.data(), 0, sample, gen_threads_);
        fill_found_ = f.count(keys.data(), sample) == sample;
      } else {
        f.clear();
      }
      for (const std::uint64_t b : batches_) run_row(c, e, o, f, b);
    }
  }

  /// The auto rows route by the model this run's 'cpu' and 'gpu-host' rows of
  /// the same filter size imply (the rows run before them, with the auto
  /// filter's thread count), so that a first run on a machine already shows
  /// calibrated routing; without those rows, by the cached model or the defaults.
  void choose_auto_costs(const filter_case& c) {
    std::string why;
    auto_costs_ = fit_cost_model(rows, {c}, &why);
    if (auto_costs_) {
      auto_costs_text_ = "fitted from this run's cpu and gpu-host rows";
    } else {
      auto_costs_ = cost_model::for_automatic_backend();
      auto_costs_text_ = auto_costs_->source + " (no fit in this run: " + why + ")";
    }
    std::fprintf(stderr, "gbf bench:   auto routes by the cost model %s\n", auto_costs_text_.c_str());
  }

  void run_row(const filter_case& c, engine e, op o, filter& f, std::uint64_t b) {
    row r;
    r.backend = e;
    r.operation = o;
    r.filter_mib = c.mib;
    r.filter_bytes = c.shape.size_bytes();
    r.batch = b;
    r.verification = "ok";
    const std::uint64_t* keys = o == op::add ? add_keys_.data() : probe_keys_.data();
    const std::size_t n = static_cast<std::size_t>(b);
    bool* found = found_.get();
    const dispatch_stats routed_before = f.dispatch();

#if defined(GBF_HAS_CUDA)
    detail::device_buffer<std::uint64_t> device_keys;
    detail::device_buffer<bool> device_found;
    if (e == engine::gpu_device) {
      const std::uint64_t need = b * (sizeof(std::uint64_t) + 1) + (64ULL << 20);
      const std::uint64_t free_bytes = device_free_bytes();
      if (free_bytes < need) {
        note("skipped " + std::string(id_of(e)) + " " + to_string(o) + " batch " + human_batch(b) +
             " (" + mib_text(c.mib) + " filter): needs " + with_commas(need >> 20) +
             " MiB of device memory, " + with_commas(free_bytes >> 20) + " MiB free");
        return;
      }
      device_keys = detail::device_buffer<std::uint64_t>(n);
      device_found = detail::device_buffer<bool>(n);
      GBF_CUDA_TRY(cudaMemcpy(device_keys.data(), keys, device_keys.size_bytes(), cudaMemcpyHostToDevice));
    }
    const std::uint64_t* op_keys = e == engine::gpu_device ? device_keys.data() : keys;
    bool* op_found = e == engine::gpu_device ? device_found.data() : found;
#else
    const std::uint64_t* op_keys = keys;
    bool* op_found = found;
#endif

    if (o == op::add) {
      f.clear();
      r.time = time_op([&] { f.add(op_keys, n); }, opts_.repeat);
      check(r, f.count(op_keys, n) == b, "false negatives: an added key is not found");
      const std::uint64_t d = bits_digest(f);
      const reference& ref = reference_for(add_refs_, b, e, d, [&] {
        filter cpu(c.shape, options_of(engine::cpu), c.capacity);
        cpu.add(keys, n);
        return bits_digest(cpu);
      });
      r.checked = ref.by == id_of(e) ? "no false negatives (reference bits)"
                                     : "no false negatives, bits = " + ref.by;
      check(r, d == ref.value, "bits differ from " + ref.by);
    } else {
      r.time = time_op([&] { f.contains(op_keys, n, op_found); }, opts_.repeat);
#if defined(GBF_HAS_CUDA)
      if (e == engine::gpu_device)
        GBF_CUDA_TRY(cudaMemcpy(found, device_found.data(), n, cudaMemcpyDeviceToHost));
#endif
      for (std::size_t i = 0; i < n; ++i) r.positives += found[i];
      r.measured_fpr = static_cast<double>(r.positives) / static_cast<double>(b);
      r.predicted_fpr = c.predicted_fpr;
      const std::uint64_t d = digest(found, n);
      const reference& ref = reference_for(contains_refs_, b, e, d, [&] {
        filter cpu(c.shape, options_of(engine::cpu), c.capacity);
        fill(cpu, c);
        std::unique_ptr<bool[]> answers(new bool[n]);
        cpu.contains(keys, n, answers.get());
        return digest(answers.get(), n);
      });
      check(r, fill_found_, "false negatives among the fill keys");
      check(r, fill_ok_, "filled bits differ from " + fill_ref_->by);
      check(r, d == ref.value, "answers differ from " + ref.by);
      r.checked = ref.by == id_of(e) ? "no false negatives (reference answers)"
                                     : "bits and answers = " + ref.by;
      if (!is_cpu(e)) {
        const verify_report v = f.verify_contains(keys, n, found);
        check(r, v.ok(), with_commas(v.mismatches) + " answers differ when recomputed on the CPU");
        r.checked += ", recomputed on the CPU";
      }
    }
    r.keys_per_s = static_cast<double>(b) / r.time.median_s;
    if (e == engine::automatic) r.routing = routing_text(routed_before, f.dispatch());
    if (e == engine::automatic && gpu_.available) r.routed_by = auto_costs_text_;
    std::fprintf(stderr, "gbf bench:   %-8s %-10s batch %-6s %10s keys/s  %s%s\n", to_string(o), id_of(e),
                 human_batch(b).c_str(), human_rate(r.keys_per_s).c_str(), r.verification.c_str(),
                 r.routing.empty() ? "" : ("; " + r.routing).c_str());
    rows.push_back(std::move(r));
  }

  const bench_options& opts_;
  std::vector<std::uint64_t> batches_;
  std::vector<filter_case> cases_;
  std::vector<op> ops_;
  std::vector<engine> engines_;
  gpu_status gpu_;
  unsigned gen_threads_ = 1;
  std::vector<std::uint64_t> add_keys_;
  std::vector<std::uint64_t> probe_keys_;
  std::unique_ptr<bool[]> found_;
  std::map<std::uint64_t, reference> add_refs_;
  std::map<std::uint64_t, reference> contains_refs_;
  std::optional<reference> fill_ref_;
  std::optional<cost_model> auto_costs_;  // the auto rows' model (GPU machines only)
  std::string auto_costs_text_;
  bool fill_ok_ = true;
  bool fill_found_ = true;
};

// ---------------------------------------------------------------------------
// Analysis: speedups, crossovers, cost model
// ---------------------------------------------------------------------------

const row* find_row(const std::vector<row>& rows, engine e, op o, double mib, std::uint64_t b) {
  for (const row& r : rows)
    if (r.backend == e && r.operation == o && r.filter_mib == mib && r.batch == b) return &r;
  return nullptr;
}

/// t(n) = a + n / R through the smallest and the largest batch of (e, o, mib) up
/// to `max_batch` keys.
fit fit_model(const std::vector<row>& rows, engine e, op o, double mib,
              std::uint64_t max_batch = UINT64_MAX) {
  const row* first = nullptr;
  const row* last = nullptr;
  for (const row& r : rows) {
    if (r.backend != e || r.operation != o || r.filter_mib != mib || r.batch > max_batch) continue;
    if (first == nullptr || r.batch < first->batch) first = &r;
    if (last == nullptr || r.batch > last->batch) last = &r;
  }
  fit m;
  if (first == nullptr || first == last || last->time.median_s <= first->time.median_s) return m;
  m.rate = static_cast<double>(last->batch - first->batch) / (last->time.median_s - first->time.median_s);
  m.fixed_s = std::max(0.0, first->time.median_s - static_cast<double>(first->batch) / m.rate);
  return m;
}

std::vector<crossover> crossovers(const std::vector<row>& rows, const std::vector<filter_case>& cases,
                                  const std::vector<op>& ops, const std::vector<engine>& engines,
                                  const std::vector<std::uint64_t>& batches, const gpu_status& gpu) {
  std::vector<crossover> out;
  std::vector<engine> cpus;
  for (const engine e : engines)
    if (is_cpu(e)) cpus.push_back(e);
  for (const filter_case& c : cases) {
    for (const op o : ops) {
      for (const engine g : {engine::gpu_device, engine::gpu_host}) {
        crossover x;
        x.operation = o;
        x.filter_mib = c.mib;
        x.gpu = g;
        if (!gpu.available) {
          x.text = "no GPU: " + gpu.description;
          out.push_back(x);
          break;  // one line per (op, filter) is enough
        }
        if (std::find(engines.begin(), engines.end(), g) == engines.end()) continue;
        if (cpus.empty()) {
          x.text = "no CPU row to compare with (--backends)";
          out.push_back(x);
          continue;
        }
        // Smallest batch from which the GPU beats the best CPU row at every larger batch.
        std::uint64_t from = 0;
        bool measured = false;
        for (auto it = batches.rbegin(); it != batches.rend(); ++it) {
          const row* gr = find_row(rows, g, o, c.mib, *it);
          double best_cpu = 0;
          for (const engine ce : cpus)
            if (const row* cr = find_row(rows, ce, o, c.mib, *it)) best_cpu = std::max(best_cpu, cr->keys_per_s);
          if (gr == nullptr || best_cpu == 0) continue;
          measured = true;
          if (gr->keys_per_s > best_cpu)
            from = *it;
          else
            break;
        }
        x.batch = from;
        if (!measured)
          x.text = "not measured";
        else if (from == 0)
          x.text = "GPU never wins in the measured range";
        else
          x.text = "GPU faster than the best CPU row from batch " + human_batch(from);
        // Cost model: the GPU must beat every CPU backend.
        const fit gm = fit_model(rows, g, o, c.mib);
        double n_star = 0;
        for (const engine ce : cpus) {
          const fit cm = fit_model(rows, ce, o, c.mib);
          if (!std::isfinite(gm.rate) || !std::isfinite(cm.rate) || gm.rate <= cm.rate) {
            n_star = NAN;
            break;
          }
          n_star = std::max(n_star, (gm.fixed_s - cm.fixed_s) / (1 / cm.rate - 1 / gm.rate));
        }
        x.model_batch = n_star;
        out.push_back(x);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Output: table, JSON, plot
// ---------------------------------------------------------------------------

void print_table(const std::vector<row>& rows, const std::vector<filter_case>& cases,
                 const std::vector<op>& ops, const std::vector<engine>& engines,
                 const std::vector<std::uint64_t>& batches, const std::vector<crossover>& xs) {
  for (const filter_case& c : cases) {
    for (const op o : ops) {
      std::printf("\n%s, %s filter (%s blocks of %u B", to_string(o), mib_text(c.mib).c_str(),
                  with_commas(c.shape.num_blocks).c_str(), c.shape.words_per_block * 4);
      if (o == op::contains)
        std::printf("; filled with %s keys, predicted FPR %.3f%%", with_commas(c.capacity).c_str(),
                    100 * c.predicted_fpr);
      std::printf(")\n");
      std::printf("  %-6s %-10s %10s %12s %8s %8s  %-18s %s\n", "batch", "backend", "time/call", "keys/s",
                  "vs cpu1", "vs CPU", o == op::contains ? "FPR meas/pred" : "FPR", "verify");
      for (const std::uint64_t b : batches) {
        for (const engine e : engines) {
          const row* r = find_row(rows, e, o, c.mib, b);
          if (r == nullptr) continue;
          const std::string fpr = o == op::contains
                                      ? fmt("%.3f%%", 100 * r->measured_fpr) + fmt(" / %.3f%%", 100 * r->predicted_fpr)
                                      : "-";
          const std::string speed = std::isfinite(r->speedup) ? fmt("%.2fx", r->speedup) : "-";
          const std::string vs_cpu = std::isfinite(r->speedup_best_cpu) ? fmt("%.2fx", r->speedup_best_cpu) : "-";
          std::printf("  %-6s %-10s %10s %12s %8s %8s  %-18s %s%s\n", human_batch(b).c_str(), id_of(e),
                      human_time(r->time.median_s).c_str(), (human_rate(r->keys_per_s) + "").c_str(),
                      speed.c_str(), vs_cpu.c_str(), fpr.c_str(), r->verification.c_str(),
                      r->routing.empty() ? "" : (" (" + r->routing + ")").c_str());
        }
      }
      for (const engine e : engines) {
        const fit m = fit_model(rows, e, o, c.mib);
        if (std::isfinite(m.rate))
          std::printf("  model %-10s t(n) = %s + n / %s keys/s\n", id_of(e), human_time(m.fixed_s).c_str(),
                      human_rate(m.rate).c_str());
      }
      for (const crossover& x : xs) {
        if (x.operation != o || x.filter_mib != c.mib) continue;
        if (x.text.rfind("no GPU", 0) == 0) {
          std::printf("  crossover: %s\n", x.text.c_str());
        } else {
          std::printf("  crossover %-10s %s", id_of(x.gpu), x.text.c_str());
          if (std::isfinite(x.model_batch))
            std::printf(" (cost model: from %s keys)", with_commas(static_cast<std::uint64_t>(std::ceil(std::max(1.0, x.model_batch)))).c_str());
          std::printf("\n");
        }
      }
    }
  }
}

std::string json_report(const bench_options& opts, const std::vector<row>& rows,
                        const std::vector<filter_case>& cases, const std::vector<crossover>& xs,
                        const std::vector<std::string>& skipped, const gpu_status& gpu, unsigned cpu_threads) {
  std::ostringstream j;
  j << "{\n  \"tool\": \"gbf bench\",\n  \"statistic\": \"median\",\n  \"repeat\": " << opts.repeat
    << ",\n  \"fpp\": " << json_number(opts.fpp) << ",\n";
  j << "  \"machine\": {\"cpu_model\": " << json_string(cpu_model())
    << ", \"hardware_threads\": " << std::thread::hardware_concurrency()
    << ", \"cpu_threads\": " << cpu_threads << ", \"avx2\": " << (cpu_has_avx2() ? "true" : "false")
    << ", \"gpu\": {\"available\": " << (gpu.available ? "true" : "false")
    << ", \"description\": " << json_string(gpu.description) << "}},\n";
  j << "  \"filters\": [";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const filter_case& c = cases[i];
    j << (i ? ",\n    " : "\n    ") << "{\"filter_mib\": " << json_number(c.mib)
      << ", \"bytes\": " << c.shape.size_bytes() << ", \"layout\": " << json_string(to_string(c.shape))
      << ", \"words_per_block\": " << c.shape.words_per_block << ", \"bits_per_key\": " << c.shape.bits_per_key
      << ", \"seed\": " << c.shape.seed << ", \"num_blocks\": " << c.shape.num_blocks
      << ", \"capacity\": " << c.capacity << ", \"predicted_fpr\": " << json_number(c.predicted_fpr) << "}";
  }
  j << "\n  ],\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    j << (i ? ",\n    " : "\n    ") << "{\"backend\": " << json_string(id_of(r.backend))
      << ", \"op\": " << json_string(to_string(r.operation)) << ", \"filter_mib\": " << json_number(r.filter_mib)
      << ", \"filter_bytes\": " << r.filter_bytes << ", \"batch\": " << r.batch
      << ", \"seconds\": " << json_number(r.time.median_s) << ", \"best_seconds\": " << json_number(r.time.best_s)
      << ", \"calls_per_run\": " << r.time.calls_per_run << ", \"keys_per_s\": " << json_number(r.keys_per_s)
      << ", \"speedup_vs_cpu1\": " << json_number(r.speedup)
      << ", \"speedup_vs_best_cpu\": " << json_number(r.speedup_best_cpu);
    if (r.operation == op::contains)
      j << ", \"false_positives\": " << r.positives << ", \"measured_fpr\": " << json_number(r.measured_fpr)
        << ", \"predicted_fpr\": " << json_number(r.predicted_fpr);
    if (!r.routing.empty()) j << ", \"routing\": " << json_string(r.routing);
    if (!r.routed_by.empty()) j << ", \"cost_model\": " << json_string(r.routed_by);
    j << ", \"verification\": " << json_string(r.ok ? "ok" : "mismatch")
      << ", \"verification_detail\": " << json_string(r.ok ? r.checked : r.verification) << "}";
  }
  j << "\n  ],\n  \"crossover\": [";
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const crossover& x = xs[i];
    j << (i ? ",\n    " : "\n    ") << "{\"op\": " << json_string(to_string(x.operation))
      << ", \"filter_mib\": " << json_number(x.filter_mib) << ", \"gpu_backend\": "
      << (gpu.available ? json_string(id_of(x.gpu)) : "null") << ", \"batch\": "
      << (x.batch ? std::to_string(x.batch) : "null") << ", \"model_batch\": " << json_number(x.model_batch)
      << ", \"text\": " << json_string(x.text) << "}";
  }
  j << "\n  ],\n  \"skipped\": [";
  for (std::size_t i = 0; i < skipped.size(); ++i) j << (i ? ", " : "") << json_string(skipped[i]);
  j << "]\n}\n";
  return j.str();
}

void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw io_error("cannot write '" + tmp + "'", errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw io_error("cannot rename '" + tmp + "' to '" + path + "'", errno);
}

std::string gnuplot_script(const std::string& png, const std::vector<row>& rows,
                           const std::vector<filter_case>& cases, const std::vector<op>& ops,
                           const std::vector<engine>& engines, const std::vector<crossover>& xs,
                           const std::string& machine) {
  const std::size_t panels = cases.size() * ops.size();
  const std::size_t cols = ops.size();
  const std::size_t lines = (panels + cols - 1) / cols;
  std::ostringstream s;
  s << "# gbf bench plot: keys/s against batch size, one line per backend.\n"
    << "# Made by gbf bench; run `gnuplot " << "this-file" << "` to redraw.\n";
  s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n  set terminal pngcairo enhanced size "
    << 640 * cols << "," << 430 * lines + 40 << " font 'sans,9'\n} else {\n  set terminal png size "
    << 640 * cols << "," << 430 * lines + 40 << "\n}\n";
  s << "set output " << json_string(png) << "\n";
  s << "set logscale xy\nset format x '10^{%L}'\nset format y '10^{%L}'\nset grid\n"
    << "set xlabel 'batch size (keys)'\nset ylabel 'keys/s'\nset key top left\n";
  s << "set multiplot layout " << lines << "," << cols << " title " << json_string("gbf bench: " + machine)
    << " noenhanced\n";
  for (const filter_case& c : cases) {
    for (const op o : ops) {
      s << "unset arrow\nunset label\n";
      s << "set title " << json_string(std::string(to_string(o)) + ", " + mib_text(c.mib) + " filter") << " noenhanced\n";
      double label_y = 0.92;
      for (const crossover& x : xs) {
        if (x.operation != o || x.filter_mib != c.mib) continue;
        if (x.text.rfind("no GPU", 0) == 0) continue;  // said once, in the plot's title
        if (x.batch != 0) {
          s << "set arrow from " << x.batch << ", graph 0 to " << x.batch
            << ", graph 1 nohead dt 2 lw 1.5 lc rgb 'red'\n";
          s << "set label " << json_string(std::string(id_of(x.gpu)) + " wins from " + human_batch(x.batch))
            << " at " << x.batch << ", graph " << label_y << " offset 0.5,0 noenhanced textcolor rgb 'red'\n";
        } else {
          s << "set label " << json_string(std::string(id_of(x.gpu)) + ": " + x.text)
            << " at graph 0.03, graph " << label_y - 0.8 << " noenhanced textcolor rgb 'gray40'\n";
        }
        label_y -= 0.07;
      }
      std::string plot;
      for (const engine e : engines) {
        std::string data;
        for (const row& r : rows)
          if (r.backend == e && r.operation == o && r.filter_mib == c.mib)
            data += std::to_string(r.batch) + " " + json_number(r.keys_per_s) + "\n";
        if (data.empty()) continue;
        const std::string block = "$d_" + std::to_string(&c - cases.data()) + "_" + to_string(o) + "_" +
                                  std::to_string(static_cast<int>(e));
        s << block << " << EOD\n" << data << "EOD\n";
        plot += (plot.empty() ? "plot " : ", ") + block + " using 1:2 with linespoints lw 2 title '" + id_of(e) + "'";
      }
      s << (plot.empty() ? "plot 1/0 notitle" : plot) << "\n";
    }
  }
  s << "unset multiplot\n";
  return s.str();
}

/// Writes the gnuplot script beside `png` and runs gnuplot; false (and a note on stderr) when it cannot.
bool write_plot(const std::string& png, const std::string& script) {
  std::string gp = png;
  if (gp.size() > 4 && gp.compare(gp.size() - 4, 4, ".png") == 0) gp.resize(gp.size() - 4);
  gp += ".gp";
  write_file(gp, script);
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

/// Median seconds of copying `bytes` host -> device and device -> host (pageable
/// memory, as the automatic backend's mirror copies are), the slower direction; NaN without CUDA.
/// Measured once per size: the auto rows and the saved model ask for the same sizes.
double copy_seconds(std::uint64_t bytes) {
#if defined(GBF_HAS_CUDA)
  static std::map<std::uint64_t, double> measured;
  if (const auto it = measured.find(bytes); it != measured.end()) return it->second;
  detail::device_buffer<std::uint32_t> device(static_cast<std::size_t>(bytes / 4));
  std::vector<std::uint32_t> host(static_cast<std::size_t>(bytes / 4), 1);
  const auto one_way = [&](bool to_device) {
    return time_op([&] {
             GBF_CUDA_TRY(to_device ? cudaMemcpy(device.data(), host.data(), device.size_bytes(), cudaMemcpyHostToDevice)
                                    : cudaMemcpy(host.data(), device.data(), device.size_bytes(), cudaMemcpyDeviceToHost));
           }, 5).median_s;
  };
  return measured[bytes] = std::max(one_way(true), one_way(false));
#else
  (void)bytes;
  return NAN;
#endif
}

/// The cost model the rows imply, for the automatic backend: per filter size,
/// 2-point fits of the 'gpu-host' rows and of the 'cpu' rows (the mirror's CPU
/// backend) and a copy cost measured at the smallest and the largest filter
/// size. The CPU fit only uses batches the CPU backend runs on one thread
/// (under 2 * min_keys_per_thread keys): the routing matters around the
/// crossover, and a line through a multi-threaded large batch would price those
/// small batches several times too low. String throughput is not measured here
/// and keeps the built-in values. Empty, with the reason in `why`, when the rows
/// do not determine it.
std::optional<cost_model> fit_cost_model(const std::vector<row>& rows, const std::vector<filter_case>& cases,
                                         std::string* why) {
  const cost_model defaults = cost_model::defaults();
  cost_model m;
  m.source = "fitted by gbf bench";
  for (const filter_case& c : cases) {
    const std::uint64_t one_thread = 2 * detail::min_keys_per_thread - 1;
    const fit cpu_add = fit_model(rows, engine::cpu, op::add, c.mib, one_thread);
    const fit cpu_probe = fit_model(rows, engine::cpu, op::contains, c.mib, one_thread);
    const fit gpu_add = fit_model(rows, engine::gpu_host, op::add, c.mib);
    const fit gpu_probe = fit_model(rows, engine::gpu_host, op::contains, c.mib);
    bool complete = true;
    for (const fit& f : {cpu_add, cpu_probe, gpu_add, gpu_probe})
      complete = complete && std::isfinite(f.rate) && std::isfinite(f.fixed_s);
    if (!complete) continue;
    cost_point p = defaults.at(c.shape.size_bytes());
    p.filter_bytes = c.shape.size_bytes();
    p.cpu_add = {cpu_add.fixed_s, cpu_add.rate, p.cpu_add.bytes_per_s};
    p.cpu_probe = {cpu_probe.fixed_s, cpu_probe.rate, p.cpu_probe.bytes_per_s};
    p.gpu_add = {gpu_add.fixed_s, gpu_add.rate, p.gpu_add.bytes_per_s};
    p.gpu_probe = {gpu_probe.fixed_s, gpu_probe.rate, p.gpu_probe.bytes_per_s};
    m.points.push_back(p);
  }
  if (m.points.empty()) {
    *why = "needs 'cpu' and 'gpu-host' rows for add and contains at two or more batch sizes, two of "
           "the 'cpu' ones under " + with_commas(2 * detail::min_keys_per_thread) + " keys";
    return std::nullopt;
  }
  const std::uint64_t small = m.points.front().filter_bytes;
  const std::uint64_t large = m.points.back().filter_bytes;
  const double small_s = copy_seconds(small);
  m.copy = defaults.copy;
  if (large > small) {
    const double large_s = copy_seconds(large);
    if (large_s > small_s) {
      m.copy.bytes_per_s = static_cast<double>(large - small) / (large_s - small_s);
      m.copy.fixed_s = std::max(0.0, small_s - static_cast<double>(small) / m.copy.bytes_per_s);
    }
  } else if (small_s > m.copy.fixed_s) {
    m.copy.bytes_per_s = static_cast<double>(small) / (small_s - m.copy.fixed_s);
  }
  if (const std::string bad = m.problem(); !bad.empty()) {
    *why = "the fitted model is not usable: " + bad;
    return std::nullopt;
  }
  return m;
}

}  // namespace

int run_bench(const bench_options& opts) {
  // --- options ---------------------------------------------------------------
  if (opts.repeat < 1) throw usage_error("--repeat must be at least 1");
  if (!(opts.fpp > 0 && opts.fpp < 1)) throw usage_error("--fpp must be in (0, 1)");
  std::vector<std::string> batch_text = opts.batches;
  if (batch_text.empty())
    batch_text = opts.full ? std::vector<std::string>{"1e3", "1e4", "1e5", "1e6", "1e7", "1e8", "1e9"}
                           : std::vector<std::string>{"1e3", "1e4", "1e5", "1e6", "1e7"};
  std::vector<std::uint64_t> batches;
  for (const std::string& t : batch_text) batches.push_back(parse_count(t));
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());

  std::vector<std::string> mib_text_list = opts.filter_mib;
  if (mib_text_list.empty())
    mib_text_list = opts.full ? std::vector<std::string>{"1", "64", "512", "4096"}
                              : std::vector<std::string>{"1", "64"};
  std::vector<double> mibs;
  for (const std::string& t : mib_text_list) mibs.push_back(parse_mib(t));
  std::sort(mibs.begin(), mibs.end());
  mibs.erase(std::unique(mibs.begin(), mibs.end()), mibs.end());

  std::vector<op> ops;
  for (const std::string& t : opts.ops.empty() ? std::vector<std::string>{"add", "contains"} : opts.ops) {
    const op o = t == "add" ? op::add : t == "contains" ? op::contains : throw usage_error("--ops: unknown op '" + t + "' (add, contains)");
    if (std::find(ops.begin(), ops.end(), o) == ops.end()) ops.push_back(o);
  }

  const gpu_status gpu = query_gpu();
  std::vector<engine> engines;
  const std::vector<std::string> all{"cpu1", "cpu", "gpu-device", "gpu-host", "auto"};
  for (const std::string& id : all) {
    const bool wanted = opts.backends.empty() || std::find(opts.backends.begin(), opts.backends.end(), id) != opts.backends.end();
    const engine e = id == "cpu1" ? engine::cpu1 : id == "cpu" ? engine::cpu : id == "gpu-device" ? engine::gpu_device
                   : id == "gpu-host" ? engine::gpu_host : engine::automatic;
    if (!wanted) continue;
    // Without a GPU, auto is the cpu row again: run it only when asked for.
    if (e == engine::automatic && !gpu.available && opts.backends.empty()) continue;
    if (is_gpu(e) && !gpu.available) {
      if (!opts.backends.empty()) {
        std::fprintf(stderr, "gbf bench: --backends %s requested but there is no GPU: %s\n", id.c_str(),
                     gpu.description.c_str());
        return 1;
      }
      continue;
    }
    engines.push_back(e);
  }
  for (const std::string& id : opts.backends)
    if (std::find(all.begin(), all.end(), id) == all.end())
      throw usage_error("--backends: unknown backend '" + id + "' (cpu1, cpu, gpu-device, gpu-host, auto)");

  const unsigned cpu_threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());

  // --- filter cases and what fits in memory ----------------------------------
  std::vector<filter_case> cases;
  for (const double mib : mibs) {
    filter_case c;
    c.mib = mib;
    c.shape = layout{};
    c.shape.num_blocks = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::llround(mib * 1048576.0 / (c.shape.words_per_block * 4))));
    c.capacity = capacity_for(c.shape, opts.fpp);
    if (c.capacity == 0) throw usage_error("--filter-mib " + fmt("%g", mib) + ": too small to hold any key at --fpp");
    c.predicted_fpr = expected_fpr(c.shape, static_cast<double>(c.capacity));
    cases.push_back(c);
  }
  std::vector<std::string> skipped;
  const std::uint64_t avail = host_available_bytes();
  // auto rows on a GPU machine hold a third host copy of the filter: the mirror.
  const bool auto_mirror = gpu.available && std::find(engines.begin(), engines.end(), engine::automatic) != engines.end();
  const std::uint64_t host_copies = auto_mirror ? 3 : 2;
  if (avail != 0) {
    // Host: add keys + probe keys (8 B each) + answers (1 B) per key of the largest batch,
    // plus a CPU filter and one host copy of its words (and the auto row's mirror),
    // plus 512 MiB of slack.
    while (!cases.empty() && host_copies * cases.back().shape.size_bytes() + (512ULL << 20) > avail * 9 / 10) {
      const std::string text = "skipped the " + mib_text(cases.back().mib) + " filter: needs " +
                               with_commas((host_copies * cases.back().shape.size_bytes() + (512ULL << 20)) >> 20) +
                               " MiB of host memory, " + with_commas(avail >> 20) + " MiB available";
      std::fprintf(stderr, "gbf bench: %s\n", text.c_str());
      skipped.push_back(text);
      cases.pop_back();
    }
    if (cases.empty()) throw usage_error("--filter-mib: no filter size fits in host memory");
    const std::uint64_t fixed = host_copies * cases.back().shape.size_bytes() + (512ULL << 20);
    while (!batches.empty() && fixed + 17 * batches.back() > avail * 9 / 10) {
      const std::string text = "skipped batch " + human_batch(batches.back()) + ": needs " +
                               with_commas((fixed + 17 * batches.back()) >> 20) + " MiB of host memory, " +
                               with_commas(avail >> 20) + " MiB available";
      std::fprintf(stderr, "gbf bench: %s\n", text.c_str());
      skipped.push_back(text);
      batches.pop_back();
    }
  }
  if (batches.empty()) throw usage_error("--batches: no batch size fits in host memory");

  // --- header ----------------------------------------------------------------
  std::printf("gbf bench: keys/s per backend, op, filter size and batch size (median of %u runs after a warm-up)\n",
              opts.repeat);
  std::printf("cpu: %s, %u hardware threads, AVX2 %s; 'cpu' rows use %u threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency(), cpu_has_avx2() ? "yes" : "no", cpu_threads);
  std::printf("gpu: %s\n", gpu.available ? gpu.description.c_str() : ("none (" + gpu.description + "); CPU rows only").c_str());
  std::printf("layout: %s per filter below; contains rows fill the filter to its capacity at fpp %g\n",
              to_string(cases.front().shape).c_str(), opts.fpp);
  std::printf("backends:");
  for (const engine e : engines) std::printf(" %s", id_of(e));
  std::printf("  (cpu1: 1 CPU thread; cpu: %u threads; gpu-device: keys in device memory; gpu-host: keys in host memory, transfers included;"
              " auto: backend::automatic, host keys)\n",
              cpu_threads);
  for (const std::string& s : skipped) std::printf("%s\n", s.c_str());
  std::fflush(stdout);

  // --- run -------------------------------------------------------------------
  bench b(opts, batches, cases, ops, engines, gpu);
  b.run();
  std::vector<row>& rows = b.rows;
  for (const std::string& s : b.skipped) skipped.push_back(s);
  for (row& r : rows) {
    if (const row* base = find_row(rows, engine::cpu1, r.operation, r.filter_mib, r.batch))
      r.speedup = r.keys_per_s / base->keys_per_s;
    if (is_cpu(r.backend)) continue;
    double best_cpu = 0;
    for (const engine e : {engine::cpu1, engine::cpu})
      if (const row* c = find_row(rows, e, r.operation, r.filter_mib, r.batch)) best_cpu = std::max(best_cpu, c->keys_per_s);
    if (best_cpu > 0) r.speedup_best_cpu = r.keys_per_s / best_cpu;
  }
  const std::vector<crossover> xs = crossovers(rows, cases, ops, engines, batches, gpu);

  print_table(rows, cases, ops, engines, batches, xs);
  bool ok = true;
  for (const row& r : rows) ok = ok && r.ok;
  std::printf("\nverification: %s\n", ok ? "ok (every row: no false negatives, same bits and answers as the reference)"
                                         : "FAILED (see the rows marked above)");
  std::fflush(stdout);

  // --- the automatic backend's cost model --------------------------------------
  if (opts.save_cost_model) {
    std::string why;
    std::optional<cost_model> fitted;
    if (!ok) {
      why = "verification failed";
    } else if (!gpu.available) {
      why = "no GPU (" + gpu.description + ")";
    } else if (opts.threads != 0 && opts.threads != std::thread::hardware_concurrency()) {
      // The saved model is for mirrors, which use every hardware thread.
      why = "--threads " + std::to_string(opts.threads) + " differs from the mirror's thread count (all hardware threads)";
    } else {
      fitted = fit_cost_model(rows, cases, &why);
    }
    const std::string path = opts.cost_model.empty() ? cost_model::default_path() : opts.cost_model;
    bool saved = false;
    if (fitted) {
      try {
        fitted->save(path, "fitted by gbf bench: cpu " + cpu_model() + ", gpu " + gpu.description);
        saved = true;
      } catch (const error& e) {
        why = e.what();  // the results below are still written
      }
    }
    if (saved)
      std::printf("cost model: saved to %s (%zu filter size%s, copy %s + bytes / %sB/s); backend::automatic reads it\n",
                  path.c_str(), fitted->points.size(), fitted->points.size() == 1 ? "" : "s",
                  human_time(fitted->copy.fixed_s).c_str(), human_rate(fitted->copy.bytes_per_s).c_str());
    else
      std::printf("cost model: not saved: %s\n", why.c_str());
  }

  if (!opts.json.empty()) {
    write_file(opts.json, json_report(opts, rows, cases, xs, skipped, gpu, cpu_threads));
    std::fprintf(stderr, "gbf bench: JSON written to %s\n", opts.json.c_str());
  }
  if (!opts.plot.empty()) {
    const std::string machine = cpu_model() + (gpu.available ? " vs " + gpu.description : " (no GPU: " + gpu.description + ")");
    write_plot(opts.plot, gnuplot_script(opts.plot, rows, cases, ops, engines, xs, machine));
  }
  return ok ? 0 : 1;
}

}  // namespace gbf::cli
