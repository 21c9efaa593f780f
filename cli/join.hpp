// gbf join: a TPC-H-like semi-join reduction measured end to end.
//
// Generates orders (o_orderkey, o_orderdate) and lineitem (l_orderkey,
// l_quantity) at scale factor --sf, deterministically from --seed; keeps the
// orders with o_orderdate < cutoff (the cutoff chosen so that about
// --selectivity of them qualify); builds a gbf filter on the qualifying
// o_orderkey; selects the lineitem rows whose l_orderkey may match; joins those
// exactly with a hash table; and runs the same hash join without the filter.
// Reports rows, survivors, false positives, the time of each phase and the
// speedup the prefilter buys. --export-csv writes the tables for an external
// check (tests/join/check_duckdb.sh runs the query in DuckDB).
#pragma once

#include <cstdint>
#include <string>

#include "gbf/filter.hpp"

namespace gbf::cli {

struct join_args {
  double sf = 1;                 ///< Scale factor: 1.5M orders, ~6M lineitems per unit.
  double selectivity = 0.05;     ///< Target fraction of orders passing the predicate, in (0, 1].
  std::uint64_t seed = 1;        ///< Data generation seed.
  backend where = backend::automatic;
  unsigned threads = 0;          ///< CPU threads for the filter and the joins' probes, 0 = all.
  double fpp = 0.01;             ///< Filter target false-positive rate.
  std::string export_csv;        ///< Directory for orders.csv and lineitem.csv, empty = none.
  bool json = false;             ///< One JSON object on stdout instead of text.
};

int run_join(const join_args& args);

}  // namespace gbf::cli
