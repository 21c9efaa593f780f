// Host memory for a filter's words, whatever its kind: one zeroed, 64-byte
// aligned array, in transparent huge pages when it is large, and the
// whole-array operations on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gbf::detail::cpu {

/// Frees a word array: munmap for a mapped one (mapped_bytes > 0), else free.
struct word_deleter {
  std::uint64_t mapped_bytes = 0;
  void operator()(std::uint32_t* p) const noexcept;
};
using word_array = std::unique_ptr<std::uint32_t[], word_deleter>;

/// A zeroed, 64-byte aligned array of `bytes` bytes (a block never straddles a
/// cache line; AVX2 loads of a block are aligned). With `huge_pages`, arrays of
/// 2 MiB or more are mapped 2 MiB-aligned and advised MADV_HUGEPAGE (see
/// memory.cpp). Throws allocation_error naming `what` and the size, also up front
/// when the size exceeds the machine's physical memory, the memory it has
/// available, or what this process's memory cgroups leave it (no OOM kill
/// mid-memset).
word_array allocate_words(std::uint64_t bytes, bool huge_pages, const char* what);

/// Bytes this process may still take under its memory cgroups' limits: over its
/// cgroup and every ancestor with a limit, the least of limit - (usage - inactive
/// file pages, which the kernel reclaims before it OOM-kills). nullopt where no
/// limit applies or none can be read. `proc_self_cgroup` is the text of
/// /proc/self/cgroup (v1 "N:memory:/path" or v2 "0::/path" lines), `root` the
/// cgroup file system's mount point (/sys/fs/cgroup; v1 controllers below it).
std::optional<std::uint64_t> cgroup_memory_headroom(const std::string& proc_self_cgroup,
                                                    const std::string& root);

/// Set bits in words[0, n) (POPCNT where the CPU has it).
std::uint64_t count_set_bits(const std::uint32_t* words, std::uint64_t n);

}  // namespace gbf::detail::cpu
