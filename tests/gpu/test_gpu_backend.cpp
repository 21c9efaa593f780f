// The CUDA backend against the CPU backend: the same keys must give the same
// bits, bit for bit, and the same answers, for every layout, both key types,
// host and device batches, the pipeline with many small chunks, and the async
// API. Every test skips with the reason when there is no GPU (except the one
// that checks what happens then).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "gbf/error.hpp"
#include "gbf/filter.hpp"
#include "host/backend.hpp"
#include "host/gpu/runtime.hpp"

namespace gbf::detail {
namespace {

using gbf::test::random_keys;

// Pipeline geometry small enough that test batches span many chunks and wrap
// around every slot several times.
constexpr std::size_t tiny_chunk_keys = 1000;
constexpr unsigned tiny_streams = 3;

class GpuBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    const gpu_status gpu = query_gpu();
    if (!gpu.available) GTEST_SKIP() << "no GPU: " << gpu.description;
  }
};

std::unique_ptr<backend_impl> cpu_reference(const layout& l) {
  return make_cpu_backend(l, cpu_simd::scalar, 1, nullptr);
}

template <class Key>
key_batch host_batch(const Key* keys, std::size_t n) {
  return {keys, n, key_kind_of<Key>(), memory_space::host};
}

template <class Key>
key_batch device_batch(const Key* keys, std::size_t n) {
  return {keys, n, key_kind_of<Key>(), memory_space::device};
}

template <class T>
device_buffer<T> to_device(const T* data, std::size_t n) {
  device_buffer<T> buffer(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(buffer.data(), data, n * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> out(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(out.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// A host array of n bools (std::vector<bool> has no bool*).
std::unique_ptr<bool[]> bools(std::size_t n) { return std::unique_ptr<bool[]>(new bool[n]()); }

std::unique_ptr<bool[]> bools_from_device(const bool* device, std::size_t n) {
  auto out = bools(n);
  if (n > 0) GBF_CUDA_TRY(cudaMemcpy(out.get(), device, n, cudaMemcpyDeviceToHost));
  return out;
}

std::vector<std::uint32_t> words_of(const backend_impl& b) {
  std::vector<std::uint32_t> words(b.layout().num_words());
  b.read_words(words.data());
  return words;
}

// Index of the first differing answer, or n.
std::size_t first_difference(const bool* a, const bool* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return i;
  }
  return n;
}

// ---------------------------------------------------------------------------
// Every layout x both key types
// ---------------------------------------------------------------------------

std::vector<layout> all_layouts() {
  std::vector<layout> layouts;
  for (std::uint32_t w : {1u, 2u, 4u, 8u, 16u}) {
    std::vector<std::uint32_t> ks = {w};
    if (2 * w < max_bits_per_key) ks.push_back(2 * w);
    ks.push_back(max_bits_per_key);
    for (std::uint32_t k : ks) {
      layout l;
      l.words_per_block = w;
      l.bits_per_key = k;
      l.seed = 0x9e3779b97f4a7c15ULL * w + k;
      l.num_blocks = 4099;  // not a power of two: multiply-shift, not masking
      layouts.push_back(l);
    }
  }
  return layouts;
}

}  // namespace
}  // namespace gbf::detail
namespace gbf {
// Readable parameter values in test listings ("8 words/block, 8 bits/key, ...").
void PrintTo(const layout& l, std::ostream* os) { *os << to_string(l); }
}  // namespace gbf
namespace gbf::detail {
namespace {

struct layout_name {
  std::string operator()(const ::testing::TestParamInfo<layout>& info) const {
    return "W" + std::to_string(info.param.words_per_block) + "k" +
           std::to_string(info.param.bits_per_key);
  }
};

class GpuLayout : public GpuBackend, public ::testing::WithParamInterface<layout> {
 protected:
  // Batches of several sizes: empty, one key, less than a chunk, many chunks.
  static constexpr std::size_t sizes[] = {0, 1, 777, 25'013};

  template <class Key>
  void check_add_and_contains() {
    const layout& l = GetParam();
    for (std::size_t n : sizes) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<Key> keys = random_keys<Key>(n, 1 + n);
      const std::vector<Key> probes = random_keys<Key>(2 * n, 2 + n);  // absent keys
      auto cpu = cpu_reference(l);
      auto gpu_host = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
      auto gpu_device = make_gpu_backend(l, 0, 0, nullptr);
      cpu->add(host_batch(keys.data(), n));
      gpu_host->add(host_batch(keys.data(), n));
      const auto device_keys = to_device(keys.data(), n);
      gpu_device->add(device_batch(device_keys.data(), n));
      const std::vector<std::uint32_t> expected = words_of(*cpu);
      EXPECT_EQ(words_of(*gpu_host), expected);
      EXPECT_EQ(words_of(*gpu_device), expected);

      // Queries: the added keys (all must be found) followed by absent ones.
      std::vector<Key> queries = keys;
      queries.insert(queries.end(), probes.begin(), probes.end());
      const std::size_t q = queries.size();
      auto want = bools(q);
      cpu->contains(host_batch(queries.data(), q), want.get());
      for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(want[i]) << "CPU false negative at " << i;
      auto got = bools(q);
      gpu_host->contains(host_batch(queries.data(), q), got.get());
      EXPECT_EQ(first_difference(got.get(), want.get(), q), q);

      const auto device_queries = to_device(queries.data(), q);
      device_buffer<bool> device_found(q);
      gpu_device->contains(device_batch(device_queries.data(), q), device_found.data());
      EXPECT_EQ(first_difference(bools_from_device(device_found.data(), q).get(), want.get(), q),
                q);

      const std::uint64_t hits = cpu->count(host_batch(queries.data(), q));
      EXPECT_EQ(gpu_host->count(host_batch(queries.data(), q)), hits);
      EXPECT_EQ(gpu_device->count(device_batch(device_queries.data(), q)), hits);
      EXPECT_EQ(gpu_host->popcount(), cpu->popcount());
    }
  }

  template <class Key>
  void check_add_new() {
    const layout& l = GetParam();
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
    auto gpu_host = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
    auto gpu_device = make_gpu_backend(l, 0, 0, nullptr);
    auto gpu_device_pieces = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
    for (backend_impl* b : {cpu.get(), gpu_host.get(), gpu_device.get(), gpu_device_pieces.get()}) {
      b->add(host_batch(earlier.data(), earlier.size()));
    }

    auto want = bools(n);
    cpu->add_new(host_batch(batch.data(), n), want.get());
    auto got = bools(n);
    gpu_host->add_new(host_batch(batch.data(), n), got.get());
    EXPECT_EQ(first_difference(got.get(), want.get(), n), n) << "host batch, 1000-key chunks";

    const auto device_keys = to_device(batch.data(), n);
    device_buffer<bool> device_is_new(n);
    gpu_device->add_new(device_batch(device_keys.data(), n), device_is_new.data());
    EXPECT_EQ(first_difference(bools_from_device(device_is_new.data(), n).get(), want.get(), n), n)
        << "device batch, one piece";
    gpu_device_pieces->add_new(device_batch(device_keys.data(), n), device_is_new.data());
    EXPECT_EQ(first_difference(bools_from_device(device_is_new.data(), n).get(), want.get(), n), n)
        << "device batch, 1000-key pieces";

    const std::vector<std::uint32_t> expected = words_of(*cpu);
    EXPECT_EQ(words_of(*gpu_host), expected);
    EXPECT_EQ(words_of(*gpu_device), expected);
    EXPECT_EQ(words_of(*gpu_device_pieces), expected);
  }
};

TEST_P(GpuLayout, AddContainsCountMatchCpu32) { check_add_and_contains<std::uint32_t>(); }
TEST_P(GpuLayout, AddContainsCountMatchCpu64) { check_add_and_contains<std::uint64_t>(); }
TEST_P(GpuLayout, AddNewMatchesCpu32) { check_add_new<std::uint32_t>(); }
TEST_P(GpuLayout, AddNewMatchesCpu64) { check_add_new<std::uint64_t>(); }

INSTANTIATE_TEST_SUITE_P(AllLayouts, GpuLayout, ::testing::ValuesIn(all_layouts()), layout_name{});

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
  auto gpu = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
  auto want = bools(keys.size());
  auto got = bools(keys.size());
  cpu->add_new(host_batch(keys.data(), keys.size()), want.get());
  gpu->add_new(host_batch(keys.data(), keys.size()), got.get());
  EXPECT_EQ(first_difference(got.get(), want.get(), keys.size()), keys.size());
  EXPECT_EQ(words_of(*gpu), words_of(*cpu));
}

TEST_F(GpuBackend, AsyncOnUserStreamMatchesCpu) {
  const layout l = default_layout();
  const std::vector<std::uint64_t> keys = random_keys<std::uint64_t>(10'000, 21);
  const std::vector<std::uint64_t> queries = random_keys<std::uint64_t>(10'000, 22);
  std::vector<std::uint64_t> all = keys;
  all.insert(all.end(), queries.begin(), queries.end());
  auto cpu = cpu_reference(l);
  cpu->add(host_batch(keys.data(), keys.size()));
  auto want = bools(all.size());
  cpu->contains(host_batch(all.data(), all.size()), want.get());

  auto gpu = make_gpu_backend(l, 0, 0, nullptr);
  stream user;
  const auto device_keys = to_device(keys.data(), keys.size());
  const auto device_all = to_device(all.data(), all.size());
  device_buffer<bool> found(all.size());
  device_buffer<std::uint64_t> hits(1);
  gpu->add_async(device_batch(device_keys.data(), keys.size()), user.get());
  gpu->contains_async(device_batch(device_all.data(), all.size()), found.data(), user.get());
  gpu->count_async(device_batch(device_all.data(), all.size()), hits.data(), user.get());
  user.synchronize();

  EXPECT_EQ(first_difference(bools_from_device(found.data(), all.size()).get(), want.get(),
                             all.size()),
            all.size());
  EXPECT_EQ(to_host(hits.data(), 1)[0], cpu->count(host_batch(all.data(), all.size())));
  EXPECT_EQ(words_of(*gpu), words_of(*cpu));
}

TEST_F(GpuBackend, SyncCallAfterAsyncSeesItsBits) {
  // No user synchronization: the sync contains must order itself after add_async.
  const layout l = default_layout();
  const std::vector<std::uint32_t> keys = random_keys<std::uint32_t>(50'000, 31);
  auto gpu = make_gpu_backend(l, 0, 0, nullptr);
  stream user;
  const auto device_keys = to_device(keys.data(), keys.size());
  gpu->add_async(device_batch(device_keys.data(), keys.size()), user.get());
  EXPECT_EQ(gpu->count(host_batch(keys.data(), keys.size())), keys.size());
}

TEST_F(GpuBackend, CombineMatchesCpu) {
  const layout l = default_layout(500);
  const std::vector<std::uint64_t> a_keys = random_keys<std::uint64_t>(3'000, 41);
  const std::vector<std::uint64_t> b_keys = random_keys<std::uint64_t>(3'000, 42);
  for (set_op op : {set_op::union_or, set_op::intersect_and}) {
    auto cpu_a = cpu_reference(l);
    auto cpu_b = cpu_reference(l);
    auto gpu_a = make_gpu_backend(l, 0, 0, nullptr);
    auto gpu_b = make_gpu_backend(l, 0, 0, nullptr);
    auto gpu_c = make_gpu_backend(l, 0, 0, nullptr);
    cpu_a->add(host_batch(a_keys.data(), a_keys.size()));
    cpu_b->add(host_batch(b_keys.data(), b_keys.size()));
    gpu_a->add(host_batch(a_keys.data(), a_keys.size()));
    gpu_b->add(host_batch(b_keys.data(), b_keys.size()));
    gpu_c->add(host_batch(a_keys.data(), a_keys.size()));
    cpu_a->combine(*cpu_b, op);
    gpu_a->combine(*gpu_b, op);
    gpu_c->combine_host(words_of(*gpu_b).data(), op);
    EXPECT_EQ(words_of(*gpu_a), words_of(*cpu_a));
    EXPECT_EQ(words_of(*gpu_c), words_of(*cpu_a));
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
  auto gpu = make_gpu_backend(l, 0, 0, nullptr);
  cpu->add(host_batch(keys.data(), keys.size()));
  std::vector<std::uint32_t> ones(l.num_words(), 0xffffffffu);
  gpu->combine_host(ones.data(), set_op::union_or);
  EXPECT_EQ(gpu->popcount(), l.num_bits());
  gpu->combine_host(words_of(*cpu).data(), set_op::intersect_and);
  EXPECT_EQ(words_of(*gpu), words_of(*cpu));
}

TEST_F(GpuBackend, ClearReadWriteRoundTrip) {
  const layout l = default_layout(1000);
  std::vector<std::uint32_t> words(l.num_words());
  std::mt19937 rng(61);
  for (std::uint32_t& w : words) w = static_cast<std::uint32_t>(rng());
  auto gpu = make_gpu_backend(l, 0, 0, nullptr);
  EXPECT_EQ(gpu->popcount(), 0u);
  gpu->write_words(words.data());
  EXPECT_EQ(words_of(*gpu), words);
  std::uint64_t bits = 0;
  for (std::uint32_t w : words) bits += static_cast<std::uint64_t>(__builtin_popcount(w));
  EXPECT_EQ(gpu->popcount(), bits);
  gpu->clear();
  EXPECT_EQ(gpu->popcount(), 0u);
  EXPECT_EQ(words_of(*gpu), std::vector<std::uint32_t>(l.num_words(), 0));
}

// `copy` holds `keys` in host memory of some kind: adding it through the GPU
// pipeline (small chunks) sets the CPU's bits, and probing it finds every key.
void expect_host_copy_matches_cpu(const layout& l, const std::vector<std::uint64_t>& keys,
                                  const std::uint64_t* copy) {
  const std::size_t n = keys.size();
  auto cpu = cpu_reference(l);
  auto gpu = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
  cpu->add(host_batch(keys.data(), n));
  gpu->add(host_batch(copy, n));
  EXPECT_EQ(words_of(*gpu), words_of(*cpu));
  auto found = bools(n);
  gpu->contains(host_batch(copy, n), found.get());
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
  cpu->add(host_batch(keys.data(), n));

  GBF_CUDA_TRY(cudaSetDevice(1));
  auto on_1 = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
  const auto keys_on_1 = to_device(keys.data(), n);
  GBF_CUDA_TRY(cudaSetDevice(0));
  auto on_0 = make_gpu_backend(l, tiny_chunk_keys, tiny_streams, nullptr);
  const auto keys_on_0 = to_device(keys.data(), n);

  on_1->add(host_batch(keys.data(), n));
  on_1->add(device_batch(keys_on_1.data(), n));
  EXPECT_EQ(words_of(*on_1), words_of(*cpu));
  EXPECT_EQ(on_1->count(host_batch(keys.data(), n)), n);
  int current = -1;
  GBF_CUDA_TRY(cudaGetDevice(&current));
  EXPECT_EQ(current, 0) << "the call changed the caller's device";

  EXPECT_THROW(on_1->add(device_batch(keys_on_0.data(), n)), invalid_argument);
  EXPECT_THROW(on_0->combine(*on_1, set_op::union_or), invalid_argument);
  EXPECT_EQ(words_of(*on_1), words_of(*cpu));  // nothing half-written
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
  auto gpu = make_gpu_backend(default_layout(), 0, 0, nullptr);
  const std::vector<std::uint64_t> keys(10, 1);
  stream user;
  EXPECT_THROW(gpu->add_async(host_batch(keys.data(), keys.size()), user.get()), invalid_argument);
  EXPECT_THROW(gpu->contains_async(host_batch(keys.data(), keys.size()), nullptr, user.get()),
               invalid_argument);
  EXPECT_THROW(gpu->count_async(host_batch(keys.data(), keys.size()), nullptr, user.get()),
               invalid_argument);
  // An empty batch is no pointer at all: the async calls accept it, and count_async
  // still writes its zero.
  device_buffer<std::uint64_t> hits(1);
  const std::uint64_t garbage = 42;
  GBF_CUDA_TRY(cudaMemcpy(hits.data(), &garbage, sizeof(garbage), cudaMemcpyHostToDevice));
  EXPECT_NO_THROW(gpu->add_async(host_batch(keys.data(), 0), user.get()));
  EXPECT_NO_THROW(gpu->count_async(host_batch(keys.data(), 0), hits.data(), user.get()));
  user.synchronize();
  EXPECT_EQ(to_host(hits.data(), 1)[0], 0u);
}

TEST_F(GpuBackend, DescribesTheDevice) {
  std::string description;
  auto gpu = make_gpu_backend(default_layout(), 0, 0, &description);
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

// ---------------------------------------------------------------------------
// The automatic backend on a real GPU (the router itself: test_auto_backend.cpp)
// ---------------------------------------------------------------------------

TEST_F(GpuBackend, AutomaticFilterRoutesSmallHostBatchesToItsMirrorWithTheSameAnswers) {
  // GPU 50 us + 1 ns/key, CPU 1 us + 25 ns/key, copies 1 us: small batches go
  // to the mirror at once, big ones and device batches to the GPU.
  cost_model m;
  cost_point p;
  p.filter_bytes = 1;
  p.cpu_add = p.cpu_probe = {1e-6, 40e6, 2e9};
  p.gpu_add = p.gpu_probe = {50e-6, 1e9, 10e9};
  m.points = {p};
  m.copy = {1e-6, 1e12};
  m.source = "test";
  options o;
  o.costs = m;
  filter f = filter::create(200000, 0.01, o);
  ASSERT_EQ(f.where(), backend::gpu);
  ASSERT_TRUE(f.dispatch().mirrored) << f.dispatch().mirror_note;
  EXPECT_NE(f.description().find("mirror"), std::string::npos) << f.description();
  filter cpu = filter::create(200000, 0.01, [] { options c; c.where = backend::cpu; return c; }());

  const auto big = random_keys(100000, 1);
  f.add(big.data(), big.size());
  cpu.add(big.data(), big.size());
  EXPECT_EQ(f.dispatch().gpu_batches, 1u);
  for (int i = 0; i < 20; ++i) {
    const auto small = random_keys(16, 100 + i);
    f.add(small.data(), small.size());
    cpu.add(small.data(), small.size());
  }
  EXPECT_EQ(f.dispatch().cpu_batches, 20u);
  // Device keys run on the GPU copy, which must first take the mirror's adds.
  const auto probe = random_keys(50000, 2);
  const auto device_probe = to_device(probe.data(), probe.size());
  device_buffer<bool> device_found(probe.size());
  f.contains(device_probe.data(), probe.size(), device_found.data());
  std::unique_ptr<bool[]> want(new bool[probe.size()]);
  cpu.contains(probe.data(), probe.size(), want.get());
  const auto host_found = bools_from_device(device_found.data(), probe.size());
  for (std::size_t i = 0; i < probe.size(); ++i) ASSERT_EQ(host_found[i], want[i]) << i;
  EXPECT_EQ(f.words(), cpu.words());
  // merge with a plain GPU filter and with a CPU filter.
  options g;
  g.where = backend::gpu;
  filter other = filter::create(200000, 0.01, g);
  const auto more = random_keys(1000, 3);
  other.add(more.data(), more.size());
  f.merge(other);
  cpu.merge(other);
  EXPECT_EQ(f.words(), cpu.words());
  EXPECT_EQ(f.count(more.data(), more.size()), more.size());
}

// ---------------------------------------------------------------------------
// Without a GPU
// ---------------------------------------------------------------------------

TEST(GpuAbsent, MakeGpuBackendThrowsNoGpu) {
  const gpu_status gpu = query_gpu();
  if (gpu.available) GTEST_SKIP() << "a GPU is present: " << gpu.description;
  EXPECT_FALSE(gpu.description.empty());
  try {
    make_gpu_backend(default_layout(), 0, 0, nullptr);
    FAIL() << "make_gpu_backend did not throw without a GPU";
  } catch (const no_gpu& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU"), std::string::npos) << e.what();
  }
  int no_memory = 0;
  EXPECT_EQ(locate(&no_memory), memory_space::host);
}

}  // namespace
}  // namespace gbf::detail
