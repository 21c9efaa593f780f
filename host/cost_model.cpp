// gbf::cost_model: built-in estimates, the cache file, and lookup by filter size.
//
// File format (text, one record per line, '#' starts a comment line):
//
//   gbf-cost-model 1
//   copy <fixed_s> <bytes_per_s>
//   point <filter_bytes> <cpu_add> <cpu_probe> <gpu_add> <gpu_probe>
//
// where each of the four costs is three numbers: fixed_s keys_per_s bytes_per_s.
// At least one point; points in any order (they are sorted on load). Numbers
// are written and read with std::to_chars / from_chars: the file is the same
// whatever the process's locale, and doubles round-trip exactly.
#include "gbf/cost_model.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "gbf/error.hpp"
#include "host/io/atomic_file.hpp"

namespace gbf {
namespace {

constexpr const char* magic = "gbf-cost-model";
constexpr int version = 1;

// The built-in estimates. CPU: one core of a 2020s server probes or adds about
// 150 M keys/s while the filter sits in cache and about 40 M keys/s once every
// probe misses to DRAM (docs/cpu-vs-gpu.md measures 35-47 M keys/s on a 2-vCPU
// EPYC at 64 MiB), and hashes strings at about 2 GB/s. GPU with host keys: the
// pipeline moves 8-byte keys and 1-byte answers over PCIe and through pinned
// staging copies, about 1 G keys/s end to end, with a few stream operations'
// latency (tens of microseconds) per call. Copy: pinned-less cudaMemcpy of the
// bit array, about 12 GB/s. `gbf bench` replaces all of this with measurements.
cost_point default_point(std::uint64_t filter_bytes, double cpu_keys_per_s) {
  cost_point p;
  p.filter_bytes = filter_bytes;
  p.cpu_add = {2e-6, cpu_keys_per_s, 2e9};
  p.cpu_probe = {2e-6, cpu_keys_per_s, 2e9};
  p.gpu_add = {40e-6, 1.2e9, 10e9};
  p.gpu_probe = {50e-6, 1.0e9, 10e9};
  return p;
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

std::string call_cost_problem(const call_cost& c, const std::string& name) {
  if (!(std::isfinite(c.fixed_s) && c.fixed_s >= 0)) return name + ".fixed_s is not a finite number >= 0";
  if (!finite_positive(c.keys_per_s)) return name + ".keys_per_s is not a finite number > 0";
  if (!finite_positive(c.bytes_per_s)) return name + ".bytes_per_s is not a finite number > 0";
  return {};
}

std::string number(double v) {
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string costs_text(const call_cost& c) {
  return number(c.fixed_s) + " " + number(c.keys_per_s) + " " + number(c.bytes_per_s);
}

}  // namespace

cost_model cost_model::defaults() {
  cost_model m;
  m.points = {default_point(std::uint64_t{1} << 20, 150e6), default_point(std::uint64_t{1} << 30, 40e6)};
  m.source = "built-in defaults";
  return m;
}

std::string cost_model::problem() const {
  if (points.empty()) return "no cost points";
  for (std::size_t i = 0; i < points.size(); ++i) {
    const cost_point& p = points[i];
    const std::string at = "points[" + std::to_string(i) + "]";
    if (p.filter_bytes == 0) return at + ".filter_bytes is 0";
    if (i > 0 && p.filter_bytes <= points[i - 1].filter_bytes)
      return at + ".filter_bytes is not above the previous point's";
    for (const auto& [cost, name] : {std::pair{&p.cpu_add, "cpu_add"}, std::pair{&p.cpu_probe, "cpu_probe"},
                                     std::pair{&p.gpu_add, "gpu_add"}, std::pair{&p.gpu_probe, "gpu_probe"}}) {
      const std::string bad = call_cost_problem(*cost, at + "." + name);
      if (!bad.empty()) return bad;
    }
  }
  if (!(std::isfinite(copy.fixed_s) && copy.fixed_s >= 0)) return "copy.fixed_s is not a finite number >= 0";
  if (!finite_positive(copy.bytes_per_s)) return "copy.bytes_per_s is not a finite number > 0";
  return {};
}

const cost_point& cost_model::at(std::uint64_t filter_bytes) const {
  if (points.empty()) throw invalid_argument("cost_model::at: the model has no cost points");
  const double target = std::log(static_cast<double>(std::max<std::uint64_t>(filter_bytes, 1)));
  const cost_point* best = &points.front();
  for (const cost_point& p : points)
    if (std::fabs(std::log(static_cast<double>(p.filter_bytes)) - target) <
        std::fabs(std::log(static_cast<double>(best->filter_bytes)) - target))
      best = &p;
  return *best;
}

std::string cost_model::default_path() {
  if (const char* explicit_path = std::getenv("GBF_COST_MODEL"); explicit_path && *explicit_path)
    return explicit_path;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return std::string(cache) + "/gbf/cost-model";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/gbf/cost-model";
  return ".gbf-cost-model";
}

void cost_model::save(const std::string& path, const std::string& comment) const {
  if (const std::string bad = problem(); !bad.empty())
    throw invalid_argument("cost_model::save: invalid model: " + bad);
  std::string text = std::string(magic) + " " + std::to_string(version) + "\n";
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  text += "# copy <fixed_s> <bytes_per_s>\n"
          "# point <filter_bytes> then cpu_add cpu_probe gpu_add gpu_probe, each <fixed_s> <keys_per_s> <bytes_per_s>\n";
  text += "copy " + number(copy.fixed_s) + " " + number(copy.bytes_per_s) + "\n";
  for (const cost_point& p : points)
    text += "point " + std::to_string(p.filter_bytes) + "  " + costs_text(p.cpu_add) + "  " +
            costs_text(p.cpu_probe) + "  " + costs_text(p.gpu_add) + "  " + costs_text(p.gpu_probe) + "\n";
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      throw io_error("save '" + path + "': cannot create directory '" + parent.string() + "': " + ec.message(),
                     ec.value());
  }
  detail::atomic_file_sink out(path);
  out.write(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  out.commit();
}

cost_model cost_model::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    throw io_error("cost model '" + path + "': cannot open: " + std::strerror(err), err);
  }
  cost_model m;
  m.source = path;
  bool have_magic = false;
  bool have_copy = false;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    const std::string where = "cost model '" + path + "' line " + std::to_string(line_no) + ": ";
    std::istringstream fields(line);
    std::string keyword;
    if (!(fields >> keyword) || keyword[0] == '#') continue;
    auto read = [&](auto& v, const char* name) {
      std::string token;
      const char* end = token.data();
      if (fields >> token) {
        end = token.data() + token.size();
        const std::from_chars_result r = std::from_chars(token.data(), end, v);
        if (r.ec == std::errc() && r.ptr == end) return;
      }
      throw format_error(where + "expected a number for " + name);
    };
    if (!have_magic) {
      int v = 0;
      if (keyword != magic || !(fields >> v))
        throw format_error(where + "not a gbf cost model (expected '" + magic + " " + std::to_string(version) + "')");
      if (v != version)
        throw format_error(where + "unsupported version " + std::to_string(v) + " (this gbf reads " +
                           std::to_string(version) + ")");
      have_magic = true;
    } else if (keyword == "copy") {
      read(m.copy.fixed_s, "copy fixed_s");
      read(m.copy.bytes_per_s, "copy bytes_per_s");
      have_copy = true;
    } else if (keyword == "point") {
      cost_point p;
      std::string token;
      fields >> token;
      const std::from_chars_result r =
          std::from_chars(token.data(), token.data() + token.size(), p.filter_bytes);
      if (token.empty() || r.ec != std::errc() || r.ptr != token.data() + token.size() || p.filter_bytes == 0)
        throw format_error(where + "filter_bytes must be a whole number >= 1");
      for (auto [cost, name] : {std::pair{&p.cpu_add, "cpu_add"}, std::pair{&p.cpu_probe, "cpu_probe"},
                                std::pair{&p.gpu_add, "gpu_add"}, std::pair{&p.gpu_probe, "gpu_probe"}}) {
        const std::string prefix = std::string(name) + " ";
        read(cost->fixed_s, (prefix + "fixed_s").c_str());
        read(cost->keys_per_s, (prefix + "keys_per_s").c_str());
        read(cost->bytes_per_s, (prefix + "bytes_per_s").c_str());
      }
      m.points.push_back(p);
    } else {
      throw format_error(where + "unknown record '" + keyword + "' (copy, point)");
    }
    if (std::string extra; fields >> extra) throw format_error(where + "unexpected '" + extra + "' at the end");
  }
  if (in.bad()) {
    const int err = errno;
    throw io_error("cost model '" + path + "': read failed: " + std::strerror(err), err);
  }
  if (!have_magic) throw format_error("cost model '" + path + "': empty file");
  if (!have_copy) throw format_error("cost model '" + path + "': no 'copy' record");
  std::sort(m.points.begin(), m.points.end(),
            [](const cost_point& a, const cost_point& b) { return a.filter_bytes < b.filter_bytes; });
  if (const std::string bad = m.problem(); !bad.empty())
    throw format_error("cost model '" + path + "': " + bad);
  return m;
}

cost_model cost_model::for_automatic_backend() {
  const std::string path = default_path();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return defaults();
  try {
    return load(path);
  } catch (const error& e) {
    cost_model m = defaults();
    m.source = "built-in defaults (" + std::string(e.what()) + ")";
    return m;
  }
}

}  // namespace gbf
