// The scaling chain as it grows (docs/scaling.md): FPR, memory and speed
// against plain filters, measured in one run.
//
//   gbf_scaling_growth [--initial 1000] [--final 16000000] [--probes 10000000]
//                      [--fpp 0.01] [--expansion 2] [--tightening 0.5]
//                      [--layout W/K] [--backend cpu|gpu] [--threads N]
//
// 1. Growth: a chain made for --initial keys takes distinct keys up to --final;
//    at each doubling of the key count it prints one tab-separated row: keys,
//    levels, chain bytes, measured chain FPR on --probes absent keys, the
//    chain's model FPR (scaling_stats::compound_fpr), the FPR of a plain filter
//    sized for --initial fed the same keys, and the bytes of a plain filter
//    sized up front for the current count (the memory price of not knowing it).
// 2. Speed at --final keys: add (all keys, one batch) and contains (--probes
//    keys, half present) on the chain, and on a plain filter sized for --final
//    up front, side by side.
// Keys are SplitMix64 of a counter (distinct); probes use a disjoint range, so
// every hit on them is a false positive.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gbf/detail/splitmix64.hpp"
#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "gbf/sizing.hpp"

namespace {

struct settings {
  std::uint64_t initial = 1'000;
  std::uint64_t final_keys = 16'000'000;
  std::uint64_t probes = 10'000'000;
  double fpp = 0.01;
  std::uint32_t expansion = 2;
  double tightening = 0.5;
  gbf::shape layout;  // W and k of every level (and of the plain filters)
  gbf::backend where = gbf::backend::cpu;
  unsigned threads = 0;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr, "gbf_scaling_growth: %s (see the comment at the top of bench/scaling_growth.cpp)\n",
               problem);
  std::exit(2);
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + name).c_str());
    const char* value = argv[++i];
    if (name == "--initial") s.initial = std::strtoull(value, nullptr, 10);
    else if (name == "--final") s.final_keys = std::strtoull(value, nullptr, 10);
    else if (name == "--probes") s.probes = std::strtoull(value, nullptr, 10);
    else if (name == "--fpp") s.fpp = std::strtod(value, nullptr);
    else if (name == "--expansion") s.expansion = static_cast<std::uint32_t>(std::strtoul(value, nullptr, 10));
    else if (name == "--tightening") s.tightening = std::strtod(value, nullptr);
    else if (name == "--layout") {
      char* end = nullptr;
      s.layout.words_per_block = static_cast<std::uint32_t>(std::strtoul(value, &end, 10));
      if (end == nullptr || *end != '/') usage("--layout is W/K");
      s.layout.bits_per_key = static_cast<std::uint32_t>(std::strtoul(end + 1, nullptr, 10));
    } else if (name == "--threads") s.threads = static_cast<unsigned>(std::strtoul(value, nullptr, 10));
    else if (name == "--backend") {
      if (std::strcmp(value, "cpu") == 0) s.where = gbf::backend::cpu;
      else if (std::strcmp(value, "gpu") == 0) s.where = gbf::backend::gpu;
      else usage("--backend is cpu or gpu");
    } else {
      usage(("unknown option " + name).c_str());
    }
  }
  if (s.initial == 0 || s.final_keys < s.initial || s.probes == 0) usage("need 0 < initial <= final, probes > 0");
  return s;
}

std::vector<std::uint64_t> make_keys(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = gbf::detail::splitmix64(first + i);
  return keys;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse(argc, argv);
  gbf::options opts;
  opts.where = s.where;
  opts.cpu_threads = s.threads;
  gbf::scaling_policy policy;
  policy.expansion = s.expansion;
  policy.tightening = s.tightening;

  const std::vector<std::uint64_t> keys = make_keys(0, s.final_keys);
  const std::vector<std::uint64_t> absent = make_keys(std::uint64_t{1} << 62, s.probes);

  gbf::scaling_filter chain = gbf::scaling_filter::create(s.initial, s.fpp, policy, opts, s.layout);
  gbf::filter plain_initial = gbf::filter::create(s.initial, s.fpp, opts, s.layout);
  std::printf("# gbf_scaling_growth: layout %u/%u, initial %llu, fpp %g, expansion %u, tightening %g, %llu absent probes, %s\n",
              s.layout.words_per_block, s.layout.bits_per_key,
              static_cast<unsigned long long>(s.initial), s.fpp, s.expansion, s.tightening,
              static_cast<unsigned long long>(s.probes), chain.description().c_str());
  std::printf("keys\tlevels\tchain_bytes\tchain_fpr\tchain_model_fpr\tplain_initial_fpr\tpresized_bytes\n");
  std::uint64_t added = 0;
  for (std::uint64_t target = s.initial;; target *= 2) {
    if (target > s.final_keys) target = s.final_keys;
    chain.add(keys.data() + added, target - added);
    plain_initial.add(keys.data() + added, target - added);
    added = target;
    if (chain.count(keys.data(), added) != added) {
      std::fprintf(stderr, "false negatives at %llu keys\n", static_cast<unsigned long long>(added));
      return 1;
    }
    const gbf::scaling_stats st = chain.stats();
    const double chain_fpr = static_cast<double>(chain.count(absent.data(), absent.size())) / s.probes;
    const double plain_fpr = static_cast<double>(plain_initial.count(absent.data(), absent.size())) / s.probes;
    const gbf::layout presized = gbf::size_for(added, s.fpp, s.layout);
    std::printf("%llu\t%zu\t%llu\t%.6f\t%.6f\t%.6f\t%llu\n", static_cast<unsigned long long>(added),
                st.num_levels, static_cast<unsigned long long>(st.size_bytes), chain_fpr,
                st.compound_fpr, plain_fpr, static_cast<unsigned long long>(presized.size_bytes()));
    std::fflush(stdout);
    if (added == s.final_keys) break;
  }

  // Speed at the final size: the chain grown from --initial against a plain
  // filter sized for --final up front, the same keys and probes.
  std::vector<std::uint64_t> probes = absent;
  for (std::size_t i = 0; i < probes.size(); i += 2) probes[i] = keys[(i / 2) % keys.size()];
  std::unique_ptr<bool[]> found(new bool[probes.size()]);
  std::printf("\n# speed at %llu keys (keys/s; contains: %llu probes, half present)\n",
              static_cast<unsigned long long>(s.final_keys), static_cast<unsigned long long>(s.probes));
  std::printf("filter\tlevels\tbytes\tadd_keys_per_s\tcontains_keys_per_s\tfpr_on_absent\n");
  {
    gbf::scaling_filter fresh = gbf::scaling_filter::create(s.initial, s.fpp, policy, opts, s.layout);
    auto start = std::chrono::steady_clock::now();
    fresh.add(keys.data(), keys.size());
    const double add_s = seconds_since(start);
    fresh.contains(probes.data(), probes.size(), found.get());  // warm-up
    start = std::chrono::steady_clock::now();
    fresh.contains(probes.data(), probes.size(), found.get());
    const double contains_s = seconds_since(start);
    const gbf::scaling_stats st = fresh.stats();
    std::printf("scaling chain\t%zu\t%llu\t%.3g\t%.3g\t%.6f\n", st.num_levels,
                static_cast<unsigned long long>(st.size_bytes), keys.size() / add_s,
                probes.size() / contains_s,
                static_cast<double>(fresh.count(absent.data(), absent.size())) / s.probes);
  }
  {
    gbf::filter presized = gbf::filter::create(s.final_keys, s.fpp, opts, s.layout);
    auto start = std::chrono::steady_clock::now();
    presized.add(keys.data(), keys.size());
    const double add_s = seconds_since(start);
    presized.contains(probes.data(), probes.size(), found.get());
    start = std::chrono::steady_clock::now();
    presized.contains(probes.data(), probes.size(), found.get());
    const double contains_s = seconds_since(start);
    std::printf("plain, sized for final\t1\t%llu\t%.3g\t%.3g\t%.6f\n",
                static_cast<unsigned long long>(presized.layout().size_bytes()), keys.size() / add_s,
                probes.size() / contains_s,
                static_cast<double>(presized.count(absent.data(), absent.size())) / s.probes);
  }
  return 0;
}
