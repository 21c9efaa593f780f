#!/usr/bin/env bash
# CLI tests: run the gbf binary on small files, check outputs and exit codes.
# Usage: test_cli.sh path/to/gbf
set -u
source "$(dirname "${BASH_SOURCE[0]}")/cli_common.sh" "$1"

# expect_rc RC CMD...: runs CMD (stdout -> out, stderr -> err), checks its exit code.
expect_rc() {
  local want=$1; shift
  "$@" >out 2>err
  local got=$?
  [[ $got == "$want" ]] || fail "exit $got (want $want): $* -- stderr: $(cat err)"
}
expect_err() { grep -q -- "$1" err || fail "stderr lacks '$1': $(cat err)"; }
expect_out() { [[ "$(cat out)" == "$1" ]] || fail "stdout is '$(cat out)', want '$1'"; }

# Key files: raw u32/u64 arrays, .npy (v1, <i8 and <u4), text.
python3 - <<'PY'
import struct
def npy(path, descr, fmt, values, fortran=False, shape=None):
    shape = len(values) if shape is None else shape
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%d,), }" % (descr, fortran, shape)
    header += ' ' * (63 - (10 + len(header)) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode())
        f.write(struct.pack('<%d%s' % (len(values), fmt), *values))
open('k.u64', 'wb').write(struct.pack('<1000Q', *range(1000)))
open('absent.u64', 'wb').write(struct.pack('<1000Q', *range(10**9, 10**9 + 1000)))
open('k.u32', 'wb').write(struct.pack('<500I', *range(7, 507)))
open('odd.u64', 'wb').write(b'\0' * 13)
npy('k.npy', '<i8', 'q', list(range(-100, 100)))
npy('k4.npy', '<u4', 'I', list(range(300)))
npy('f.npy', '<f8', 'd', [1.0, 2.0])
npy('big.npy', '>i8', 'q', [1])
npy('fortran.npy', '<i8', 'q', [1], fortran=True)
npy('pipe-order.npy', '|i8', 'q', [1])
npy('negative-shape.npy', '<i8', 'q', [1], shape=-1)
open('k.txt', 'w').write(''.join('key-%d\n' % i for i in range(300)))
open('mixed.txt', 'wb').write(b'alpha\r\nbeta\n\ngamma')
PY

# --- version: the headers' (include/gbf/version.hpp), and the library's -------
version=$(sed -n 's/^#define GBF_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  "$CLI_TESTS/../../include/gbf/version.hpp" | paste -sd.)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "include/gbf/version.hpp gives no version ('$version')"
expect_rc 0 "$GBF" --version
grep -Eq "^gbf $version \(library $version, (with the CUDA backend|CPU backend only)\)$" out ||
  fail "gbf --version printed '$(cat out)', want gbf $version"

# --- create / add / query on u64 --------------------------------------------
expect_rc 0 "$GBF" create --capacity 1000 --fpp 0.01 -o a.gbf
expect_rc 0 "$GBF" add a.gbf k.u64 --keys-format u64 --verify
expect_err "added 1,000 keys"
expect_err "0 mismatches, 0 false negatives"
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --count
expect_out 1000
# A merge whose union passes the capacity warns, as add and build do.
python3 -c "import numpy as np; np.arange(1000, 1600, dtype='<u8').tofile('more.u64')"
expect_rc 0 "$GBF" build more.u64 --capacity 1000 -o more.gbf -q
expect_rc 0 "$GBF" merge a.gbf more.gbf -o union.gbf -q
expect_err "gbf: warning: 'union.gbf' is over capacity"
# A query's keys may be absent: its verify counts mismatches only, no false negatives.
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --count --verify -q
expect_err "0 mismatches$"
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --count --chunk-keys 7 --verify
expect_out 1000
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --select
[[ "$(cat out)" == "$(seq 0 999)" ]] || fail "--select does not list keys 0..999"
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --select --row-numbers --chunk-keys 300
[[ "$(cat out)" == "$(seq 0 999)" ]] || fail "--row-numbers does not list rows 0..999"
expect_rc 0 "$GBF" query a.gbf absent.u64 --keys-format u64
grep -Eq '^[0-9]+ of 1,000 keys may be present$' out || fail "default query output: $(cat out)"
absent_hits=$(cut -d' ' -f1 out)
(( absent_hits < 50 )) || fail "$absent_hits of 1000 absent keys hit a 1% filter"
# --select writes 64 KiB at a time: 200,000 keys (about 1.3 MB of lines) in
# chunks that end mid-buffer, printed exactly once each and in order.
seq 0 199999 > many.txt
expect_rc 0 "$GBF" build many.txt -o many.gbf --fpp 0.0001 -q
expect_rc 0 "$GBF" query many.gbf many.txt --select --chunk-keys 70001 -q
cmp -s out many.txt || fail "--select of 200,000 text keys is not the keys, in order"
expect_rc 0 "$GBF" query many.gbf many.txt --select --row-numbers --chunk-keys 70001 -q
cmp -s out many.txt || fail "--select --row-numbers of 200,000 keys is not rows 0..199999"
# Text keys, whether read in bulk from the 256 KiB read buffer or line by line:
# short lines ending in \n, \r\n and \r\r\n, empty lines, NUL bytes, a \r\n split
# by the buffer's end, a line longer than the buffer, no final newline. --select
# prints every key back (without the \r before its \n) at any chunk size.
python3 - <<'PY'
import random
r = random.Random(7)
def short_lines(n):
    ends = [b'\n', b'\n', b'\r\n', b'\r\r\n']
    return b''.join(bytes(r.choice(b'ab\0\r') for _ in range(r.choice([0, 1, 5, 8, 13, 24, 40, 70]))) +
                    r.choice(ends) for _ in range(n))
data = short_lines(20000)[:(1 << 18) - 200]
data = data[:data.rindex(b'\n') + 1]
data += b'x' * ((1 << 18) - 1 - len(data)) + b'\r\n'   # the \r is the buffer's last byte
data += b'y' * 300000 + b'\n' + short_lines(20000) + b'tail'
open('edge.txt', 'wb').write(data)
keys = [k[:-1] if k.endswith(b'\r') else k for k in data.split(b'\n')]
open('edge.want', 'wb').write(b''.join(k + b'\n' for k in keys))
PY
expect_rc 0 "$GBF" build edge.txt -o edge.gbf --fpp 0.0001 -q
for chunk in 3 1000 1048576; do
  expect_rc 0 "$GBF" query edge.gbf edge.txt --select --chunk-keys $chunk -q
  cmp -s out edge.want || fail "--select --chunk-keys $chunk of edge.txt is not its keys, in order"
done

# --keys-format int: decimal lines as 8-byte integer keys, the keys a .u64 file,
# a signed .npy and Python ints give; the same lines as text are other keys.
python3 -c "
import numpy as np
k = np.array([0, 1, -1, 42, -2**63, 2**63 - 1, 123456789012345], dtype=np.int64)
open('ints.txt', 'w').write('\\n'.join(str(x) for x in k[:-1]) + '\\n+' + str(k[-1]) + '\\r\\n')
k.view(np.uint64).tofile('ints.u64')
np.save('ints.npy', k)
"
expect_rc 0 "$GBF" build ints.txt --keys-format int -o ints.gbf --fpp 0.0001 -q
expect_rc 0 "$GBF" query ints.gbf ints.u64 --count -q
expect_out 7
expect_rc 0 "$GBF" query ints.gbf ints.npy --count -q
expect_out 7
expect_rc 0 "$GBF" query ints.gbf ints.txt --count -q
expect_out 0
expect_rc 0 "$GBF" query ints.gbf ints.txt --keys-format int --select -q --chunk-keys 3
[[ "$(cat out)" == "$(printf '0\n1\n-1\n42\n-9223372036854775808\n9223372036854775807\n123456789012345')" ]] ||
  fail "--keys-format int --select prints the integers back: $(cat out)"
printf '5\n18446744073709551615\n' > big.txt
expect_rc 0 "$GBF" build big.txt --keys-format int -o big.gbf -q
expect_rc 0 "$GBF" query big.gbf big.txt --keys-format int --select -q
expect_out "$(printf '5\n18446744073709551615')"
printf '1\n2x\n' > bad.txt
expect_rc 1 "$GBF" query ints.gbf bad.txt --keys-format int
expect_err "'bad.txt': line 2 ('2x') is not a decimal integer (--keys-format int)"
printf '1\n\n' > bad.txt
expect_rc 1 "$GBF" query ints.gbf bad.txt --keys-format int
expect_err "line 2 ('') is not a decimal integer"
printf -- '-9223372036854775809\n' > bad.txt
expect_rc 1 "$GBF" query ints.gbf bad.txt --keys-format int
expect_err "line 1 ('-9223372036854775809') is outside the 64-bit keys"
printf '18446744073709551616\n' > bad.txt
expect_rc 1 "$GBF" query ints.gbf bad.txt --keys-format int
expect_err "is outside the 64-bit keys"
printf -- '-1\n3\n9223372036854775808\n' > bad.txt
expect_rc 1 "$GBF" query ints.gbf bad.txt --keys-format int --chunk-keys 1
expect_err "line 3 ('9223372036854775808') makes the keys mix negative integers"

# --out: bytes, bitmap, text
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --out r.bytes
[[ $(stat -c %s r.bytes) == 1000 ]] || fail "--out bytes size"
[[ $(od -An -v -tu1 r.bytes | tr -s ' \n' '\n' | sort -u | grep -c .) == 1 && \
   $(od -An -N1 -tu1 r.bytes | tr -d ' ') == 1 ]] || fail "--out bytes are not all 1"
expect_rc 0 "$GBF" query a.gbf k.u64 --keys-format u64 --out r.bits --out-format bitmap --chunk-keys 13
[[ $(stat -c %s r.bits) == 125 ]] || fail "--out bitmap size"
[[ $(od -An -v -tx1 r.bits | tr -s ' \n' '\n' | sort -u | grep .) == ff ]] || fail "--out bitmap not all ones"
printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\xca\x9a\x3b\x00\x00\x00\x00' >two.u64  # 0 (in), 1e9 (absent)
expect_rc 0 "$GBF" query a.gbf two.u64 --keys-format u64 --out r.txt --out-format text
[[ "$(head -1 r.txt)" == 1 && $(wc -l <r.txt) == 2 ]] || fail "--out text: $(cat r.txt)"

# --- info ---------------------------------------------------------------------
expect_rc 0 "$GBF" info a.gbf
grep -q '^capacity: *1,000 keys$' out || fail "info capacity"
grep -q '^keys inserted: *1,000' out || fail "info keys inserted"
grep -q '^layout: *8 words/block, 8 bits/key, seed 0' out || fail "info layout"
grep -q 'WARNING' out && fail "info warns on a filter within capacity"
expect_rc 0 "$GBF" info a.gbf --json
python3 -c "import json,sys; d=json.load(open('out')); assert d['keys_inserted']==1000 and not d['over_capacity'] and d['kind']=='plain'" \
  || fail "info --json"

# Over capacity: 1000 keys in a filter sized for 100.
expect_rc 0 "$GBF" create --capacity 100 -o small.gbf -q
expect_rc 0 "$GBF" add small.gbf k.u64 --keys-format u64 -q
expect_err "over capacity"
expect_rc 0 "$GBF" info small.gbf
grep -q '^WARNING: over capacity' out || fail "info lacks the over-capacity warning"

# --- build from u32, npy, text -------------------------------------------------
expect_rc 0 "$GBF" build k.u32 -o b32.gbf --verify
expect_rc 0 "$GBF" info b32.gbf
grep -q '^capacity: *500 keys$' out || fail "build sized from the key count"
expect_rc 0 "$GBF" query b32.gbf k.u32 --count -q
expect_out 500
expect_rc 0 "$GBF" build k.npy -o npy.gbf --fpp 0.001
expect_rc 0 "$GBF" query npy.gbf k.npy --select -q
[[ "$(cat out)" == "$(seq -100 99)" ]] || fail "npy --select prints signed keys"
expect_rc 0 "$GBF" build k4.npy -o npy4.gbf --capacity 1000
expect_rc 0 "$GBF" query npy4.gbf k4.npy --count -q
expect_out 300
# A <i8 .npy key and a raw u64 key with the same bytes are the same key.
python3 -c "import struct; open('neg.u64','wb').write(struct.pack('<q', -5))"
expect_rc 0 "$GBF" query npy.gbf neg.u64 --count -q
expect_out 1

expect_rc 0 "$GBF" build k.txt -o txt.gbf --verify
expect_rc 0 "$GBF" query txt.gbf k.txt --count -q --chunk-keys 17
expect_out 300
expect_rc 0 "$GBF" build mixed.txt -o mixed.gbf --layout 16/16
printf 'alpha\nbeta\n\ngamma\nbeta\r\ndelta\n' >probe.txt
expect_rc 0 "$GBF" query mixed.gbf probe.txt --select --row-numbers -q
expect_out "$(printf '0\n1\n2\n3\n4')"
printf 'gamma\nalpha\n' | "$GBF" query mixed.gbf - --select -q >out 2>err
expect_out "$(printf 'gamma\nalpha')"

# --- merge / intersect -----------------------------------------------------------
expect_rc 0 "$GBF" create --capacity 1000 -o m1.gbf -q
expect_rc 0 "$GBF" create --capacity 1000 -o m2.gbf -q
head -c 4000 k.u64 >first.u64
tail -c 4000 k.u64 >second.u64
expect_rc 0 "$GBF" add m1.gbf first.u64 --keys-format u64 -q
expect_rc 0 "$GBF" add m2.gbf second.u64 --keys-format u64 -q
expect_rc 0 "$GBF" merge m1.gbf m2.gbf -o union.gbf
expect_rc 0 "$GBF" query union.gbf k.u64 --keys-format u64 --count -q
expect_out 1000
expect_rc 0 "$GBF" intersect union.gbf m1.gbf -o inter.gbf
expect_rc 0 "$GBF" query inter.gbf first.u64 --keys-format u64 --count -q
expect_out 500
# A file merged with itself (by its name, or through a link) is one filter with
# itself: its bits and its 500 keys, not 1,000; a copy of it is another filter.
ln -sf m1.gbf m1-link.gbf
cp m1.gbf m1-copy.gbf
for second in m1.gbf m1-link.gbf; do
  expect_rc 0 "$GBF" merge m1.gbf $second -o self.gbf -q
  cmp -s m1.gbf self.gbf || fail "m1 merged with $second is not m1"
done
expect_rc 0 "$GBF" merge m1.gbf m1-copy.gbf -o twice.gbf -q
expect_rc 0 "$GBF" info twice.gbf --json
grep -q '"keys_inserted": 1000' out || fail "m1 merged with its copy does not count both: $(cat out)"
expect_rc 1 "$GBF" merge a.gbf small.gbf -o bad.gbf
expect_err "^gbf: .*layout"
[[ -e bad.gbf ]] && fail "merge of mismatched layouts wrote a file"
# xor: the delta from m1 to the union holds m2's bits not in m1; m1 xor it is the union again.
expect_rc 0 "$GBF" xor union.gbf m1.gbf -o delta.gbf
expect_err "symmetric difference (XOR)"
expect_rc 0 "$GBF" xor m1.gbf delta.gbf -o rebuilt.gbf -q
cmp -s <(tail -c +81 union.gbf | head -c -8) <(tail -c +81 rebuilt.gbf | head -c -8) ||
  fail "m1 xor (union xor m1) is not the union's bit array"
expect_rc 0 "$GBF" query rebuilt.gbf k.u64 --keys-format u64 --count -q
expect_out 1000
expect_rc 0 "$GBF" info delta.gbf
grep -q '^keys inserted: *not counted (made from bits' out || fail "an xor's 0 recorded keys read as a count: $(grep 'keys inserted' out)"
expect_rc 0 "$GBF" info m1.gbf
grep -q '^keys inserted: *500 (duplicates included)' out || fail "info keys inserted of m1: $(grep 'keys inserted' out)"
expect_rc 1 "$GBF" xor a.gbf small.gbf -o bad.gbf
expect_err "^gbf: .*layout"
[[ -e bad.gbf ]] && fail "xor of mismatched layouts wrote a file"

# --- Parquet SBBF -----------------------------------------------------------------
expect_rc 0 "$GBF" create --capacity 1000 --parquet-compatible --format parquet-sbbf -o p.sbbf
[[ $(stat -c %s p.sbbf) == 2064 ]] || fail "parquet-sbbf with header: $(stat -c %s p.sbbf) bytes, want 16 + 2048"
expect_rc 0 "$GBF" build k.u64 --keys-format u64 --parquet-compatible --format parquet-sbbf --no-header -o p.bin
[[ $(stat -c %s p.bin) == 2048 ]] || fail "parquet-sbbf without header: $(stat -c %s p.bin) bytes"
expect_rc 0 "$GBF" query p.bin k.u64 --keys-format u64 --format parquet-sbbf --no-header --count -q
expect_out 1000
expect_rc 0 "$GBF" add p.sbbf k.u64 --keys-format u64 --format parquet-sbbf -q
expect_rc 0 "$GBF" query p.sbbf k.u64 --keys-format u64 --format parquet-sbbf --count -q
expect_out 1000
expect_rc 0 "$GBF" info p.sbbf --format parquet-sbbf
grep -q '^capacity: *unknown$' out || fail "parquet info capacity"
# The same keys give the same bits with and without the header: bitset = file minus 16 bytes.
cmp <(tail -c 2048 p.sbbf) p.bin || fail "header + bitset differs from the bare bitset"
expect_rc 1 "$GBF" create --capacity 1000 --layout 16/16 --format parquet-sbbf -o p16.sbbf
expect_err "words_per_block is 16, Parquet needs 8"
expect_rc 1 "$GBF" create --capacity 1000 --format parquet-sbbf -o pnp.sbbf
expect_err "not a power of two"
expect_rc 1 "$GBF" query k.u64 k.u64 --format parquet-sbbf --keys-format u64

# --- usage errors (exit 2) ------------------------------------------------------
expect_rc 2 "$GBF" frobnicate
expect_rc 2 "$GBF"
expect_rc 2 "$GBF" create --capacity 10
expect_err "output"
expect_rc 2 "$GBF" create --capacity 10 --fpp 0 -o x.gbf
expect_err "fpp"
expect_rc 2 "$GBF" create --capacity 10 --fpp 1.5 -o x.gbf
expect_rc 2 "$GBF" create --capacity 0 -o x.gbf
expect_err "capacity"
expect_rc 2 "$GBF" create --capacity 10 --layout 3/3 -o x.gbf
expect_rc 2 "$GBF" create --capacity 10 --layout 16/16 --parquet-compatible -o x.gbf
expect_rc 2 "$GBF" query a.gbf k.u64 --count --select
expect_rc 2 "$GBF" query a.gbf k.u64 --keys-format u128
expect_rc 2 "$GBF" build - -o x.gbf
expect_err "capacity"
[[ -e x.gbf ]] && fail "a usage error wrote a file"
# An empty path (an unset shell variable) is refused before any work, not taken
# for "no output" or failed at the final rename.
expect_rc 2 "$GBF" create --capacity 10 -o ""
expect_err "--output: is an empty path"
expect_rc 2 "$GBF" query a.gbf k.u64 --out ""
expect_err "--out: is an empty path"
expect_rc 2 "$GBF" bench --json ""
expect_rc 2 "$GBF" join --export-csv ""
expect_rc 2 "$GBF" merge a.gbf a.gbf -o ""
# Probabilities are decimal numbers, as counts are: no hex floats, no leading blank.
expect_rc 2 "$GBF" create --capacity 10 --fpp 0x1p-7 -o x.gbf
expect_err "'0x1p-7' is not a decimal number"
expect_rc 2 "$GBF" create --capacity 10 --fpp " 0.1" -o x.gbf
# Options that would do nothing are refused, not ignored.
expect_rc 2 "$GBF" create --cuckoo --layout 8/8 --capacity 10 -o x.gbf
expect_err "--layout shapes Bloom filters"
expect_rc 2 "$GBF" create --scaling --non-scaling --expansion 4 --capacity 10 -o x.gbf
expect_rc 2 "$GBF" create --scaling --non-scaling --tightening 0.9 --capacity 10 -o x.gbf
expect_rc 2 "$GBF" create --scaling --expansion 1.5 --capacity 10 -o x.gbf
expect_err "'1.5' is not a number"
expect_rc 2 "$GBF" create --capacity 10 --no-header -o x.gbf
expect_err "--no-header: applies to parquet-sbbf files only"
expect_rc 2 "$GBF" query a.gbf k.u64 --no-header
[[ -e x.gbf ]] && fail "a usage error wrote a file"
# Control bytes of a key line or a path are written as \xNN: the message stays one line.
printf '1\0002\n' > nul.txt
expect_rc 1 "$GBF" build nul.txt --keys-format int -o x.gbf
expect_err "line 1 ('1\\\\x002') is not a decimal integer"
expect_rc 1 "$GBF" info "$(printf 'no\nsuch.gbf')"
expect_err "'no\\\\x0asuch.gbf'"
[[ $(wc -l < err) == 1 ]] || fail "a newline in a path split the error: $(cat err)"
expect_rc 0 "$GBF" query --help
grep -q -- "--select" out || fail "query --help lacks --select"

# --- runtime errors (exit 1) ----------------------------------------------------
expect_rc 1 "$GBF" info missing.gbf
expect_err "^gbf: .*missing.gbf"
expect_rc 1 "$GBF" query a.gbf missing.u64
expect_err "missing.u64"
cp a.gbf corrupt.gbf
printf '\xff' | dd of=corrupt.gbf bs=1 seek=100 conv=notrunc 2>/dev/null
expect_rc 1 "$GBF" info corrupt.gbf
expect_err "checksum"
expect_rc 1 "$GBF" query corrupt.gbf k.u64 --keys-format u64
expect_err "corrupt.gbf"
expect_rc 1 "$GBF" query a.gbf odd.u64
expect_err "odd.u64.*13 bytes is not a multiple of 8"
expect_rc 1 "$GBF" query a.gbf f.npy
expect_err "f.npy.*'<f8'"
expect_rc 1 "$GBF" query a.gbf big.npy
expect_err "big-endian"
expect_rc 1 "$GBF" query a.gbf fortran.npy
expect_err "Fortran"
expect_rc 1 "$GBF" query a.gbf pipe-order.npy
expect_err "byte order '|' where a 4- or 8-byte integer needs '<' (little-endian)"
expect_rc 1 "$GBF" query a.gbf negative-shape.npy
expect_err ".npy shape (-1,) is not a valid length"
cp k.u64 k.bin
expect_rc 1 "$GBF" query a.gbf k.bin
expect_err "keys-format"
expect_rc 1 "$GBF" info k.txt
expect_err "bad magic"
# The likeliest mix-ups between the formats say what to pass.
expect_rc 1 "$GBF" info p.sbbf
expect_err "a Parquet SBBF is read as one (.*--format parquet-sbbf, or --input-format parquet-sbbf for the inputs of merge"
expect_rc 1 "$GBF" info p.sbbf --format parquet-sbbf --no-header
expect_err "not a positive multiple of 32 (the SBBF block size); if a Thrift header comes first, read it with the header"
expect_rc 1 "$GBF" info a.gbf --format parquet-sbbf
expect_err "this is a gbf filter file"

if (( failures > 0 )); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all CLI tests passed"
