// The cuckoo filter in the gbf command (docs/cuckoo.md):
//
//   gbf create --cuckoo --capacity N [--fpp P] [--tag-bits 8|16|32] [--max-kicks K] -o F
//   gbf add F KEYS [--unique]      CF.ADD (CF.ADDNX with --unique); all or nothing
//   gbf remove F KEYS [--strict]   CF.DEL, one copy per key; keys not present are refused
//   gbf query F KEYS [...]         CF.MEXISTS; --count, --select, --out as for Bloom filters
//   gbf info F [--json]            CF.INFO
//
// add, query and info recognise a cuckoo file by its kind (gbf::read_file_kind)
// and come here from commands.cpp; remove is for cuckoo files only.
#pragma once

#include <cstdint>
#include <functional>

#include "cli/commands.hpp"
#include "gbf/cuckoo_layout.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gbf::cli {

/// What `create --cuckoo` takes besides --capacity, --fpp and -o.
struct cuckoo_create_options {
  bool enabled = false;                                ///< --cuckoo
  std::uint32_t tag_bits = 0;                          ///< 0: the width with the smallest table.
  std::uint32_t max_kicks = cuckoo_default_max_kicks;  ///< Most moves per insert.
};

/// Adds --cuckoo, --tag-bits and --max-kicks to the create subcommand.
CLI::Option* add_cuckoo_create_options(CLI::App* create_cmd, cuckoo_create_options& opts);

/// True when `file` is a gbf file holding a cuckoo filter (false for any other
/// file, and for one that cannot be read: the caller's load reports that).
bool is_cuckoo_file(const filter_file& file);

/// create --cuckoo: an empty cuckoo filter sized for the capacity and fpp.
int run_cuckoo_create(const create_args& args, const cuckoo_create_options& opts);
/// `gbf query --counts` on a cuckoo file: each key's copies of its tag (CF.COUNT), a line each.
int run_cuckoo_counts(const query_args& args);
/// add to a cuckoo file: every key or none (filter_full leaves the file as it was).
/// The caller holds the output lock.
int run_cuckoo_add(const add_args& args, bool unique);
/// remove from a cuckoo file: one copy of each key found, the others refused
/// (always "checked": a cuckoo filter cannot remove a tag it does not hold);
/// prints how many were removed and refused. With `strict`, a refused key
/// fails the command and nothing is written. The caller holds the output lock.
int run_cuckoo_remove(const add_args& args, bool strict);
/// query a cuckoo file (the caller holds the --out lock).
int run_cuckoo_query(const query_args& args);
/// `gbf merge A B -o C` of two cuckoo files (the caller holds the output's lock):
/// B's tags inserted into A's table (cuckoo_filter::merge), in the gbf format.
/// `same_file`: A and B are one file, read once and merged with itself.
int run_cuckoo_merge(const combine_args& args, bool same_file);
/// info of a cuckoo file.
int run_cuckoo_info(const info_args& args);

}  // namespace gbf::cli
