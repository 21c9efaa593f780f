// The data caches of the CPU running this process, read at run time, so that a
// benchmark can say whether a filter sits in a cache or far beyond it wherever
// it runs (a 1 MiB filter is beyond the L2 of one machine and inside that of
// another; 64 MiB is beyond a 32 MiB L3 and inside a 260 MiB one), and the
// memory it can take, so that a run too large for the machine is refused or
// shrunk before it allocates rather than killed part-way.
//
// Header-only: `gbf bench`, `gbf demo` and bench/bench_cpu_peers.cpp use it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace gbf::cli {

struct cpu_caches {
  std::uint64_t l2_bytes = 0;   ///< One instance of the level-2 data cache (per core), 0 = unknown.
  std::uint64_t llc_bytes = 0;  ///< One instance of the last-level data cache, 0 = unknown.
  unsigned llc_level = 0;       ///< The last level's number (3 on most x86 servers), 0 = unknown.
};

namespace caches_detail {

/// "512K", "32768K", "1M" or a plain byte count, as sysfs writes cache sizes.
inline std::uint64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  std::uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : '\0';
  if (unit == 'K' || unit == 'k') return value << 10;
  if (unit == 'M' || unit == 'm') return value << 20;
  if (unit == 'G' || unit == 'g') return value << 30;
  return value;
}

inline std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace caches_detail

/// CPU 0's data and unified caches from sysfs (Linux), else sysconf; unknown
/// sizes stay 0.
inline cpu_caches read_cpu_caches() {
  using namespace caches_detail;
  cpu_caches c;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level_text = read_line(dir + "level");
    if (level_text.empty()) break;
    const std::string type = read_line(dir + "type");
    if (type != "Data" && type != "Unified") continue;
    const unsigned level = static_cast<unsigned>(std::stoul(level_text));
    const std::uint64_t size = parse_size(read_line(dir + "size"));
    if (level == 2) c.l2_bytes = size;
    if (level >= c.llc_level && size > 0) {
      c.llc_level = level;
      c.llc_bytes = size;
    }
  }
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (c.l2_bytes == 0) {
    const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 > 0) c.l2_bytes = static_cast<std::uint64_t>(l2);
  }
  if (c.llc_bytes == 0) {
    const long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l3 > 0) {
      c.llc_bytes = static_cast<std::uint64_t>(l3);
      c.llc_level = 3;
    } else if (l2 > 0) {
      c.llc_bytes = static_cast<std::uint64_t>(l2);
      c.llc_level = 2;
    }
  }
#endif
  return c;
}

/// The kernel's estimate of the memory that can be allocated without swapping
/// (MemAvailable in /proc/meminfo), in bytes; 0 when unknown (not Linux).
inline std::uint64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace gbf::cli
