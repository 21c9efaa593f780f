// The scaling chain on the GPU gives the CPU chain's levels, bits and answers:
// add_new from host and device keys (in pieces and pinned chunks smaller than
// the levels, so that slices cross pieces and levels open inside a piece),
// contains/count/select over every level, string keys, non-scaling refusal,
// copies between backends. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gbf/scaling_filter.hpp"
#include "tests/gpu/gpu_test.hpp"

namespace gbf::test {
namespace {

class GpuScaling : public gpu_layout_test {};

scaling_config config_for(const layout& g, std::uint64_t initial) {
  scaling_config c;
  c.initial_capacity = initial;
  c.fpp = 0.01;
  c.s = {g.words_per_block, g.bits_per_key, g.seed};
  return c;
}

void expect_same_chain(const scaling_filter& gpu, const scaling_filter& cpu, const std::string& what) {
  ASSERT_EQ(gpu.levels().size(), cpu.levels().size()) << what;
  for (std::size_t i = 0; i < cpu.levels().size(); ++i) {
    EXPECT_EQ(gpu.levels()[i].l, cpu.levels()[i].l) << what << " level " << i;
    EXPECT_EQ(gpu.levels()[i].keys, cpu.levels()[i].keys) << what << " level " << i;
    EXPECT_TRUE(gpu.level_words(i) == cpu.level_words(i)) << what << " level " << i << " bits";
  }
}

std::vector<std::uint64_t> keys_with_repeats(std::size_t n, std::uint64_t range, std::uint64_t seed) {
  std::vector<std::uint64_t> keys = random_keys(n, seed);
  for (auto& k : keys) k %= range;
  return keys;
}

TEST_P(GpuScaling, HostAndDeviceAddsGiveTheCpuChainBitForBit) {
  const scaling_config c = config_for(current_layout(), 500);
  scaling_filter cpu = scaling_filter::create(c, on_cpu(2));
  scaling_filter from_host = scaling_filter::create(c, on_gpu(3'000, 2));
  scaling_filter from_device = scaling_filter::create(c, on_gpu(3'000, 2));
  ASSERT_EQ(from_host.where(), backend::gpu);
  const auto keys = keys_with_repeats(40'000, 30'000, 7);
  auto cpu_new = bools(keys.size());
  auto host_new = bools(keys.size());
  cpu.add_new(keys.data(), keys.size(), cpu_new.get());
  from_host.add_new(keys.data(), keys.size(), host_new.get());
  const auto device_keys = to_device(keys);
  auto device_new = to_device(std::vector<unsigned char>(keys.size()));
  from_device.add_new(device_keys.data(), keys.size(), reinterpret_cast<bool*>(device_new.data()));
  const auto device_answers = to_host(device_new.data(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(host_new[i], cpu_new[i]) << "host keys, row " << i;
    ASSERT_EQ(device_answers[i] != 0, cpu_new[i]) << "device keys, row " << i;
  }
  EXPECT_GE(cpu.levels().size(), 5u);
  expect_same_chain(from_host, cpu, "host keys");
  expect_same_chain(from_device, cpu, "device keys");

  // One launch over all levels answers as the CPU does; no false negatives.
  const auto probes = probes_for(keys, 100'000, 8);
  auto gpu_found = bools(probes.size());
  auto cpu_found = bools(probes.size());
  from_host.contains(probes.data(), probes.size(), gpu_found.get());
  cpu.contains(probes.data(), probes.size(), cpu_found.get());
  EXPECT_EQ(first_difference(gpu_found.get(), cpu_found.get(), probes.size()), probes.size());
  EXPECT_EQ(from_host.count(probes.data(), probes.size()), cpu.count(probes.data(), probes.size()));
  EXPECT_EQ(from_host.count(keys.data(), keys.size()), keys.size());
  std::vector<std::uint64_t> gpu_rows(probes.size()), cpu_rows(probes.size());
  const std::uint64_t n = from_host.select(probes.data(), probes.size(), gpu_rows.data());
  ASSERT_EQ(n, cpu.select(probes.data(), probes.size(), cpu_rows.data()));
  gpu_rows.resize(n);
  cpu_rows.resize(n);
  EXPECT_EQ(gpu_rows, cpu_rows);
  EXPECT_TRUE(from_host.verify_contains(probes.data(), probes.size(), gpu_found.get()).ok());
}

INSTANTIATE_TEST_SUITE_P(Layouts, GpuScaling, ::testing::ValuesIn(layout_params(1)),
                         layout_param_name());

class GpuScalingChain : public gpu_test {};

TEST_F(GpuScalingChain, StringKeysGiveTheCpuChain) {
  scaling_config c;
  c.initial_capacity = 100;
  c.fpp = 0.02;
  scaling_filter cpu = scaling_filter::create(c, on_cpu(1));
  scaling_filter gpu = scaling_filter::create(c, on_gpu(500, 2));
  auto batch = mixed_batch<std::int64_t>(3'000, 4, /*with_mib=*/false);
  for (std::size_t i = 0; i < 200; ++i) batch.push(batch.values[i]);
  auto cpu_new = bools(batch.size());
  auto gpu_new = bools(batch.size());
  cpu.add_new(batch.keys(), cpu_new.get());
  gpu.add_new(batch.keys(), gpu_new.get());
  EXPECT_EQ(first_difference(gpu_new.get(), cpu_new.get(), batch.size()), batch.size());
  expect_same_chain(gpu, cpu, "strings");
  EXPECT_EQ(gpu.count(batch.keys()), batch.size());
}

TEST_F(GpuScalingChain, NonScalingRefusalLeavesTheGpuChainUnchanged) {
  scaling_policy p;
  p.non_scaling = true;
  scaling_filter f = scaling_filter::create(1'000, 0.01, p, on_gpu());
  const auto first = random_keys(900, 1);
  f.add(first.data(), first.size());
  const std::vector<std::uint32_t> bits = f.level_words(0);
  const std::uint64_t keys = f.levels()[0].keys;
  const auto more = random_keys(500, 2);
  EXPECT_THROW(f.add(more.data(), more.size()), filter_full);
  EXPECT_EQ(f.level_words(0), bits);
  EXPECT_EQ(f.levels()[0].keys, keys);
  EXPECT_EQ(f.count(first.data(), first.size()), first.size());
}

TEST_F(GpuScalingChain, CopiesBetweenBackendsKeepEveryLevel) {
  scaling_filter cpu = scaling_filter::create(300, 0.01, {}, on_cpu(2));
  const auto keys = random_keys(5'000, 3);
  cpu.add(keys.data(), keys.size());
  const scaling_filter gpu = cpu.copy_to(backend::gpu, on_gpu());
  expect_same_chain(gpu, cpu, "cpu to gpu");
  const scaling_filter back = gpu.copy_to(backend::cpu, on_cpu(1));
  expect_same_chain(back, cpu, "gpu to cpu");
  EXPECT_EQ(gpu.count(keys.data(), keys.size()), keys.size());
}

}  // namespace
}  // namespace gbf::test
