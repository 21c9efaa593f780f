// `gbf parquet`: the Bloom filters of a column of Parquet files.
//
//   gbf parquet FILE... --column C --keys KEYS [--per-key]
//       which row groups of which files may hold some of the keys (a table), or
//       with --per-key each key's row groups; a summary of what can be skipped on stderr.
//   gbf parquet FILE --column C --extract [--row-group N] -o OUT [--format gbf|parquet-sbbf]
//       one row group's filter, or the union of all of them when their sizes agree.
//
// Text keys are read per the column's type: decimal integers for INT32 / INT64
// columns (a value the column cannot hold is in no row group), raw bytes for
// BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY.
#pragma once

#include <functional>

namespace CLI {
class App;
}  // namespace CLI

namespace gbf::cli {

/// Adds the `parquet` subcommand to `app`; when the command line picks it,
/// `command` is set to the function that runs it (returns the exit code).
void add_parquet_command(CLI::App& app, std::function<int()>& command);

}  // namespace gbf::cli
