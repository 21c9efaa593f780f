// filter::select (the join prefilter): the selected rows are exactly the
// indices where contains answers true, ascending, for every layout, both key
// types, string keys, one thread and many, scalar and AVX2; validity bitmaps
// drop null rows; empty batches and bad arguments. The GPU tests compare the
// GPU's rows with the CPU's and skip with the reason when there is no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"

#if GBF_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace gbf {
namespace {

using gbf::test::random_keys;

// Half the probes are added keys, half random (absent but for false positives).
template <class Key>
std::vector<Key> probes_for(const std::vector<Key>& added, std::size_t n, std::uint64_t seed) {
  std::vector<Key> probes = random_keys<Key>(n, seed);
  for (std::size_t i = 0; i < n; i += 2) probes[i] = added[(i / 2) % added.size()];
  return probes;
}

// The rows contains() reports present (and non-null), ascending.
template <class Key>
std::vector<std::uint64_t> expected_rows(const filter& f, const std::vector<Key>& keys,
                                         const std::uint8_t* validity = nullptr) {
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  f.contains(keys.data(), keys.size(), found.get());
  std::vector<std::uint64_t> rows;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool valid = validity == nullptr || ((validity[i / 8] >> (i % 8)) & 1) != 0;
    if (found[i] && valid) rows.push_back(i);
  }
  return rows;
}

template <class Key>
std::vector<std::uint64_t> selected_rows(const filter& f, const std::vector<Key>& keys,
                                         const std::uint8_t* validity = nullptr) {
  std::vector<std::uint64_t> rows(keys.size() + 1, ~std::uint64_t{0});
  const std::uint64_t n = validity == nullptr
                              ? f.select(keys.data(), keys.size(), rows.data())
                              : f.select(keys.data(), keys.size(), validity, rows.data());
  EXPECT_LE(n, keys.size());
  EXPECT_EQ(rows[keys.size()], ~std::uint64_t{0}) << "select wrote past n rows";
  rows.resize(n);
  return rows;
}

std::vector<std::uint8_t> random_validity(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> bits((n + 7) / 8);
  for (std::uint8_t& byte : bits) byte = static_cast<std::uint8_t>(rng());
  return bits;
}

struct cpu_config {
  cpu_simd simd;
  unsigned threads;
};

template <class Key>
void check_cpu_select(const shape& s, const cpu_config& config) {
  options opts;
  opts.where = backend::cpu;
  opts.simd = config.simd == cpu_simd::avx2 && !cpu_has_avx2() ? cpu_simd::scalar : config.simd;
  opts.cpu_threads = config.threads;
  filter f = filter::create(20'000, 0.05, opts, s);
  const std::vector<Key> added = random_keys<Key>(20'000, 1);
  f.add(added.data(), added.size());
  // 300k probes: above the threads' split threshold, so several threads compact.
  const std::vector<Key> probes = probes_for(added, 300'000, 2);
  const std::vector<std::uint64_t> rows = selected_rows(f, probes);
  EXPECT_EQ(rows, expected_rows(f, probes)) << to_string(f.layout());
  EXPECT_GE(rows.size(), probes.size() / 2);  // every added key is selected
  const std::vector<std::uint8_t> validity = random_validity(probes.size(), 3);
  EXPECT_EQ(selected_rows(f, probes, validity.data()),
            expected_rows(f, probes, validity.data()));
}

TEST(Select, MatchesContainsForEveryLayoutAndKeyTypeOnTheCpu) {
  const shape shapes[] = {{1, 1, 0}, {2, 4, 0}, {4, 4, 7}, {8, 8, 0}, {8, 12, 0}, {16, 16, 0}, {16, 24, 3}};
  const cpu_config configs[] = {{cpu_simd::scalar, 1}, {cpu_simd::automatic, 1}, {cpu_simd::automatic, 4}};
  for (const shape& s : shapes) {
    for (const cpu_config& config : configs) {
      SCOPED_TRACE("W=" + std::to_string(s.words_per_block) + " k=" + std::to_string(s.bits_per_key) +
                   " threads=" + std::to_string(config.threads));
      check_cpu_select<std::uint32_t>(s, config);
      check_cpu_select<std::uint64_t>(s, config);
    }
  }
}

TEST(Select, SelectsEveryAddedKeyAndOnlyThem) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(1000, 0.001, opts);
  std::vector<std::int64_t> keys(5000);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<std::int64_t>(i) * 7 - 10'000;
  std::vector<std::int64_t> build;
  for (std::size_t i = 0; i < keys.size(); i += 5) build.push_back(keys[i]);
  f.add(build.data(), build.size());
  std::vector<std::uint64_t> rows(keys.size());
  const std::uint64_t n = f.select(keys.data(), keys.size(), rows.data());
  rows.resize(n);
  std::size_t next = 0;  // every multiple of 5 must appear, in order
  for (std::uint64_t row : rows) {
    if (row % 5 == 0) {
      EXPECT_EQ(row, next);
      next += 5;
    }
  }
  EXPECT_EQ(next, keys.size());
  EXPECT_LT(n, build.size() + 50u);  // fpp 0.001 over 4000 absent keys: a handful
}

TEST(Select, NullRowsAreNeverSelected) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(1000, 0.01, opts);
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(1000, 9);
  f.add(keys.data(), keys.size());
  std::vector<std::uint8_t> validity(125, 0x55);  // even rows valid
  std::vector<std::uint64_t> rows(keys.size());
  ASSERT_EQ(f.select(keys.data(), keys.size(), validity.data(), rows.data()), 500u);
  for (std::size_t j = 0; j < 500; ++j) EXPECT_EQ(rows[j], 2 * j);
  std::vector<std::uint8_t> none(125, 0);
  EXPECT_EQ(f.select(keys.data(), keys.size(), none.data(), rows.data()), 0u);
}

TEST(Select, StringKeysWithNulls) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(100, 0.01, opts);
  std::string data;
  std::vector<std::int32_t> offsets{0};
  for (int i = 0; i < 200; ++i) {
    data += "key-" + std::to_string(i);
    offsets.push_back(static_cast<std::int32_t>(data.size()));
  }
  string_keys<std::int32_t> keys{data.data(), data.size(), offsets.data(), 200, nullptr};
  string_keys<std::int32_t> first_half = keys;
  first_half.count = 100;
  f.add(first_half);
  std::vector<std::uint64_t> rows(200);
  const std::uint64_t n = f.select(keys, rows.data());
  std::unique_ptr<bool[]> found(new bool[200]);
  f.contains(keys, found.get());
  std::vector<std::uint64_t> want;
  for (std::uint64_t i = 0; i < 200; ++i)
    if (found[i]) want.push_back(i);
  rows.resize(n);
  EXPECT_EQ(rows, want);
  ASSERT_GE(n, 100u);
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_EQ(rows[i], i);

  std::vector<std::uint8_t> validity(25, 0xff);
  validity[0] = 0xfe;  // row 0 null
  keys.validity = validity.data();
  rows.assign(200, 0);
  const std::uint64_t with_null = f.select(keys, rows.data());
  EXPECT_EQ(with_null, n - 1);
  EXPECT_EQ(rows[0], 1u);
}

TEST(Select, EmptyBatchAndErrors) {
  options opts;
  opts.where = backend::cpu;
  filter f = filter::create(100, 0.01, opts);
  EXPECT_EQ(f.select(static_cast<const std::uint64_t*>(nullptr), 0, nullptr), 0u);
  std::uint64_t key = 1;
  std::uint64_t row = 0;
  EXPECT_THROW(f.select(static_cast<const std::uint64_t*>(nullptr), 1, &row), invalid_argument);
  EXPECT_THROW(f.select(&key, 1, nullptr), invalid_argument);
  std::uint64_t count = 0;
  EXPECT_THROW(f.select_async(&key, 1, &row, &count, nullptr), wrong_backend);
  EXPECT_THROW(f.select_async(&key, 1, &row, nullptr, nullptr), invalid_argument);
}

// ---------------------------------------------------------------------------
// GPU: the same rows as the CPU, host and device batches, sync and async.
// ---------------------------------------------------------------------------

class SelectGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const gpu_status gpu = query_gpu();
    if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  }
};

#if GBF_HAS_CUDA
template <class T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  if (cudaMalloc(&p, host.size() * sizeof(T) + 8) != cudaSuccess) throw std::bad_alloc();
  cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* device, std::size_t n) {
  std::vector<T> out(n);
  if (n > 0) cudaMemcpy(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
  return out;
}

template <class Key>
void check_gpu_select(const shape& s) {
  options gpu_opts;
  gpu_opts.where = backend::gpu;
  gpu_opts.gpu_chunk_keys = 10'000;  // host batches span many pipeline chunks
  filter g = filter::create(20'000, 0.05, gpu_opts, s);
  const std::vector<Key> added = random_keys<Key>(20'000, 1);
  g.add(added.data(), added.size());
  filter c = g.copy_to(backend::cpu);
  const std::vector<Key> probes = probes_for(added, 100'003, 2);
  const std::vector<std::uint8_t> validity = random_validity(probes.size(), 3);
  const std::vector<std::uint64_t> want = selected_rows(c, probes);
  const std::vector<std::uint64_t> want_valid = selected_rows(c, probes, validity.data());
  // Host batches.
  EXPECT_EQ(selected_rows(g, probes), want);
  EXPECT_EQ(selected_rows(g, probes, validity.data()), want_valid);
  // Device batches, sync and async.
  Key* keys = device_copy(probes);
  std::uint8_t* bits = device_copy(validity);
  std::uint64_t* rows = nullptr;
  ASSERT_EQ(cudaMalloc(&rows, (probes.size() + 1) * sizeof(std::uint64_t)), cudaSuccess);
  EXPECT_EQ(g.select(keys, probes.size(), rows), want.size());
  EXPECT_EQ(host_copy(rows, want.size()), want);
  EXPECT_EQ(g.select(keys, probes.size(), bits, rows), want_valid.size());
  EXPECT_EQ(host_copy(rows, want_valid.size()), want_valid);
  std::uint64_t* count = rows + probes.size();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  g.select_async(keys, probes.size(), rows, count, stream, bits);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(host_copy(count, 1)[0], want_valid.size());
  EXPECT_EQ(host_copy(rows, want_valid.size()), want_valid);
  g.select_async(keys, 0, rows, count, stream);  // empty: count = 0
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(host_copy(count, 1)[0], 0u);
  // Device keys with host rows: refused.
  std::vector<std::uint64_t> host_rows(probes.size());
  EXPECT_THROW(g.select(keys, probes.size(), host_rows.data()), invalid_argument);
  cudaStreamDestroy(stream);
  cudaFree(rows);
  cudaFree(bits);
  cudaFree(keys);
}
#endif

TEST_F(SelectGpu, GpuRowsEqualCpuRowsForEveryLayout) {
#if GBF_HAS_CUDA
  const shape shapes[] = {{1, 1, 0}, {2, 4, 0}, {4, 4, 7}, {8, 8, 0}, {16, 24, 3}};
  for (const shape& s : shapes) {
    SCOPED_TRACE("W=" + std::to_string(s.words_per_block));
    check_gpu_select<std::uint32_t>(s);
    check_gpu_select<std::uint64_t>(s);
  }
#else
  GTEST_SKIP() << "no GPU: gbf built without CUDA";
#endif
}

}  // namespace
}  // namespace gbf
