// Option helpers shared by the subcommands' CLI11 wiring (cli/gbf.cpp,
// cli/parquet.cpp): one spelling of each check and each enumerated option.
#pragma once

#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>

#include "cli/commands.hpp"
#include "cli/key_reader.hpp"
#include "gbf/backend.hpp"

namespace gbf::cli {

extern const std::map<std::string, gbf::backend> backend_names;
extern const std::map<std::string, filter_format> filter_format_names;
extern const std::map<std::string, key_format> key_format_names;
extern const std::map<std::string, result_format> result_format_names;

/// Checks an integer option: digits only, within [lo, hi]. Says "is not a
/// number" for text (CLI11's Range would say "not in range").
CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi);

/// Checks a probability option: a decimal number strictly between 0 and 1 (NaN,
/// hexadecimal floats and leading blanks refused, as the integer options refuse them).
CLI::Validator open_unit_interval();

/// Checks a path option: not empty (an unset shell variable would otherwise
/// pass for "no output" or fail only after the work).
CLI::Validator nonempty_path();

/// Maps an enumerated option's name (any case) to its value and refuses
/// anything else, naming the choices. CLI11's CheckedTransformer also takes the
/// enum's underlying integers ("--format 1"), which are no documented spelling.
template <class Enum>
CLI::Validator one_of(const std::map<std::string, Enum>& names) {
  static_assert(std::is_enum_v<Enum>, "an enumerated option");
  std::string choices;
  for (const auto& entry : names) choices += (choices.empty() ? "" : ", ") + entry.first;
  return CLI::Validator(
      [names, choices](std::string& text) -> std::string {
        std::string lower = text;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto found = names.find(lower);
        if (found == names.end()) return "'" + text + "' is not one of " + choices;
        text = std::to_string(static_cast<std::underlying_type_t<Enum>>(found->second));
        return {};
      },
      "one of " + choices);
}

/// --threads: 0 (all hardware threads) to max_cpu_threads.
void add_threads_option(CLI::App* cmd, unsigned& threads, const char* help);

/// --wait: wait for another gbf process's lock on the output instead of failing.
void add_wait_flag(CLI::App* cmd, run_options& run);

}  // namespace gbf::cli
