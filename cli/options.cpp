#include "cli/options.hpp"

#include <cctype>
#include <cstdlib>
#include <optional>

namespace gbf::cli {

const std::map<std::string, gbf::backend> backend_names{
    {"auto", gbf::backend::automatic}, {"cpu", gbf::backend::cpu}, {"gpu", gbf::backend::gpu}};
const std::map<std::string, filter_format> filter_format_names{
    {"gbf", filter_format::gbf}, {"parquet-sbbf", filter_format::parquet_sbbf}};
const std::map<std::string, key_format> key_format_names{
    {"auto", key_format::automatic}, {"u32", key_format::u32}, {"u64", key_format::u64},
    {"text", key_format::text},      {"int", key_format::int_text},   {"npy", key_format::npy}};
const std::map<std::string, result_format> result_format_names{
    {"bytes", result_format::bytes}, {"bitmap", result_format::bitmap}, {"text", result_format::text}};

CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const std::optional<std::uint64_t> value = parse_whole_number(text);
        if (!value) {
          const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
          return digits ? text + " is out of range (" + range + ")"
                        : "'" + text + "' is not a number (expected a whole number from " + range + ")";
        }
        return *value < lo || *value > hi ? text + " is out of range (" + range + ")" : std::string();
      },
      "INT in " + range);
}

CLI::Validator open_unit_interval() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double p = std::strtod(text.c_str(), &end);
        const bool decimal = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') &&
                             text.find_first_of("xX") == std::string::npos;
        if (!decimal || end == text.c_str() || *end != '\0') return "'" + text + "' is not a decimal number";
        return p > 0 && p < 1 ? std::string() : "must be in (0, 1), got " + text;
      },
      "FLOAT in (0, 1)");
}

CLI::Validator nonempty_path() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "is an empty path: give a file name" : std::string();
      },
      "PATH");
}

void add_threads_option(CLI::App* cmd, unsigned& threads, const char* help) {
  cmd->add_option("--threads", threads, help)->check(whole_number(0, max_cpu_threads));
}

void add_wait_flag(CLI::App* cmd, run_options& run) {
  cmd->add_flag("--wait", run.wait,
                "When another gbf process is writing the output file, wait for it instead of failing");
}

}  // namespace gbf::cli
