// Text helpers shared by the gbf subcommands: grouped numbers, SI rates, sizes, JSON strings.
#pragma once

#include <cstdint>
#include <string>

namespace gbf::cli {

/// 1234567 -> "1,234,567".
std::string with_commas(std::uint64_t n);

/// 8.3e6 -> "8.3 M" (k, M, G); below 1000 the plain number.
std::string human(double x);

/// A size in MiB: 1 -> "1 MiB", 0.5 -> "0.5 MiB", 4096 -> "4,096 MiB" (whole
/// numbers grouped, others to 6 significant digits). Byte counts pass `bytes >> 20`.
std::string mib_text(double mib);

/// `s` as a JSON string literal: quotes, backslashes and control bytes escaped.
std::string json_string(const std::string& s);

}  // namespace gbf::cli
