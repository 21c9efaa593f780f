#!/usr/bin/env bash
# `gbf bench` tests: a tiny run (CPU rows everywhere, GPU rows where there is a
# GPU), its JSON and plot, and usage errors.
# Usage: test_bench.sh path/to/gbf
set -u
GBF=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$GBF" bench --batches 1000,100000 --filter-mib 1 --repeat 1 --json J.json --plot P.png >out 2>err
rc=$?
[[ $rc == 0 ]] || fail "bench exit $rc (want 0) -- stderr: $(cat err)"
grep -q "FPR meas/pred" out || fail "table lacks the FPR column: $(cat out)"
grep -q "crossover" out || fail "table lacks the crossover line: $(cat out)"
grep -q "^verification: ok" out || fail "verification line: $(cat out)"
python3 -m json.tool J.json >/dev/null || fail "J.json does not parse"
python3 - J.json <<'PY' || fail "J.json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["machine"]["hardware_threads"], int), d["machine"]
assert isinstance(d["machine"]["avx2"], bool), d["machine"]
assert d["filters"][0]["bytes"] == 1 << 20, d["filters"]
rows = d["rows"]
for backend in ("cpu1", "cpu"):
    for op in ("add", "contains"):
        got = [r for r in rows if r["backend"] == backend and r["op"] == op]
        assert sorted(r["batch"] for r in got) == [1000, 100000], (backend, op, got)
        for r in got:
            assert r["keys_per_s"] > 0 and r["verification"] == "ok", r
            if op == "contains":
                assert 0 <= r["measured_fpr"] < 0.05 and 0 < r["predicted_fpr"] <= 0.01, r
if not d["machine"]["gpu"]["available"]:
    assert all(x["text"].startswith("no GPU") for x in d["crossover"]), d["crossover"]
PY
[[ -s P.gp ]] || fail "no gnuplot script P.gp"
if command -v gnuplot >/dev/null 2>&1; then
  [[ -s P.png ]] || fail "gnuplot is installed but P.png was not written: $(cat err)"
else
  grep -q "gnuplot not found" err || fail "no note that gnuplot is missing: $(cat err)"
fi

# Usage errors exit 2.
for args in "--batches 0" "--batches abc" "--batches 1.5" "--filter-mib -1" "--ops insert" \
            "--backends tpu" "--repeat 0" "--fpp 2" "--no-such-option"; do
  # shellcheck disable=SC2086
  "$GBF" bench $args --filter-mib 1 >out 2>err
  rc=$?
  [[ $rc == 2 ]] || fail "bench $args: exit $rc (want 2) -- stderr: $(cat err)"
done

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all bench CLI tests passed"
