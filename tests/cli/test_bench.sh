#!/usr/bin/env bash
# `gbf bench` tests: a tiny run (CPU rows everywhere, GPU rows where there is a
# GPU), its JSON and plot, and usage errors.
# Usage: test_bench.sh path/to/gbf
set -u
# Never touch the cost model of the user running the tests (a GPU run saves one).
export GBF_COST_MODEL

GBF=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
GBF_COST_MODEL="$WORK/default-cost-model"
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

# The auto row, and the automatic backend's cost model: fitted and saved where
# there is a GPU, refused with the reason where there is none; never with
# --no-cost-model.
GBF_COST_MODEL="$WORK/cache/cost-model" "$GBF" bench --batches 1000,100000 --filter-mib 1 --repeat 1 \
  --backends cpu,gpu-host,auto --json A.json >out 2>err
rc=$?
if python3 -c 'import json,sys; sys.exit(0 if json.load(open("J.json"))["machine"]["gpu"]["available"] else 1)'; then
  [[ $rc == 0 ]] || fail "bench with auto: exit $rc -- stderr: $(cat err)"
  grep -q "^cost model: saved to $WORK/cache/cost-model" out || fail "no cost model saved: $(cat out)"
  head -1 "$WORK/cache/cost-model" | grep -q "^gbf-cost-model 1$" || fail "cost model file: $(cat "$WORK/cache/cost-model")"
  grep -q "auto ran" out || fail "auto rows do not say where they ran: $(cat out)"
else
  # gpu-host needs a GPU: the run refuses it; auto alone runs on the CPU.
  [[ $rc == 1 ]] || fail "bench --backends gpu-host without a GPU: exit $rc (want 1)"
  GBF_COST_MODEL="$WORK/cache/cost-model" "$GBF" bench --batches 1000,100000 --filter-mib 1 --repeat 1 \
    --backends cpu,auto --json A.json >out 2>err
  rc=$?
  [[ $rc == 0 ]] || fail "bench --backends cpu,auto: exit $rc -- stderr: $(cat err)"
  grep -q "^cost model: not saved: no GPU" out || fail "no 'not saved: no GPU' line: $(cat out)"
  [[ ! -e "$WORK/cache/cost-model" ]] || fail "a cost model was written without a GPU"
  python3 - A.json <<'PY' || fail "A.json auto rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
auto = [r for r in rows if r["backend"] == "auto"]
assert len(auto) == 4 and all(r["verification"] == "ok" for r in auto), auto
assert all("one backend" in r["routing"] for r in auto), auto
PY
fi
GBF_COST_MODEL="$WORK/cache/other" "$GBF" bench --batches 1000,10000 --filter-mib 1 --repeat 1 --backends cpu1 \
  --no-cost-model >out 2>err || fail "bench --no-cost-model failed: $(cat err)"
! grep -q "^cost model" out || fail "--no-cost-model still reports a cost model: $(cat out)"
[[ ! -e "$WORK/cache/other" ]] || fail "--no-cost-model wrote a cost model"

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
