// gbf join: see cli/join.hpp.
//
// Data (deterministic from the seed, one splitmix64 stream):
//   orders:   n = round(1.5M * sf) rows; o_orderkey sparse as in TPC-H dbgen
//             (row i -> (i / 8) * 32 + i % 8 + 1: 8 keys used in every 32),
//             o_orderdate uniform over 1992-01-01 .. 1998-08-02 (days since 1970-01-01).
//   lineitem: 1..7 rows per order (uniform, mean 4), in order-key order as dbgen
//             writes them; l_orderkey = the order's key, l_quantity uniform 1..50.
// Query:
//   SELECT count(*), sum(l_quantity) FROM lineitem JOIN orders ON l_orderkey = o_orderkey
//   WHERE o_orderdate < cutoff
// Phases:
//   scan       the predicate over orders (both plans need it; not in the speedup)
//   build      gbf::filter::create + add of the qualifying o_orderkey
//   prefilter  filter.select over l_orderkey: the surviving row indices
//   join       exact hash join of the survivors: build a hash table on the
//              qualifying orders, probe it with the surviving rows
//   baseline   the same hash join over every lineitem row, no filter
// speedup = baseline / (build + prefilter + join).
//
// The hash table is a flat open-addressing table (linear probing, power-of-two
// capacity >= 2x the keys, multiply-shift hash); it is built on one thread and
// probed by --threads threads in both plans, so the plans differ only by the filter.
#include "cli/join.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/cpu_caches.hpp"
#include "cli/stopwatch.hpp"
#include "cli/text.hpp"
#include "gbf/detail/splitmix64.hpp"
#include "gbf/error.hpp"
#include "gbf/files.hpp"

namespace gbf::cli {
namespace {

constexpr std::int32_t first_order_date = 8035;   // 1992-01-01
constexpr std::int32_t last_order_date = 10440;   // 1998-08-02
constexpr std::int32_t order_date_span = last_order_date - first_order_date + 1;
constexpr double orders_per_sf = 1.5e6;

/// Uniform in [0, n) from the generator (multiply-shift; the bias is below 2^-32 for these n).
std::uint32_t below(detail::splitmix64_stream& rng, std::uint32_t n) {
  return static_cast<std::uint32_t>(((rng.next() >> 32) * n) >> 32);
}

struct tables {
  std::vector<std::uint64_t> o_orderkey;
  std::vector<std::int32_t> o_orderdate;
  std::vector<std::uint64_t> l_orderkey;
  std::vector<std::int32_t> l_quantity;
};

tables generate(double sf, std::uint64_t seed) {
  const auto num_orders =
      static_cast<std::size_t>(std::max(1.0, std::round(orders_per_sf * sf)));
  tables t;
  t.o_orderkey.resize(num_orders);
  t.o_orderdate.resize(num_orders);
  t.l_orderkey.reserve(num_orders * 4 + 1024);
  t.l_quantity.reserve(num_orders * 4 + 1024);
  detail::splitmix64_stream rng{seed};
  for (std::size_t i = 0; i < num_orders; ++i) {
    const std::uint64_t key = (i / 8) * 32 + i % 8 + 1;
    t.o_orderkey[i] = key;
    t.o_orderdate[i] = first_order_date + static_cast<std::int32_t>(below(rng, order_date_span));
    const std::uint32_t lines = 1 + below(rng, 7);
    for (std::uint32_t line = 0; line < lines; ++line) {
      t.l_orderkey.push_back(key);
      t.l_quantity.push_back(1 + static_cast<std::int32_t>(below(rng, 50)));
    }
  }
  return t;
}

/// "YYYY-MM-DD" of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
std::string iso_date(std::int32_t days) {
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  char text[48];
  std::snprintf(text, sizeof text, "%04lld-%02lld-%02lld", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d));
  return text;
}

/// Flat open-addressing hash table from order key (never 0) to o_orderdate.
class hash_table {
 public:
  explicit hash_table(std::size_t n) {
    std::size_t capacity = 16;
    shift_ = 60;
    while (capacity < 2 * n) {
      capacity *= 2;
      --shift_;
    }
    mask_ = capacity - 1;
    keys_.assign(capacity, 0);
    values_.assign(capacity, 0);
  }
  void insert(std::uint64_t key, std::int32_t value) {
    std::size_t slot = slot_of(key);
    while (keys_[slot] != 0 && keys_[slot] != key) slot = (slot + 1) & mask_;
    keys_[slot] = key;
    values_[slot] = value;
  }
  bool contains(std::uint64_t key) const {
    for (std::size_t slot = slot_of(key);; slot = (slot + 1) & mask_) {
      if (keys_[slot] == key) return true;
      if (keys_[slot] == 0) return false;
    }
  }
  std::size_t bytes() const { return keys_.size() * (sizeof(std::uint64_t) + sizeof(std::int32_t)); }

 private:
  std::size_t slot_of(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  std::vector<std::uint64_t> keys_;
  std::vector<std::int32_t> values_;
  std::size_t mask_ = 0;
  unsigned shift_ = 60;
};

struct join_result {
  std::uint64_t count = 0;
  std::int64_t sum_quantity = 0;
};

/// The exact join: a hash table on the qualifying orders, probed by lineitem rows
/// rows[0..n) (or rows 0..n-1 when rows is null) on `threads` threads.
join_result hash_join(const std::vector<std::uint64_t>& build_keys,
                      const std::vector<std::int32_t>& build_dates, const tables& t,
                      const std::uint64_t* rows, std::size_t n, unsigned threads) {
  hash_table table(build_keys.size());
  for (std::size_t i = 0; i < build_keys.size(); ++i) table.insert(build_keys[i], build_dates[i]);
  const unsigned parts = static_cast<unsigned>(
      std::clamp<std::size_t>(n / (std::size_t{1} << 16), 1, threads));
  std::vector<join_result> partial(parts);
  const auto probe = [&](unsigned part) {
    const std::size_t begin = n / parts * part + std::min<std::size_t>(part, n % parts);
    const std::size_t end = n / parts * (part + 1) + std::min<std::size_t>(part + 1, n % parts);
    join_result r;
    for (std::size_t j = begin; j < end; ++j) {
      const std::size_t row = rows == nullptr ? j : static_cast<std::size_t>(rows[j]);
      if (table.contains(t.l_orderkey[row])) {
        ++r.count;
        r.sum_quantity += t.l_quantity[row];
      }
    }
    partial[part] = r;
  };
  std::vector<std::thread> workers;
  for (unsigned part = 1; part < parts; ++part) workers.emplace_back(probe, part);
  probe(0);
  for (std::thread& w : workers) w.join();
  join_result total;
  for (const join_result& r : partial) {
    total.count += r.count;
    total.sum_quantity += r.sum_quantity;
  }
  return total;
}

void export_csv(const std::string& dir, const tables& t) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw io_error("cannot create directory " + dir + ": " + ec.message(), ec.value());
  // Each table is written like every gbf output (gbf::atomic_file): whole or not at all.
  const auto write = [&](const std::string& name, const char* header, const auto& keys,
                         const auto& values) {
    gbf::atomic_file file((std::filesystem::path(dir) / name).string());
    constexpr std::size_t flush_bytes = std::size_t{1} << 20;
    std::string text = std::string(header) + "\n";
    char line[48];
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const int n = std::snprintf(line, sizeof line, "%llu,%d\n", static_cast<unsigned long long>(keys[i]),
                                  static_cast<int>(values[i]));
      text.append(line, static_cast<std::size_t>(n));
      if (text.size() >= flush_bytes) {
        file.write(text.data(), text.size());
        text.clear();
      }
    }
    file.write(text.data(), text.size());
    file.commit();
  };
  write("orders.csv", "o_orderkey,o_orderdate", t.o_orderkey, t.o_orderdate);
  write("lineitem.csv", "l_orderkey,l_quantity", t.l_orderkey, t.l_quantity);
}

/// Host bytes a run holds at its peak, per unit of scale factor: the tables (1.5 M
/// orders and about 6 M lineitems of 12 bytes a row), the build side and its hash
/// table, the filter, the selected rows and the answers. Measured: 9.5 GB peak RSS
/// at --sf 100, so 100 MB per SF with a margin.
constexpr double peak_bytes_per_sf = 100e6;

/// Refuses a scale factor whose tables would not fit the memory the machine has
/// available, before they are generated: Linux overcommits, and the kernel would
/// otherwise kill the run mid-way.
void check_host_memory(double sf) {
  const std::uint64_t available = host_available_bytes();
  const double needed = peak_bytes_per_sf * sf;
  if (available == 0 || needed <= static_cast<double>(available)) return;
  char sf_text[32];
  std::snprintf(sf_text, sizeof sf_text, "%g", sf);
  throw allocation_error(std::string("--sf ") + sf_text + " needs about " +
                             bytes_text(static_cast<std::uint64_t>(needed)) + " of host memory (about " +
                             bytes_text(static_cast<std::uint64_t>(peak_bytes_per_sf)) + " per unit of SF), and " +
                             bytes_text(available) + " is available: use a smaller --sf",
                         static_cast<std::uint64_t>(needed));
}

}  // namespace

int run_join(const join_args& args) {
  if (!(args.sf > 0) || args.sf > 1000) throw usage_error("--sf must be in (0, 1000]");
  if (!(args.selectivity > 0) || args.selectivity > 1)
    throw usage_error("--selectivity must be in (0, 1]");
  if (!(args.fpp > 0) || args.fpp >= 1) throw usage_error("--fpp must be in (0, 1)");
  check_host_memory(args.sf);
  const unsigned threads =
      args.threads != 0 ? args.threads : std::max(1u, std::thread::hardware_concurrency());

  stopwatch clock;
  const tables t = generate(args.sf, args.seed);
  const double generate_ms = 1e3 * clock.lap();
  if (!args.export_csv.empty()) export_csv(args.export_csv, t);

  // The predicate: o_orderdate < cutoff, about `selectivity` of the date range.
  const std::int32_t cutoff =
      first_order_date +
      static_cast<std::int32_t>(std::llround(args.selectivity * order_date_span));
  clock.restart();
  std::vector<std::uint64_t> build_keys;
  std::vector<std::int32_t> build_dates;
  for (std::size_t i = 0; i < t.o_orderkey.size(); ++i) {
    if (t.o_orderdate[i] < cutoff) {
      build_keys.push_back(t.o_orderkey[i]);
      build_dates.push_back(t.o_orderdate[i]);
    }
  }
  const double scan_ms = 1e3 * clock.lap();

  // Build the filter on the qualifying keys.
  options opts;
  opts.where = args.where;
  opts.cpu_threads = threads;
  clock.restart();
  filter f = filter::create(std::max<std::size_t>(build_keys.size(), 1), args.fpp, opts);
  f.add(build_keys.data(), build_keys.size());
  const double build_ms = 1e3 * clock.lap();

  // Prefilter lineitem.
  const std::size_t num_lines = t.l_orderkey.size();
  std::unique_ptr<std::uint64_t[]> rows(new std::uint64_t[num_lines]);
  clock.restart();
  const std::uint64_t survivors = f.select(t.l_orderkey.data(), num_lines, rows.get());
  const double prefilter_ms = 1e3 * clock.lap();

  // Exact join of the survivors, then the baseline without the filter.
  clock.restart();
  const join_result joined = hash_join(build_keys, build_dates, t, rows.get(),
                                       static_cast<std::size_t>(survivors), threads);
  const double join_ms = 1e3 * clock.lap();
  const join_result baseline = hash_join(build_keys, build_dates, t, nullptr, num_lines, threads);
  const double baseline_ms = 1e3 * clock.lap();

  if (joined.count != baseline.count || joined.sum_quantity != baseline.sum_quantity) {
    std::fprintf(stderr,
                 "gbf: join mismatch: prefiltered %llu rows (sum %lld) vs baseline %llu (sum %lld)\n",
                 static_cast<unsigned long long>(joined.count),
                 static_cast<long long>(joined.sum_quantity),
                 static_cast<unsigned long long>(baseline.count),
                 static_cast<long long>(baseline.sum_quantity));
    return 1;
  }

  const std::uint64_t false_positives = survivors - joined.count;
  const std::uint64_t non_matching = num_lines - joined.count;
  const double measured_fpr =
      non_matching == 0 ? 0.0 : static_cast<double>(false_positives) / static_cast<double>(non_matching);
  const double actual_selectivity =
      static_cast<double>(build_keys.size()) / static_cast<double>(t.o_orderkey.size());
  const double prefiltered_ms = build_ms + prefilter_ms + join_ms;
  const double speedup = prefiltered_ms > 0 ? baseline_ms / prefiltered_ms : 0.0;
  const bool on_gpu = f.where() == backend::gpu;
  const char* placement =
      on_gpu ? "filter build and select on the GPU (keys host-resident, streamed through the "
               "pinned pipeline; row compaction on the host); hash joins on the CPU"
             : "everything on the CPU";

  if (args.json) {
    std::printf(
        "{\"sf\": %g, \"seed\": %llu, \"selectivity_target\": %g, \"selectivity_actual\": %.6f, "
        "\"cutoff\": %d, \"cutoff_date\": \"%s\", \"orders\": %zu, \"qualifying_orders\": %zu, "
        "\"lineitem_rows\": %zu, \"survivors\": %llu, \"true_matches\": %llu, "
        "\"false_positives\": %llu, \"measured_fpr\": %.6g, \"target_fpp\": %g, "
        "\"result_count\": %llu, \"result_sum_quantity\": %lld, \"backend\": \"%s\", "
        "\"backend_description\": %s, \"placement\": \"%s\", \"threads\": %u, "
        "\"filter_bytes\": %llu, \"times_ms\": {\"generate\": %.3f, \"scan\": %.3f, "
        "\"build\": %.3f, \"prefilter\": %.3f, \"join\": %.3f, \"prefiltered_total\": %.3f, "
        "\"baseline_join\": %.3f}, \"speedup\": %.4f}\n",
        args.sf, static_cast<unsigned long long>(args.seed), args.selectivity, actual_selectivity,
        cutoff, iso_date(cutoff).c_str(), t.o_orderkey.size(), build_keys.size(), num_lines,
        static_cast<unsigned long long>(survivors), static_cast<unsigned long long>(joined.count),
        static_cast<unsigned long long>(false_positives), measured_fpr, args.fpp,
        static_cast<unsigned long long>(joined.count), static_cast<long long>(joined.sum_quantity),
        to_string(f.where()), json_string(f.description()).c_str(), placement, threads,
        static_cast<unsigned long long>(f.layout().size_bytes()), generate_ms, scan_ms,
        build_ms, prefilter_ms, join_ms, prefiltered_ms, baseline_ms, speedup);
    return 0;
  }
  std::printf("gbf join: SF %g, seed %llu, %s\n", args.sf,
              static_cast<unsigned long long>(args.seed), f.description().c_str());
  std::printf("  placement:          %s\n", placement);
  std::printf("  predicate:          o_orderdate < %s (day %d): %zu of %zu orders (%.3f%%, target %.3f%%)\n",
              iso_date(cutoff).c_str(), cutoff, build_keys.size(), t.o_orderkey.size(),
              100 * actual_selectivity, 100 * args.selectivity);
  std::printf("  filter:             %s, fpp %g\n", to_string(f.layout()).c_str(), args.fpp);
  std::printf("  lineitem rows in:   %zu\n", num_lines);
  std::printf("  survivors:          %llu (%.3f%%)\n", static_cast<unsigned long long>(survivors),
              100.0 * static_cast<double>(survivors) / static_cast<double>(num_lines));
  std::printf("  true matches:       %llu\n", static_cast<unsigned long long>(joined.count));
  std::printf("  false positives:    %llu (measured FPR %.4f%% of non-matching rows)\n",
              static_cast<unsigned long long>(false_positives), 100 * measured_fpr);
  std::printf("  result:             count %llu, sum(l_quantity) %lld (baseline agrees)\n",
              static_cast<unsigned long long>(joined.count),
              static_cast<long long>(joined.sum_quantity));
  std::printf("  times (ms):         build %.2f + prefilter %.2f + join %.2f = %.2f; baseline join %.2f\n",
              build_ms, prefilter_ms, join_ms, prefiltered_ms, baseline_ms);
  std::printf("  speedup:            %.2fx (baseline / prefiltered), %u threads; generate %.0f ms, scan %.2f ms\n",
              speedup, threads, generate_ms, scan_ms);
  return 0;
}

}  // namespace gbf::cli
