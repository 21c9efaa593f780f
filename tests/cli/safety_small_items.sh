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
  expect_err "'pipe.gbf'.* not a regular file (a FIFO)"
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

rm -f x.gbf
# Enumerated options take their names only (CLI11 also took the enum's numbers:
# --keys-format 3 read a u64 file as text), and the error lists the names.
expect_rc 2 "$GBF" query f.gbf k.u64 --keys-format 3
expect_err "^gbf: --keys-format: '3' is not one of auto, int, npy, text, u32, u64"
expect_rc 2 "$GBF" query f.gbf k.u64 --keys-format u16
expect_err "'u16' is not one of auto, int, npy, text, u32, u64"
expect_rc 2 "$GBF" create --capacity 10 --format 1 -o x.gbf
expect_err "^gbf: --format: '1' is not one of gbf, parquet-sbbf"
expect_rc 2 "$GBF" query f.gbf k.u64 --backend 0
expect_err "'0' is not one of auto, cpu, gpu"
expect_rc 2 "$GBF" query f.gbf k.u64 --out r.bin --out-format 2
expect_err "'2' is not one of bitmap, bytes, text"
# --out-format says how --out is written: alone it was silently ignored.
expect_rc 2 "$GBF" query f.gbf k.u64 --out-format bitmap
expect_err "--out-format requires --out"
expect_rc 0 "$GBF" query f.gbf k.u64 --keys-format U64 --backend CPU --count -q
expect_out 1000
[[ -e x.gbf ]] && fail "a refused option wrote a file"

# A mistyped subcommand is named.
expect_rc 2 "$GBF" crate --capacity 10 -o x.gbf
expect_err "^gbf: unknown subcommand 'crate' (one of: demo, bench, create, build"

# join's --seed is a whole number of 64 bits: -5 wrapped and 2^64 was clamped.
for s in -5 18446744073709551616 1e3; do
  expect_rc 2 "$GBF" join --sf 0.01 --seed $s
  expect_err "^gbf: --seed: "
done

# --fpp outside (0, 1) is a usage error for every command that takes it.
for cmd in "demo --keys 10 --probes 10" "join --sf 0.01" "create --capacity 10 -o x.gbf"; do
  for p in 0 1 -0.5 nan 0.1x; do
    expect_rc 2 "$GBF" $cmd --fpp $p
    expect_err "^gbf: --fpp: "
  done
done

# An fpp no layout reaches for that many keys is a usage error in demo as in create
# (demo exited 1).
for cmd in "demo --keys 1000 --probes 10" "create --capacity 1000 -o x.gbf"; do
  expect_rc 2 "$GBF" $cmd --fpp 1e-300
  expect_err "^gbf: "
done

# A demo larger than the machine's memory is refused before it allocates, naming
# the options and both sizes (it printed only "out of memory", or was killed).
expect_rc 1 "$GBF" demo --keys 1000 --probes 1099511627776
expect_err "^gbf: --keys 1,000 and --probes 1,099,511,627,776 need about 9.0 TiB of host memory .* is available: use fewer keys or probes"

# build without --capacity counts a file's keys first; a pipe cannot be read
# twice, so it is refused before anything is read from it.
rm -f x.gbf
mkfifo keys.fifo
( printf '1\n2\n3\n' > keys.fifo ) &
writer=$!
expect_rc 1 timeout 10 "$GBF" build keys.fifo -o x.gbf
expect_err "'keys.fifo': cannot count the lines of a stream (a pipe or FIFO) before reading it; pass --capacity"
kill $writer 2>/dev/null; wait $writer 2>/dev/null
[[ -e x.gbf ]] && fail "a refused build wrote a file"
( printf '1\n2\n3\n' > keys.fifo ) &
expect_rc 0 timeout 10 "$GBF" build keys.fifo --capacity 3 -o x.gbf -q
wait

# info --json is valid JSON (UTF-8) whatever bytes the file name holds.
cp f.gbf $'bad\xffname.gbf'
expect_rc 0 "$GBF" info $'bad\xffname.gbf' --json
python3 -c 'import json, sys; d = json.loads(open("out", "rb").read()); assert d["file"] == "bad\ufffdname.gbf", d["file"]' \
  || fail "info --json of a non-UTF-8 name: $(cat out)"
finish
