// `gbf bench`, the runner: options, the filter sizes that fit, and the rows.
//
// For every filter size (an exact layout of that many bytes), every kind
// (--kinds: the plain gbf::filter, the gbf::counting_filter of the same layout
// with 4-bit counters) and every engine:
//   add rows      the filter is cleared, then a batch of keys is added; every
//                 added key must be found afterwards and the bits (counters)
//                 must equal those a CPU built from the same keys. A counting
//                 add is undone, untimed, before the next timed call, so the
//                 batch ends up added once whatever the number of calls;
//   contains rows the filter is filled with `capacity` keys (the most its size
//                 holds at --fpp, found by bisection on expected_fpr), then a
//                 batch of keys that were never added is probed: every hit is a
//                 false positive, compared with expected_fpr(layout, capacity);
//   remove rows   (counting only; remove = checked, remove-unchecked) filled as
//                 for contains, each timed call removes a batch of keys that an
//                 untimed add put in just before: a checked remove must remove
//                 every key and refuse none, the counters must come back to the
//                 fill's (unless the batch saturated some: said, not failed),
//                 and no fill key may go missing.
// Keys are SplitMix64 (a bijection) over disjoint counter ranges, so fill
// keys, add keys and probe keys are distinct. Each row is timed as the median
// of --repeat runs after a warm-up; a run repeats the call until it lasts at
// least 10 ms (small batches), and reports the time of one call.
//
// Verification. The first engine to produce a result (CPU 1 thread by
// default) is the reference: later engines must hold the same bits after the
// same adds and the same fill, and give the same answers. A GPU row never
// takes its reference from a GPU: without a CPU row it is built on the CPU.
// GPU contains rows are also recomputed on the CPU (filter::verify_contains; a
// CPU copy of the counting filter). The counting kind's filled projection and
// contains answers must also equal the plain kind's when both ran.
//
// The speedups, fits and crossovers are cli/bench_analysis.hpp; the table,
// JSON and plot cli/bench_report.hpp.
#include "cli/bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cli/bench_analysis.hpp"
#include "cli/bench_report.hpp"
#include "cli/bench_rows.hpp"
#include "cli/commands.hpp"
#include "cli/cpu_caches.hpp"
#include "cli/device_memory.hpp"
#include "cli/stopwatch.hpp"
#include "cli/synthetic_keys.hpp"
#include "cli/text.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/counting_layout.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/filter.hpp"

namespace gbf::cli {
namespace bench {
namespace {

// Disjoint counter ranges: fill keys [0, capacity), add keys, probe keys.
constexpr std::uint64_t add_base = 1ULL << 48;
constexpr std::uint64_t probe_base = 1ULL << 49;
/// Keys add and contains rows rotate through: each timed call takes the next
/// slice of its batch size, so a small batch's blocks are not still in the
/// caches from the call before. Repeating one batch measured a 10^3-key add
/// at 335 M keys/s on a 2 GiB filter where fresh keys give ~26 M (a reviewer's
/// run, 2-vCPU VM): cache speed, labelled "beyond the L3". 2^23 keys (64 MiB
/// of keys, 256 MiB of W = 8 blocks) pass the caches of the machines measured.
constexpr std::uint64_t rotation_keys = 1ULL << 23;

/// Calls per timed run, so that a run lasts >= 10 ms when one call took `warm_s`.
std::uint64_t calls_per_run_for(double warm_s) {
  constexpr double min_run_s = 0.010;
  if (warm_s >= min_run_s) return 1;
  return static_cast<std::uint64_t>(std::min(1e6, std::ceil(min_run_s / std::max(warm_s, 1e-7))));
}

/// The best and median of the per-call times of the runs.
timing summarize(std::vector<double> per_call, std::uint64_t calls_per_run) {
  std::sort(per_call.begin(), per_call.end());
  timing t;
  t.calls_per_run = calls_per_run;
  t.best_s = per_call.front();
  t.median_s = per_call[per_call.size() / 2];
  return t;
}

/// One warm-up call, then `repeat` runs of enough calls to last >= 10 ms each.
template <class F>
timing time_op(F&& op, unsigned repeat) {
  const std::uint64_t calls = calls_per_run_for(seconds_of(op));
  std::vector<double> per_call;
  for (unsigned r = 0; r < repeat; ++r)
    per_call.push_back(seconds_of([&] {
                         for (std::uint64_t c = 0; c < calls; ++c) op();
                       }) /
                       static_cast<double>(calls));
  return summarize(std::move(per_call), calls);
}

/// time_op with an untimed `setup` before every call (remove rows add the keys
/// they remove): one warm-up, then `repeat` runs of enough calls that their
/// timed parts sum to >= 10 ms each; reports the time of one call.
template <class Setup, class F>
timing time_op_with_setup(Setup&& setup, F&& op, unsigned repeat) {
  setup();
  const std::uint64_t calls = calls_per_run_for(seconds_of(op));
  std::vector<double> per_call;
  for (unsigned r = 0; r < repeat; ++r) {
    double timed = 0;
    for (std::uint64_t c = 0; c < calls; ++c) {
      setup();
      timed += seconds_of(op);
    }
    per_call.push_back(timed / static_cast<double>(calls));
  }
  return summarize(std::move(per_call), calls);
}

/// A 64-bit digest of `bytes` bytes, to compare bits and answers between engines.
std::uint64_t digest(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = bytes;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = detail::splitmix64(h ^ w);
  }
  for (; i < bytes; ++i) h = detail::splitmix64(h ^ p[i]);
  return h;
}

std::uint64_t bits_digest(const filter& f) {
  const std::vector<std::uint32_t> w = f.words();
  return digest(w.data(), w.size() * sizeof(std::uint32_t));
}

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
  constexpr double one_block_mib = 32.0 / 1048576.0;
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= one_block_mib) || v > 128 * 1024)
    throw usage_error("--filter-mib: '" + text +
                      "' is not a size in MiB from 32 B (one block, 0.000030517578125) to 131072");
  return v;
}

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

/// Free device memory in bytes (0 in a build without CUDA).
std::uint64_t free_device_bytes() {
#if defined(GBF_HAS_CUDA)
  return device_free_bytes();
#else
  return 0;
#endif
}

/// The bytes of a kind's filter for case `c`: the counting filter's counters are
/// default_counter_bits times the plain filter's bytes.
std::uint64_t filter_bytes(kind k, const filter_case& c) {
  return k == kind::plain ? c.shape.size_bytes() : counter_bytes(c.shape, default_counter_bits);
}

/// What is compared between engines: the bits of a plain filter, the counters of a counting one.
std::uint64_t state_digest(const filter& f) { return bits_digest(f); }
std::uint64_t state_digest(const counting_filter& f) {
  const std::vector<std::uint32_t> w = f.counters();
  return digest(w.data(), w.size() * sizeof(std::uint32_t));
}

template <class Filter>
constexpr kind kind_of() {
  return std::is_same_v<Filter, counting_filter> ? kind::counting : kind::plain;
}

/// A digest some engine produced first, and which engine ("cpu" when made for a GPU row).
struct reference {
  std::string by;
  std::uint64_t value = 0;
};

/// Runs the rows of a sweep, one filter size, kind and engine at a time.
class runner {
 public:
  explicit runner(const sweep& run) : run_(run) {
    const std::uint64_t max_batch = run_.batches.empty() ? 0 : run_.batches.back();
    const std::uint64_t pool = std::max(max_batch, rotation_keys);
    gen_threads_ = std::max(1u, std::thread::hardware_concurrency());
    add_keys_.resize(pool);
    probe_keys_.resize(pool);
    found_.reset(new bool[max_batch]);
    make_distinct_keys(add_keys_.data(), add_base, pool, gen_threads_);
    make_distinct_keys(probe_keys_.data(), probe_base, pool, gen_threads_);
  }

  std::vector<row> rows;
  std::vector<std::string> skipped;

  void run() {
    for (const filter_case& c : run_.cases) {
      plain_fill_bits_.reset();
      plain_answers_.clear();
      for (const kind k : run_.kinds) {
        add_refs_.clear();
        contains_refs_.clear();
        remove_refs_.clear();
        fill_ref_.reset();
        for (const engine e : run_.engines) {
          if (k == kind::plain)
            run_engine<filter>(c, e);
          else
            run_engine<counting_filter>(c, e);
        }
        // The counting kind's projection and answers must be the plain filter's.
        if (k == kind::plain) {
          if (fill_ref_) plain_fill_bits_ = fill_ref_->value;
          plain_answers_ = contains_refs_;
        }
      }
    }
  }

 private:
  options options_of(engine e) const {
    options o;
    o.where = is_gpu(e) ? backend::gpu : backend::cpu;
    o.cpu_threads = e == engine::cpu1 ? 1 : run_.cpu_threads;
    return o;
  }

  template <class Filter>
  void fill(Filter& f, const filter_case& c) const {
    std::vector<std::uint64_t> chunk(std::min<std::uint64_t>(c.capacity, 1ULL << 24));
    for (std::uint64_t start = 0; start < c.capacity; start += chunk.size()) {
      const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), c.capacity - start));
      make_distinct_keys(chunk.data(), start, m, gen_threads_);
      f.add(chunk.data(), m);
    }
  }

  /// The reference for `key` in `refs`: `value` of `e` when it is the first CPU
  /// engine to get there, else computed on the CPU by `make`.
  template <class Make>
  const reference& reference_for(std::map<std::uint64_t, reference>& refs, std::uint64_t key,
                                 engine e, std::uint64_t value, Make&& make) {
    auto it = refs.find(key);
    if (it != refs.end()) return it->second;
    if (!is_cpu(e)) return refs.emplace(key, reference{"cpu", make()}).first->second;
    return refs.emplace(key, reference{id_of(e), value}).first->second;
  }

  static void check(row& r, bool ok, const std::string& problem) {
    if (ok) return;
    r.ok = false;
    r.verification = r.verification == "ok" ? problem : r.verification + "; " + problem;
  }

  void note(const std::string& text) {
    std::fprintf(stderr, "gbf bench: %s\n", text.c_str());
    skipped.push_back(text);
  }

  /// " counting" for the counting kind, "" for the plain one (whose messages are as before kinds).
  static std::string kind_word(kind k) { return k == kind::plain ? "" : std::string(" ") + to_string(k); }

  template <class Filter>
  void run_engine(const filter_case& c, engine e) {
    constexpr kind k = kind_of<Filter>();
    const std::uint64_t bytes = filter_bytes(k, c);
    if (is_gpu(e)) {
      const std::uint64_t free_bytes = free_device_bytes();
      if (free_bytes < bytes + (64ULL << 20)) {
        note(std::string("skipped ") + id_of(e) + " with the" + kind_word(k) + " " + mib_text(c.mib) +
             " filter: needs " + mib_text(static_cast<double>(bytes >> 20)) + " of device memory, " +
             mib_text(static_cast<double>(free_bytes >> 20)) + " free");
        return;
      }
    }
    std::fprintf(stderr, "gbf bench: %s,%s %s filter\n", id_of(e), kind_word(k).c_str(), mib_text(c.mib).c_str());
    Filter f(c.shape, options_of(e), c.capacity);
    at_fill_ = false;
    for (const op o : run_.ops) {
      if (!has_op(k, o)) continue;
      for (const std::uint64_t b : run_.batches) {
        // contains and remove rows start from the filter filled to capacity.
        if (o != op::add && !at_fill_) fill_and_check(f, c, e);
        run_row(c, e, o, f, b);
      }
    }
  }

  /// Clears `f`, fills it to capacity and checks the fill: the same state as the
  /// reference engine's, no false negatives among a sample of the fill keys, and
  /// for the counting kind a projection equal to the plain filter's bits.
  template <class Filter>
  void fill_and_check(Filter& f, const filter_case& c, engine e) {
    f.clear();
    fill(f, c);
    at_fill_ = true;
    fill_digest_ = state_digest(f);
    if (!fill_ref_) {
      if (!is_cpu(e)) {
        Filter cpu(c.shape, options_of(engine::cpu), c.capacity);
        fill(cpu, c);
        fill_ref_ = reference{"cpu", state_digest(cpu)};
      } else {
        fill_ref_ = reference{id_of(e), fill_digest_};
      }
    }
    fill_ok_ = fill_digest_ == fill_ref_->value;
    const std::size_t sample = static_cast<std::size_t>(std::min<std::uint64_t>(c.capacity, 1ULL << 20));
    fill_sample_.resize(sample);
    make_distinct_keys(fill_sample_.data(), 0, sample, gen_threads_);
    fill_found_ = f.count(fill_sample_.data(), sample) == sample;
    fill_projection_ok_ = true;
    if constexpr (kind_of<Filter>() == kind::counting)
      if (plain_fill_bits_) fill_projection_ok_ = bits_digest(f.projection()) == *plain_fill_bits_;
  }

  template <class Filter>
  void run_row(const filter_case& c, engine e, op o, Filter& f, std::uint64_t b) {
    constexpr kind k = kind_of<Filter>();
    const char* state = k == kind::plain ? "bits" : "counters";
    row r;
    r.filter_kind = k;
    r.backend = e;
    r.operation = o;
    r.filter_mib = c.mib;
    r.filter_bytes = filter_bytes(k, c);
    r.batch = b;
    r.verification = "ok";
    std::string caveat;  // said beside "ok": what could not be compared, and why
    const std::uint64_t* keys = o == op::contains ? probe_keys_.data() : add_keys_.data();
    const std::size_t n = static_cast<std::size_t>(b);
    bool* found = found_.get();
    // add and contains time a fresh slice of keys per call (rotation_keys); the
    // checks use the first slice. remove rows add and remove one batch per call,
    // so their small batches stay cache-warm (docs/cpu-vs-gpu.md says so).
    const bool rotates = o == op::add || o == op::contains;
    const std::size_t key_count = rotates ? add_keys_.size() : n;
    const std::size_t slices = n == 0 ? 1 : key_count / n;

    // gpu-device rows: the keys and the answers in device memory.
    const std::uint64_t* op_keys = keys;
    bool* op_found = found;
#if defined(GBF_HAS_CUDA)
    device_buffer<std::uint64_t> device_keys;
    device_buffer<bool> device_found;
    if (e == engine::gpu_device) {
      const std::uint64_t need = key_count * sizeof(std::uint64_t) + b + (64ULL << 20);
      const std::uint64_t free_bytes = device_free_bytes();
      if (free_bytes < need) {
        note("skipped " + std::string(id_of(e)) + kind_word(k) + " " + to_string(o) + " batch " + batch_text(b) +
             " (" + mib_text(c.mib) + " filter): needs " + mib_text(static_cast<double>(need >> 20)) +
             " of device memory, " + mib_text(static_cast<double>(free_bytes >> 20)) + " free");
        return;
      }
      device_keys = to_device(keys, key_count);
      device_found = device_buffer<bool>(n);
      op_keys = device_keys.data();
      op_found = device_found.data();
    }
#endif
    std::uint64_t call = 0;  // the timed calls so far: call c takes slice c mod slices
    const auto next_slice = [&] { return op_keys + (call++ % slices) * n; };

    if (o == op::add) {
      f.clear();
      at_fill_ = false;
      if constexpr (k == kind::plain) {
        r.time = time_op([&] { f.add(next_slice(), n); }, run_.repeat);
      } else {
        // Each timed add is undone (untimed, remove_unchecked) before the next, so
        // the counters stay those of one batch, as they would be in use, instead
        // of piling up to saturation.
        const std::uint64_t* added = nullptr;
        r.time = time_op_with_setup(
            [&] {
              if (added != nullptr) f.remove_unchecked(added, n);
              added = nullptr;
            },
            [&] {
              added = next_slice();
              f.add(added, n);
            },
            run_.repeat);
      }
      // The checks below need the first slice added once, as every engine has it.
      f.clear();
      f.add(op_keys, n);
      check(r, f.count(op_keys, n) == b, "false negatives: an added key is not found");
      const std::uint64_t d = state_digest(f);
      const reference& ref = reference_for(add_refs_, b, e, d, [&] {
        Filter cpu(c.shape, options_of(engine::cpu), c.capacity);
        cpu.add(keys, n);
        return state_digest(cpu);
      });
      r.checked = ref.by == id_of(e) ? "no false negatives (reference " + std::string(state) + ")"
                                     : "no false negatives, " + std::string(state) + " = " + ref.by;
      check(r, d == ref.value, std::string(state) + " differ from " + ref.by);
    } else if (o == op::contains) {
      r.time = time_op([&] { f.contains(next_slice(), n, op_found); }, run_.repeat);
      f.contains(op_keys, n, op_found);  // the answers checked below: the first slice's
#if defined(GBF_HAS_CUDA)
      if (e == engine::gpu_device)
        GBF_CUDA_TRY(cudaMemcpy(found, device_found.data(), n, cudaMemcpyDeviceToHost));
#endif
      for (std::size_t i = 0; i < n; ++i) r.positives += found[i];
      r.measured_fpr = static_cast<double>(r.positives) / static_cast<double>(b);
      r.predicted_fpr = c.predicted_fpr;
      const std::uint64_t d = digest(found, n);
      const reference& ref = reference_for(contains_refs_, b, e, d, [&] {
        Filter cpu(c.shape, options_of(engine::cpu), c.capacity);
        fill(cpu, c);
        std::unique_ptr<bool[]> answers(new bool[n]);
        cpu.contains(keys, n, answers.get());
        return digest(answers.get(), n);
      });
      check(r, fill_found_, "false negatives among the fill keys");
      check(r, fill_ok_, "filled " + std::string(state) + " differ from " + fill_ref_->by);
      check(r, d == ref.value, "answers differ from " + ref.by);
      r.checked = ref.by == id_of(e) ? "no false negatives (reference answers)"
                                     : std::string(state) + " and answers = " + ref.by;
      if constexpr (k == kind::counting) {
        // The projection is the plain filter of the fill keys, so the answers are its answers.
        check(r, fill_projection_ok_, "projection of the filled counters differs from the plain filter's bits");
        if (const auto plain = plain_answers_.find(b); plain != plain_answers_.end()) {
          check(r, d == plain->second.value, "answers differ from the plain filter's");
          r.checked += ", answers = plain filter's";
        }
      }
      if (!is_cpu(e)) {
        if constexpr (k == kind::plain) {
          const verify_report v = f.verify_contains(keys, n, found);
          check(r, v.ok(), with_commas(v.mismatches) + " answers differ when recomputed on the CPU");
        } else {
          const counting_filter cpu = f.copy_to(backend::cpu);
          std::unique_ptr<bool[]> answers(new bool[n]);
          cpu.contains(keys, n, answers.get());
          std::uint64_t mismatches = 0;
          for (std::size_t i = 0; i < n; ++i) mismatches += answers[i] != found[i];
          check(r, mismatches == 0, with_commas(mismatches) + " answers differ when recomputed on a CPU copy");
        }
        r.checked += ", recomputed on the CPU";
      }
    } else if constexpr (k == kind::counting) {
      // remove rows: each timed call removes the batch an untimed add put in just
      // before, so the counters return to the fill's after every call.
      bool all_removed = true;
      const auto add_back = [&] { f.add(op_keys, n); };
      if (o == op::remove)
        r.time = time_op_with_setup(
            add_back,
            [&] {
              const remove_report removed = f.remove(op_keys, n);
              all_removed = all_removed && removed.removed == b && removed.refused == 0;
            },
            run_.repeat);
      else
        r.time = time_op_with_setup(add_back, [&] { f.remove_unchecked(op_keys, n); }, run_.repeat);
      if (o == op::remove) check(r, all_removed, "a checked remove refused keys that were just added");
      const std::uint64_t d = state_digest(f);
      at_fill_ = d == fill_digest_;
      check(r, fill_ok_, "filled counters differ from " + fill_ref_->by);
      r.checked = o == op::remove ? "every key removed, none refused; " : "";
      if (const std::uint64_t saturated = f.stats().saturated_counters; saturated != 0 && !at_fill_) {
        // A saturated counter never decrements: the batch's adds pushed some
        // counters to the maximum, so the fill's counters cannot come back. The
        // state is still the same after any number of add+remove rounds (each
        // round saturates the same counters), so engines must still agree.
        const reference& ref = reference_for(remove_refs_, b * 4 + static_cast<unsigned>(o), e, d, [&] {
          Filter cpu(c.shape, options_of(engine::cpu), c.capacity);
          fill(cpu, c);
          cpu.add(keys, n);
          if (o == op::remove)
            cpu.remove(keys, n);
          else
            cpu.remove_unchecked(keys, n);
          return state_digest(cpu);
        });
        check(r, d == ref.value, "counters after add+remove differ from " + ref.by);
        caveat = with_commas(saturated) + " counters saturated, not back to the fill's";
        r.checked += "counters not compared with the fill's: " + with_commas(saturated) +
                     " counters saturated (batch added over the fill)" +
                     (ref.by == id_of(e) ? "" : "; counters = " + ref.by);
      } else {
        check(r, d == fill_digest_, "counters after add+remove differ from the fill's");
        check(r, d == fill_ref_->value, "counters after add+remove differ from " + fill_ref_->by);
        r.checked += "counters = the fill's" + (fill_ref_->by == id_of(e) ? "" : " = " + fill_ref_->by);
      }
      const std::size_t sample = fill_sample_.size();
      check(r, f.count(fill_sample_.data(), sample) == sample,
            "false negatives among the fill keys after the removes");
      r.checked += ", no false negatives among the fill keys";
    }
    if (r.ok && !caveat.empty()) r.verification = "ok (" + caveat + ")";
    r.keys_per_s = static_cast<double>(b) / r.time.median_s;
    std::fprintf(stderr, "gbf bench:   %-8s %-10s batch %-6s %10s keys/s  %s\n",
                 (k == kind::plain ? std::string(to_string(o)) : std::string(to_string(o)) + " (counting)").c_str(),
                 id_of(e), batch_text(b).c_str(), human(r.keys_per_s).c_str(), r.verification.c_str());
    rows.push_back(std::move(r));
  }

  const sweep& run_;
  unsigned gen_threads_ = 1;
  std::vector<std::uint64_t> add_keys_;
  std::vector<std::uint64_t> probe_keys_;
  std::unique_ptr<bool[]> found_;
  // Per (filter size, kind): the references later engines are checked against.
  std::map<std::uint64_t, reference> add_refs_;
  std::map<std::uint64_t, reference> contains_refs_;
  std::map<std::uint64_t, reference> remove_refs_;  ///< By batch * 4 + op, when saturated.
  std::optional<reference> fill_ref_;
  // Per filter size: the plain kind's filled bits and answers, for the counting kind.
  std::optional<std::uint64_t> plain_fill_bits_;
  std::map<std::uint64_t, reference> plain_answers_;
  // Per engine: the filter's state.
  bool at_fill_ = false;  ///< The filter holds exactly the fill keys.
  std::uint64_t fill_digest_ = 0;
  std::vector<std::uint64_t> fill_sample_;
  bool fill_ok_ = true;
  bool fill_found_ = true;
  bool fill_projection_ok_ = true;
};

/// Batch sizes, ascending and distinct (the defaults when none are given).
std::vector<std::uint64_t> batches_of(const bench_options& opts) {
  std::vector<std::string> text = opts.batches;
  if (text.empty())
    text = opts.full ? std::vector<std::string>{"1e3", "1e4", "1e5", "1e6", "1e7", "1e8", "1e9"}
                     : std::vector<std::string>{"1e3", "1e4", "1e5", "1e6", "1e7"};
  std::vector<std::uint64_t> batches;
  for (const std::string& t : text) batches.push_back(parse_count(t));
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  return batches;
}

/// Where a filter of `bytes` sits against this CPU's caches.
std::string where_in_caches(std::uint64_t bytes, const cpu_caches& caches) {
  if (caches.llc_bytes == 0) return "caches unknown";
  if (caches.l2_bytes != 0 && bytes <= caches.l2_bytes) return "in L2";
  if (bytes <= caches.llc_bytes) return "in L" + std::to_string(caches.llc_level);
  char text[64];
  std::snprintf(text, sizeof text, "beyond the L%u, %.1fx", caches.llc_level,
                static_cast<double>(bytes) / static_cast<double>(caches.llc_bytes));
  return text;
}

/// The default filter sizes, from this CPU's caches read at run time (a fixed
/// "64 MiB beyond the caches" is inside a 260 MiB L3): half the L2, a power of
/// two (at least 1/16 MiB), and 4x the last-level cache rounded up to a whole
/// MiB, or the largest that fits host memory beside its copy (2 filters + 512
/// MiB, as fit_in_host_memory counts). --full adds 512 and 4096 MiB. Caches
/// unknown: 1 and 64 MiB.
std::vector<double> default_mibs(bool full, const cpu_caches& caches) {
  std::vector<double> mibs;
  if (caches.llc_bytes == 0 || caches.l2_bytes == 0) {
    mibs = {1, 64};
  } else {
    double in_l2 = 1.0 / 16;
    while (in_l2 * 2 * 1048576.0 <= static_cast<double>(caches.l2_bytes) / 2) in_l2 *= 2;
    double beyond = std::ceil(4.0 * static_cast<double>(caches.llc_bytes) / 1048576.0);
    if (const std::uint64_t avail = host_available_bytes(); avail != 0) {
      const double most = std::floor((static_cast<double>(avail) * 0.9 - 512.0 * 1048576.0) / 2 / 1048576.0);
      if (most >= 1 && most < beyond) beyond = most;
    }
    mibs = {in_l2, beyond};
  }
  if (full) mibs.insert(mibs.end(), {512, 4096});
  return mibs;
}

/// One case per distinct --filter-mib size, ascending (the defaults when none are given).
std::vector<filter_case> cases_of(const bench_options& opts) {
  const cpu_caches caches = read_cpu_caches();
  std::vector<double> mibs;
  if (opts.filter_mib.empty()) mibs = default_mibs(opts.full, caches);
  for (const std::string& t : opts.filter_mib) mibs.push_back(parse_mib(t));
  // A size is a whole number of 32-byte blocks: rows and JSON show the size measured,
  // and two requests that round to one size run once.
  std::vector<std::uint64_t> block_counts;
  for (const double mib : mibs)
    block_counts.push_back(std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::llround(mib * 1048576.0 / (layout{}.words_per_block * 4)))));
  std::sort(block_counts.begin(), block_counts.end());
  block_counts.erase(std::unique(block_counts.begin(), block_counts.end()), block_counts.end());
  std::vector<filter_case> cases;
  for (const std::uint64_t blocks : block_counts) {
    filter_case c;
    c.shape = layout{};
    c.shape.num_blocks = blocks;
    c.mib = static_cast<double>(c.shape.size_bytes()) / 1048576.0;
    c.capacity = capacity_for(c.shape, opts.fpp);
    if (c.capacity == 0) throw usage_error("--filter-mib " + mib_text(c.mib) + ": too small to hold any key at --fpp");
    c.predicted_fpr = expected_fpr(c.shape, static_cast<double>(c.capacity));
    c.where = where_in_caches(c.shape.size_bytes(), caches);
    cases.push_back(c);
  }
  return cases;
}

/// The kinds --kinds names (plain when empty), plain before counting.
std::vector<kind> kinds_of(const bench_options& opts) {
  std::vector<kind> kinds;
  for (const std::string& t : opts.kinds)
    if (t != "plain" && t != "counting") throw usage_error("--kinds: unknown kind '" + t + "' (plain, counting)");
  for (const kind k : {kind::plain, kind::counting})
    if (opts.kinds.empty() ? k == kind::plain
                           : std::find(opts.kinds.begin(), opts.kinds.end(), to_string(k)) != opts.kinds.end())
      kinds.push_back(k);
  return kinds;
}

std::vector<op> ops_of(const bench_options& opts, const std::vector<kind>& kinds) {
  std::vector<op> ops;
  for (const std::string& t : opts.ops.empty() ? std::vector<std::string>{"add", "contains"} : opts.ops) {
    const op o = t == "add"                ? op::add
                 : t == "contains"         ? op::contains
                 : t == "remove"           ? op::remove
                 : t == "remove-unchecked" ? op::remove_unchecked
                                           : throw usage_error("--ops: unknown op '" + t +
                                                               "' (add, contains, remove, remove-unchecked)");
    if (std::none_of(kinds.begin(), kinds.end(), [&](kind k) { return has_op(k, o); }))
      throw usage_error("--ops " + t +
                        ": a plain Bloom filter cannot remove keys; bench the counting filter with "
                        "--kinds counting (or --kinds plain,counting to compare)");
    if (std::find(ops.begin(), ops.end(), o) == ops.end()) ops.push_back(o);
  }
  return ops;
}

/// The engines --backends names (all available ones when empty), in table order.
/// A GPU engine asked for on a machine without one is nullopt: the run refuses it.
std::optional<std::vector<engine>> engines_of(const bench_options& opts, const gpu_status& gpu) {
  for (const std::string& id : opts.backends)
    if (std::none_of(std::begin(all_engines), std::end(all_engines), [&](engine e) { return id == id_of(e); }))
      throw usage_error("--backends: unknown backend '" + id + "' (cpu1, cpu, gpu-device, gpu-host)");
  std::vector<engine> engines;
  for (const engine e : all_engines) {
    const bool wanted = opts.backends.empty() ||
                        std::find(opts.backends.begin(), opts.backends.end(), id_of(e)) != opts.backends.end();
    if (!wanted) continue;
    if (is_gpu(e) && !gpu.available) {
      if (!opts.backends.empty()) {
        std::fprintf(stderr, "gbf bench: --backends %s requested but there is no GPU: %s\n", id_of(e),
                     gpu.description.c_str());
        return std::nullopt;
      }
      continue;
    }
    engines.push_back(e);
  }
  return engines;
}

/// Drops the filter sizes, then the batch sizes, that do not fit in host memory,
/// saying so in `skipped`. Per key of the largest batch: add keys and probe keys
/// (8 B each) and answers (1 B); beside them a CPU filter and one host copy of
/// its words (for the counting kind: its counters, and its projection and that
/// projection's words), and 512 MiB of slack.
void fit_in_host_memory(sweep& run, std::vector<std::string>& skipped) {
  const std::uint64_t avail = host_available_bytes();
  if (avail == 0) return;
  const auto skip = [&](const std::string& text) {
    std::fprintf(stderr, "gbf bench: %s\n", text.c_str());
    skipped.push_back(text);
  };
  const bool counting = std::find(run.kinds.begin(), run.kinds.end(), kind::counting) != run.kinds.end();
  const auto fixed_bytes = [&] {
    const filter_case& c = run.cases.back();
    return 2 * filter_bytes(counting ? kind::counting : kind::plain, c) + (counting ? 2 * c.shape.size_bytes() : 0) +
           (512ULL << 20);
  };
  const std::string available = mib_text(static_cast<double>(avail >> 20)) + " available";
  while (!run.cases.empty() && fixed_bytes() > avail * 9 / 10) {
    skip("skipped the " + mib_text(run.cases.back().mib) + " filter: needs " +
         mib_text(static_cast<double>(fixed_bytes() >> 20)) + " of host memory, " + available);
    run.cases.pop_back();
  }
  if (run.cases.empty()) throw usage_error("--filter-mib: no filter size fits in host memory");
  while (!run.batches.empty() && fixed_bytes() + 17 * run.batches.back() > avail * 9 / 10) {
    skip("skipped batch " + batch_text(run.batches.back()) + ": needs " +
         mib_text(static_cast<double>((fixed_bytes() + 17 * run.batches.back()) >> 20)) + " of host memory, " +
         available);
    run.batches.pop_back();
  }
}

}  // namespace
}  // namespace bench

int run_bench(const bench_options& opts) {
  using namespace bench;
  if (opts.repeat < 1) throw usage_error("--repeat must be at least 1");
  if (!(opts.fpp > 0 && opts.fpp < 1)) throw usage_error("--fpp must be in (0, 1)");
  sweep run;
  run.repeat = opts.repeat;
  run.fpp = opts.fpp;
  run.cpu_threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  run.batches = batches_of(opts);
  run.cases = cases_of(opts);
  run.kinds = kinds_of(opts);
  run.ops = ops_of(opts, run.kinds);
  const gpu_status gpu = query_gpu();
  const std::optional<std::vector<engine>> engines = engines_of(opts, gpu);
  if (!engines) return 1;
  run.engines = *engines;

  results out;
  fit_in_host_memory(run, out.skipped);
  if (run.batches.empty()) throw usage_error("--batches: no batch size fits in host memory");

  // The outputs' temporaries are made before the measurements, which can take hours
  // (--full): a path that cannot be written fails now, with the OS's reason.
  std::optional<gbf::atomic_file> json_file, plot_file;
  if (!opts.json.empty()) json_file.emplace(opts.json);
  if (!opts.plot.empty()) plot_file.emplace(plot_script_path(opts.plot));

  const machine m = this_machine(gpu);
  print_header(run, m, out.skipped);
  runner rows(run);
  rows.run();
  out.rows = std::move(rows.rows);
  out.skipped.insert(out.skipped.end(), rows.skipped.begin(), rows.skipped.end());
  set_speedups(out.rows);
  out.crossovers = find_crossovers(out.rows, run, gpu);
  out.ratios = counting_vs_plain(out.rows, run);

  print_table(run, out);
  const bool ok = std::all_of(out.rows.begin(), out.rows.end(), [](const row& r) { return r.ok; });
  print_kind_ratios(run, out);
  const bool counting = std::find(run.kinds.begin(), run.kinds.end(), kind::counting) != run.kinds.end();
  std::printf("\nverification: %s\n",
              !ok        ? "FAILED (see the rows marked above)"
              : counting ? "ok (every row: no false negatives, same bits or counters and answers as the reference)"
                         : "ok (every row: no false negatives, same bits and answers as the reference)");
  std::fflush(stdout);

  if (json_file) {
    write_report_file(*json_file, json_report(run, m, out));
    std::fprintf(stderr, "gbf bench: JSON written to %s\n", opts.json.c_str());
  }
  if (plot_file) write_plot(opts.plot, *plot_file, gnuplot_script(opts.plot, run, m, out));
  return ok ? 0 : 1;
}

}  // namespace gbf::cli
