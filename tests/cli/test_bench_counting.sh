#!/usr/bin/env bash
# `gbf bench --kinds plain,counting`: both kinds over the same sweep, the
# counting filter's remove and remove-unchecked rows verified, the
# counting-vs-plain ratios in the table and the JSON, and the remove ops refused
# for the plain kind alone (issue 14).
# Usage: test_bench_counting.sh path/to/gbf
set -u

source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"

"$GBF" bench --kinds plain,counting --ops add,contains,remove,remove-unchecked --batches 1e3,1e4 \
  --filter-mib 1 --repeat 1 --json J.json --plot P.png >out 2>err
rc=$?
[[ $rc == 0 ]] || fail "bench exit $rc (want 0) -- stdout: $(cat out) -- stderr: $(cat err)"
for title in "plain add, 1 MiB" "plain contains, 1 MiB" "counting add, 1 MiB" "counting contains, 1 MiB" \
             "counting remove, 1 MiB" "counting remove-unchecked, 1 MiB"; do
  grep -q "^$title filter" out || fail "no table '$title': $(cat out)"
done
! grep -q "^plain remove" out || fail "the plain kind has remove rows: $(cat out)"
grep -q "^counting vs plain" out || fail "no counting vs plain table: $(cat out)"
grep -Eq "^  contains +1 MiB +1e4 +[0-9.]+x +[0-9.]+x" out || fail "no contains ratio line: $(cat out)"
grep -q "^verification: ok" out || fail "verification line: $(cat out)"
[[ -s P.gp ]] || fail "no gnuplot script P.gp"
python3 - J.json <<'PY' || fail "J.json content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kinds"] == ["plain", "counting"], d["kinds"]
rows = d["rows"]
backends = sorted({r["backend"] for r in rows})  # cpu1 and cpu; gpu-device and gpu-host on a GPU machine
assert {"cpu1", "cpu"} <= set(backends), backends
want = {("plain", "add"), ("plain", "contains"), ("counting", "add"), ("counting", "contains"),
        ("counting", "remove"), ("counting", "remove-unchecked")}
assert {(r["kind"], r["op"]) for r in rows} == want, sorted({(r["kind"], r["op"]) for r in rows})
for kind, op in want:
    for backend in backends:
        got = [r for r in rows if (r["kind"], r["op"], r["backend"]) == (kind, op, backend)]
        assert sorted(r["batch"] for r in got) == [1000, 10000], (kind, op, backend, got)
        for r in got:
            assert r["keys_per_s"] > 0 and r["verification"] == "ok", r
            if op == "contains":
                assert 0 <= r["measured_fpr"] < 0.05, r
            if kind == "counting":
                assert r["filter_bytes"] == 4 << 20, r  # 4-bit counters of a 1 MiB layout
            if op == "remove":
                assert "every key removed, none refused" in r["verification_detail"], r
            if op.startswith("remove"):
                assert "counters = the fill's" in r["verification_detail"], r
            if kind == "counting" and op == "contains":
                assert "answers = plain filter's" in r["verification_detail"], r
# The same probe keys, fill and layout: the counting filter's false positives are the plain filter's.
for backend in backends:
    for b in (1000, 10000):
        fp = {r["kind"]: r["false_positives"] for r in rows
              if r["op"] == "contains" and r["backend"] == backend and r["batch"] == b}
        assert fp["plain"] == fp["counting"], (backend, b, fp)
ratios = d["counting_vs_plain"]
assert sorted({(x["op"], x["backend"], x["batch"]) for x in ratios}) == sorted(
    (op, backend, b) for op in ("add", "contains") for backend in backends for b in (1000, 10000)), ratios
for x in ratios:
    assert x["time_ratio"] > 0, x
assert {x["kind"] for x in d["crossover"]} == {"plain", "counting"}, d["crossover"]
assert not any(x["kind"] == "plain" and x["op"].startswith("remove") for x in d["crossover"]), d["crossover"]
PY

# The default run (no --kinds) is the plain kind alone: no kind in the titles, no ratios.
"$GBF" bench --batches 1e3 --filter-mib 1 --repeat 1 --ops contains >out 2>err
rc=$?
[[ $rc == 0 ]] || fail "plain bench exit $rc -- stderr: $(cat err)"
grep -q "^contains, 1 MiB filter" out || fail "default title changed: $(cat out)"
! grep -q "counting" out || fail "default run mentions counting: $(cat out)"

# Removing needs the counting kind: usage error (exit 2) naming the problem.
for args in "--ops remove" "--ops add,remove-unchecked" "--kinds plain --ops remove"; do
  # shellcheck disable=SC2086
  "$GBF" bench $args --batches 1e3 --filter-mib 1 --repeat 1 >out 2>err
  rc=$?
  [[ $rc == 2 ]] || fail "bench $args: exit $rc (want 2) -- stderr: $(cat err)"
  grep -q "a plain Bloom filter cannot remove keys" err || fail "bench $args: no reason: $(cat err)"
  grep -q -- "--kinds counting" err || fail "bench $args: no hint at --kinds counting: $(cat err)"
done
for args in "--kinds cuckoo" "--kinds plain,bloom" "--ops delete"; do
  # shellcheck disable=SC2086
  "$GBF" bench $args --batches 1e3 --filter-mib 1 >out 2>err
  rc=$?
  [[ $rc == 2 ]] || fail "bench $args: exit $rc (want 2) -- stderr: $(cat err)"
done

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all counting bench CLI tests passed"
