#!/usr/bin/env bash
# Runs `gbf join` at SF 1 and SF 10 across selectivities 1%, 5%, 25%, 100%
# (three runs each, the run with the median speedup kept) and writes
# results.tsv next to this script, or to $OUT_TSV when set.
# Usage: [OUT_TSV=file] measure.sh path/to/gbf [extra gbf join options]
set -euo pipefail
GBF=$1; shift
DIR=$(cd "$(dirname "$0")" && pwd)
TSV=${OUT_TSV:-$DIR/results.tsv}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo -e "sf\tselectivity\tactual\trows\tsurvivors\tmatches\tfalse_pos\tfpr\tbuild_ms\tprefilter_ms\tjoin_ms\tprefiltered_ms\tbaseline_ms\tspeedup\tfilter_bytes\tbackend" >"$TSV"
for sf in 1 10; do
  for s in 0.01 0.05 0.25 1; do
    for r in 1 2 3; do "$GBF" join --sf "$sf" --selectivity "$s" --json "$@" >"$TMP/$r.json"; done
    python3 - "$sf" "$s" "$TMP" >>"$TSV" <<'PY'
import json, sys
sf, s, tmp = sys.argv[1:4]
runs = sorted((json.load(open(f"{tmp}/{r}.json")) for r in (1, 2, 3)), key=lambda r: r["speedup"])
m = runs[1]; t = m["times_ms"]
print("\t".join(str(x) for x in (sf, s, m["selectivity_actual"], m["lineitem_rows"], m["survivors"],
      m["true_matches"], m["false_positives"], round(m["measured_fpr"], 5), t["build"], t["prefilter"],
      t["join"], t["prefiltered_total"], t["baseline_join"], m["speedup"], m["filter_bytes"], m["backend"])))
PY
  done
done
cat "$TSV"
