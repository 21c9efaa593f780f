// String keys (gbf::string_keys) on the GPU against the CPU, bit for bit: host
// batches through the pinned pipeline with tiny chunks (strings crossing chunk
// boundaries, 1 MiB strings outgrowing the staging), device batches (misaligned
// strings, add_new in pieces), the async calls, and bad device offsets
// rejected before any bit is written, reported later for _async calls. Skips
// without a GPU (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/gpu/runtime.hpp"

namespace {

using gbf::detail::device_buffer;
using gbf::test::expect_rejected;
using gbf::test::layout_of;
using gbf::test::mixed_batch;
using gbf::test::on_cpu;
using gbf::test::run_string_filter;
using gbf::test::string_batch;
using gbf::test::string_outcome;
using gbf::test::to_device;

using StringKeysGpu = gbf::test::gpu_test;

gbf::options gpu_options(std::size_t chunk_keys) { return gbf::test::on_gpu(chunk_keys, 3); }

template <class Offset>
void check_gpu_host_batches() {
  string_batch<Offset> b = mixed_batch<Offset>(20000, 21);
  for (std::size_t i = 0; i < b.size(); i += 7) b.push(b.values[i]);
  for (std::size_t i = 5; i < b.size(); i += 13) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(5000, 22, false);
  for (std::size_t i = 0; i < b.size(); i += 2) q.push(b.values[i]);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const gbf::layout l = layout_of(w, w == 1 ? 3 : w, 3000, 7);
    const string_outcome cpu = run_string_filter(l, on_cpu(1, gbf::cpu_simd::scalar), b, q);
    // Tiny chunks: strings cross chunk boundaries, 1 MiB strings outgrow the staging.
    for (std::size_t chunk : {std::size_t{7}, std::size_t{1000}, std::size_t{0}}) {
      const string_outcome gpu = run_string_filter(l, gpu_options(chunk), b, q);
      EXPECT_EQ(gpu.words, cpu.words) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.is_new, cpu.is_new) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.found, cpu.found) << "W " << w << " chunk " << chunk;
      EXPECT_EQ(gpu.count, cpu.count) << "W " << w << " chunk " << chunk;
    }
  }
}

TEST_F(StringKeysGpu, HostBatchesMatchCpuBitForBitInt32) { check_gpu_host_batches<std::int32_t>(); }
TEST_F(StringKeysGpu, HostBatchesMatchCpuBitForBitInt64) { check_gpu_host_batches<std::int64_t>(); }

// A string batch copied to device memory (data offset by 3 bytes: misaligned strings).
template <class Offset>
struct device_batch {
  device_buffer<unsigned char> data;
  device_buffer<Offset> offsets;
  device_buffer<std::uint8_t> validity;
  gbf::string_keys<Offset> keys;
  explicit device_batch(const string_batch<Offset>& b) {
    std::vector<unsigned char> shifted(3, 0xab);
    shifted.insert(shifted.end(), b.data.begin(), b.data.end());
    data = to_device(shifted);
    offsets = to_device(b.offsets);
    validity = to_device(b.validity);
    keys.data = data.data() + 3;
    keys.data_bytes = b.data.size();
    keys.offsets = offsets.data();
    keys.count = b.size();
    keys.validity = b.validity.empty() ? nullptr : validity.data();
  }
};

std::vector<bool> from_device(const bool* d, std::size_t n) {
  return gbf::test::as_vector(gbf::test::bools_from_device(d, n).get(), n);
}

template <class Offset>
void check_gpu_device_batches() {
  string_batch<Offset> b = mixed_batch<Offset>(20000, 31);
  for (std::size_t i = 0; i < b.size(); i += 7) b.push(b.values[i]);
  for (std::size_t i = 5; i < b.size(); i += 13) b.set_null(i);
  string_batch<Offset> q = mixed_batch<Offset>(5000, 32, false);
  for (std::size_t i = 0; i < b.size(); i += 2) q.push(b.values[i]);
  const device_batch<Offset> db(b);
  const device_batch<Offset> dq(q);
  device_buffer<bool> results(std::max(b.size(), q.size()));
  device_buffer<std::uint64_t> counter(1);
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    const gbf::layout l = layout_of(w, w == 1 ? 3 : w, 3000, 7);
    const string_outcome cpu = run_string_filter(l, on_cpu(1, gbf::cpu_simd::scalar), b, q);
    gbf::filter f(l, gpu_options(1000));  // add_new in pieces of 1000 keys
    f.add_new(db.keys, results.data());
    EXPECT_EQ(from_device(results.data(), b.size()), cpu.is_new) << "W " << w;
    EXPECT_EQ(f.words(), cpu.words) << "W " << w;
    f.contains(dq.keys, results.data());
    EXPECT_EQ(from_device(results.data(), q.size()), cpu.found) << "W " << w;
    EXPECT_EQ(f.count(dq.keys), cpu.count) << "W " << w;
    EXPECT_TRUE(f.verify_contains(dq.keys, results.data()).ok());

    gbf::filter g(l, gpu_options(0));
    g.add_async(db.keys, nullptr);
    g.contains_async(dq.keys, results.data(), nullptr);
    g.count_async(dq.keys, counter.data(), nullptr);
    GBF_CUDA_TRY(cudaDeviceSynchronize());
    EXPECT_EQ(g.words(), cpu.words) << "W " << w;
    EXPECT_EQ(from_device(results.data(), q.size()), cpu.found) << "W " << w;
    std::uint64_t hits = 0;
    GBF_CUDA_TRY(cudaMemcpy(&hits, counter.data(), sizeof hits, cudaMemcpyDeviceToHost));
    EXPECT_EQ(hits, cpu.count) << "W " << w;
  }
}

TEST_F(StringKeysGpu, DeviceBatchesAndAsyncMatchCpuBitForBitInt32) {
  check_gpu_device_batches<std::int32_t>();
}
TEST_F(StringKeysGpu, DeviceBatchesAndAsyncMatchCpuBitForBitInt64) {
  check_gpu_device_batches<std::int64_t>();
}

TEST_F(StringKeysGpu, BadDeviceOffsetsAreRejectedBeforeAnyBitIsWritten) {
  const std::string bytes(100, 'x');
  std::vector<std::int32_t> offsets(21);
  for (int i = 0; i <= 20; ++i) offsets[i] = 3 * i;
  offsets[17] = 40;
  const device_buffer<unsigned char> data =
      to_device(std::vector<unsigned char>(bytes.begin(), bytes.end()));
  const device_buffer<std::int32_t> d_offsets = to_device(offsets);
  gbf::string_keys<std::int32_t> keys;
  keys.data = data.data();
  keys.data_bytes = bytes.size();
  keys.offsets = d_offsets.data();
  keys.count = 20;
  gbf::filter f(layout_of(8, 8, 64), gpu_options(0));
  device_buffer<bool> results(20);
  expect_rejected(f, keys, "offsets[17] = 40 < offsets[16] = 48 (offsets must not decrease)",
                  results.data());
  keys.data_bytes = 30;
  expect_rejected(f, keys, "offsets[11] = 33 is past the end of the data (data_bytes = 30)",
                  results.data());

  // _async: nothing written, and the next synchronous call reports it.
  f.add_async(keys, nullptr);
  GBF_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(f.bits_set(), 0u);
  keys.data_bytes = bytes.size();
  offsets[17] = 51;
  const device_buffer<std::int32_t> good = to_device(offsets);
  keys.offsets = good.data();
  EXPECT_THROW((void)f.count(keys), gbf::invalid_argument);
  EXPECT_EQ(f.count(keys), 0u);  // reported once; the good batch now works

  // synchronize() reports it too, and so does an integer operation. data_bytes is
  // 100 again, so offsets[17] = 40 < offsets[16] = 48 is the batch's only bad offset.
  keys.offsets = d_offsets.data();
  f.add_async(keys, nullptr);
  try {
    f.synchronize();
    ADD_FAILURE() << "synchronize() did not report the bad _async batch";
  } catch (const gbf::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("synchronize: string keys: an earlier _async call had a "
                                         "bad offset at offsets[17]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(f.synchronize());
  f.contains_async(keys, results.data(), nullptr);
  const std::uint64_t integer_keys[] = {1, 2, 3};
  EXPECT_THROW((void)f.count(integer_keys, 3), gbf::invalid_argument);
  EXPECT_EQ(f.count(integer_keys, 3), 0u);
  EXPECT_EQ(f.bits_set(), 0u);
}

}  // namespace
