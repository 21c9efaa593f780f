// The analysis of `gbf bench` (cli/bench_analysis.hpp) on synthetic rows:
// the time fits, the measured and fitted CPU/GPU crossovers and the speedups.
// On a machine without a GPU the bench itself never reaches the crossover
// code, so these pin it here.
#include "cli/bench_analysis.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gbf::cli::bench {
namespace {

const std::vector<std::uint64_t> grid{1000, 10000, 100000, 1000000, 10000000};

/// A row of `e` whose call takes `seconds`.
row timed_row(engine e, op o, double mib, std::uint64_t batch, double seconds) {
  row r;
  r.backend = e;
  r.operation = o;
  r.filter_mib = mib;
  r.batch = batch;
  r.time.median_s = seconds;
  r.time.best_s = seconds;
  r.keys_per_s = static_cast<double>(batch) / seconds;
  return r;
}

/// Rows of `e` over `batches` that take exactly fixed_s + n / rate.
void add_linear_rows(std::vector<row>& rows, engine e, op o, double mib, double fixed_s, double rate,
                     const std::vector<std::uint64_t>& batches = grid) {
  for (const std::uint64_t b : batches)
    rows.push_back(timed_row(e, o, mib, b, fixed_s + static_cast<double>(b) / rate));
}

sweep gpu_sweep(std::vector<engine> engines) {
  sweep run;
  filter_case c;
  c.mib = 1;
  run.cases = {c};
  run.ops = {op::contains};
  run.engines = std::move(engines);
  run.batches = grid;
  return run;
}

gpu_status a_gpu() {
  gpu_status gpu;
  gpu.available = true;
  gpu.description = "test GPU";
  return gpu;
}

TEST(BenchAnalysis, FitRecoversTheFixedCostAndRateOfLinearTimes) {
  std::mt19937_64 rng(20);
  std::uniform_real_distribution<double> log_fixed(-7, -3);  // 100 ns .. 1 ms
  std::uniform_real_distribution<double> log_rate(6, 10);    // 1 M .. 10 G keys/s
  for (int trial = 0; trial < 200; ++trial) {
    const double fixed_s = std::pow(10.0, log_fixed(rng));
    const double rate = std::pow(10.0, log_rate(rng));
    std::vector<row> rows;
    add_linear_rows(rows, engine::cpu, op::add, 64, fixed_s, rate);
    const time_fit fit = fit_time(rows, kind::plain, engine::cpu, op::add, 64);
    ASSERT_TRUE(fit.valid());
    EXPECT_NEAR(fit.keys_per_s, rate, 1e-6 * rate) << "trial " << trial;
    EXPECT_NEAR(fit.fixed_s, fixed_s, 1e-6 * fixed_s + 1e-12) << "trial " << trial;
  }
}

TEST(BenchAnalysis, FitUsesOnlyTheRowsOfItsEngineOpAndFilter) {
  std::vector<row> rows;
  add_linear_rows(rows, engine::cpu, op::add, 64, 1e-6, 1e8);
  add_linear_rows(rows, engine::cpu1, op::add, 64, 5e-6, 2e7);
  add_linear_rows(rows, engine::cpu, op::contains, 64, 9e-6, 3e7);
  add_linear_rows(rows, engine::cpu, op::add, 1, 2e-6, 4e8);
  const time_fit fit = fit_time(rows, kind::plain, engine::cpu, op::add, 64);
  EXPECT_NEAR(fit.keys_per_s, 1e8, 1e-2);
  EXPECT_NEAR(fit.fixed_s, 1e-6, 1e-12);
}

TEST(BenchAnalysis, FitIsInvalidWithOneBatchOrTimesThatDoNotGrow) {
  std::vector<row> one;
  add_linear_rows(one, engine::cpu, op::add, 1, 1e-6, 1e8, {1000});
  EXPECT_FALSE(fit_time(one, kind::plain, engine::cpu, op::add, 1).valid());
  EXPECT_FALSE(fit_time({}, kind::plain, engine::cpu, op::add, 1).valid());
  const std::vector<row> flat{timed_row(engine::cpu, op::add, 1, 1000, 1e-3),
                              timed_row(engine::cpu, op::add, 1, 100000, 1e-3)};
  EXPECT_FALSE(fit_time(flat, kind::plain, engine::cpu, op::add, 1).valid());
}

TEST(BenchAnalysis, CrossoversMatchTheLinearModelsTheRowsFollow) {
  // CPU: small fixed cost, low rate; GPU: large fixed cost, high rate. The
  // GPU wins from n* = (a_g - a_c) / (1/R_c - 1/R_g): measured, from the first
  // grid batch above n*; fitted, n* itself.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> log_gpu_fixed(-5, -3);
  for (int trial = 0; trial < 200; ++trial) {
    const double cpu_fixed = 1e-6, cpu_rate = 1e8;
    const double gpu_fixed = std::pow(10.0, log_gpu_fixed(rng)), gpu_rate = 2e9;
    const double n_star = (gpu_fixed - cpu_fixed) / (1 / cpu_rate - 1 / gpu_rate);
    std::vector<row> rows;
    add_linear_rows(rows, engine::cpu, op::contains, 1, cpu_fixed, cpu_rate);
    add_linear_rows(rows, engine::gpu_host, op::contains, 1, gpu_fixed, gpu_rate);
    const std::vector<crossover> xs =
        find_crossovers(rows, gpu_sweep({engine::cpu, engine::gpu_host}), a_gpu());
    ASSERT_EQ(xs.size(), 1u);
    EXPECT_EQ(xs[0].gpu, engine::gpu_host);
    EXPECT_FALSE(xs[0].no_gpu);
    EXPECT_NEAR(xs[0].fitted_batch, n_star, 1e-6 * n_star) << "trial " << trial;
    std::uint64_t first_win = 0;
    bool tie = false;  // n* on a grid point: rounding decides, so there is nothing to pin
    for (const std::uint64_t b : grid) {
      tie = tie || std::fabs(static_cast<double>(b) - n_star) < 1e-6 * n_star;
      if (static_cast<double>(b) > n_star && first_win == 0) first_win = b;
    }
    if (tie) continue;
    EXPECT_EQ(xs[0].batch, first_win) << "trial " << trial << ", n* = " << n_star;
    if (first_win == 0)
      EXPECT_EQ(xs[0].text, "GPU never wins in the measured range");
    else
      EXPECT_EQ(xs[0].text.rfind("GPU faster than the best CPU row from batch ", 0), 0u) << xs[0].text;
  }
}

TEST(BenchAnalysis, MeasuredCrossoverIsWhereTheGpuStaysFasterAgainstTheBestCpuRow) {
  // cpu1 is the faster CPU row at every batch; the GPU beats cpu but not cpu1 at
  // 1e4, wins over both at 1e3 only by noise, and from 1e5 on for good.
  std::vector<row> rows;
  const std::vector<double> cpu1_rate{100e6, 100e6, 100e6, 100e6, 100e6};
  const std::vector<double> cpu_rate{50e6, 50e6, 50e6, 50e6, 50e6};
  const std::vector<double> gpu_rate{120e6, 80e6, 150e6, 900e6, 2e9};
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const double n = static_cast<double>(grid[i]);
    rows.push_back(timed_row(engine::cpu1, op::contains, 1, grid[i], n / cpu1_rate[i]));
    rows.push_back(timed_row(engine::cpu, op::contains, 1, grid[i], n / cpu_rate[i]));
    rows.push_back(timed_row(engine::gpu_device, op::contains, 1, grid[i], n / gpu_rate[i]));
  }
  const std::vector<crossover> xs =
      find_crossovers(rows, gpu_sweep({engine::cpu1, engine::cpu, engine::gpu_device}), a_gpu());
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].gpu, engine::gpu_device);
  EXPECT_EQ(xs[0].batch, 100000u);
  EXPECT_EQ(xs[0].text, "GPU faster than the best CPU row from batch 1e5");
}

TEST(BenchAnalysis, GpuSlowerAtTheLargestBatchNeverWins) {
  std::vector<row> rows;
  add_linear_rows(rows, engine::cpu, op::contains, 1, 0, 1e9);
  add_linear_rows(rows, engine::gpu_host, op::contains, 1, 0, 5e8);
  const std::vector<crossover> xs =
      find_crossovers(rows, gpu_sweep({engine::cpu, engine::gpu_host}), a_gpu());
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].batch, 0u);
  EXPECT_TRUE(std::isnan(xs[0].fitted_batch));  // R_gpu < R_cpu: the fits never cross
  EXPECT_EQ(xs[0].text, "GPU never wins in the measured range");
}

TEST(BenchAnalysis, OneCrossoverPerGpuEngineAndOpAndFilter) {
  std::vector<row> rows;
  sweep run = gpu_sweep({engine::cpu1, engine::gpu_device, engine::gpu_host});
  filter_case big;
  big.mib = 64;
  run.cases.push_back(big);
  run.ops = {op::add, op::contains};
  for (const filter_case& c : run.cases)
    for (const op o : run.ops)
      for (const engine e : run.engines) add_linear_rows(rows, e, o, c.mib, is_gpu(e) ? 1e-4 : 1e-6, is_gpu(e) ? 1e9 : 1e8);
  const std::vector<crossover> xs = find_crossovers(rows, run, a_gpu());
  ASSERT_EQ(xs.size(), 8u);
  std::size_t i = 0;
  for (const filter_case& c : run.cases)
    for (const op o : run.ops)
      for (const engine g : {engine::gpu_device, engine::gpu_host}) {
        EXPECT_EQ(xs[i].filter_mib, c.mib);
        EXPECT_EQ(xs[i].operation, o);
        EXPECT_EQ(xs[i].gpu, g);
        EXPECT_NE(xs[i].batch, 0u);
        ++i;
      }
}

TEST(BenchAnalysis, WithoutAGpuEachOpAndFilterGetsOneCrossoverSayingWhy) {
  std::vector<row> rows;
  add_linear_rows(rows, engine::cpu1, op::add, 1, 1e-6, 1e8);
  sweep run = gpu_sweep({engine::cpu1, engine::cpu});
  run.ops = {op::add, op::contains};
  gpu_status none;
  none.description = "no CUDA driver";
  const std::vector<crossover> xs = find_crossovers(rows, run, none);
  ASSERT_EQ(xs.size(), 2u);
  for (const crossover& x : xs) {
    EXPECT_TRUE(x.no_gpu);
    EXPECT_EQ(x.batch, 0u);
    EXPECT_EQ(x.text, "no GPU: no CUDA driver");
  }
}

TEST(BenchAnalysis, GpuRowsWithoutCpuRowsSayThereIsNothingToCompare) {
  std::vector<row> rows;
  add_linear_rows(rows, engine::gpu_host, op::contains, 1, 1e-4, 1e9);
  const std::vector<crossover> xs = find_crossovers(rows, gpu_sweep({engine::gpu_host}), a_gpu());
  ASSERT_EQ(xs.size(), 1u);
  EXPECT_EQ(xs[0].batch, 0u);
  EXPECT_EQ(xs[0].text, "no CPU row to compare with (--backends)");
}

TEST(BenchAnalysis, SpeedupsAreOverCpu1AndGpuRowsAlsoOverTheBestCpuRow) {
  std::vector<row> rows{timed_row(engine::cpu1, op::add, 1, 1000, 1e-3),
                        timed_row(engine::cpu, op::add, 1, 1000, 0.5e-3),
                        timed_row(engine::gpu_host, op::add, 1, 1000, 0.25e-3),
                        timed_row(engine::gpu_host, op::add, 1, 2000, 0.25e-3)};
  set_speedups(rows);
  EXPECT_DOUBLE_EQ(rows[0].speedup, 1);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 2);
  EXPECT_DOUBLE_EQ(rows[2].speedup, 4);
  EXPECT_TRUE(std::isnan(rows[0].speedup_best_cpu));  // CPU rows have no "vs CPU"
  EXPECT_TRUE(std::isnan(rows[1].speedup_best_cpu));
  EXPECT_DOUBLE_EQ(rows[2].speedup_best_cpu, 2);
  EXPECT_TRUE(std::isnan(rows[3].speedup));  // no CPU row at that batch
  EXPECT_TRUE(std::isnan(rows[3].speedup_best_cpu));
}

TEST(BenchAnalysis, SpeedupsAndFitsNeverMixTheFilterKinds) {
  // A counting cpu1 row twice as slow as the plain one: each kind's cpu row is
  // compared with its own kind's cpu1 row.
  std::vector<row> rows{timed_row(engine::cpu1, op::contains, 1, 1000, 1e-3),
                        timed_row(engine::cpu, op::contains, 1, 1000, 0.5e-3)};
  for (row r : std::vector<row>{timed_row(engine::cpu1, op::contains, 1, 1000, 2e-3),
                                timed_row(engine::cpu, op::contains, 1, 1000, 0.5e-3),
                                timed_row(engine::cpu1, op::contains, 1, 100000, 0.2)}) {
    r.filter_kind = kind::counting;
    rows.push_back(r);
  }
  set_speedups(rows);
  EXPECT_DOUBLE_EQ(rows[1].speedup, 2);
  EXPECT_DOUBLE_EQ(rows[3].speedup, 4);
  EXPECT_EQ(find_row(rows, kind::counting, engine::cpu1, op::contains, 1, 1000), &rows[2]);
  EXPECT_EQ(find_row(rows, kind::plain, engine::cpu1, op::contains, 1, 100000), nullptr);
  EXPECT_FALSE(fit_time(rows, kind::plain, engine::cpu1, op::contains, 1).valid());  // one batch
  const time_fit fit = fit_time(rows, kind::counting, engine::cpu1, op::contains, 1);
  ASSERT_TRUE(fit.valid());
  EXPECT_NEAR(fit.keys_per_s, 99000 / (0.2 - 2e-3), 1e-6 * fit.keys_per_s);
}

TEST(BenchAnalysis, CrossoversArePerKindAndThePlainKindHasNoRemoveOps) {
  EXPECT_FALSE(has_op(kind::plain, op::remove));
  EXPECT_FALSE(has_op(kind::plain, op::remove_unchecked));
  EXPECT_TRUE(has_op(kind::plain, op::contains));
  EXPECT_TRUE(has_op(kind::counting, op::remove));
  sweep run = gpu_sweep({engine::cpu1, engine::gpu_host});
  run.kinds = {kind::plain, kind::counting};
  run.ops = {op::contains, op::remove};
  std::vector<row> rows;
  // The plain GPU wins from 1e5, the counting GPU never.
  add_linear_rows(rows, engine::cpu1, op::contains, 1, 1e-6, 1e8);
  add_linear_rows(rows, engine::gpu_host, op::contains, 1, 2e-4, 1e10);  // n* = 20 101
  for (const engine e : {engine::cpu1, engine::gpu_host}) {
    std::vector<row> counting;
    add_linear_rows(counting, e, op::contains, 1, 1e-6, is_gpu(e) ? 1e7 : 1e8);
    add_linear_rows(counting, e, op::remove, 1, 1e-6, 1e8);
    for (row& r : counting) r.filter_kind = kind::counting;
    rows.insert(rows.end(), counting.begin(), counting.end());
  }
  const std::vector<crossover> xs = find_crossovers(rows, run, a_gpu());
  ASSERT_EQ(xs.size(), 3u);  // plain contains, counting contains, counting remove
  EXPECT_EQ(xs[0].filter_kind, kind::plain);
  EXPECT_EQ(xs[0].operation, op::contains);
  EXPECT_EQ(xs[0].batch, 100000u);
  EXPECT_EQ(xs[1].filter_kind, kind::counting);
  EXPECT_EQ(xs[1].operation, op::contains);
  EXPECT_EQ(xs[1].batch, 0u);
  EXPECT_EQ(xs[2].filter_kind, kind::counting);
  EXPECT_EQ(xs[2].operation, op::remove);
}

TEST(BenchAnalysis, CountingVsPlainIsTheTimeRatioWhereBothKindsRan) {
  sweep run = gpu_sweep({engine::cpu1, engine::cpu});
  run.kinds = {kind::plain, kind::counting};
  run.ops = {op::add, op::contains, op::remove};
  run.batches = {1000, 10000};
  std::vector<row> rows{timed_row(engine::cpu1, op::contains, 1, 1000, 1e-3),
                        timed_row(engine::cpu1, op::contains, 1, 10000, 1e-2),
                        timed_row(engine::cpu, op::contains, 1, 10000, 0.5e-2)};
  for (row r : std::vector<row>{timed_row(engine::cpu1, op::contains, 1, 1000, 1.5e-3),
                                timed_row(engine::cpu1, op::contains, 1, 10000, 1.2e-2),
                                timed_row(engine::cpu1, op::remove, 1, 10000, 3e-2)}) {
    r.filter_kind = kind::counting;
    rows.push_back(r);
  }
  // cpu at 1e4 has no counting row, remove no plain row: no ratio for either.
  const std::vector<kind_ratio> xs = counting_vs_plain(rows, run);
  ASSERT_EQ(xs.size(), 2u);
  EXPECT_EQ(xs[0].operation, op::contains);
  EXPECT_EQ(xs[0].backend, engine::cpu1);
  EXPECT_EQ(xs[0].batch, 1000u);
  EXPECT_DOUBLE_EQ(xs[0].counting_over_plain, 1.5);
  EXPECT_EQ(xs[1].batch, 10000u);
  EXPECT_DOUBLE_EQ(xs[1].counting_over_plain, 1.2);
  run.kinds = {kind::plain};
  EXPECT_EQ(counting_vs_plain({rows[0], rows[1]}, run).size(), 0u);
}

}  // namespace
}  // namespace gbf::cli::bench
