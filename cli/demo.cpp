// `gbf demo`: the CPU-versus-GPU comparison of the README's main job.
//
// Builds one filter from `keys` distinct keys on every backend available,
// probes it with `probes` keys that were never inserted, and reports keys/s
// per backend, the measured FPR against the model's prediction, that no
// inserted key is missed, that every backend holds the same bits, and the
// result of recomputing the GPU's answers on the CPU.
#include "cli/demo.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command_support.hpp"
#include "cli/cpu_caches.hpp"
#include "cli/device_memory.hpp"
#include "cli/stopwatch.hpp"
#include "cli/synthetic_keys.hpp"
#include "gbf/filter.hpp"

namespace gbf::cli {
namespace {

std::vector<std::uint64_t> make_keys(std::uint64_t first_counter, std::size_t n) {
  std::vector<std::uint64_t> keys(n);
  make_distinct_keys(keys.data(), first_counter, n);
  return keys;
}

/// Refuses a run whose keys, answers and filter copies would not fit the memory
/// the machine has available, naming the options, before anything is allocated:
/// Linux overcommits, so a too-large run would otherwise be killed mid-way.
void check_host_memory(const demo_options& opts, const layout& shape) {
  const std::uint64_t available = host_available_bytes();
  if (available == 0) return;
  // 8-byte keys, a bool answer per probe, and the filter up to 6 times (the rows'
  // words, each backend's filter, the verification's copy).
  const long double needed = 8.0L * opts.keys + 9.0L * opts.probes + 6.0L * shape.size_bytes();
  if (needed <= static_cast<long double>(available)) return;
  const std::uint64_t needed_bytes = needed >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(needed);
  throw gbf::allocation_error("--keys " + with_commas(opts.keys) + " and --probes " + with_commas(opts.probes) +
                                  " need about " + bytes_text(needed_bytes) +
                                  " of host memory (8 bytes a key, 9 a probe, the " +
                                  bytes_text(shape.size_bytes()) + " filter several times), and " +
                                  bytes_text(available) + " is available: use fewer keys or probes",
                              needed_bytes);
}

struct run_result {
  std::string name;
  double add_keys_per_s = 0;
  double contains_keys_per_s = 0;
  std::uint64_t false_positives = 0;
  std::uint64_t inserted_found = 0;
  std::vector<std::uint32_t> words;
};

struct workload {
  layout shape;
  std::uint64_t capacity;
  std::vector<std::uint64_t> inserted;
  std::vector<std::uint64_t> absent;
};

/// Keys of the untimed call before the timed ones: a probe of the empty filter,
/// which changes nothing but pays what a first call pays once (the GPU's pinned
/// staging buffers, ~100 MiB for three 4 Mi-key slots, and its lazy module load;
/// the CPU's worker threads), so the rates are of the work, not of the set-up.
constexpr std::size_t warm_up_keys = std::size_t{1} << 16;

// Times add and contains with keys in host memory (for the GPU: transfers included).
run_result run_from_host(const char* name, const options& opts, const workload& w,
                         std::unique_ptr<bool[]>& found, std::optional<filter>* keep) {
  filter f(w.shape, opts, w.capacity);
  f.contains(w.absent.data(), std::min(warm_up_keys, w.absent.size()), found.get());
  run_result r;
  r.name = name;
  r.add_keys_per_s = w.inserted.size() / seconds_of([&] { f.add(w.inserted.data(), w.inserted.size()); });
  r.contains_keys_per_s =
      w.absent.size() / seconds_of([&] { f.contains(w.absent.data(), w.absent.size(), found.get()); });
  for (std::size_t i = 0; i < w.absent.size(); ++i) r.false_positives += found[i];
  r.inserted_found = f.count(w.inserted.data(), w.inserted.size());
  r.words = f.words();
  if (keep != nullptr) keep->emplace(std::move(f));
  return r;
}

#if defined(GBF_HAS_CUDA)
// Times add and contains with keys and answers already in device memory.
run_result run_device_resident(const workload& w) {
  options opts;
  opts.where = backend::gpu;
  filter f(w.shape, opts, w.capacity);
  const device_buffer<std::uint64_t> inserted = to_device(w.inserted.data(), w.inserted.size());
  const device_buffer<std::uint64_t> absent = to_device(w.absent.data(), w.absent.size());
  device_buffer<bool> found(w.absent.size());
  f.contains(absent.data(), std::min(warm_up_keys, w.absent.size()), found.data());
  run_result r;
  r.name = "gpu, keys in device memory";
  r.add_keys_per_s = w.inserted.size() / seconds_of([&] { f.add(inserted.data(), w.inserted.size()); });
  r.contains_keys_per_s =
      w.absent.size() / seconds_of([&] { f.contains(absent.data(), w.absent.size(), found.data()); });
  // The false positives are the timed call's own answers (a recount would not
  // show a wrong answer of that call).
  std::unique_ptr<bool[]> answers(new bool[w.absent.size()]);
  GBF_CUDA_TRY(cudaMemcpy(answers.get(), found.data(), w.absent.size(), cudaMemcpyDeviceToHost));
  r.false_positives =
      static_cast<std::uint64_t>(std::count(answers.get(), answers.get() + w.absent.size(), true));
  r.inserted_found = f.count(inserted.data(), w.inserted.size());
  r.words = f.words();
  return r;
}
#endif

void print_row(const run_result& r, double cpu_contains_keys_per_s) {
  std::printf("  %-34s %12.3g %14.3g %9.2fx\n", r.name.c_str(), r.add_keys_per_s,
              r.contains_keys_per_s, r.contains_keys_per_s / cpu_contains_keys_per_s);
}

}  // namespace

int run_demo(const demo_options& opts) {
  workload w;
  w.capacity = opts.keys;
  sizing_options sizing;
  sizing.fpp = opts.fpp;
  w.shape = size_layout(sizing, opts.keys);  // a size no layout reaches is a usage error, as in create
  check_host_memory(opts, w.shape);
  std::printf("gbf demo: add %llu keys, probe %llu keys never added, target fpp %g\n",
              static_cast<unsigned long long>(opts.keys),
              static_cast<unsigned long long>(opts.probes), opts.fpp);
  std::printf("layout: %s; %.2f bits/key (a classic Bloom filter needs %.2f)\n",
              to_string(w.shape).c_str(), bits_per_key_at(w.shape, opts.keys),
              classic_bits_per_key(opts.fpp));

  const gpu_status gpu = query_gpu();
  const bool use_gpu = gpu.available && opts.where != backend::cpu;
  if (opts.where == backend::gpu && !gpu.available) {
    std::fprintf(stderr, "gbf demo: --backend gpu requested but there is no GPU: %s\n",
                 gpu.description.c_str());
    return 1;
  }
  std::printf("gpu: %s\n", gpu.available ? gpu.description.c_str()
                                         : ("none (" + gpu.description + "); CPU only").c_str());
  std::printf("cpu: %u hardware threads, AVX2 %s, AVX-512 %s\n", std::thread::hardware_concurrency(),
              cpu_has_avx2() ? "yes" : "no", cpu_has_avx512() ? "yes" : "no");

  w.inserted = make_keys(0, opts.keys);
  w.absent = make_keys(opts.keys, opts.probes);
  std::unique_ptr<bool[]> found(new bool[opts.probes]);

  std::vector<run_result> runs;
  if (opts.where != backend::gpu) {
    options cpu1;
    cpu1.where = backend::cpu;
    cpu1.cpu_threads = 1;
    runs.push_back(run_from_host("cpu, 1 thread", cpu1, w, found, nullptr));
    options cpu_all = cpu1;
    cpu_all.cpu_threads = opts.threads;
    const std::string all_name =
        "cpu, " + std::to_string(opts.threads ? opts.threads : std::thread::hardware_concurrency()) +
        " threads";
    runs.push_back(run_from_host(all_name.c_str(), cpu_all, w, found, nullptr));
  }
  verify_report verification;
  bool verified = false;
#if defined(GBF_HAS_CUDA)
  if (use_gpu) {
    runs.push_back(run_device_resident(w));
    options on_gpu;
    on_gpu.where = backend::gpu;
    std::optional<filter> gpu_filter;
    runs.push_back(run_from_host("gpu, keys in host memory", on_gpu, w, found, &gpu_filter));
    if (opts.verify) {
      verification = gpu_filter->verify_contains(w.absent.data(), w.absent.size(), found.get());
      verified = true;
    }
  }
#endif

  const double baseline = runs.front().contains_keys_per_s;
  std::printf("\n  %-34s %12s %14s %10s\n", "backend", "add keys/s", "contains keys/s",
              "vs row 1");
  for (const run_result& r : runs) print_row(r, baseline);

  const double predicted = expected_fpr(w.shape, static_cast<double>(opts.keys));
  const run_result& last = runs.back();
  const double measured = static_cast<double>(last.false_positives) / opts.probes;
  std::printf("\nfpr: measured %.4f%% (%llu of %llu), predicted %.4f%%\n", 100 * measured,
              static_cast<unsigned long long>(last.false_positives),
              static_cast<unsigned long long>(opts.probes), 100 * predicted);

  bool ok = true;
  for (const run_result& r : runs) {
    if (r.inserted_found != opts.keys) {
      std::printf("FALSE NEGATIVES on %s: %llu of %llu inserted keys found\n", r.name.c_str(),
                  static_cast<unsigned long long>(r.inserted_found),
                  static_cast<unsigned long long>(opts.keys));
      ok = false;
    }
    if (r.words != runs.front().words || r.false_positives != runs.front().false_positives) {
      std::printf("MISMATCH: %s holds different bits or answers than %s\n", r.name.c_str(),
                  runs.front().name.c_str());
      ok = false;
    }
  }
  if (ok) {
    std::printf("no false negatives: all %llu inserted keys found on every backend\n",
                static_cast<unsigned long long>(opts.keys));
    std::printf("bit-identical: every backend built the same %llu words\n",
                static_cast<unsigned long long>(w.shape.num_words()));
  }
  if (verified) {
    std::printf("verify: %llu GPU answers recomputed on the CPU, %llu mismatches\n",
                static_cast<unsigned long long>(verification.keys_checked),
                static_cast<unsigned long long>(verification.mismatches));
    ok = ok && verification.ok();
  } else if (!use_gpu) {
    std::printf("verify: skipped (no GPU answers to check; CPU only)\n");
  }
  return ok ? 0 : 1;
}

}  // namespace gbf::cli
