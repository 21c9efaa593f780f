// The scaling chain in the CLI (docs/scaling.md): `create --scaling` and
// `build --scaling` make one; add, query and info recognise a scaling file by
// its container kind and run on it. The key loops are commands.cpp's, shared
// with the plain filter; this file holds what differs: sizing, files, info.
#pragma once

#include <cstdint>
#include <string>

#include "gbf/scaling_filter.hpp"

namespace gbf::cli {

struct sizing_options;
struct run_options;
struct filter_file;
struct combine_args;

/// --scaling, --expansion, --tightening, --non-scaling of create and build.
struct scaling_options {
  bool enabled = false;        ///< --scaling: make a growing chain instead of a plain filter.
  std::uint32_t expansion = 2; ///< Level i + 1 takes `expansion` times level i's keys.
  double tightening = 0.5;     ///< Level i's target fpp is fpp (1 - r) r^i.
  bool non_scaling = false;    ///< One level that refuses adds past its capacity.
};

/// Whether `file` is a gbf file holding a scaling chain (false for a missing or
/// unreadable file and for Parquet files: the plain path then reports the problem).
bool is_scaling_file(const filter_file& file);

/// A new empty chain; usage_error for a bad combination (Parquet output, --parquet-compatible).
scaling_filter create_scaling(const sizing_options& sizing, const scaling_options& scaling,
                              const run_options& run, const filter_file& output);

/// Loads the chain in `file`.
scaling_filter load_scaling(const filter_file& file, const run_options& run);

/// Saves the chain to `file` atomically.
void save_scaling(const scaling_filter& f, const filter_file& file);

/// One line on stderr describing a chain just written (unless quiet).
void report_scaling(const scaling_filter& f, const std::string& what, const std::string& path,
                    bool quiet);

/// `gbf merge` of two chains (the caller holds the output's lock): the other
/// chain's keys in this one's levels (scaling_filter::merge), in the gbf format;
/// `same_file`: A and B are one file, a chain merged with itself (unchanged).
int run_scaling_merge(const combine_args& args, bool same_file);

/// `gbf info` of a chain: BF.INFO's fields and one row per level (text or JSON).
void print_scaling_info(const filter_file& file, const scaling_filter& f, bool json);

}  // namespace gbf::cli
