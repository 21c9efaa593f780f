#!/usr/bin/env bash
# gbf join against DuckDB: generate the tables with `gbf join --export-csv`,
# run the same query in DuckDB (the duckdb Python package, which
# scripts/setup.sh installs), and require the same count(*) and
# sum(l_quantity), exactly. Without duckdb it exits 77, which CTest reports as
# skipped (tests/CMakeLists.txt: SKIP_RETURN_CODE).
# Usage: check_duckdb.sh path/to/gbf
set -euo pipefail
GBF=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if ! python3 -c 'import duckdb' 2>/dev/null; then
  echo "skipped: the duckdb Python package is missing (scripts/setup.sh installs it)"
  exit 77
fi

for selectivity in 0.05 0.01 1; do
  "$GBF" join --sf 0.05 --selectivity "$selectivity" --seed 7 \
    --export-csv "$WORK/tables" --json >"$WORK/gbf.json"
  python3 - "$WORK/gbf.json" "$WORK/tables" <<'PY'
import json, sys, duckdb
result = json.load(open(sys.argv[1]))
tables = sys.argv[2]
con = duckdb.connect()
con.execute(f"CREATE TABLE orders AS SELECT * FROM read_csv('{tables}/orders.csv', header=true, "
            "columns={'o_orderkey': 'UBIGINT', 'o_orderdate': 'INTEGER'})")
con.execute(f"CREATE TABLE lineitem AS SELECT * FROM read_csv('{tables}/lineitem.csv', header=true, "
            "columns={'l_orderkey': 'UBIGINT', 'l_quantity': 'INTEGER'})")
orders, lines = con.execute("SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM lineitem)").fetchone()
count, total = con.execute(
    "SELECT count(*), coalesce(sum(l_quantity), 0) FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "WHERE o_orderdate < ?", [result["cutoff"]]).fetchone()
qualifying = con.execute("SELECT count(*) FROM orders WHERE o_orderdate < ?", [result["cutoff"]]).fetchone()[0]
got = (result["result_count"], result["result_sum_quantity"])
print(f"selectivity {result['selectivity_target']}: cutoff {result['cutoff']} ({result['cutoff_date']}); "
      f"gbf {got}, DuckDB {(count, int(total))}; survivors {result['survivors']}, "
      f"false positives {result['false_positives']}")
ok = (got == (count, int(total)) and orders == result["orders"] and lines == result["lineitem_rows"]
      and qualifying == result["qualifying_orders"]
      and result["survivors"] == result["true_matches"] + result["false_positives"]
      and result["survivors"] >= count)
if not ok:
    print(f"MISMATCH: DuckDB orders {orders} lineitem {lines} qualifying {qualifying}; gbf {result}")
    sys.exit(1)
PY
done
echo "gbf join agrees with DuckDB"
