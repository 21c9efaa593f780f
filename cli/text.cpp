#include "cli/text.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

std::string estimated_keys_text(double estimate, const char* why) {
  return std::isinf(estimate) ? std::string("unknown (") + why + ")"
                              : with_commas(static_cast<std::uint64_t>(std::llround(estimate)));
}

std::string mib_text(double mib) {
  if (mib >= 0 && mib < 0x1p53 && mib == static_cast<double>(static_cast<std::uint64_t>(mib)))
    return with_commas(static_cast<std::uint64_t>(mib)) + " MiB";
  char text[32];
  std::snprintf(text, sizeof text, "%g MiB", mib);
  return text;
}

namespace {

/// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no
/// overlong forms, no surrogates, nothing past U+10FFFF), or 0 if it is not one.
std::size_t utf8_sequence_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char lead = byte(i);
  std::size_t length;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (s.size() - i < length || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t j = 2; j < length; ++j)
    if (byte(i + j) < 0x80 || byte(i + j) > 0xbf) return 0;
  return length;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const std::size_t length = utf8_sequence_length(s, i);
    if (length == 0) {
      // JSON text is UTF-8: a byte that is not (a file name may hold any) becomes U+FFFD.
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out.append(s, i, length);
    }
    i += length;
  }
  return out + "\"";
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned>(byte));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  // The fewest digits that read back as x (0.95, not 0.94999999999999996); 17 always do.
  char text[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  return text;
}

std::string json_recorded(std::uint64_t n) { return n == 0 ? "null" : std::to_string(n); }

std::string json_recorded(double x) { return x == 0 ? "null" : json_number(x); }

}  // namespace gbf::cli
