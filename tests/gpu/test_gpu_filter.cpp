// The public gbf::filter API on the GPU: the same bits and answers as a CPU
// filter, the automatic backend choosing the GPU, synchronous calls on the
// caller's stream (ordered after the work already queued there, or on the
// legacy default stream without one, and done when they return), device_words,
// merge of block_bits, and select (the join prefilter) against the CPU's rows
// for host and device batches, sync and async. Every test skips without a GPU (gbf::test::gpu_test).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/block_bits.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf {
namespace {

using detail::device_buffer;
using detail::pinned_buffer;
using test::bools;
using test::bools_from_device;
using test::first_difference;
using test::on_cpu;
using test::on_gpu;
using test::random_keys;
using test::to_device;
using test::to_host;

using GpuFilter = test::gpu_test;
using GpuSelect = test::gpu_test;

std::vector<bool> answers(const filter& f, const std::vector<std::uint64_t>& keys) {
  auto found = bools(keys.size());
  f.contains(keys.data(), keys.size(), found.get());
  return test::as_vector(found.get(), keys.size());
}

TEST_F(GpuFilter, GpuAndCpuFiltersHoldTheSameBitsAndAnswers) {
  for (shape s : {shape{8, 8, 0}, shape{16, 16, 0}, shape{1, 3, 0}}) {
    filter g = filter::create(100'000, 0.01, on_gpu(10'000), s);  // many pipeline chunks
    filter c = filter::create(100'000, 0.01, on_cpu(), s);
    const auto keys = random_keys<std::uint64_t>(100'000, 71);
    g.add(keys.data(), keys.size());
    c.add(keys.data(), keys.size());
    ASSERT_EQ(g.words(), c.words());
    const auto queries = random_keys<std::uint64_t>(300'000, 72);
    EXPECT_EQ(answers(g, queries), answers(c, queries));
    EXPECT_EQ(g.count(queries.data(), queries.size()), c.count(queries.data(), queries.size()));
    auto found = bools(queries.size());
    g.contains(queries.data(), queries.size(), found.get());
    EXPECT_TRUE(g.verify_contains(queries.data(), queries.size(), found.get()).ok());
    EXPECT_EQ(g.copy_to(backend::cpu).words(), c.words());
    EXPECT_EQ(c.copy_to(backend::gpu).words(), c.words());
    g.merge(c);  // across backends
    EXPECT_EQ(g.words(), c.words());
  }
}

// filter::merge(block_bits) on the GPU copies the rows over in steps of 2^20
// blocks and scatters them with a kernel: every block width, more than one step
// (W = 1 with 3,000,017 blocks takes most of its blocks from 2 x 10^6 keys), and
// the last block, all against the same merge on the CPU.
TEST_F(GpuFilter, MergingBlockBitsSetsTheSameBitsAsOnTheCpu) {
  for (const auto& [w, k, num_blocks] : {std::tuple<std::uint32_t, std::uint32_t, std::uint64_t>{1, 3, 3'000'017},
                                         {2, 4, 999'999}, {8, 8, 400'001}, {16, 16, 7}}) {
    const layout l = test::layout_of(w, k, num_blocks, 5);
    auto keys = random_keys<std::uint64_t>(w == 1 ? 4'000'000 : 20'000, 81);
    filter g(l, on_gpu());
    filter c(l, on_cpu());
    g.add(keys.data(), keys.size() / 2);
    c.add(keys.data(), keys.size() / 2);
    block_bits bits(l);
    bits.add(keys.data() + keys.size() / 2, keys.size() - keys.size() / 2);
    // The last block too, so the last window ends at the filter's end.
    const block_bits last = block_bits::from_blocks(l, {static_cast<std::uint32_t>(num_blocks - 1)},
                                                    std::vector<std::uint32_t>(w, 0x80000001u));
    bits.merge(last);
    g.merge(bits);
    c.merge(bits);
    EXPECT_EQ(g.words(), c.words()) << test::name_of(l);
    EXPECT_EQ(g.stats().keys_added, keys.size());
    EXPECT_EQ(g.count(keys.data(), keys.size()), keys.size());
  }
}

// A key array at an address that is not a multiple of its width (a byte buffer
// viewed at an odd offset) would fault in the kernels, a sticky error that ends
// the context: refused up front, the filter unchanged, and the GPU still usable.
TEST_F(GpuFilter, MisalignedDeviceKeysAreRefusedBeforeAnyKernel) {
  filter g = filter::create(1'000, 0.01, on_gpu());
  const auto keys = random_keys<std::uint64_t>(100, 73);
  device_buffer<unsigned char> bytes(keys.size() * 8 + 8);
  GBF_CUDA_TRY(cudaMemcpy(bytes.data() + 4, keys.data(), keys.size() * 8, cudaMemcpyHostToDevice));
  const auto* misaligned = reinterpret_cast<const std::uint64_t*>(bytes.data() + 4);
  EXPECT_NE(test::message_of([&] { g.add(misaligned, keys.size()); }).find("are not aligned to their 8 bytes"),
            std::string::npos);
  device_buffer<bool> found(keys.size());
  EXPECT_THROW(g.contains(misaligned, keys.size(), found.data()), invalid_argument);
  EXPECT_THROW(g.add_async(misaligned, keys.size(), nullptr), invalid_argument);
  EXPECT_EQ(g.bits_set(), 0u);
  const auto* aligned32 = reinterpret_cast<const std::uint32_t*>(bytes.data() + 4);
  g.add(aligned32, 2 * keys.size());  // 4-byte keys at that address are aligned
  EXPECT_GT(g.bits_set(), 0u);
}

TEST_F(GpuFilter, AutomaticIsTheGpuAndSaysSo) {
  filter f = filter::create(1000, 0.01);
  EXPECT_EQ(f.where(), backend::gpu);
  EXPECT_EQ(f.description().rfind("gpu (", 0), 0u) << f.description();
  EXPECT_NE(f.description().find("; auto: GPU present"), std::string::npos) << f.description();
  const auto keys = random_keys(1000, 1);
  f.add(keys.data(), keys.size());
  EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
}

TEST_F(GpuFilter, DeviceWordsAreTheFiltersBits) {
  filter f = filter::create(10'000, 0.01, on_gpu());
  const auto keys = random_keys(10'000, 2);
  f.add(keys.data(), keys.size());
  std::uint32_t* mutable_words = f.device_words();
  const std::uint32_t* read_only = std::as_const(f).device_words();
  ASSERT_NE(mutable_words, nullptr);
  EXPECT_EQ(read_only, mutable_words);
  EXPECT_EQ(test::device_bits(read_only, f.layout()), f.words());
  // A write through the mutable address is what every operation sees next.
  GBF_CUDA_TRY(cudaMemset(mutable_words, 0, f.layout().size_bytes()));
  EXPECT_EQ(f.bits_set(), 0u);
}

// ---------------------------------------------------------------------------
// Synchronous calls and streams
// ---------------------------------------------------------------------------

// Keys big enough that a copy of them takes a while: a call that did not wait
// for it would read the zeros the buffer held before.
constexpr std::size_t ordering_keys = std::size_t{1} << 22;

// A pinned host copy of `keys` (copies from it are truly asynchronous).
pinned_buffer<std::uint64_t> pinned_copy(const std::vector<std::uint64_t>& keys) {
  pinned_buffer<std::uint64_t> pinned(keys.size());
  std::memcpy(pinned.data(), keys.data(), keys.size() * sizeof(std::uint64_t));
  return pinned;
}

// A zeroed device buffer of n keys (ready before anything else is queued).
device_buffer<std::uint64_t> zeroed_keys(std::size_t n) {
  device_buffer<std::uint64_t> buffer(n);
  GBF_CUDA_TRY(cudaMemset(buffer.data(), 0, n * sizeof(std::uint64_t)));
  GBF_CUDA_TRY(cudaDeviceSynchronize());
  return buffer;
}

TEST_F(GpuFilter, SyncCallsOnACallerStreamRunAfterItsWorkAndAreDoneWhenTheyReturn) {
  const auto keys = random_keys(ordering_keys, 3);
  const auto pinned = pinned_copy(keys);
  const auto device_keys = zeroed_keys(keys.size());
  detail::stream caller;  // non-blocking: nothing orders it with other streams implicitly
  detail::stream reader;
  filter f = filter::create(keys.size(), 0.01, on_gpu());
  filter reference = filter::create(keys.size(), 0.01, on_cpu());
  reference.add(keys.data(), keys.size());

  // The caller queues the copy that produces the keys and adds them on the same stream.
  GBF_CUDA_TRY(cudaMemcpyAsync(device_keys.data(), pinned.data(), keys.size() * sizeof(std::uint64_t),
                               cudaMemcpyHostToDevice, caller.get()));
  f.add(device_keys.data(), keys.size(), caller.get());
  EXPECT_EQ(f.words(), reference.words()) << "the add did not wait for the caller's copy";

  // Device results are complete when the call returns: read them on another stream.
  device_buffer<bool> found(keys.size());
  GBF_CUDA_TRY(cudaMemsetAsync(found.data(), 0, keys.size(), caller.get()));
  f.contains(device_keys.data(), keys.size(), found.data(), caller.get());
  auto host_found = bools(keys.size());
  GBF_CUDA_TRY(cudaMemcpyAsync(host_found.get(), found.data(), keys.size(), cudaMemcpyDeviceToHost,
                               reader.get()));
  reader.synchronize();
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(host_found[i]) << "key " << i;

  // Every synchronous operation takes the stream, for host and device batches alike.
  EXPECT_EQ(f.count(device_keys.data(), keys.size(), caller.get()), keys.size());
  EXPECT_EQ(f.count(keys.data(), keys.size(), caller.get()), keys.size());
  const auto absent = random_keys(100'000, 4);
  auto is_new = bools(absent.size());
  auto want_new = bools(absent.size());
  f.add_new(absent.data(), absent.size(), is_new.get(), caller.get());
  reference.add_new(absent.data(), absent.size(), want_new.get());
  EXPECT_EQ(first_difference(is_new.get(), want_new.get(), absent.size()), absent.size());
  std::vector<std::uint64_t> rows(absent.size()), want_rows(absent.size());
  EXPECT_EQ(f.select(absent.data(), absent.size(), rows.data(), caller.get()),
            reference.select(absent.data(), absent.size(), want_rows.data()));
  EXPECT_EQ(rows, want_rows);
  EXPECT_EQ(f.words(), reference.words());
  EXPECT_EQ(cudaStreamQuery(caller.get()), cudaSuccess) << "work left pending on the caller's stream";
}

TEST_F(GpuFilter, SyncCallsWithoutAStreamRunAfterTheLegacyDefaultStream) {
  const auto keys = random_keys(ordering_keys, 5);
  const auto pinned = pinned_copy(keys);
  const auto device_keys = zeroed_keys(keys.size());
  filter f = filter::create(keys.size(), 0.01, on_gpu());
  // As a cudaMemcpy would, the call waits for work queued on the legacy default stream.
  GBF_CUDA_TRY(cudaMemcpyAsync(device_keys.data(), pinned.data(), keys.size() * sizeof(std::uint64_t),
                               cudaMemcpyHostToDevice, cudaStreamLegacy));
  f.add(device_keys.data(), keys.size());
  EXPECT_EQ(f.count(keys.data(), keys.size()), keys.size());
}

TEST_F(GpuFilter, ASyncCallOnOneStreamSeesAsyncWorkQueuedOnAnother) {
  const auto keys = random_keys(ordering_keys, 6);
  const auto device_keys = to_device(keys);
  detail::stream producer, consumer;
  filter f = filter::create(keys.size(), 0.01, on_gpu());
  f.add_async(device_keys.data(), keys.size(), producer.get());
  EXPECT_EQ(f.count(device_keys.data(), keys.size(), consumer.get()), keys.size());
  f.synchronize();
}

// ---------------------------------------------------------------------------
// select: the GPU's rows equal the CPU's, host and device batches, sync and async
// ---------------------------------------------------------------------------

template <class Key>
void check_gpu_select(const shape& s) {
  filter g = filter::create(20'000, 0.05, on_gpu(10'000), s);  // host batches span many chunks
  const std::vector<Key> added = random_keys<Key>(20'000, 1);
  g.add(added.data(), added.size());
  filter c = g.copy_to(backend::cpu);
  const std::vector<Key> probes = test::probes_for(added, 100'003, 2);
  const std::vector<std::uint8_t> validity = test::random_validity(probes.size(), 3);
  const std::vector<std::uint64_t> want = test::selected_rows(c, probes);
  const std::vector<std::uint64_t> want_valid = test::selected_rows(c, probes, validity.data());
  // Host batches.
  EXPECT_EQ(test::selected_rows(g, probes), want);
  EXPECT_EQ(test::selected_rows(g, probes, validity.data()), want_valid);
  // Device batches, sync and async.
  const auto keys = to_device(probes);
  const auto bits = to_device(validity);
  device_buffer<std::uint64_t> rows(probes.size() + 1);
  EXPECT_EQ(g.select(keys.data(), probes.size(), rows.data()), want.size());
  EXPECT_EQ(to_host(rows.data(), want.size()), want);
  EXPECT_EQ(g.select(keys.data(), probes.size(), bits.data(), rows.data()), want_valid.size());
  EXPECT_EQ(to_host(rows.data(), want_valid.size()), want_valid);
  std::uint64_t* count = rows.data() + probes.size();
  detail::stream user;
  g.select_async(keys.data(), probes.size(), rows.data(), count, user.get(), bits.data());
  user.synchronize();
  EXPECT_EQ(to_host(count, 1)[0], want_valid.size());
  EXPECT_EQ(to_host(rows.data(), want_valid.size()), want_valid);
  g.select_async(keys.data(), 0, rows.data(), count, user.get());  // empty: count = 0
  user.synchronize();
  EXPECT_EQ(to_host(count, 1)[0], 0u);
  // Device keys with host rows: refused.
  std::vector<std::uint64_t> host_rows(probes.size());
  EXPECT_THROW(g.select(keys.data(), probes.size(), host_rows.data()), invalid_argument);
}

TEST_F(GpuSelect, GpuRowsEqualCpuRowsForEveryLayout) {
  const shape shapes[] = {{1, 1, 0}, {2, 4, 0}, {4, 4, 7}, {8, 8, 0}, {16, 24, 3}};
  for (const shape& s : shapes) {
    SCOPED_TRACE("W=" + std::to_string(s.words_per_block));
    check_gpu_select<std::uint32_t>(s);
    check_gpu_select<std::uint64_t>(s);
  }
}

}  // namespace
}  // namespace gbf
