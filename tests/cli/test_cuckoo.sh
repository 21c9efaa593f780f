#!/usr/bin/env bash
# CLI tests of the cuckoo filter (cli/cuckoo.cpp): create --cuckoo, add
# (--unique, all or nothing when full), remove (--strict), query, info, and
# the errors that name the problem.
# Usage: test_cuckoo.sh path/to/gbf
set -u
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"
expect_rc() {
  local want=$1; shift
  "$@" >out 2>err
  local got=$?
  [[ $got == "$want" ]] || fail "exit $got (want $want): $* -- stderr: $(cat err)"
}
expect_err() { grep -q -- "$1" err || fail "stderr lacks '$1': $(cat err)"; }
expect_out() { [[ "$(cat out)" == "$1" ]] || fail "stdout is '$(cat out)', want '$1'"; }

python3 - <<'PY'
import struct
open('k.u64', 'wb').write(struct.pack('<1000Q', *range(1000)))
open('first.u64', 'wb').write(struct.pack('<300Q', *range(300)))
open('next600.u64', 'wb').write(struct.pack('<600Q', *range(300, 900)))
open('absent.u64', 'wb').write(struct.pack('<10000Q', *range(10**9, 10**9 + 10000)))
open('many.u64', 'wb').write(struct.pack('<5000Q', *range(10**6, 10**6 + 5000)))
open('k.txt', 'w').write(''.join('key-%d\n' % i for i in range(200)))
PY

# --- create, add, query, info -------------------------------------------------
expect_rc 0 "$GBF" create --cuckoo --capacity 2000 --fpp 0.001 -o c.gbf
expect_err "cuckoo filter, 16-bit tags"
expect_rc 0 "$GBF" add c.gbf k.u64 --keys-format u64 --verify
expect_err "1,000 inserted"
expect_err "0 mismatches, 0 false negatives"
expect_rc 0 "$GBF" query c.gbf k.u64 --keys-format u64 --count --verify
expect_out 1000
# --counts: CF.COUNT per key, one line each in key order (a repeated add holds two copies).
printf 'a\nb\na\n' > twice.txt
printf 'a\nb\nzz\n' > asked.txt
expect_rc 0 "$GBF" create --cuckoo --capacity 100 -o ct.gbf -q
expect_rc 0 "$GBF" add ct.gbf twice.txt -q
expect_rc 0 "$GBF" query ct.gbf asked.txt --counts -q
expect_out "$(printf '2\n1\n0')"
expect_rc 2 "$GBF" query ct.gbf asked.txt --counts --count
# merge: B's tags inserted into A's table (the keys of both, repeats held twice).
expect_rc 0 "$GBF" create --cuckoo --capacity 2000 --fpp 0.001 -o cb.gbf -q
expect_rc 0 "$GBF" add cb.gbf next600.u64 --keys-format u64 -q
expect_rc 0 "$GBF" merge c.gbf cb.gbf -o cm.gbf
expect_err "wrote cm.gbf (union of the cuckoo filters 'c.gbf' and 'cb.gbf': 1,600 tags"
expect_rc 0 "$GBF" query cm.gbf k.u64 --keys-format u64 --count
expect_out 1000
expect_rc 0 "$GBF" info cm.gbf --json
python3 -c 'import json; d = json.load(open("out")); assert d["keys_added"] == 1600 and d["occupied_slots"] == 1600, d' ||
  fail "merged cuckoo info: $(cat out)"
# The keys held twice come out twice.
expect_rc 0 "$GBF" remove cm.gbf next600.u64 --keys-format u64
expect_out "600 keys removed, 0 refused (not present)"
expect_rc 0 "$GBF" query cm.gbf k.u64 --keys-format u64 --count
expect_out 1000
for op in intersect xor; do
  expect_rc 2 "$GBF" $op c.gbf cb.gbf -o cx.gbf
  expect_err "'c.gbf' holds a cuckoo filter: cuckoo filters can be merged, not given to $op"
done
# A merge past the table's room changes nothing; another layout is refused.
expect_rc 0 "$GBF" merge cm.gbf cm.gbf -o full.gbf -q
expect_rc 1 "$GBF" merge full.gbf full.gbf -o cy.gbf
expect_err "tags do not fit this one (2000 of 2112 slots taken): more tags than slots; nothing was merged"
expect_rc 0 "$GBF" create --cuckoo --capacity 100 -o tiny.gbf -q
expect_rc 1 "$GBF" merge c.gbf tiny.gbf -o cy.gbf
expect_err "cannot merge cuckoo filters of different layouts"
[[ -e cy.gbf ]] && fail "a refused cuckoo merge wrote a file"
expect_rc 0 "$GBF" query c.gbf absent.u64 --keys-format u64 --count
hits=$(cat out)
(( hits < 40 )) || fail "$hits of 10000 absent keys hit a 0.1% cuckoo filter"
expect_rc 0 "$GBF" query c.gbf first.u64 --keys-format u64 --select --row-numbers --chunk-keys 77
[[ "$(cat out)" == "$(seq 0 299)" ]] || fail "--select --row-numbers does not list rows 0..299"
expect_rc 0 "$GBF" query c.gbf k.u64 --keys-format u64 --out r.bits --out-format bitmap --chunk-keys 13
[[ $(od -An -v -tx1 r.bits | tr -s ' \n' '\n' | sort -u | grep .) == ff ]] || fail "--out bitmap not all ones"
expect_rc 0 "$GBF" info c.gbf
grep -q '^layout: *16-bit tags, 16 slots/bucket' out || fail "info layout: $(cat out)"
grep -q '^keys added: *1,000$' out || fail "info keys added: $(cat out)"
grep -q '^capacity: *2,000 keys$' out || fail "info capacity"
expect_rc 0 "$GBF" info c.gbf --json
python3 -c "import json,sys; d=json.load(open('out')); assert d['kind']=='cuckoo' and d['occupied_slots']==1000 and d['keys_added']==1000, d" \
  || fail "info --json: $(cat out)"

# --- past capacity below the load limit: warned, as the other kinds are ---------
# fpp 0.12 picks 8-bit tags with room to spare: 900 keys in a 500-key filter stay
# below the maximum load, yet the FPR is past the target.
expect_rc 0 "$GBF" create --cuckoo --capacity 500 --fpp 0.12 -o small.gbf
expect_rc 0 "$GBF" add small.gbf first.u64 --keys-format u64
grep -q 'warning' err && fail "a warning at 300 of 500 keys: $(cat err)"
expect_rc 0 "$GBF" add small.gbf next600.u64 --keys-format u64
expect_err "holds 900 keys, past its capacity of 500"
expect_rc 0 "$GBF" info small.gbf
grep -q '^WARNING: over capacity: 900 keys held, capacity 500' out || fail "info: $(cat out)"
expect_rc 0 "$GBF" info small.gbf --json
python3 -c "import json; d=json.load(open('out')); assert d['over_capacity'] is True and d['load_factor'] < d['max_load'], d" \
  || fail "info --json over_capacity: $(cat out)"

# --- add --unique (CF.ADDNX) --------------------------------------------------
expect_rc 0 "$GBF" add c.gbf first.u64 --keys-format u64 --unique
expect_err "0 inserted, 300 already present"
expect_rc 0 "$GBF" add c.gbf first.u64 --keys-format u64
expect_rc 0 "$GBF" info c.gbf --json
python3 -c "import json; d=json.load(open('out')); assert d['occupied_slots']==1300, d" || fail "plain add stores repeats"

# --- remove (CF.DEL), --strict -----------------------------------------------
expect_rc 0 "$GBF" remove c.gbf first.u64 --keys-format u64
expect_err "300 removed, 0 refused (not present)"
# The counts go to stdout as well (as the counting filter's remove prints them), even with -q.
expect_out "300 keys removed, 0 refused (not present)"
expect_rc 0 "$GBF" remove c.gbf first.u64 --keys-format u64 -q
grep -Eq '^[0-9]+ keys removed, [0-9,]+ refused \(not present\)$' out || fail "remove -q printed '$(cat out)'"
expect_rc 0 "$GBF" query c.gbf first.u64 --keys-format u64 --count
[[ $(cat out) -lt 5 ]] || fail "keys removed twice still found: $(cat out)"
cp c.gbf before.gbf
expect_rc 1 "$GBF" remove c.gbf first.u64 --keys-format u64 --strict
expect_err "were not in the filter"
expect_err "the file is unchanged"
cmp -s c.gbf before.gbf || fail "a refused --strict remove changed the file"
expect_rc 0 "$GBF" query c.gbf k.u64 --keys-format u64 --count
expect_out 700

# --- text keys ------------------------------------------------------------------
expect_rc 0 "$GBF" create --cuckoo --capacity 500 --tag-bits 8 --max-kicks 10 -o t.gbf
expect_rc 0 "$GBF" add t.gbf k.txt
expect_rc 0 "$GBF" query t.gbf k.txt --count
expect_out 200
expect_rc 0 "$GBF" info t.gbf
grep -q '^max kicks: *10$' out || fail "info max kicks"
grep -q '8-bit tags, 32 slots/bucket' out || fail "--tag-bits 8"

# --- a full filter: the file is unchanged --------------------------------------
expect_rc 0 "$GBF" create --cuckoo --capacity 1000 --fpp 0.01 -o small.gbf
cp small.gbf small.before
expect_rc 1 "$GBF" add small.gbf many.u64 --keys-format u64
expect_err "the cuckoo filter is full"
expect_err "keys could not be inserted"
cmp -s small.gbf small.before || fail "a full add changed the file"

# One key repeated past its two buckets' slots fails far below the capacity:
# the error names that limit and --unique, not a larger --capacity.
expect_rc 0 "$GBF" create --cuckoo --capacity 1000 --tag-bits 8 -o dup.gbf -q
yes same-key | head -100 > dup.txt
cp dup.gbf dup.before
expect_rc 1 "$GBF" add dup.gbf dup.txt
expect_err "36 of 100 keys could not be inserted"
expect_err "most likely a key was added more than 64 times (all its two buckets hold)"
expect_err "(--unique adds each key once)"
cmp -s dup.gbf dup.before || fail "a failed duplicate add changed the file"
expect_rc 0 "$GBF" add dup.gbf dup.txt --unique -q

# --- usage errors --------------------------------------------------------------
expect_rc 2 "$GBF" create --tag-bits 16 --capacity 10 -o x.gbf
expect_rc 2 "$GBF" create --cuckoo --tag-bits 12 --capacity 10 -o x.gbf
expect_rc 2 "$GBF" create --cuckoo --max-kicks 33 --capacity 10 -o x.gbf
expect_rc 2 "$GBF" create --cuckoo --layout 4/8 --capacity 10 -o x.gbf
expect_err "--layout shapes Bloom filters"
expect_rc 0 "$GBF" create --capacity 1000 -o bloom.gbf
expect_rc 1 "$GBF" remove bloom.gbf k.u64 --keys-format u64
expect_err "holds a plain Bloom filter, which cannot forget keys"
expect_rc 2 "$GBF" add bloom.gbf k.u64 --keys-format u64 --unique
expect_err "--unique applies to cuckoo filters only"
head -c 100 c.gbf > cut.gbf
expect_rc 1 "$GBF" info cut.gbf
expect_rc 1 "$GBF" remove missing.gbf k.u64 --keys-format u64

if (( failures > 0 )); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all cuckoo CLI tests passed"
