// Placing backends and the checks every kind shares (host/backend.hpp).
#include "host/backend.hpp"

#include <cstdio>
#include <string>

#include "gbf/error.hpp"

namespace gbf {

const char* to_string(backend b) {
  switch (b) {
    case backend::cpu: return "cpu";
    case backend::gpu: return "gpu";
    case backend::automatic: return "auto";
  }
  return "unknown";
}

namespace detail {

void require_sync(const call_options& call) {
  if (call.async)
    throw wrong_backend(std::string(call.what) +
                        " needs the GPU backend, but this filter lives on the CPU");
}

void check_listed(cpu_simd simd) {
  switch (simd) {
    case cpu_simd::automatic:
    case cpu_simd::scalar:
    case cpu_simd::avx2:
    case cpu_simd::avx512: return;
  }
  throw invalid_argument("options::simd = " + std::to_string(static_cast<int>(simd)) +
                         " is not a gbf::cpu_simd (automatic, scalar, avx2 or avx512)");
}

void check_listed(backend where) {
  switch (where) {
    case backend::cpu:
    case backend::gpu:
    case backend::automatic: return;
  }
  throw invalid_argument("options::where = " + std::to_string(static_cast<int>(where)) +
                         " is not a gbf::backend (cpu, gpu or automatic)");
}

backend resolve(const options& opts, std::string* reason) {
  // One value outside an enum's list must not pick a branch silently.
  check_listed(opts.simd);
  check_listed(opts.where);
  if (opts.where != backend::automatic) return opts.where;
  const gpu_status gpu = query_gpu();
  if (gpu.available) {
    if (reason != nullptr) *reason = "auto: GPU present";
    return backend::gpu;
  }
  if (reason != nullptr) *reason = "auto: no GPU (" + gpu.description + ")";
  return backend::cpu;
}

std::string format_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace detail
}  // namespace gbf
