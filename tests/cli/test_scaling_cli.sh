#!/usr/bin/env bash
# CLI tests of scaling filters (docs/scaling.md): create/build --scaling, add
# past capacity, query, info (text and JSON), non-scaling refusal leaving the
# file unchanged, and the errors of bad combinations.
# Usage: test_scaling_cli.sh path/to/gbf
set -u
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"
expect_rc() {
  local want=$1; shift
  "$@" >out 2>err
  local got=$?
  [[ $got == "$want" ]] || fail "exit $got (want $want): $* -- stderr: $(cat err)"
}
expect_err() { grep -q -- "$1" err || fail "stderr lacks '$1': $(cat err)"; }
expect_out_has() { grep -q -- "$1" out || fail "stdout lacks '$1': $(cat out)"; }
expect_out() { [[ "$(cat out)" == "$1" ]] || fail "stdout is '$(cat out)', want '$1'"; }

python3 - <<'PY'
import struct
open('k.u64', 'wb').write(struct.pack('<20000Q', *range(20000)))
open('absent.u64', 'wb').write(struct.pack('<100000Q', *range(10**9, 10**9 + 100000)))
open('few.u64', 'wb').write(struct.pack('<600Q', *range(10**6, 10**6 + 600)))
open('k.txt', 'w').write(''.join('key-%d\n' % i for i in range(3000)))
PY

# --- grow a chain 20x past its initial capacity -------------------------------
expect_rc 0 "$GBF" create --scaling --capacity 1000 --fpp 0.01 -o s.gbf
expect_err "scaling filter, 1 level, 0 keys of 1,000 capacity"
expect_rc 0 "$GBF" add s.gbf k.u64 --keys-format u64 --verify --chunk-keys 3000
expect_err "0 mismatches, 0 false negatives"
expect_err "scaling filter, 5 levels"
expect_rc 0 "$GBF" query s.gbf k.u64 --keys-format u64 --count
expect_out 20000
expect_rc 0 "$GBF" query s.gbf absent.u64 --keys-format u64 --count --verify
hits=$(cat out)
# Target 1%: 100,000 absent keys may hit at most 1,000 + 5 sigma (~157).
(( hits <= 1157 )) || fail "scaling chain FPR too high: $hits of 100,000 absent keys hit"
expect_rc 0 "$GBF" query s.gbf k.u64 --keys-format u64 --select --row-numbers --chunk-keys 777
[[ "$(cat out)" == "$(seq 0 19999)" ]] || fail "--select on a chain does not list every row"

# A plain filter sized for the initial capacity, for comparison: far above 1%.
expect_rc 0 "$GBF" create --capacity 1000 --fpp 0.01 -o plain.gbf
expect_rc 0 "$GBF" add plain.gbf k.u64 --keys-format u64
expect_rc 0 "$GBF" query plain.gbf absent.u64 --keys-format u64 --count
(( $(cat out) > 50000 )) || fail "a plain filter 20x over capacity should be mostly ones: $(cat out)"

# --- info: BF.INFO's fields ---------------------------------------------------
expect_rc 0 "$GBF" info s.gbf
expect_out_has "kind scaling"
expect_out_has "Capacity: *31,000"
expect_out_has "Number of filters: *5"
expect_out_has "Expansion rate: *2"
expect_out_has "Number of items inserted:"
expect_rc 0 "$GBF" info s.gbf --json
python3 - <<'PY' || fail "info --json: $(cat out)"
import json
d = json.load(open('out'))
assert d['kind'] == 'scaling' and d['num_levels'] == 5 and d['capacity'] == 31000, d
assert [l['capacity'] for l in d['levels']] == [1000, 2000, 4000, 8000, 16000], d
assert all(l['keys'] == l['capacity'] for l in d['levels'][:-1]), d
assert sum(l['keys'] for l in d['levels']) == d['keys_inserted'], d
assert d['compound_fpr'] <= d['fpp'] == 0.01, d
PY

# --- build --scaling, expansion, text keys ------------------------------------
expect_rc 0 "$GBF" build --scaling --capacity 100 --expansion 4 --tightening 0.8 k.txt -o t.gbf
expect_err "scaling filter, 4 levels"
expect_rc 0 "$GBF" query t.gbf k.txt --count
expect_out 3000
expect_rc 0 "$GBF" info t.gbf --json
python3 -c "
import json; d = json.load(open('out'))
assert d['expansion'] == 4 and d['tightening'] == 0.8, d
assert [l['capacity'] for l in d['levels']] == [100, 400, 1600, 6400], d" || fail "build --expansion 4: $(cat out)"

# --- non-scaling: refuses past capacity, file unchanged -----------------------
expect_rc 0 "$GBF" create --scaling --non-scaling --capacity 1000 -o n.gbf
expect_rc 0 "$GBF" add n.gbf few.u64 --keys-format u64
cp n.gbf before.gbf
expect_rc 1 "$GBF" add n.gbf k.u64 --keys-format u64
expect_err "non scaling filter is full"
expect_err "400 more fit"
expect_err "the file was not changed"
cmp -s n.gbf before.gbf || fail "a refused non-scaling add changed the file"
expect_rc 0 "$GBF" add n.gbf few.u64 --keys-format u64  # present keys: nothing new, accepted
expect_rc 0 "$GBF" info n.gbf --json
python3 -c "
import json; d = json.load(open('out'))
assert d['non_scaling'] and d['expansion'] is None and d['num_levels'] == 1, d" || fail "non-scaling info: $(cat out)"

# --- errors -------------------------------------------------------------------
expect_rc 2 "$GBF" create --expansion 3 --capacity 10 -o x.gbf
expect_err "requires --scaling"
expect_rc 2 "$GBF" create --scaling --capacity 10 --format parquet-sbbf -o x.bin
expect_err "gbf format only"
expect_rc 2 "$GBF" create --scaling --capacity 10 --parquet-compatible -o x.gbf
expect_err "does not apply to --scaling"
expect_rc 2 "$GBF" create --scaling --capacity 10 --tightening 1.5 -o x.gbf
expect_err "must be in (0, 1\]"
# Tightening 1: every level at --fpp (Hadoop's dynamic filter); info says there is no bound.
expect_rc 0 "$GBF" create --scaling --capacity 1000 --expansion 1 --tightening 1 -o dyn.gbf -q
expect_rc 0 "$GBF" add dyn.gbf k.u64 --keys-format u64
expect_err "each level at 0.01"
expect_rc 0 "$GBF" info dyn.gbf
grep -q 'no bound: tightening 1 keeps every level at 0.01' out || fail "info of a tightening-1 chain: $(cat out)"
# merge: B's keys in A's levels (both under half full here); intersect and xor
# are refused, as is a chain whose merged level could pass its capacity.
python3 - <<'PY'
import struct
open('m1.u64', 'wb').write(struct.pack('<300Q', *range(300)))
open('m2.u64', 'wb').write(struct.pack('<300Q', *range(200, 500)))
open('m12.u64', 'wb').write(struct.pack('<500Q', *range(500)))
open('far.u64', 'wb').write(struct.pack('<1000Q', *range(10**9, 10**9 + 1000)))
PY
expect_rc 0 "$GBF" build m1.u64 --keys-format u64 --scaling --capacity 1000 -o sm1.gbf -q
expect_rc 0 "$GBF" build m2.u64 --keys-format u64 --scaling --capacity 1000 -o sm2.gbf -q
expect_rc 0 "$GBF" merge sm1.gbf sm2.gbf -o smu.gbf
expect_err "wrote smu.gbf (union of 'sm1.gbf' and 'sm2.gbf'): scaling filter, 1 level, 600 keys"
expect_rc 0 "$GBF" query smu.gbf m12.u64 --keys-format u64 --count
expect_out 500
expect_rc 0 "$GBF" query smu.gbf far.u64 --keys-format u64 --count
(( $(cat out) < 40 )) || fail "$(cat out) of 1000 absent keys in a merged 1% chain"
for op in intersect xor; do
  expect_rc 2 "$GBF" $op sm1.gbf sm2.gbf -o smx.gbf
  expect_err "holds a scaling filter: chains can be merged, not given to $op"
done
expect_rc 0 "$GBF" build m12.u64 --keys-format u64 --scaling --capacity 600 -o full1.gbf -q
cp full1.gbf full2.gbf
expect_rc 1 "$GBF" merge full1.gbf full2.gbf -o smx.gbf
expect_err "may hold more keys than the level's capacity"
# One file as A and B is one chain merged with itself, as in the library: unchanged.
ln -s full1.gbf full1-link.gbf
expect_rc 0 "$GBF" merge full1.gbf full1-link.gbf -o self.gbf -q
cmp -s full1.gbf self.gbf || fail "a chain merged with itself (through a link) is not the chain"
expect_rc 0 "$GBF" build m1.u64 --keys-format u64 --scaling --capacity 999 -o other.gbf -q
expect_rc 1 "$GBF" merge sm1.gbf other.gbf -o smx.gbf
expect_err "cannot merge chains made from different configs (initial capacity 1000 vs 999)"
[[ -e smx.gbf ]] && fail "a refused chain merge wrote a file"
printf 'garbage' >> s.gbf
expect_rc 1 "$GBF" query s.gbf k.u64 --keys-format u64
[[ -s err ]] || fail "a corrupt chain file gave no error"

if (( failures > 0 )); then
  echo "$failures scaling CLI checks failed"
  exit 1
fi
echo "all scaling CLI checks passed"
