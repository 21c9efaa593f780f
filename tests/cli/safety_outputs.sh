#!/usr/bin/env bash
# Issue 22, item 3: an output that is (after links, by device and inode) any
# input of the same command is refused before anything is opened for writing,
# and query's results file is written atomically like a filter.
# Usage: safety_outputs.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

u64_keys k.u64 0 1000
expect_rc 0 "$GBF" create --capacity 1000 -o f.gbf -q
expect_rc 0 "$GBF" create --capacity 1000 -o g.gbf -q
ln -s k.u64 klink
ln k.u64 khard
ln -s f.gbf flink
cp k.u64 k.orig; cp f.gbf f.orig; cp g.gbf g.orig
unchanged() {
  cmp -s k.u64 k.orig || fail "$1: the key file changed"
  cmp -s f.gbf f.orig || fail "$1: the filter f.gbf changed"
  cmp -s g.gbf g.orig || fail "$1: the filter g.gbf changed"
  [[ -z $(leftovers) ]] || fail "$1: files left behind: $(leftovers)"
}
# refused "what" MESSAGE CMD...: exit 2, the message, and no file touched.
refused() {
  local what=$1 message=$2; shift 2
  expect_rc 2 "$@"
  expect_err "$message"
  unchanged "$what"
}

refused "query --out FILTER" "^gbf: --out 'f.gbf' is the same file as the filter 'f.gbf'; refusing to overwrite an input" \
  "$GBF" query f.gbf k.u64 --out f.gbf
refused "query --out KEYS" "^gbf: --out 'k.u64' is the same file as the key file 'k.u64'" \
  "$GBF" query f.gbf k.u64 --out k.u64
refused "query --out LINK-TO-KEYS" "--out 'klink' is the same file as the key file 'k.u64'" \
  "$GBF" query f.gbf k.u64 --out klink
refused "query --out HARD-LINK-TO-KEYS" "--out 'khard' is the same file as the key file 'k.u64'" \
  "$GBF" query f.gbf k.u64 --out khard
refused "query --out LINK-TO-FILTER" "--out 'flink' is the same file as the filter 'f.gbf'" \
  "$GBF" query f.gbf k.u64 --keys-format u64 --out flink
"$GBF" query f.gbf - --keys-format u64 --out k.u64 <k.u64 >out 2>err
[[ $? == 2 ]] || fail "query --out over standard input was not refused"
expect_err "--out 'k.u64' is the same file as the key file '-'"
unchanged "query --out STDIN"
refused "build -o KEYS" "^gbf: -o 'k.u64' is the same file as the key file 'k.u64'" \
  "$GBF" build k.u64 -o k.u64
refused "build -o LINK-TO-KEYS" "-o 'klink' is the same file as the key file 'k.u64'" \
  "$GBF" build k.u64 -o klink --capacity 10
refused "merge -o A" "^gbf: -o 'f.gbf' is the same file as input A 'f.gbf'" "$GBF" merge f.gbf g.gbf -o f.gbf
refused "merge -o B" "-o 'g.gbf' is the same file as input B 'g.gbf'" "$GBF" merge f.gbf g.gbf -o g.gbf
refused "intersect -o LINK-TO-A" "-o 'flink' is the same file as input A 'f.gbf'" "$GBF" intersect f.gbf g.gbf -o flink
refused "add KEYS=FILTER" "^gbf: the filter 'f.gbf' is the same file as the key file 'flink'" \
  "$GBF" add f.gbf flink --keys-format u64

# Outputs distinct from the inputs still work, and add still rewrites its filter.
expect_rc 0 "$GBF" add f.gbf k.u64 -q
expect_rc 0 "$GBF" query f.gbf k.u64 --out r.bytes -q
[[ $(stat -c %s r.bytes) == 1000 ]] || fail "--out: $(stat -c %s r.bytes) bytes, want 1000"
expect_rc 0 "$GBF" merge f.gbf g.gbf -o h.gbf -q

# The results file is written atomically: a query that fails after answering
# some keys (a partial key at the end of a pipe) leaves the old results whole.
cp r.bytes r.orig
{ cat k.u64; printf 'abc'; } | "$GBF" query f.gbf - --keys-format u64 --chunk-keys 10 --out r.bytes >out 2>err
[[ $? == 1 ]] || fail "a query ending in a partial key did not fail"
expect_err "ends with a partial key at byte 8,000 (key 1,000) (3 trailing bytes; keys are 8 bytes)"
cmp -s r.bytes r.orig || fail "a failed query changed its results file"
{ cat k.u64; printf 'abc'; } | "$GBF" query f.gbf - --keys-format u64 --out new.bytes >out 2>err
[[ -e new.bytes ]] && fail "a failed query created its results file"
# A full disk, simulated with ulimit -f (write(2) fails with EFBIG, SIGXFSZ
# ignored as a shell's trap leaves it): the error names the file, the old
# results stay whole, and no temporary is left.
u64_keys many.u64 0 100000
(trap '' XFSZ; ulimit -f 16; "$GBF" query f.gbf many.u64 --out r.bytes >out 2>err); rc=$?
[[ $rc == 1 ]] || fail "--out on a full disk: exit $rc"
expect_err "^gbf: save 'r.bytes': cannot write"
expect_err "File too large"
cmp -s r.bytes r.orig || fail "a query that could not write its results changed the old ones"
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"
# The same with SIGXFSZ at its default: gbf ignores it itself (it used to die
# of the signal, exit 153, with no message and its lock file left).
(ulimit -f 16; "$GBF" query f.gbf many.u64 --out r.bytes >out 2>err); rc=$?
[[ $rc == 1 ]] || fail "--out past ulimit -f with SIGXFSZ at its default: exit $rc"
expect_err "File too large"
cmp -s r.bytes r.orig || fail "a query killed at ulimit -f changed the old results"
[[ -z $(leftovers) ]] || fail "files left behind after ulimit -f: $(leftovers)"

# An output that is not a regular file is refused, the node left as it was:
# a rename over it would replace a FIFO (or, as root, /dev/null) itself.
mkfifo pipe.out
expect_rc 1 "$GBF" create --capacity 10 -o pipe.out
expect_err "'pipe.out' is not a regular file (a FIFO)"
[[ -p pipe.out ]] || fail "create -o FIFO replaced the FIFO"
expect_rc 1 "$GBF" query f.gbf k.u64 --out pipe.out
[[ -p pipe.out ]] || fail "query --out FIFO replaced the FIFO"
rm pipe.out
# /dev/stdout on a pipe resolves to /proc/self/fd/pipe:[N], which names nothing:
# the path as given is checked too (the lock file's error was the message).
"$GBF" create --capacity 10 -o /dev/stdout 2>err | cat >/dev/null
expect_err "'/dev/stdout': .*is not a regular file (a FIFO)"
[[ -z $(leftovers) ]] || fail "files left behind by refused non-regular outputs: $(leftovers)"

# A closed standard descriptor is not reused for gbf's own files: with stdout
# closed, --select's rows went into the lock file (exit 0); with stdin closed,
# `build -` read a lock file as its keys.
cp r.orig r.bytes
"$GBF" query f.gbf k.u64 --keys-format u64 --out r.bytes --select -q >&- 2>err; rc=$?
[[ $rc == 1 ]] || fail "query --select with stdout closed: exit $rc"
expect_err "standard output: write failed"
"$GBF" build - --capacity 1000 -o stdin.gbf -q <&- 2>err; rc=$?
[[ $rc == 1 ]] || fail "build - with stdin closed: exit $rc"
expect_err "read failed"
[[ -e stdin.gbf ]] && fail "build - with stdin closed wrote a filter"
# A rewrite keeps the file's permissions.
chmod 600 g.gbf
expect_rc 0 "$GBF" add g.gbf k.u64 --keys-format u64 -q
[[ $(stat -c %a g.gbf) == 600 ]] || fail "add turned a 0600 filter into $(stat -c %a g.gbf)"
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"
finish
