#include "cli/text.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gbf/error.hpp"

namespace gbf::cli {

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n);
  for (std::size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

std::string human(double x) {
  static const char* const units[] = {"", " k", " M", " G", " T"};
  std::size_t unit = 0;
  while (x >= 1000 && unit + 1 < sizeof units / sizeof units[0]) {
    x /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f%s" : "%.3g%s", x, units[unit]);
  return text;
}

std::string bytes_text(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < sizeof units / sizeof units[0]) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

void check_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw io_error(std::string("standard output: write failed: ") + std::strerror(errno), errno);
}

std::string mib_text(double mib) {
  if (mib >= 0 && mib < 0x1p53 && mib == static_cast<double>(static_cast<std::uint64_t>(mib)))
    return with_commas(static_cast<std::uint64_t>(mib)) + " MiB";
  char text[32];
  std::snprintf(text, sizeof text, "%g MiB", mib);
  return text;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace gbf::cli
