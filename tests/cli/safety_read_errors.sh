#!/usr/bin/env bash
# Issue 22, item 2: every read error (I/O error, allocation failure, a line past
# the maximum key length) is an error naming the file and the position, never
# the end of the input; text lines are streamed, so a 1 GB line costs no 1 GB.
# Allocation failures are provoked with ulimit -v.
# Usage: safety_read_errors.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

expect_rc 0 "$GBF" create --capacity 1000 -o f.gbf -q
no_answer() { grep -q "keys may be present" out && fail "an error still printed an answer: $(cat out)"; }

# An I/O error: reading /proc/self/mem from offset 0 fails with EIO.
expect_rc 1 "$GBF" query f.gbf /proc/self/mem --keys-format text --backend cpu
expect_err "^gbf: '/proc/self/mem': read failed at byte 0 (line 1): Input/output error"
no_answer
# A file whose size says 0 but which holds bytes is not 0 keys.
expect_rc 1 "$GBF" query f.gbf /proc/self/status --keys-format u64 --backend cpu
expect_err "'/proc/self/status': holds more bytes than its size said"

# A 1 GB line (sparse file: no disk used): refused after 16 MiB, in little memory.
truncate -s 1G line.txt
python3 - "$GBF" <<'PY' || fail "1 GB line"
import resource, subprocess, sys
r = subprocess.run([sys.argv[1], "query", "f.gbf", "line.txt", "--backend", "cpu"], capture_output=True, text=True)
rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("1 GB line: exit %d, peak RSS %.0f MiB: %s" % (r.returncode, rss_mib, r.stderr.strip()))
assert r.returncode == 1 and "'line.txt': line 1 (starting at byte 0) is longer than the maximum key length of 16,777,216 bytes" in r.stderr
assert rss_mib < 128, "a 1 GB line took %.0f MiB" % rss_mib
PY
# The issue's commands: /dev/zero as text, and a 3 GiB line in the middle of a
# text file under ulimit -v. Both are now errors naming the line, and no filter is written.
(ulimit -v 1000000; "$GBF" query f.gbf /dev/zero --keys-format text --backend cpu >out 2>err); rc=$?
[[ $rc == 1 ]] || fail "/dev/zero: exit $rc"
expect_err "'/dev/zero': line 1 (starting at byte 0) is longer than the maximum key length"
no_answer
printf 'alpha\nbeta\n' >mixed.txt
truncate -s $((12 + 3 * 1024 * 1024 * 1024)) mixed.txt
printf '\ngamma\n' >>mixed.txt
(ulimit -v 1500000; "$GBF" build mixed.txt --capacity 100 -o m.gbf --backend cpu >out 2>err); rc=$?
[[ $rc == 1 ]] || fail "3 GiB line: exit $rc"
expect_err "'mixed.txt': line 3 (starting at byte 11) is longer than the maximum key length"
[[ -e m.gbf ]] && fail "a failed build wrote its filter"
rm -f line.txt mixed.txt

# The limit exactly: a 16 MiB key is read (also with \r\n), one byte more is refused.
python3 -c "
open('max.txt', 'wb').write(b'x' * (16 << 20) + b'\n' + b'after\n')
open('maxcr.txt', 'wb').write(b'x' * (16 << 20) + b'\r\n')
open('over.txt', 'wb').write(b'short\n' + b'x' * ((16 << 20) + 1))"
expect_rc 0 "$GBF" build max.txt -o max.gbf --backend cpu -q
expect_rc 0 "$GBF" query max.gbf maxcr.txt --count -q --backend cpu
expect_out 1
expect_rc 1 "$GBF" query max.gbf over.txt --backend cpu
expect_err "'over.txt': line 2 (starting at byte 6) is longer than the maximum key length"
rm -f max.txt maxcr.txt over.txt

# Allocation failures, found with ulimit -v. Raw keys from a pipe with a chunk
# of 2^30 keys: the chunk grows as keys arrive, so 1000 keys cost 1000 keys' room
# (they needed all 8 GiB at once), and a stream that outgrows the memory is
# refused with the file and the position.
u64_keys k.u64 0 1000
(ulimit -v 4000000; cat k.u64 | "$GBF" query f.gbf - --keys-format u64 --chunk-keys 1073741824 --backend cpu --threads 1 --count -q >out 2>err); rc=$?
[[ $rc == 0 ]] || fail "1000 piped keys in a 2^30-key chunk: exit $rc: $(cat err)"
(ulimit -v 1000000; head -c 700000000 /dev/zero | "$GBF" query f.gbf - --keys-format u64 --chunk-keys 1073741824 --backend cpu --threads 1 >out 2>err); rc=$?
[[ $rc == 1 ]] || fail "700 MB piped into a 2^30-key chunk under 1 GB: exit $rc: $(cat err)"
expect_err "^gbf: '-': out of memory for a chunk of [0-9,]* keys ([0-9,]* bytes) at byte 0 (key 0): Cannot allocate memory"
no_answer

# Text: find the least address space a tiny query needs, then give a 48 MB
# text file 24 MiB more than that. The chunk cannot grow; the error names the
# file, byte and line, and nothing is answered.
python3 - "$GBF" <<'PY' || fail "text allocation failure"
import resource, subprocess, sys
gbf = sys.argv[1]
open("small.txt", "w").write("a\nb\n")
open("big.txt", "w").write("".join("key-%035d\n" % i for i in range(1200000)))
def query(limit_kib, keys):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_kib * 1024, limit_kib * 1024))
    return subprocess.run([gbf, "query", "f.gbf", keys, "--backend", "cpu", "--threads", "1", "-q", "--count"],
                          preexec_fn=limit, capture_output=True, text=True)
lo, hi = 1024, 8 << 20
assert query(hi, "small.txt").returncode == 0, "a tiny query fails even with 8 GiB of address space"
while hi - lo > 256:
    mid = (lo + hi) // 2
    if query(mid, "small.txt").returncode == 0:
        hi = mid
    else:
        lo = mid
r = query(hi + 24 * 1024, "big.txt")
print("text under ulimit -v %d KiB: exit %d: %s" % (hi + 24 * 1024, r.returncode, r.stderr.strip()))
assert r.returncode == 1 and r.stdout == "", r.stdout
assert r.stderr.startswith("gbf: 'big.txt': out of memory at byte "), r.stderr
assert "(line " in r.stderr and "Cannot allocate memory" in r.stderr, r.stderr
r = query(hi + 400 * 1024, "big.txt")
assert r.returncode == 0 and r.stdout == "0\n", "with room to spare: %d %r %r" % (r.returncode, r.stdout, r.stderr)
PY
finish
