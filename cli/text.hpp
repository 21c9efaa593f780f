// Text helpers shared by the gbf subcommands: grouped numbers, SI rates, sizes, JSON strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gbf::cli {

/// 1234567 -> "1,234,567".
std::string with_commas(std::uint64_t n);

/// 8.3e6 -> "8.3 M" (k, M, G); below 1000 the plain number.
std::string human(double x);

/// A size in MiB: 1 -> "1 MiB", 0.5 -> "0.5 MiB", 4096 -> "4,096 MiB" (whole
/// numbers grouped, others to 6 significant digits). Byte counts pass `bytes >> 20`.
std::string mib_text(double mib);

/// An estimate of distinct keys with commas, or "unknown (`why`)" when it is
/// infinite (a full filter: the estimate inverts log(1 - fill)).
std::string estimated_keys_text(double estimate, const char* why);

/// A byte count in binary units: 96 -> "96 B", 1536 -> "1.5 KiB", 3 << 29 -> "1.5 GiB".
std::string bytes_text(std::uint64_t bytes);

/// Flushes standard output; io_error (with errno) when a write to it failed
/// (a closed pipe, a full disk), so a command never exits 0 after losing output.
void check_stdout();

/// `s` for a one-line message on a terminal: each control byte (below 0x20, and
/// 0x7f: a NUL would end the message, a newline split it, an escape recolour the
/// terminal) as \xNN; other bytes as they are.
std::string printable(std::string_view s);

/// `s` as a JSON string literal: quotes, backslashes and control bytes escaped,
/// and each byte that is not part of well-formed UTF-8 replaced by U+FFFD.
std::string json_string(const std::string& s);

/// `x` as a JSON number in the fewest of 15-17 significant digits that read back
/// as the same double, or `null` when it is infinite or NaN, which JSON cannot write.
std::string json_number(double x);

/// A value a file may not record (a filter's capacity or target fpp, where 0
/// means "unknown"): `null` when it is 0, else the number.
std::string json_recorded(std::uint64_t n);
std::string json_recorded(double x);

}  // namespace gbf::cli
