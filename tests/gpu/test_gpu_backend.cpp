// The GPU Bloom backend (host/gpu/bloom_backend.cpp over the executor) against
// the CPU backend: the same keys must give the same bits, bit for bit, and the
// same answers, for every layout, both key types, host and device batches, the
// pipeline with many small chunks, and stream-ordered calls. Every test skips
// with the reason when there is no GPU (gbf::test::gpu_test); without one,
// make_gpu_bloom throws no_gpu (tests/unit/test_backend.cpp).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"
#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/counting_filter.hpp"
#include "gbf/cuckoo_filter.hpp"
#include "gbf/filter.hpp"
#include "gbf/scaling_filter.hpp"
#include "host/backend.hpp"
#include "host/bloom_backend.hpp"
#include "host/gpu/runtime.hpp"
#include "host/keys.hpp"

namespace gbf::detail {
namespace {

using gbf::test::bools;
using gbf::test::bools_from_device;
using gbf::test::first_difference;
using gbf::test::on_gpu;
using gbf::test::random_keys;
using gbf::test::to_device;
using gbf::test::to_host;

using GpuBackend = gbf::test::gpu_test;

// Pipeline geometry small enough that test batches span many chunks and wrap
// around every slot several times.
constexpr std::size_t tiny_chunk_keys = 1000;
constexpr unsigned tiny_streams = 3;

// How the tests call a backend: synchronously on the filter's own stream, or
// stream-ordered on `s`.
const call_options sync_call{"test", nullptr, false};
call_options async_on(cudaStream_t s, const char* what = "test_async") { return {what, s, true}; }

std::unique_ptr<bloom_backend> cpu_reference(const layout& l) {
  return make_cpu_bloom(l, gbf::test::on_cpu(1, cpu_simd::scalar), nullptr);
}

std::unique_ptr<bloom_backend> gpu_backend(const layout& l, std::size_t chunk_keys = 0,
                                           unsigned streams = 0) {
  return make_gpu_bloom(l, on_gpu(chunk_keys, streams), nullptr);
}

template <class Key>
key_batch host_batch(const Key* keys, std::size_t n) {
  return {keys, n, key_kind_of<Key>(), memory_space::host};
}

template <class Key>
key_batch device_batch(const Key* keys, std::size_t n) {
  return {keys, n, key_kind_of<Key>(), memory_space::device};
}

std::vector<std::uint32_t> words_of(const bloom_backend& b, const layout& l) {
  std::vector<std::uint32_t> words(l.num_words());
  b.read_words(words.data());
  return words;
}

void sync_add(bloom_backend& b, const key_batch& keys) { b.add(keys, nullptr, sync_call); }
void sync_add_new(bloom_backend& b, const key_batch& keys, bool* is_new) { b.add(keys, is_new, sync_call); }
void sync_contains(const bloom_backend& b, const key_batch& keys, bool* found) {
  b.contains(keys, found, sync_call);
}
std::uint64_t sync_count(const bloom_backend& b, const key_batch& keys) {
  return b.count(keys, nullptr, sync_call);
}

// ---------------------------------------------------------------------------
// Every layout x both key types
// ---------------------------------------------------------------------------

class GpuLayout : public gbf::test::gpu_layout_test {
 protected:
  // Batches of several sizes: empty, one key, less than a chunk, many chunks.
  static constexpr std::size_t sizes[] = {0, 1, 777, 25'013};

  template <class Key>
  void check_add_and_contains() {
    const layout& l = current_layout();
    for (std::size_t n : sizes) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<Key> keys = random_keys<Key>(n, 1 + n);
      const std::vector<Key> probes = random_keys<Key>(2 * n, 2 + n);  // absent keys
      auto cpu = cpu_reference(l);
      auto gpu_host = gpu_backend(l, tiny_chunk_keys, tiny_streams);
      auto gpu_device = gpu_backend(l);
      sync_add(*cpu, host_batch(keys.data(), n));
      sync_add(*gpu_host, host_batch(keys.data(), n));
      const auto device_keys = to_device(keys.data(), n);
      sync_add(*gpu_device, device_batch(device_keys.data(), n));
      const std::vector<std::uint32_t> expected = words_of(*cpu, l);
      EXPECT_EQ(words_of(*gpu_host, l), expected);
      EXPECT_EQ(words_of(*gpu_device, l), expected);

      // Queries: the added keys (all must be found) followed by absent ones.
      std::vector<Key> queries = keys;
      queries.insert(queries.end(), probes.begin(), probes.end());
      const std::size_t q = queries.size();
      auto want = bools(q);
      sync_contains(*cpu, host_batch(queries.data(), q), want.get());
      for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(want[i]) << "CPU false negative at " << i;
      auto got = bools(q);
      sync_contains(*gpu_host, host_batch(queries.data(), q), got.get());
      EXPECT_EQ(first_difference(got.get(), want.get(), q), q);

      const auto device_queries = to_device(queries.data(), q);
      device_buffer<bool> device_found(q);
      sync_contains(*gpu_device, device_batch(device_queries.data(), q), device_found.data());
      EXPECT_EQ(first_difference(bools_from_device(device_found.data(), q).get(), want.get(), q),
                q);

      const std::uint64_t hits = sync_count(*cpu, host_batch(queries.data(), q));
      EXPECT_EQ(sync_count(*gpu_host, host_batch(queries.data(), q)), hits);
      EXPECT_EQ(sync_count(*gpu_device, device_batch(device_queries.data(), q)), hits);
      EXPECT_EQ(gpu_host->popcount(), cpu->popcount());
    }
  }

  template <class Key>
  void check_add_new() {
    const layout& l = current_layout();
    // Pre-added keys, then a batch mixing them with fresh keys and repeats.
    const std::vector<Key> earlier = random_keys<Key>(5'000, 7);
    const std::vector<Key> fresh = random_keys<Key>(9'000, 8);
    std::vector<Key> batch;
    std::mt19937_64 rng(9);
    for (std::size_t i = 0; i < 20'000; ++i) {
      switch (rng() % 4) {
        case 0: batch.push_back(earlier[rng() % earlier.size()]); break;
        case 1:
          if (!batch.empty()) {
            batch.push_back(batch[rng() % batch.size()]);
            break;
          }
          [[fallthrough]];
        default: batch.push_back(fresh[rng() % fresh.size()]); break;
      }
    }
    const std::size_t n = batch.size();

    auto cpu = cpu_reference(l);
    auto gpu_host = gpu_backend(l, tiny_chunk_keys, tiny_streams);
    auto gpu_device = gpu_backend(l);
    auto gpu_device_pieces = gpu_backend(l, tiny_chunk_keys, tiny_streams);
    for (bloom_backend* b : {cpu.get(), gpu_host.get(), gpu_device.get(), gpu_device_pieces.get()}) {
      sync_add(*b, host_batch(earlier.data(), earlier.size()));
    }

    auto want = bools(n);
    sync_add_new(*cpu, host_batch(batch.data(), n), want.get());
    auto got = bools(n);
    sync_add_new(*gpu_host, host_batch(batch.data(), n), got.get());
    EXPECT_EQ(first_difference(got.get(), want.get(), n), n) << "host batch, 1000-key chunks";

    const auto device_keys = to_device(batch.data(), n);
    device_buffer<bool> device_is_new(n);
    sync_add_new(*gpu_device, device_batch(device_keys.data(), n), device_is_new.data());
    EXPECT_EQ(first_difference(bools_from_device(device_is_new.data(), n).get(), want.get(), n), n)
        << "device batch, one piece";
    sync_add_new(*gpu_device_pieces, device_batch(device_keys.data(), n), device_is_new.data());
    EXPECT_EQ(first_difference(bools_from_device(device_is_new.data(), n).get(), want.get(), n), n)
        << "device batch, 1000-key pieces";

    const std::vector<std::uint32_t> expected = words_of(*cpu, l);
    EXPECT_EQ(words_of(*gpu_host, l), expected);
    EXPECT_EQ(words_of(*gpu_device, l), expected);
    EXPECT_EQ(words_of(*gpu_device_pieces, l), expected);
  }
};

TEST_P(GpuLayout, AddContainsCountMatchCpu32) { check_add_and_contains<std::uint32_t>(); }
TEST_P(GpuLayout, AddContainsCountMatchCpu64) { check_add_and_contains<std::uint64_t>(); }
TEST_P(GpuLayout, AddNewMatchesCpu32) { check_add_new<std::uint32_t>(); }
TEST_P(GpuLayout, AddNewMatchesCpu64) { check_add_new<std::uint64_t>(); }

// 4099 blocks: not a power of two, so block_index is a multiply-shift, not a mask.
INSTANTIATE_TEST_SUITE_P(AllLayouts, GpuLayout, ::testing::ValuesIn(gbf::test::layout_params(4099)),
                         gbf::test::layout_param_name{});

// ---------------------------------------------------------------------------
// Single-layout properties
// ---------------------------------------------------------------------------

layout default_layout(std::uint64_t num_blocks = 2048) {
  layout l;
  l.num_blocks = num_blocks;
  return l;
}

TEST_F(GpuBackend, AddNewOnOneBlockIsSequential) {
  // Every key lands in the single block: one thread walks the whole batch.
  const layout l = default_layout(1);
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(3'000, 11);
  auto cpu = cpu_reference(l);
  auto gpu = gpu_backend(l, tiny_chunk_keys, tiny_streams);
  auto want = bools(keys.size());
  auto got = bools(keys.size());
  sync_add_new(*cpu, host_batch(keys.data(), keys.size()), want.get());
  sync_add_new(*gpu, host_batch(keys.data(), keys.size()), got.get());
  EXPECT_EQ(first_difference(got.get(), want.get(), keys.size()), keys.size());
  EXPECT_EQ(words_of(*gpu, l), words_of(*cpu, l));
}

TEST_F(GpuBackend, AsyncOnUserStreamMatchesCpu) {
  const layout l = default_layout();
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(10'000, 21);
  const std::vector<std::uint64_t> queries = random_keys<std::uint64_t>(10'000, 22);
  std::vector<std::uint64_t> all = keys;
  all.insert(all.end(), queries.begin(), queries.end());
  auto cpu = cpu_reference(l);
  sync_add(*cpu, host_batch(keys.data(), keys.size()));
  auto want = bools(all.size());
  sync_contains(*cpu, host_batch(all.data(), all.size()), want.get());

  auto gpu = gpu_backend(l);
  stream user;
  const auto device_keys = to_device(keys.data(), keys.size());
  const auto device_all = to_device(all.data(), all.size());
  device_buffer<bool> found(all.size());
  device_buffer<std::uint64_t> hits(1);
  gpu->add(device_batch(device_keys.data(), keys.size()), nullptr, async_on(user.get()));
  gpu->contains(device_batch(device_all.data(), all.size()), found.data(), async_on(user.get()));
  gpu->count(device_batch(device_all.data(), all.size()), hits.data(), async_on(user.get()));
  user.synchronize();

  EXPECT_EQ(first_difference(bools_from_device(found.data(), all.size()).get(), want.get(),
                             all.size()),
            all.size());
  EXPECT_EQ(to_host(hits.data(), 1)[0], sync_count(*cpu, host_batch(all.data(), all.size())));
  EXPECT_EQ(words_of(*gpu, l), words_of(*cpu, l));
}

TEST_F(GpuBackend, SyncCallAfterAsyncSeesItsBits) {
  // No user synchronization: the sync contains must order itself after add_async.
  const layout l = default_layout();
  const std::vector<std::uint32_t> keys = random_keys<std::uint32_t>(50'000, 31);
  auto gpu = gpu_backend(l);
  stream user;
  const auto device_keys = to_device(keys.data(), keys.size());
  gpu->add(device_batch(device_keys.data(), keys.size()), nullptr, async_on(user.get()));
  EXPECT_EQ(sync_count(*gpu, host_batch(keys.data(), keys.size())), keys.size());
}

TEST_F(GpuBackend, CombineMatchesCpu) {
  const layout l = default_layout(500);
  const std::vector<std::uint64_t> a_keys = random_keys<std::uint64_t>(3'000, 41);
  const std::vector<std::uint64_t> b_keys = random_keys<std::uint64_t>(3'000, 42);
  for (set_op op : {set_op::union_or, set_op::intersect_and, set_op::symmetric_xor}) {
    auto cpu_a = cpu_reference(l);
    auto cpu_b = cpu_reference(l);
    auto gpu_a = gpu_backend(l);
    auto gpu_b = gpu_backend(l);
    auto gpu_c = gpu_backend(l);
    sync_add(*cpu_a, host_batch(a_keys.data(), a_keys.size()));
    sync_add(*cpu_b, host_batch(b_keys.data(), b_keys.size()));
    sync_add(*gpu_a, host_batch(a_keys.data(), a_keys.size()));
    sync_add(*gpu_b, host_batch(b_keys.data(), b_keys.size()));
    sync_add(*gpu_c, host_batch(a_keys.data(), a_keys.size()));
    cpu_a->combine(*cpu_b, op);
    gpu_a->combine(*gpu_b, op);
    // In three slices, the middle one starting past the first vector.
    const std::vector<std::uint32_t> b_words = words_of(*gpu_b, l);
    const std::uint64_t cut1 = 4, cut2 = (l.num_words() / 2) & ~std::uint64_t{3};
    gpu_c->combine_host(0, cut1, b_words.data(), op);
    gpu_c->combine_host(cut1, cut2 - cut1, b_words.data() + cut1, op);
    gpu_c->combine_host(cut2, l.num_words() - cut2, b_words.data() + cut2, op);
    EXPECT_EQ(words_of(*gpu_a, l), words_of(*cpu_a, l));
    EXPECT_EQ(words_of(*gpu_c, l), words_of(*cpu_a, l));
    EXPECT_EQ(gpu_a->popcount(), cpu_a->popcount());
  }
}

TEST_F(GpuBackend, CombineHandlesWordCountsNotMultipleOfFour) {
  // W = 1 with 4099 blocks: 1024 16-byte vectors plus a 3-word tail.
  layout l = default_layout(4099);
  l.words_per_block = 1;
  l.bits_per_key = 3;
  const std::vector<std::uint32_t> keys = random_keys<std::uint32_t>(2'000, 51);
  auto cpu = cpu_reference(l);
  auto gpu = gpu_backend(l);
  sync_add(*cpu, host_batch(keys.data(), keys.size()));
  std::vector<std::uint32_t> ones(l.num_words(), 0xffffffffu);
  const std::uint64_t n = l.num_words();
  gpu->combine_host(0, n, ones.data(), set_op::union_or);
  EXPECT_EQ(gpu->popcount(), l.num_bits());
  gpu->combine_host(0, n, words_of(*cpu, l).data(), set_op::intersect_and);
  EXPECT_EQ(words_of(*gpu, l), words_of(*cpu, l));
  EXPECT_THROW(gpu->combine_host(2, 4, ones.data(), set_op::union_or), invalid_argument);  // not a vector start
  gpu->combine_host(0, n, ones.data(), set_op::symmetric_xor);  // the complement, tail words too
  std::vector<std::uint32_t> complement = words_of(*cpu, l);
  for (std::uint32_t& w : complement) w = ~w;
  EXPECT_EQ(words_of(*gpu, l), complement);
}

TEST_F(GpuBackend, SymmetricDifferenceWithItselfClearsEveryBit) {
  const layout l = default_layout(777);
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(2'000, 53);
  auto gpu = gpu_backend(l);
  sync_add(*gpu, host_batch(keys.data(), keys.size()));
  ASSERT_GT(gpu->popcount(), 0u);
  gpu->combine(*gpu, set_op::symmetric_xor);
  EXPECT_EQ(gpu->popcount(), 0u);
}

TEST_F(GpuBackend, ClearReadWriteRoundTrip) {
  const layout l = default_layout(1000);
  std::vector<std::uint32_t> words(l.num_words());
  std::mt19937 rng(61);
  for (std::uint32_t& w : words) w = static_cast<std::uint32_t>(rng());
  auto gpu = gpu_backend(l);
  EXPECT_EQ(gpu->popcount(), 0u);
  gpu->write_words(words.data());
  EXPECT_EQ(words_of(*gpu, l), words);
  std::uint64_t bits = 0;
  for (std::uint32_t w : words) bits += static_cast<std::uint64_t>(__builtin_popcount(w));
  EXPECT_EQ(gpu->popcount(), bits);
  gpu->clear();
  EXPECT_EQ(gpu->popcount(), 0u);
  EXPECT_EQ(words_of(*gpu, l), std::vector<std::uint32_t>(l.num_words(), 0));
}

// `copy` holds `keys` in host memory of some kind: adding it through the GPU
// pipeline (small chunks) sets the CPU's bits, and probing it finds every key.
void expect_host_copy_matches_cpu(const layout& l, const std::vector<std::uint64_t>& keys,
                                  const std::uint64_t* copy) {
  const std::size_t n = keys.size();
  auto cpu = cpu_reference(l);
  auto gpu = gpu_backend(l, tiny_chunk_keys, tiny_streams);
  sync_add(*cpu, host_batch(keys.data(), n));
  sync_add(*gpu, host_batch(copy, n));
  EXPECT_EQ(words_of(*gpu, l), words_of(*cpu, l));
  auto found = bools(n);
  sync_contains(*gpu, host_batch(copy, n), found.get());
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(found[i]) << "false negative at " << i;
}

TEST_F(GpuBackend, PinnedHostKeysMatchCpu) {
  const layout l = default_layout();
  const std::size_t n = 12'345;
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(n, 71);
  pinned_buffer<std::uint64_t> pinned(n);
  std::memcpy(pinned.data(), keys.data(), n * sizeof(std::uint64_t));
  ASSERT_EQ(pointer_type(pinned.data()), cudaMemoryTypeHost);
  expect_host_copy_matches_cpu(l, keys, pinned.data());
}

// A batch that starts in a cudaHostRegister'ed range and runs past its end:
// the chunks beyond the range (and the one straddling it) must be staged.
TEST_F(GpuBackend, HostKeysPartlyInARegisteredRangeMatchCpu) {
  const layout l = default_layout();
  constexpr std::size_t page = 4096;
  constexpr std::size_t n = 8 * page / sizeof(std::uint64_t);  // 8 pages of keys
  struct aligned_free {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::uint64_t, aligned_free> memory(
      static_cast<std::uint64_t*>(std::aligned_alloc(page, n * sizeof(std::uint64_t))));
  ASSERT_NE(memory, nullptr);
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(n, 72);
  std::memcpy(memory.get(), keys.data(), n * sizeof(std::uint64_t));
  // 3 pages (1,536 keys) pinned: chunk 0 lies inside, chunk 1 straddles the end, the rest lie outside.
  GBF_CUDA_TRY(cudaHostRegister(memory.get(), 3 * page, cudaHostRegisterDefault));
  struct unregister {
    void operator()(void* p) const noexcept { cudaHostUnregister(p); }
  };
  const std::unique_ptr<void, unregister> registered(memory.get());
  ASSERT_EQ(pointer_type(memory.get()), cudaMemoryTypeHost);
  ASSERT_NE(pointer_type(memory.get() + n - 1), cudaMemoryTypeHost);
  expect_host_copy_matches_cpu(l, keys, memory.get());
}

// A filter made on GPU 1 keeps working after the caller switches to GPU 0,
// leaves the caller's device as it was, and refuses keys and filters of another GPU.
TEST_F(GpuBackend, AFilterRunsOnItsOwnGpuWhateverDeviceIsCurrent) {
  int gpus = 0;
  GBF_CUDA_TRY(cudaGetDeviceCount(&gpus));
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs, this machine has " << gpus;
  const layout l = default_layout();
  const std::size_t n = 5'000;
  const auto keys = random_keys<std::uint64_t>(n, 73);
  auto cpu = cpu_reference(l);
  sync_add(*cpu, host_batch(keys.data(), n));

  GBF_CUDA_TRY(cudaSetDevice(1));
  auto on_1 = gpu_backend(l, tiny_chunk_keys, tiny_streams);
  const auto keys_on_1 = to_device(keys.data(), n);
  GBF_CUDA_TRY(cudaSetDevice(0));
  auto on_0 = gpu_backend(l, tiny_chunk_keys, tiny_streams);
  const auto keys_on_0 = to_device(keys.data(), n);

  sync_add(*on_1, host_batch(keys.data(), n));
  sync_add(*on_1, device_batch(keys_on_1.data(), n));
  EXPECT_EQ(words_of(*on_1, l), words_of(*cpu, l));
  EXPECT_EQ(sync_count(*on_1, host_batch(keys.data(), n)), n);
  int current = -1;
  GBF_CUDA_TRY(cudaGetDevice(&current));
  EXPECT_EQ(current, 0) << "the call changed the caller's device";

  EXPECT_THROW(sync_add(*on_1, device_batch(keys_on_0.data(), n)), invalid_argument);
  EXPECT_THROW(on_0->combine(*on_1, set_op::union_or), invalid_argument);
  EXPECT_EQ(words_of(*on_1, l), words_of(*cpu, l));  // nothing half-written
}

TEST_F(GpuBackend, LocateTellsDeviceFromHost) {
  device_buffer<std::uint32_t> device(4);
  pinned_buffer<std::uint32_t> pinned(4);
  std::vector<std::uint32_t> pageable(4);
  EXPECT_EQ(locate(device.data()), memory_space::device);
  EXPECT_EQ(locate(pinned.data()), memory_space::host);
  EXPECT_EQ(locate(pageable.data()), memory_space::host);
}

TEST_F(GpuBackend, AsyncWithHostKeysThrowsInvalidArgument) {
  auto gpu = gpu_backend(default_layout());
  const std::vector<std::uint64_t> keys(10, 1);
  stream user;
  EXPECT_THROW(gpu->add(host_batch(keys.data(), keys.size()), nullptr, async_on(user.get())),
               invalid_argument);
  EXPECT_THROW(gpu->contains(host_batch(keys.data(), keys.size()), nullptr, async_on(user.get())),
               invalid_argument);
  EXPECT_THROW(gpu->count(host_batch(keys.data(), keys.size()), nullptr, async_on(user.get())),
               invalid_argument);
  // An empty batch is no pointer at all: the async calls accept it, and count_async
  // still writes its zero.
  device_buffer<std::uint64_t> hits(1);
  const std::uint64_t garbage = 42;
  GBF_CUDA_TRY(cudaMemcpy(hits.data(), &garbage, sizeof(garbage), cudaMemcpyHostToDevice));
  // A cudaMemcpy from pageable memory may return before its DMA lands, and `user`
  // does not wait for the legacy stream: without this the 42 could arrive after
  // count_async's zero (it did on an H100 under load).
  GBF_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_NO_THROW(gpu->add(host_batch(keys.data(), 0), nullptr, async_on(user.get())));
  EXPECT_NO_THROW(gpu->count(host_batch(keys.data(), 0), hits.data(), async_on(user.get())));
  user.synchronize();
  EXPECT_EQ(to_host(hits.data(), 1)[0], 0u);
}

TEST_F(GpuBackend, DescribesTheDevice) {
  std::string description;
  auto gpu = make_gpu_bloom(default_layout(), on_gpu(), &description);
  EXPECT_EQ(gpu->kind(), backend::gpu);
  EXPECT_EQ(description.rfind("gpu (", 0), 0u) << description;
  EXPECT_NE(gpu->device_words(), nullptr);
}

TEST_F(GpuBackend, CudaErrorsNameTheCall) {
  try {
    GBF_CUDA_TRY(cudaMemcpy(nullptr, reinterpret_cast<const void*>(16), 4, cudaMemcpyDeviceToHost));
    FAIL() << "an invalid copy did not throw";
  } catch (const cuda_error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMemcpy"), std::string::npos) << e.what();
    EXPECT_NE(e.code(), 0);
  }
}

// Holds device memory in 256 MiB blocks until about `left` bytes stay free, and gives it
// back when destroyed: a filter larger than what is left cannot be made on the GPU.
class device_memory_hog {
 public:
  explicit device_memory_hog(std::size_t left) {
    constexpr std::size_t block = std::size_t{256} << 20;
    for (;;) {
      std::size_t free_bytes = 0, total_bytes = 0;
      GBF_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
      if (free_bytes < left + block) break;
      held_.emplace_back(block);
    }
  }

 private:
  std::vector<device_buffer<unsigned char>> held_;
};

TEST_F(GpuBackend, AnAutomaticFilterOfEveryKindTheGpuCannotHoldIsPlacedOnTheCpu) {
  constexpr std::uint64_t capacity = 400'000'000;  // each filter below needs 0.5-0.7 GB
  const options automatic;
  options gpu;
  gpu.where = backend::gpu;
  const auto on_the_cpu = [](const auto& f, const char* kind) {
    EXPECT_EQ(f.where(), backend::cpu) << kind;
    EXPECT_NE(f.description().find("GPU present but it could not hold this filter"), std::string::npos)
        << kind << ": " << f.description();
  };
  std::optional<filter> small;
  {
    const device_memory_hog hog(std::size_t{64} << 20);  // under 320 MiB free
    on_the_cpu(filter::create(capacity, 0.01, automatic), "plain");
    on_the_cpu(counting_filter::create(capacity / 4, 0.01, automatic), "counting");
    on_the_cpu(cuckoo_filter::create(capacity, 0.01, automatic), "cuckoo");
    on_the_cpu(scaling_filter::create(capacity, 0.01, {}, automatic), "scaling");
    EXPECT_THROW(filter::create(capacity, 0.01, gpu), allocation_error);  // explicit: no fallback
    small.emplace(filter::create(1000, 0.01, automatic));
    EXPECT_EQ(small->where(), backend::gpu) << small->description();
  }
  // The refused allocations left the GPU usable.
  const std::uint64_t keys[] = {1, 2, 3};
  bool found[3] = {};
  small->add(keys, 3);
  small->contains(keys, 3, found);
  EXPECT_TRUE(found[0] && found[1] && found[2]);
}

TEST_F(GpuBackend, PlaceHandsAnAutomaticChoiceToTheFallback) {
  // place() itself (the unit tests drive place_resolved): the asked backend, not the
  // resolved GPU, decides whether a refused GPU allocation falls back.
  std::string description;
  const auto cpu_made = place(
      options{}, description,
      []() -> std::unique_ptr<backend> { throw allocation_error("cannot allocate 1 byte of device memory", 1); },
      [&]() -> std::unique_ptr<backend> {
        description = "CPU";
        return std::make_unique<backend>(backend::cpu);
      });
  EXPECT_EQ(*cpu_made, backend::cpu);
  EXPECT_NE(description.find("could not hold this filter"), std::string::npos) << description;
}

}  // namespace
}  // namespace gbf::detail
