#!/usr/bin/env bash
# Issue 22, item 6: a FIFO as the filter, a seed past 2^64 - 1, --threads past
# its cap, a .npy shape whose byte count overflows, a 254/255-byte output name,
# and a capacity that is not a number: each a clear error or a documented limit.
# Usage: safety_small_items.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

u64_keys k.u64 0 1000
expect_rc 0 "$GBF" create --capacity 1000 -o f.gbf -q

# A FIFO given as the filter is refused at once instead of waiting for a writer.
mkfifo pipe.gbf
for cmd in "info pipe.gbf" "query pipe.gbf k.u64" "add pipe.gbf k.u64" "merge pipe.gbf f.gbf -o m.gbf"; do
  expect_rc 1 timeout 10 "$GBF" $cmd
  expect_err "'pipe.gbf': not a regular file (a FIFO)"
done
[[ -p pipe.gbf ]] || fail "the FIFO was replaced"

# --layout: a seed past 2^64 - 1 is refused, not clamped; the largest is taken.
expect_rc 2 "$GBF" create --capacity 10 --layout 8/8/18446744073709551616 -o x.gbf
expect_err "seed 18446744073709551616 is out of range (at most 18446744073709551615)"
expect_rc 2 "$GBF" create --capacity 10 --layout 8/8/99999999999999999999999 -o x.gbf
expect_err "out of range"
expect_rc 2 "$GBF" create --capacity 10 --layout 8/8/-1 -o x.gbf
expect_err "is not W/K or W/K/SEED"
expect_rc 2 "$GBF" create --capacity 10 --layout "8/8/ 1" -o x.gbf
expect_rc 2 "$GBF" create --capacity 10 --layout 8/4294967304 -o x.gbf
[[ -e x.gbf ]] && fail "a refused layout wrote a file"
expect_rc 0 "$GBF" create --capacity 10 --layout 8/8/18446744073709551615 -o x.gbf -q
expect_rc 0 "$GBF" info x.gbf --json
grep -q '"seed": 18446744073709551615' out || fail "the largest seed was not kept: $(cat out)"

# --threads: at most 1024 (documented), refused beyond, for every command that has it.
for cmd in "create --capacity 10 -o t.gbf" "query f.gbf k.u64" "demo --keys 10 --probes 10" "bench --batches 1000"; do
  expect_rc 2 "$GBF" $cmd --threads 4294967295
  expect_err "^gbf: --threads: 4294967295 is out of range (0 to 1024)"
  expect_rc 2 "$GBF" $cmd --threads 1025
done
expect_rc 0 "$GBF" add f.gbf k.u64 --threads 1024 --backend cpu -q
expect_rc 0 "$GBF" query f.gbf k.u64 --threads 1024 --backend cpu --count -q
expect_out 1000

# A .npy shape whose byte count overflows 64 bits is blamed on the shape, from
# a regular file (where the size check would overflow too) and from a FIFO.
python3 - <<'PY'
import struct
def npy(path, n):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d,), }" % n
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
npy("huge.npy", 2**61)        # 2^61 keys * 8 bytes = 2^64: wraps to 0, the size of the data
npy("huger.npy", 2**64 - 1)
PY
for f in huge.npy huger.npy; do
  expect_rc 1 "$GBF" build $f -o h.gbf
  expect_err "^gbf: '$f': .npy shape (.*,) is too large: .* keys of 8 bytes exceed 64-bit byte counts"
  grep -q -- "--capacity" err && fail "$f: the error blames --capacity: $(cat err)"
done
mkfifo fifo.npy
cat huge.npy >fifo.npy &
expect_rc 1 timeout 10 "$GBF" build fifo.npy -o h.gbf
expect_err ".npy shape (2305843009213693952,) is too large"
wait
[[ -e h.gbf ]] && fail "a refused .npy wrote a filter"

# A valid 254-byte (and 255-byte) output name works: temporary and lock names
# are shortened to fit NAME_MAX; with named temporaries too.
for n in 254 255; do
  name=$(printf 'x%.0s' $(seq $n))
  for mode in unnamed named; do
    rm -f "$name"
    GBF_TEMP_FILES=$mode expect_rc 0 "$GBF" build k.u64 -o "$name" -q
    GBF_TEMP_FILES=$mode expect_rc 0 "$GBF" add "$name" k.u64 -q
    GBF_TEMP_FILES=$mode expect_rc 0 "$GBF" query "$name" k.u64 --out "r${name:1}" --count -q
    expect_out 1000
    [[ $(stat -c %s "r${name:1}") == 1000 ]] || fail "$n-byte --out name: results missing"
  done
done
# 256 bytes is past NAME_MAX: refused before any work, naming the OS error.
long=$(printf 'y%.0s' $(seq 256))
expect_rc 1 "$GBF" create --capacity 10 -o "$long"
expect_err "^gbf: '$long': File name too long"
expect_rc 1 "$GBF" query f.gbf k.u64 --out "$long" --count
expect_err "File name too long"
[[ -s out ]] && fail "the query ran although its --out name is too long"
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"

# A capacity that is not a number says so (CLI11's Range said "not in range").
expect_rc 2 "$GBF" create --capacity abc -o x.gbf
expect_err "^gbf: --capacity: 'abc' is not a number (expected a whole number from 1 to 1099511627776)"
expect_rc 2 "$GBF" create --capacity 12x -o x.gbf
expect_err "'12x' is not a number"
expect_rc 2 "$GBF" create --capacity -5 -o x.gbf
expect_rc 2 "$GBF" create --capacity 0 -o x.gbf
expect_err "^gbf: --capacity: 0 is out of range (1 to 1099511627776)"
expect_rc 2 "$GBF" create --capacity 1099511627777 -o x.gbf
expect_err "out of range"
expect_rc 2 "$GBF" query f.gbf k.u64 --chunk-keys lots
expect_err "^gbf: --chunk-keys: 'lots' is not a number"
finish
