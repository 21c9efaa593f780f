#!/usr/bin/env bash
# Promises of docs/cli.md that a mutation run of the suite found unpinned:
# every command that rewrites a filter keeps its target fpp, info shows each
# counter in its own field, the warnings of add and build appear, a remove that
# removes nothing (or a refused --strict one) writes nothing, and the text
# reader counts a last line without a newline.
# Usage: test_cli_contracts.sh path/to/gbf
set -u
source "$(dirname "${BASH_SOURCE[0]}")/safety_common.sh" "$1"  # expect_rc, expect_err, expect_out
# json FILE KEY: the value info --json gives for KEY.
json() {
  "$GBF" info "$1" --json --backend cpu >json.out 2>/dev/null || { echo "(info failed)"; return; }
  python3 -c "import json,sys; print(json.load(open('json.out'))[sys.argv[1]])" "$2"
}

python3 - <<'PY'
import struct
open('k.u64', 'wb').write(struct.pack('<1000Q', *range(1000)))
open('more.u64', 'wb').write(struct.pack('<500Q', *range(1000, 1500)))
open('absent.u64', 'wb').write(struct.pack('<50Q', *range(10**12, 10**12 + 50)))
PY

# --- the target fpp survives every rewrite ----------------------------------
expect_rc 0 "$GBF" create --capacity 2000 --fpp 0.001 -o a.gbf -q --backend cpu
expect_rc 0 "$GBF" create --capacity 2000 --fpp 0.001 -o b.gbf -q --backend cpu
[[ $(json a.gbf fpp) == 0.001 ]] || fail "create --fpp 0.001: info --json fpp $(json a.gbf fpp)"
expect_rc 0 "$GBF" add a.gbf k.u64 -q --backend cpu
[[ $(json a.gbf fpp) == 0.001 ]] || fail "add lost the target fpp: $(json a.gbf fpp)"
expect_rc 0 "$GBF" add b.gbf more.u64 -q --backend cpu
for op in merge intersect xor; do
  expect_rc 0 "$GBF" "$op" a.gbf b.gbf -o "$op.gbf" -q --backend cpu
  [[ $(json "$op.gbf" fpp) == 0.001 ]] || fail "$op lost the target fpp: $(json "$op.gbf" fpp)"
done
expect_rc 0 "$GBF" create --cuckoo --capacity 2000 --fpp 0.001 -o c.gbf -q --backend cpu
expect_rc 0 "$GBF" add c.gbf k.u64 -q --backend cpu
[[ $(json c.gbf fpp) == 0.001 ]] || fail "cuckoo add lost the target fpp: $(json c.gbf fpp)"

# --- info: each count in its own field ---------------------------------------
expect_rc 0 "$GBF" create --counting --capacity 2000 --fpp 1e-6 -o n.gbf -q --backend cpu
expect_rc 0 "$GBF" add n.gbf k.u64 -q --backend cpu
expect_rc 0 "$GBF" remove n.gbf more.u64 --unchecked -q --backend cpu 2>/dev/null
python3 - <<'PY'
import struct
open('some.u64', 'wb').write(struct.pack('<30Q', *range(30)))
PY
expect_rc 0 "$GBF" create --counting --capacity 2000 --fpp 1e-6 -o m.gbf -q --backend cpu
expect_rc 0 "$GBF" add m.gbf k.u64 -q --backend cpu
expect_rc 0 "$GBF" remove m.gbf some.u64 -q --backend cpu
expect_out "30 keys removed, 0 refused (not present)"
expect_rc 0 "$GBF" info m.gbf --backend cpu
grep -q '^keys added: *1,000 ' out || fail "counting info keys added: $(grep 'keys' out)"
grep -q '^keys removed: *30$' out || fail "counting info keys removed: $(grep 'keys' out)"
[[ $(json m.gbf keys_removed) == 30 ]] || fail "counting info --json keys_removed: $(json m.gbf keys_removed)"
# A cuckoo table filled to its capacity moves tags (evictions) but fails no insert.
expect_rc 0 "$GBF" create --cuckoo --capacity 1000 --fpp 0.01 -o full.gbf -q --backend cpu
expect_rc 0 "$GBF" add full.gbf k.u64 -q --backend cpu
evictions=$(json full.gbf evictions)
failed=$(json full.gbf failed_inserts)
python3 - "$evictions" "$failed" <<'PY' || fail "cuckoo info --json evictions $evictions, failed_inserts $failed"
import sys
evictions, failed = int(sys.argv[1]), int(sys.argv[2])
assert evictions > 0 and failed == 0, (evictions, failed)
PY
expect_rc 0 "$GBF" info full.gbf --backend cpu
grep -Eq "^evictions: +$(python3 -c "print(f'{$evictions:,}')")$" out || fail "cuckoo info evictions: $(grep -i evic out)"

# --- warnings ------------------------------------------------------------------
expect_rc 0 "$GBF" build k.u64 --capacity 100 -o over.gbf --backend cpu
expect_err "gbf: warning: 'over.gbf' is over capacity"
expect_rc 0 "$GBF" create --counting --capacity 1000 --fpp 0.01 -o sat.gbf -q --backend cpu
python3 -c "import struct; open('same.u64','wb').write(struct.pack('<20Q', *([7] * 20)))"
expect_rc 0 "$GBF" add sat.gbf same.u64 --backend cpu
expect_err "gbf: warning: 'sat.gbf' has "
expect_err " saturated counters"

# --- writes that must not happen ----------------------------------------------
# A remove that removes nothing leaves the file as it was: not even rewritten.
for kind in counting cuckoo; do
  expect_rc 0 "$GBF" create --$kind --capacity 2000 --fpp 1e-6 -o r.gbf -q --backend cpu
  expect_rc 0 "$GBF" add r.gbf k.u64 -q --backend cpu
  before=$(stat -c '%i %Y.%y' r.gbf)
  sleep 0.01
  expect_rc 0 "$GBF" remove r.gbf absent.u64 -q --backend cpu
  expect_out "0 keys removed, 50 refused (not present)"
  [[ $(stat -c '%i %Y.%y' r.gbf) == "$before" ]] || fail "$kind remove of no key rewrote the file"
  # --strict with a refused key: exit 1, nothing written.
  cp r.gbf r.orig
  cat k.u64 absent.u64 > mixed.u64
  expect_rc 1 "$GBF" remove r.gbf mixed.u64 --keys-format u64 --strict -q --backend cpu
  expect_err "the file is unchanged"
  cmp -s r.gbf r.orig || fail "a refused $kind --strict remove changed the file"
done

# --- key files ---------------------------------------------------------------
# A last line without a newline is a key: build sizes for all of them.
printf 'a\nb\nc' > three.txt
expect_rc 0 "$GBF" build three.txt -o three.gbf --backend cpu
[[ $(json three.gbf capacity) == 3 ]] || fail "build of 3 lines (no final newline) sized for $(json three.gbf capacity)"
printf 'a\nb\nc\n' > three.txt
expect_rc 0 "$GBF" build three.txt -o three.gbf --backend cpu
[[ $(json three.gbf capacity) == 3 ]] || fail "build of 3 lines sized for $(json three.gbf capacity)"
# An empty key file cannot size a filter, and says so.
: > empty.txt
expect_rc 1 "$GBF" build empty.txt -o e.gbf --backend cpu
expect_err "'empty.txt' holds no keys; pass --capacity to size an empty filter"
[[ -e e.gbf ]] && fail "a refused build of an empty key file wrote its output"
# .npy format version 3 is read (the message promises 1, 2 and 3).
python3 - <<'PY'
import numpy as np, numpy.lib.format as fmt
a = np.arange(100, dtype='<i8')
with open('v3.npy', 'wb') as f:
    fmt.write_array(f, a, version=(3, 0))
PY
expect_rc 0 "$GBF" build v3.npy -o v3.gbf -q --backend cpu
expect_rc 0 "$GBF" query v3.gbf v3.npy --count -q --backend cpu
expect_out 100

finish
