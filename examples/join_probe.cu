// A user's own hash-join probe kernel that prefilters inside its loop with gbf.
//
// Build side: 64 Ki "orders" keys; probe side: 1 Mi "lineitem" rows of which
// about 1 in 8 references a build key. The host builds a gbf filter on the GPU
// over the build keys (gbf::filter, device-resident keys), builds a small
// open-addressing hash table on the GPU, then runs ONE kernel that, per probe
// row, asks the filter first (a probe-only gbf::device_ref<8, const std::uint32_t>:
// one 32-byte sector read) and walks the hash table only when the filter says
// "maybe". It prints how many rows the filter let through, the matches, and the
// false positives, and checks the matches against a CPU join. On a machine
// without a GPU it prints "no GPU: <reason>" and exits 0.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gbf/device_ref.cuh"
#include "gbf/filter.hpp"

namespace {

constexpr std::uint64_t empty_slot = ~std::uint64_t{0};

#define CHECK(call)                                                              \
  do {                                                                           \
    const cudaError_t status_ = (call);                                          \
    if (status_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(status_));      \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

__device__ std::uint64_t slot_of(std::uint64_t key, std::uint64_t mask) {
  return (key * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

// Open addressing, linear probing; keys unique, empty = ~0.
__global__ void build_table(const std::uint64_t* keys, std::size_t n, unsigned long long* table,
                            std::uint64_t mask) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    for (std::uint64_t slot = slot_of(keys[i], mask);; slot = (slot + 1) & mask) {
      if (atomicCAS(&table[slot], static_cast<unsigned long long>(empty_slot),
                    static_cast<unsigned long long>(keys[i])) == empty_slot)
        break;
    }
  }
}

struct probe_counts {
  unsigned long long passed;   // rows the filter let through
  unsigned long long matches;  // rows found in the hash table
};

// The user's join probe: filter first, hash table only on "maybe".
__global__ void probe_join(gbf::device_ref<8, const std::uint32_t> filter,
                           const std::uint64_t* probe, std::size_t n,
                           const unsigned long long* table, std::uint64_t mask,
                           probe_counts* counts) {
  unsigned long long passed = 0, matches = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::uint64_t key = probe[i];
    if (!filter.contains(key)) continue;  // definitely no match: skip the table
    ++passed;
    for (std::uint64_t slot = slot_of(key, mask);; slot = (slot + 1) & mask) {
      if (table[slot] == key) {
        ++matches;
        break;
      }
      if (table[slot] == empty_slot) break;
    }
  }
  atomicAdd(&counts->passed, passed);
  atomicAdd(&counts->matches, matches);
}

}  // namespace

int main() {
  const gbf::gpu_status gpu = gbf::query_gpu();
  if (!gpu.available) {
    std::printf("no GPU: %s\n", gpu.description.c_str());
    return 0;
  }
  constexpr std::size_t build_n = std::size_t{1} << 16;
  constexpr std::size_t probe_n = std::size_t{1} << 20;
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> build(build_n);
  std::unordered_set<std::uint64_t> build_set;
  for (std::uint64_t& key : build) {
    do key = rng() >> 1; while (!build_set.insert(key).second);
  }
  std::vector<std::uint64_t> probe(probe_n);
  std::uint64_t expected = 0;
  for (std::uint64_t& key : probe) {
    key = rng() % 8 == 0 ? build[rng() % build_n] : rng() >> 1;
    expected += build_set.count(key);
  }

  std::uint64_t *d_build = nullptr, *d_probe = nullptr;
  unsigned long long* d_table = nullptr;
  probe_counts* d_counts = nullptr;
  const std::size_t table_slots = 4 * build_n;  // power of two, load factor 1/4
  CHECK(cudaMalloc(&d_build, build_n * sizeof(std::uint64_t)));
  CHECK(cudaMalloc(&d_probe, probe_n * sizeof(std::uint64_t)));
  CHECK(cudaMalloc(&d_table, table_slots * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&d_counts, sizeof(probe_counts)));
  CHECK(cudaMemcpy(d_build, build.data(), build_n * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_probe, probe.data(), probe_n * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_table, 0xff, table_slots * sizeof(unsigned long long)));
  CHECK(cudaMemset(d_counts, 0, sizeof(probe_counts)));

  try {
    gbf::options opts;
    opts.where = gbf::backend::gpu;
    gbf::filter f = gbf::filter::create(build_n, 0.01, opts);  // default layout: W = 8
    f.add(d_build, build_n);  // device keys: built on the GPU
    // A const filter hands out a probe-only view (W checked against the layout).
    const gbf::device_ref<8, const std::uint32_t> ref(std::as_const(f));

    build_table<<<256, 256>>>(d_build, build_n, d_table, table_slots - 1);
    CHECK(cudaGetLastError());
    probe_join<<<1024, 256>>>(ref, d_probe, probe_n, d_table, table_slots - 1, d_counts);
    CHECK(cudaGetLastError());
    probe_counts counts{};
    CHECK(cudaMemcpy(&counts, d_counts, sizeof counts, cudaMemcpyDeviceToHost));

    std::printf("gpu: %s\n", gpu.description.c_str());
    std::printf("probe rows:            %zu\n", probe_n);
    std::printf("passed the filter:     %llu\n", counts.passed);
    std::printf("join matches:          %llu (CPU join: %llu)\n", counts.matches,
                static_cast<unsigned long long>(expected));
    std::printf("false positives:       %llu (%.3f%% of non-matching rows)\n",
                counts.passed - counts.matches,
                100.0 * static_cast<double>(counts.passed - counts.matches) /
                    static_cast<double>(probe_n - expected));
    std::printf("hash-table probes saved: %llu of %zu\n", probe_n - counts.passed, probe_n);
    cudaFree(d_counts);
    cudaFree(d_table);
    cudaFree(d_probe);
    cudaFree(d_build);
    return counts.matches == expected ? 0 : 1;
  } catch (const gbf::error& e) {
    std::fprintf(stderr, "gbf: %s\n", e.what());
    return 1;
  }
}
