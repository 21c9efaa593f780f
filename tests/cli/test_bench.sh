#!/usr/bin/env bash
# `gbf bench` tests: a tiny run (CPU rows everywhere, GPU rows where there is a
# GPU), its table, JSON and plot, the GPU backends refused without a GPU, and
# usage errors.
# Usage: test_bench.sh path/to/gbf
set -u

source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"

# A home of its own: the bench writes its outputs and nothing else (no cache).
mkdir home
HOME="$WORK/home" XDG_CACHE_HOME= "$GBF" bench --batches 1000,100000 --filter-mib 1 --repeat 1 \
  --json J.json --plot P.png >out 2>err
rc=$?
[[ $rc == 0 ]] || fail "bench exit $rc (want 0) -- stderr: $(cat err)"
# (.nv is the CUDA driver's kernel cache, ~/.nv/ComputeCache, which cuInit makes on a
# machine with a GPU: not gbf's writing.)
[[ -z "$(ls -A home | grep -vx '.nv')" ]] || fail "bench wrote under \$HOME: $(find home)"
grep -q "FPR meas/pred" out || fail "table lacks the FPR column: $(cat out)"
for backend in cpu1 cpu; do
  grep -Eq "^  model $backend +t\(n\) = [0-9.]+ [um]?s \+ n / [0-9.]+ ?[kMG]? keys/s$" out ||
    fail "table lacks the t(n) fit of $backend: $(cat out)"
done
grep -q "crossover" out || fail "table lacks the crossover line: $(cat out)"
grep -q "^verification: ok" out || fail "verification line: $(cat out)"
! grep -Eq "^  [0-9e,]+ +auto |cost model" out || fail "the table still has auto rows or a cost model: $(cat out)"
python3 -m json.tool J.json >/dev/null || fail "J.json does not parse"
python3 - J.json <<'PY' || fail "J.json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["machine"]["hardware_threads"], int), d["machine"]
assert isinstance(d["machine"]["avx2"], bool), d["machine"]
assert isinstance(d["machine"]["avx512"], bool), d["machine"]
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
assert all(r["backend"] in ("cpu1", "cpu", "gpu-device", "gpu-host") for r in rows), rows
crossovers = d["crossover"]
if d["machine"]["gpu"]["available"]:
    # One per (op, filter) and GPU backend, measured and fitted.
    assert sorted((x["op"], x["gpu_backend"]) for x in crossovers) == [
        ("add", "gpu-device"), ("add", "gpu-host"), ("contains", "gpu-device"), ("contains", "gpu-host")], crossovers
    for x in crossovers:
        assert x["batch"] in (None, 1000, 100000), x
        assert x["text"].startswith("GPU "), x
else:
    # One per (op, filter), saying why there is none.
    assert sorted(x["op"] for x in crossovers) == ["add", "contains"], crossovers
    assert all(x["text"].startswith("no GPU") and x["gpu_backend"] is None and x["batch"] is None
               for x in crossovers), crossovers
PY
[[ -s P.gp ]] || fail "no gnuplot script P.gp"
if command -v gnuplot >/dev/null 2>&1; then
  [[ -s P.png ]] || fail "gnuplot is installed but P.png was not written: $(cat err)"
else
  grep -q "gnuplot not found" err || fail "no note that gnuplot is missing: $(cat err)"
fi

# GPU rows: measured with a GPU; asked for without one, the run refuses (exit 1).
"$GBF" bench --batches 1000,100000 --filter-mib 1 --repeat 1 --backends cpu,gpu-host >out 2>err
rc=$?
if python3 -c 'import json,sys; sys.exit(0 if json.load(open("J.json"))["machine"]["gpu"]["available"] else 1)'; then
  [[ $rc == 0 ]] || fail "bench --backends cpu,gpu-host: exit $rc -- stderr: $(cat err)"
  grep -q "^  crossover gpu-host " out || fail "no gpu-host crossover line: $(cat out)"
else
  [[ $rc == 1 ]] || fail "bench --backends gpu-host without a GPU: exit $rc (want 1)"
  grep -q "requested but there is no GPU" err || fail "no reason for refusing gpu-host: $(cat err)"
fi

# Usage errors exit 2, the options of the removed auto rows and cost model included.
for args in "--batches 0" "--batches abc" "--batches 1.5" "--filter-mib -1" "--filter-mib 1e-30" "--ops insert" \
            "--backends tpu" "--repeat 0" "--fpp 2" "--no-such-option" "--backends auto" \
            "--backends cpu,auto" "--cost-model $WORK/cost-model" "--no-cost-model"; do
  # shellcheck disable=SC2086
  "$GBF" bench $args --filter-mib 1 >out 2>err
  rc=$?
  [[ $rc == 2 ]] || fail "bench $args: exit $rc (want 2) -- stderr: $(cat err)"
done

# A size is whole 32-byte blocks: two requests that round alike run once, and the JSON
# and rows give the size measured (they gave the one asked for).
"$GBF" bench --batches 1000 --filter-mib 0.0001,0.00010001 --repeat 1 --backends cpu1 --json R.json >out 2>err ||
  fail "bench of a 96-byte filter: $(cat err)"
python3 - R.json <<'PY' || fail "R.json sizes"
import json, sys
filters = json.load(open(sys.argv[1]))["filters"]
assert len(filters) == 1 and filters[0]["bytes"] == 96, filters
assert abs(filters[0]["filter_mib"] - 96 / 2**20) < 1e-12, filters  # printed to 9 digits
PY

# An output that cannot be written fails before the measurements (with --full they take
# hours), naming the OS's reason; it failed at the end, reason unsaid.
for out in "--json $WORK/no-such-dir/J.json" "--plot $WORK/no-such-dir/P.png"; do
  # shellcheck disable=SC2086
  "$GBF" bench --batches 1000 --filter-mib 1 --repeat 1 $out >out 2>err
  rc=$?
  [[ $rc == 1 ]] || fail "bench $out: exit $rc (want 1) -- stderr: $(cat err)"
  grep -q "No such file or directory" err || fail "bench $out: the reason is not named: $(cat err)"
  ! grep -q "verification" out || fail "bench $out measured before failing: $(cat out)"
done

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all bench CLI tests passed"
