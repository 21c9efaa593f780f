// Word arrays in host memory (host/cpu/memory.hpp).
//
// A filter beyond the caches is probed at random: every probe is a TLB miss
// with 4 KiB pages once the array passes the TLB's reach (a few MiB), and the
// page walk adds to the DRAM miss. With huge pages, arrays of 2 MiB or more
// are mapped 2 MiB-aligned and marked MADV_HUGEPAGE, which kernels whose
// transparent huge pages are in "madvise" mode (a common default) need before
// they back a mapping with 2 MiB pages; where the kernel declines, the mapping
// still works with 4 KiB pages. Measured on a 2-vCPU EPYC VM (docs/cpu-vs-gpu.md,
// "Huge pages"): 1-thread add and contains at 256 MiB 1.23-1.25x faster;
// creation, which faults every page in, from 4x faster to 3x slower depending
// on how much the kernel must compact memory to find free huge pages.
#include "host/cpu/memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gbf/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define GBF_POPCNT_DISPATCH 1
#else
#define GBF_POPCNT_DISPATCH 0
#endif

namespace gbf::detail::cpu {
namespace {

constexpr std::uint64_t cache_line_bytes = 64;
constexpr std::uint64_t huge_page_bytes = std::uint64_t{2} << 20;

static_assert(sizeof(std::size_t) >= sizeof(std::uint64_t),
              "the largest filter (2^38 bytes) needs a 64-bit size_t");

/// The machine's physical memory in bytes (0 when the system does not say).
std::uint64_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes);
}

// MemAvailable of /proc/meminfo in bytes (free memory plus what the kernel can
// reclaim without swapping), 0 where there is none.
std::uint64_t available_memory_bytes() noexcept {
  std::FILE* meminfo = std::fopen("/proc/meminfo", "re");
  if (meminfo == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, meminfo) != nullptr)
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  std::fclose(meminfo);
  return static_cast<std::uint64_t>(kib) * 1024;
}

// The first whitespace-separated token of a file, "" where it cannot be read.
std::string first_token(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  in >> token;
  return token;
}

// A whole decimal number, nullopt for anything else ("max", "", "12x").
std::optional<std::uint64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 20 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10);
}

// The value of `key` in a memory.stat file (0 where it is absent).
std::uint64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

// The headroom of one cgroup directory: limit - working set, nullopt without a limit.
// v2 names its files memory.max / memory.current ("max": no limit); v1
// memory.limit_in_bytes / memory.usage_in_bytes (no limit reads as about 2^63).
std::optional<std::uint64_t> directory_headroom(const std::string& dir, bool v2) {
  const std::optional<std::uint64_t> limit =
      whole_number(first_token(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")));
  if (!limit || *limit >= (std::uint64_t{1} << 62)) return std::nullopt;
  const std::optional<std::uint64_t> usage =
      whole_number(first_token(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")));
  if (!usage) return std::nullopt;
  const std::uint64_t reclaimable =
      std::min(*usage, stat_value(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file"));
  const std::uint64_t working_set = *usage - reclaimable;
  return *limit > working_set ? *limit - working_set : 0;
}

// POPCNT is not in the x86-64 baseline, so without -mpopcnt __builtin_popcount
// compiles to a libgcc call per word; the POPCNT entry point runs the same loop
// with the instruction where the CPU has it.
inline std::uint64_t count_bits_loop(const std::uint32_t* words, std::uint64_t n) {
  std::uint64_t bits = 0;
  for (std::uint64_t i = 0; i < n; ++i) bits += static_cast<std::uint64_t>(__builtin_popcount(words[i]));
  return bits;
}
#if GBF_POPCNT_DISPATCH
__attribute__((target("popcnt"))) std::uint64_t count_bits_popcnt(const std::uint32_t* words,
                                                                   std::uint64_t n) {
  return count_bits_loop(words, n);
}
#endif

}  // namespace

std::optional<std::uint64_t> cgroup_memory_headroom(const std::string& proc_self_cgroup,
                                                    const std::string& root) {
  std::optional<std::uint64_t> headroom;
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    bool v2 = false;
    std::string base;
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      v2 = true;
      base = root;
    } else {
      std::istringstream names(controllers);
      std::string name;
      bool memory = false;
      while (std::getline(names, name, ',')) memory = memory || name == "memory";
      if (!memory) continue;
      base = root + "/memory";
    }
    // From the process's cgroup up to the root: each level's limit holds. In a
    // container the path may name the host's hierarchy, of which only the
    // container's own cgroup is mounted (at `base`): levels that do not exist
    // are skipped. At most 64 levels, against a crafted path.
    for (int level = 0; level < 64; ++level) {
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      if (const std::optional<std::uint64_t> room = directory_headroom(base + (path == "/" ? "" : path), v2))
        headroom = headroom ? std::min(*headroom, *room) : *room;
      if (path.empty() || path == "/") break;
      const std::size_t slash = path.rfind('/');
      path = slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return headroom;
}

void word_deleter::operator()(std::uint32_t* p) const noexcept {
  if (mapped_bytes > 0)
    ::munmap(p, mapped_bytes);
  else
    std::free(p);
}

word_array allocate_words(std::uint64_t bytes, bool huge_pages, const char* what) {
  const auto fail = [bytes, what](const std::string& why = "") {
    return allocation_error(std::string("cannot allocate ") + what + " of " +
                                std::to_string(bytes) + " bytes" + why,
                            bytes);
  };
  // The array is zeroed (every page touched) before it is returned. Where the
  // kernel overcommits, an mmap larger than the machine succeeds and that
  // memset is what fails: the OOM killer ends the process, no exception. A bit
  // array is probed at random, so one that cannot be resident is useless
  // anyway: refuse what exceeds physical memory up front, by name.
  if (const std::uint64_t physical = physical_memory_bytes(); physical != 0 && bytes > physical)
    throw fail(": more than this machine's " + std::to_string(physical) + " bytes of physical memory");
  // The same for what is left: a chain of scaling levels, or many filters, each
  // below physical memory, would otherwise end in the OOM killer as well. In a
  // container (Docker, Kubernetes, a systemd slice) the cgroup's limit is
  // the one that OOM-kills, whatever the machine has free. Reading /proc and the
  // cgroup files takes tens of microseconds, more than zeroing a small array
  // (which cannot be what tips the machine over): only from 1 MiB.
  if (bytes >= (std::uint64_t{1} << 20)) {
    if (const std::uint64_t available = available_memory_bytes(); available != 0 && bytes > available)
      throw fail(": more than the " + std::to_string(available) +
                 " bytes of memory this machine has available (MemAvailable)");
    std::ostringstream self_cgroup;
    self_cgroup << std::ifstream("/proc/self/cgroup").rdbuf();
    if (const std::optional<std::uint64_t> room = cgroup_memory_headroom(self_cgroup.str(), "/sys/fs/cgroup");
        room && bytes > *room)
      throw fail(": more than the " + std::to_string(*room) +
                 " bytes this process's memory cgroup limit leaves it");
  }
  if (huge_pages && bytes >= huge_page_bytes) {
    // Huge pages back only 2 MiB-aligned ranges: map one extra huge page and
    // trim the mapping to an aligned start.
    const std::uint64_t mapped = (bytes + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    void* raw = ::mmap(nullptr, mapped + huge_page_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw fail();
    const auto raw_start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t start = (raw_start + huge_page_bytes - 1) / huge_page_bytes * huge_page_bytes;
    if (start > raw_start) ::munmap(raw, start - raw_start);
    const std::uintptr_t tail = raw_start + mapped + huge_page_bytes - (start + mapped);
    if (tail > 0) ::munmap(reinterpret_cast<void*>(start + mapped), tail);
    void* memory = reinterpret_cast<void*>(start);
#if defined(MADV_HUGEPAGE)
    ::madvise(memory, mapped, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
    word_array words(static_cast<std::uint32_t*>(memory), word_deleter{mapped});
    // Touch every page now, as the memset of the small path does: creating the
    // filter pays for the page faults, not its first batches.
    std::memset(memory, 0, mapped);
    return words;
  }
  // aligned_alloc takes only multiples of the alignment.
  const std::uint64_t padded = (bytes + cache_line_bytes - 1) / cache_line_bytes * cache_line_bytes;
  void* memory = std::aligned_alloc(cache_line_bytes, padded);
  if (memory == nullptr) throw fail();
  std::memset(memory, 0, padded);
  return word_array(static_cast<std::uint32_t*>(memory));
}

std::uint64_t count_set_bits(const std::uint32_t* words, std::uint64_t n) {
#if GBF_POPCNT_DISPATCH
  static const bool has_popcnt = __builtin_cpu_supports("popcnt") != 0;
  if (has_popcnt) return count_bits_popcnt(words, n);
#endif
  return count_bits_loop(words, n);
}

}  // namespace gbf::detail::cpu
