// The gbf subcommands other than demo: one function per subcommand, each
// taking its parsed arguments and returning the process exit code.
//
// Exit codes: 0 success; 1 runtime failure (thrown as gbf::error: bad or
// corrupt file, I/O error, GPU requested but absent; or returned: verification
// mismatch); 2 usage error (CLI11 parse errors, and usage_error thrown here for
// option values only checkable after parsing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "cli/key_reader.hpp"
#include "cli/scaling.hpp"
#include "gbf/filter.hpp"
#include "gbf/sizing.hpp"

namespace gbf::cli {

/// Bad option values found after parsing; main() turns it into exit code 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How a filter file is stored.
enum class filter_format { gbf, parquet_sbbf };

struct filter_file {
  std::string path;
  filter_format format = filter_format::gbf;
  bool parquet_header = true;  ///< parquet_sbbf: Thrift BloomFilterHeader before the bitset.
};

/// --threads refuses more than this: threads past the hardware's only add
/// start-up and scheduling cost, and a huge count slows every batch down.
constexpr unsigned max_cpu_threads = 1024;

/// Options of every command that places a filter.
struct run_options {
  backend where = backend::automatic;
  unsigned threads = 0;  ///< CPU threads, 0 = all; at most max_cpu_threads.
  bool quiet = false;    ///< No summary line on stderr.
  bool wait = false;     ///< Writers: wait for another gbf process writing the output instead of failing.
};

/// How create and build size a new filter.
struct sizing_options {
  std::uint64_t capacity = 0;  ///< 0: not given (build counts the keys).
  double fpp = 0.01;
  shape s;                     ///< From --layout W/K[/SEED].
  bool layout_given = false;   ///< --layout was given (the default shape included).
  bool parquet_compatible = false;
  std::uint32_t counter_bits = 0;  ///< --counting: a counting filter of 4- or 8-bit counters; 0: plain.
};

struct keys_input {
  std::string path;  ///< "-" = stdin.
  key_format format = key_format::automatic;
  std::size_t chunk_keys = std::size_t{1} << 20;
};

struct create_args {
  sizing_options sizing;
  filter_file output;
  run_options run;
  scaling_options scaling;  ///< --scaling: a growing chain (cli/scaling.hpp).
};

struct build_args {
  keys_input keys;
  sizing_options sizing;
  filter_file output;
  run_options run;
  bool verify = false;
  scaling_options scaling;  ///< --scaling: a growing chain (cli/scaling.hpp).
};

struct add_args {
  filter_file target;
  keys_input keys;
  run_options run;
  bool verify = false;
  bool unique = false;  ///< Cuckoo files: add only keys not present yet (CF.ADDNX).
};

/// --out encodings: one 0/1 byte per key, LSB-first packed bits (Arrow), or "0"/"1" lines.
enum class result_format { bytes, bitmap, text };

struct query_args {
  filter_file target;
  keys_input keys;
  run_options run;
  bool verify = false;
  std::string out;  ///< Empty: no results file.
  result_format out_format = result_format::bytes;
  bool count = false;
  bool counts = false;  ///< Counting and cuckoo files: each key's approximate count.
  bool select = false;
  bool row_numbers = false;
};

struct info_args {
  filter_file target;
  run_options run;
  bool json = false;
};

struct combine_args {
  filter_file a;
  filter_file b;
  filter_file output;
  run_options run;
};

/// Parses "W/K" or "W/K/SEED" (e.g. "16/16", "8/8/0"); usage_error when malformed
/// or when a field exceeds its type (a seed past 2^64 - 1 is refused, not clamped).
shape parse_layout(const std::string& text);

/// Decimal digits only (no sign, space or exponent) as a uint64; nullopt when
/// not such a number or past 2^64 - 1.
std::optional<std::uint64_t> parse_whole_number(const std::string& text);

int run_create(const create_args& args);
int run_build(const build_args& args);
int run_add(const add_args& args);
int run_query(const query_args& args);
int run_info(const info_args& args);
int run_merge(const combine_args& args);
struct remove_args;
/// remove: counting (cli/counting.hpp) and cuckoo (cli/cuckoo.hpp) files; other kinds cannot forget keys.
int run_remove(const remove_args& args);
int run_intersect(const combine_args& args);
int run_xor(const combine_args& args);

}  // namespace gbf::cli
