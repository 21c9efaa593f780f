// gbf::device_ref, the filter as a user's kernel sees it: a view made from a
// GPU filter (device_ref<W>(filter&)) adds keys whose bits are a CPU filter's
// bit for bit; the probe-only view (device_ref<W, const std::uint32_t>, from a
// const filter or converted from a mutable view) answers as filter::contains,
// for integer keys and byte strings, per thread and per warp. The host-side
// checks (a CPU filter, a W that does not match, misalignment) and the host
// half of the math run on any machine; the kernels skip without a GPU
// (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/device_ref.cuh"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "gbf/hash.hpp"
#include "gbf/layout.hpp"
#include "host/gpu/runtime.hpp"

namespace {

using gbf::detail::device_buffer;
using gbf::test::layout_of;
using gbf::test::on_cpu;
using gbf::test::on_gpu;
using gbf::test::random_keys;
using gbf::test::to_device;

using DeviceRefGpu = gbf::test::gpu_test;

template <std::uint32_t W>
using probe_only_ref = gbf::device_ref<W, const std::uint32_t>;

template <std::uint32_t W>
__global__ void add_keys(gbf::device_ref<W> ref, const std::uint64_t* keys, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    ref.add(keys[i]);
}

// add_hashes: warps step over groups of 32 keys together; a lane past the end,
// or whose key index is a multiple of 3, has no key (valid = false).
template <std::uint32_t W>
__global__ void add_keys_by_warp(gbf::device_ref<W> ref, const std::uint64_t* keys, std::size_t n) {
  namespace cg = cooperative_groups;
  const gbf::warp_tile warp = cg::tiled_partition<32>(cg::this_thread_block());
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t group = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x - warp.thread_rank();
       group < n; group += stride) {
    const std::size_t i = group + warp.thread_rank();
    const bool valid = i < n && i % 3 != 0;
    ref.add_hashes(warp, valid ? ref.hash(keys[i]) : 0, valid);
  }
}

template <std::uint32_t W>
__global__ void probe_keys(probe_only_ref<W> ref, const std::uint64_t* keys, std::size_t n,
                           bool* found) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    found[i] = ref.contains(keys[i]);
}

// One thread per string.
__global__ void probe_strings(probe_only_ref<8> ref, const unsigned char* data,
                              const std::int32_t* offsets, std::size_t n, bool* found) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    found[i] = ref.contains_bytes(data + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
}

// One warp per string (the cooperative overloads); lane 0 writes the answer.
__global__ void probe_strings_by_warp(probe_only_ref<8> ref, const unsigned char* data,
                                      const std::int32_t* offsets, std::size_t n, bool* found) {
  const gbf::warp_tile warp =
      cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block());
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / 32;
  for (std::size_t i = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / 32; i < n; i += warps) {
    const bool hit = ref.contains_bytes(warp, data + offsets[i],
                                        static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
    if (warp.thread_rank() == 0) found[i] = hit;
  }
}

// Adds strings one warp each (cooperative add_bytes).
__global__ void add_strings_by_warp(gbf::device_ref<8> ref, const unsigned char* data,
                                    const std::int32_t* offsets, std::size_t n) {
  const gbf::warp_tile warp =
      cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block());
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / 32;
  for (std::size_t i = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / 32; i < n; i += warps)
    ref.add_bytes(warp, data + offsets[i], static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
}

void check_launch() {
  GBF_CUDA_TRY(cudaGetLastError());
  GBF_CUDA_TRY(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------------------
// Host side: runs without a GPU
// ---------------------------------------------------------------------------

TEST(DeviceRef, OfACpuFilterThrowsWrongBackend) {
  gbf::filter f(layout_of(8, 8, 16), on_cpu(1));
  EXPECT_THROW(gbf::device_ref<8>{f}, gbf::wrong_backend);
  EXPECT_THROW(probe_only_ref<8>{std::as_const(f)}, gbf::wrong_backend);
  EXPECT_THROW(probe_only_ref<8>{f}, gbf::wrong_backend);
}

TEST(DeviceRef, ARawViewChecksTheLayoutWidthAndAlignment) {
  alignas(64) static std::uint32_t words[64] = {};  // never dereferenced on the host
  const gbf::layout l = layout_of(8, 8, 8);
  EXPECT_NO_THROW(gbf::device_ref<8>(words, l));
  EXPECT_THROW(gbf::device_ref<4>(words, l), gbf::invalid_argument);
  EXPECT_THROW(gbf::device_ref<8>(words + 1, l), gbf::invalid_argument);  // 16-byte loads
  EXPECT_NO_THROW(gbf::device_ref<2>(words + 2, layout_of(2, 2, 8)));    // 8-byte loads
  EXPECT_THROW(gbf::device_ref<2>(words + 1, layout_of(2, 2, 8)), gbf::invalid_argument);
  EXPECT_THROW(gbf::device_ref<8>(words, layout_of(8, 4, 8)), gbf::invalid_argument);  // k < W
  EXPECT_THROW(probe_only_ref<8>(words, layout_of(8, 8, 0)), gbf::invalid_argument);
  const std::string message = gbf::test::message_of([&] { gbf::device_ref<16>(words, l); });
  EXPECT_EQ(message, "device_ref<16> cannot view a layout of 8 words per block");
}

TEST(DeviceRef, HostMathIsTheLayoutsAndTheViewConvertsToProbeOnly) {
  alignas(64) static std::uint32_t words[16 * 1000] = {};
  const gbf::layout l = layout_of(16, 20, 1000, 77);
  const gbf::device_ref<16> ref(words, l);
  const probe_only_ref<16> probe = ref;
  EXPECT_EQ(probe.words(), words);
  EXPECT_EQ(probe.num_blocks(), 1000u);
  EXPECT_EQ(probe.bits_per_key(), 20u);
  EXPECT_EQ(probe.seed(), 77u);
  for (const std::uint64_t key : random_keys(1000, 9)) {
    const std::uint64_t h = gbf::hash_key(key, l.seed);
    ASSERT_EQ(ref.hash(key), h);
    ASSERT_EQ(probe.hash(static_cast<std::uint32_t>(key)),
              gbf::hash_key(static_cast<std::uint32_t>(key), l.seed));
    ASSERT_EQ(ref.block_of(h), gbf::block_index(h, l.num_blocks));
    std::uint32_t masks[16], expected[16];
    ref.masks_of(h, masks);
    gbf::block_masks<16>(h, l.bits_per_key, expected);
    for (int w = 0; w < 16; ++w) ASSERT_EQ(masks[w], expected[w]);
  }
  const std::string text = "a string key";
  EXPECT_EQ(ref.hash_bytes(text.data(), text.size()), gbf::xxh64(text.data(), text.size(), 77));
}

// ---------------------------------------------------------------------------
// Kernels: need a GPU
// ---------------------------------------------------------------------------

// A kernel adds through device_ref<W>(filter&); another probes through the
// probe-only view of the const filter, and one through a converted mutable view.
template <std::uint32_t W>
void check_kernels_match_the_filter(std::uint32_t k) {
  SCOPED_TRACE("W=" + std::to_string(W) + " k=" + std::to_string(k));
  const gbf::layout l = layout_of(W, k, 4099, 0x5eed + W);
  const auto keys = random_keys(50'000, W);
  const auto queries = random_keys(100'000, 100 + W);
  const auto device_keys = to_device(keys);
  const auto device_queries = to_device(queries);

  gbf::filter gpu(l, on_gpu());
  gbf::filter cpu(l, on_cpu());
  cpu.add(keys.data(), keys.size());
  const gbf::device_ref<W> ref(gpu);
  add_keys<W><<<64, 256>>>(ref, device_keys.data(), keys.size());
  check_launch();
  EXPECT_EQ(gpu.words(), cpu.words()) << "the kernel's adds differ from the CPU's";
  EXPECT_EQ(gpu.count(keys.data(), keys.size()), keys.size());

  // The warp-cooperative add sets the same bits as add() for the keys it is given.
  {
    gbf::filter by_warp(l, on_gpu());
    gbf::filter some(l, on_cpu());
    std::vector<std::uint64_t> given;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (i % 3 != 0) given.push_back(keys[i]);
    some.add(given.data(), given.size());
    add_keys_by_warp<W><<<64, 256>>>(gbf::device_ref<W>(by_warp), device_keys.data(), keys.size());
    check_launch();
    EXPECT_EQ(by_warp.words(), some.words()) << "add_hashes differs from the CPU's adds";
  }

  auto want = gbf::test::bools(queries.size());
  cpu.contains(queries.data(), queries.size(), want.get());
  device_buffer<bool> found(queries.size());
  const probe_only_ref<W> probe(std::as_const(gpu));
  EXPECT_EQ(probe.words(), std::as_const(gpu).device_words());
  probe_keys<W><<<64, 256>>>(probe, device_queries.data(), queries.size(), found.data());
  check_launch();
  EXPECT_EQ(gbf::test::first_difference(gbf::test::bools_from_device(found.data(), queries.size()).get(),
                                        want.get(), queries.size()),
            queries.size());
  GBF_CUDA_TRY(cudaMemset(found.data(), 0, queries.size()));
  probe_keys<W><<<64, 256>>>(ref, device_queries.data(), queries.size(), found.data());  // converted
  check_launch();
  EXPECT_EQ(gbf::test::first_difference(gbf::test::bools_from_device(found.data(), queries.size()).get(),
                                        want.get(), queries.size()),
            queries.size());
}

TEST_F(DeviceRefGpu, KernelsThroughTheFiltersViewsMatchTheFilterForEveryWidth) {
  check_kernels_match_the_filter<1>(3);
  check_kernels_match_the_filter<2>(2);
  check_kernels_match_the_filter<4>(7);
  check_kernels_match_the_filter<8>(8);
  check_kernels_match_the_filter<16>(32);
}

TEST_F(DeviceRefGpu, AWidthThatDoesNotMatchTheFilterIsRefused) {
  gbf::filter f(layout_of(8, 8, 64), on_gpu());
  EXPECT_THROW(gbf::device_ref<4>{f}, gbf::invalid_argument);
  EXPECT_THROW(probe_only_ref<16>{std::as_const(f)}, gbf::invalid_argument);
}

TEST_F(DeviceRefGpu, StringKernelsPerThreadAndPerWarpMatchTheFilter) {
  gbf::test::string_batch<std::int32_t> added = gbf::test::mixed_batch<std::int32_t>(5'000, 1, false);
  gbf::test::string_batch<std::int32_t> queries = gbf::test::mixed_batch<std::int32_t>(5'000, 2, false);
  for (std::size_t i = 0; i < added.size(); i += 2) queries.push(added.values[i]);
  const gbf::layout l = layout_of(8, 8, 2000, 3);
  gbf::filter cpu(l, on_cpu());
  cpu.add(added.keys());
  auto want = gbf::test::bools(queries.size());
  cpu.contains(queries.keys(), want.get());

  gbf::filter gpu(l, on_gpu());
  const auto added_data = to_device(added.data);
  const auto added_offsets = to_device(added.offsets);
  add_strings_by_warp<<<64, 256>>>(gbf::device_ref<8>(gpu), added_data.data(), added_offsets.data(),
                                   added.size());
  check_launch();
  EXPECT_EQ(gpu.words(), cpu.words()) << "the warps' adds differ from the CPU's";

  const auto query_data = to_device(queries.data);
  const auto query_offsets = to_device(queries.offsets);
  device_buffer<bool> found(queries.size());
  const probe_only_ref<8> probe(std::as_const(gpu));
  probe_strings<<<64, 256>>>(probe, query_data.data(), query_offsets.data(), queries.size(),
                             found.data());
  check_launch();
  EXPECT_EQ(gbf::test::first_difference(gbf::test::bools_from_device(found.data(), queries.size()).get(),
                                        want.get(), queries.size()),
            queries.size())
      << "per thread";
  GBF_CUDA_TRY(cudaMemset(found.data(), 0, queries.size()));
  probe_strings_by_warp<<<64, 256>>>(probe, query_data.data(), query_offsets.data(), queries.size(),
                                     found.data());
  check_launch();
  EXPECT_EQ(gbf::test::first_difference(gbf::test::bools_from_device(found.data(), queries.size()).get(),
                                        want.get(), queries.size()),
            queries.size())
      << "per warp";
}

}  // namespace
