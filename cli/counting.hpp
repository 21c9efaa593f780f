// The counting filter on the command line (docs/counting.md): `create` and
// `build` with --counting, `add`, `query` and `info` on counting files (the
// commands of cli/commands.cpp hand them over), and the counting-only
// commands `remove` and `project`.
#pragma once

#include <string>

#include "cli/commands.hpp"
#include "gbf/filter.hpp"
#include "gbf/io.hpp"

namespace gbf::cli {

struct remove_args {
  filter_file target;
  keys_input keys;
  run_options run;
  bool unchecked = false;  ///< Counting: decrement without testing; only for keys known to be held.
  bool strict = false;     ///< Any key not in the filter fails the command; nothing is written.
};

struct project_args {
  std::string input;   ///< A counting filter file.
  filter_file output;  ///< Where its projection goes: gbf (plain) or parquet-sbbf.
  run_options run;
};

/// True when `file` is a gbf file whose kind is counting (false when it cannot be
/// read: the command then reports the problem as for any filter file).
bool is_counting_file(const filter_file& file);

/// The projection of the counting filter file `file` (the plain filter its
/// contains answers as), with the file's capacity, fpp and keys held in `meta`.
filter load_counting_projection(const filter_file& file, const run_options& run,
                                file_metadata& meta);

int run_counting_create(const create_args& args);
int run_counting_build(const build_args& args);
int run_counting_add(const add_args& args);
int run_counting_info(const info_args& args);
/// `gbf query --counts` on a counting file: each key's smallest counter, a line each.
int run_counting_counts(const query_args& args);
/// `gbf remove F KEYS [--unchecked | --strict]` on a counting file: prints how
/// many keys were removed and refused.
int run_counting_remove(const remove_args& args);
/// `gbf merge` / `gbf intersect` of two counting files (the caller holds the output's
/// lock): counters added (saturating) or their minimum, written in the gbf format.
/// `same_file`: A and B are one file, read once and combined with itself.
int run_counting_combine(const combine_args& args, bool intersect, bool same_file);
/// `gbf project F -o OUT [--format parquet-sbbf]`: the plain filter of a counting file.
int run_project(const project_args& args);

}  // namespace gbf::cli
