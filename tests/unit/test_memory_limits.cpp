// The memory a CPU allocation may take: what this process's memory cgroups
// leave it (host/cpu/memory.hpp), read from a cgroup tree built in a temp dir.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "host/cpu/memory.hpp"
#include "tests/io/io_support.hpp"

namespace {

using gbf::detail::cpu::cgroup_memory_headroom;
using gbf::test::temp_dir;

// Writes `text` to root/relative, making the directories on the way.
void put(const std::string& root, const std::string& relative, const std::string& text) {
  const std::filesystem::path path = std::filesystem::path(root) / relative;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

TEST(CgroupMemory, AV2LimitLeavesItsLimitLessTheWorkingSet) {
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "job/memory.max", std::to_string(1024 * mib) + "\n");
  put(root, "job/memory.current", std::to_string(700 * mib) + "\n");
  // Inactive file pages are reclaimed before an OOM kill: they do not count.
  put(root, "job/memory.stat", "anon 1\nfile 2\ninactive_file " + std::to_string(100 * mib) + "\nactive_file 3\n");
  EXPECT_EQ(cgroup_memory_headroom("0::/job\n", root), std::optional<std::uint64_t>(424 * mib));
}

TEST(CgroupMemory, TheTightestLimitOnThePathToTheRootHolds) {
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "a/memory.max", std::to_string(300 * mib));
  put(root, "a/memory.current", std::to_string(250 * mib));
  put(root, "a/b/memory.max", "max\n");  // no limit of its own
  put(root, "a/b/memory.current", std::to_string(200 * mib));
  put(root, "a/b/c/memory.max", std::to_string(1000 * mib));
  put(root, "a/b/c/memory.current", std::to_string(100 * mib));
  EXPECT_EQ(cgroup_memory_headroom("0::/a/b/c\n", root), std::optional<std::uint64_t>(50 * mib));
}

TEST(CgroupMemory, NoLimitAnywhereIsNoHeadroomToHold) {
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "memory.max", "max");
  put(root, "memory.current", "123");
  EXPECT_EQ(cgroup_memory_headroom("0::/\n", root), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("", root), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("0::/gone/away\n", dir.file("nothing")), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("garbage\n3:cpu:/x\n", root), std::nullopt);
}

TEST(CgroupMemory, AV1MemoryControllerIsReadBelowItsMount) {
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "memory/docker/abc/memory.limit_in_bytes", std::to_string(512 * mib));
  put(root, "memory/docker/abc/memory.usage_in_bytes", std::to_string(200 * mib));
  put(root, "memory/docker/abc/memory.stat", "cache 5\ntotal_inactive_file " + std::to_string(8 * mib) + "\n");
  // v1 says "no limit" with a number near 2^63.
  put(root, "memory/memory.limit_in_bytes", "9223372036854771712");
  put(root, "memory/memory.usage_in_bytes", "999");
  EXPECT_EQ(cgroup_memory_headroom("5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n", root),
            std::optional<std::uint64_t>(320 * mib));
}

TEST(CgroupMemory, AContainersOwnCgroupMountedAtTheRootIsFoundFromTheHostsPath) {
  // Without a cgroup namespace the path names the host's hierarchy, while only
  // the container's cgroup is mounted, at the root.
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "memory.max", std::to_string(64 * mib));
  put(root, "memory.current", std::to_string(80 * mib));  // over its limit: no room at all
  EXPECT_EQ(cgroup_memory_headroom("0::/kubepods/pod1/ctr\n", root), std::optional<std::uint64_t>(0));
}

TEST(CgroupMemory, UnreadableNumbersAreNoLimitNotAZeroLimit) {
  temp_dir dir;
  const std::string root = dir.file("cg");
  put(root, "x/memory.max", "12abc");
  put(root, "x/memory.current", "1");
  put(root, "y/memory.max", std::to_string(10 * mib));
  put(root, "y/memory.current", "");
  EXPECT_EQ(cgroup_memory_headroom("0::/x\n", root), std::nullopt);
  EXPECT_EQ(cgroup_memory_headroom("0::/y\n", root), std::nullopt);
}

}  // namespace
