#!/usr/bin/env bash
# Issue 22, item 1: writers of one filter file exclude each other (a lock held
# from before the read to after the rename), with a clear error or --wait, and
# readers never see a half-written file. Two real gbf processes throughout.
# Usage: safety_concurrent_writers.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

u64_keys a.u64 0 1000
u64_keys b.u64 1000000 1000
expect_rc 0 "$GBF" create --capacity 3000 -o f.gbf -q
ln -s f.gbf link.gbf

# A writer that holds the lock deterministically: `add` locks the filter, loads
# it, then opens its key file, a FIFO, which blocks until a writer appears.
mkfifo keys.fifo
"$GBF" add f.gbf keys.fifo --keys-format u64 -q --backend cpu 2>holder.err &
holder=$!
# It holds the lock once the lock file names its pid (written after the flock;
# the file exists from the open before it, when another writer could still win).
for _ in $(seq 200); do [[ $(cat .f.gbf.gbf-lock 2>/dev/null) == "$holder" ]] && break; sleep 0.05; done
[[ $(cat .f.gbf.gbf-lock 2>/dev/null) == "$holder" ]] || fail "the first writer did not take the lock"

# A second writer is refused, naming the holder; through a link it is the same lock.
expect_rc 1 "$GBF" add f.gbf b.u64 -q --backend cpu
expect_err "^gbf: 'f.gbf' is locked by another gbf process (pid $holder) writing it; pass --wait"
expect_rc 1 "$GBF" add link.gbf b.u64 -q --backend cpu
expect_err "locked by another gbf process (pid $holder)"
for cmd in "create --capacity 10 -o f.gbf" "create --cuckoo --capacity 10 -o f.gbf" "create --counting --capacity 10 -o f.gbf" \
           "build b.u64 -o f.gbf" "merge a.gbf a.gbf -o f.gbf"; do
  [[ $cmd == merge* ]] && "$GBF" create --capacity 10 -o a.gbf -q
  expect_rc 1 "$GBF" $cmd -q --backend cpu
  expect_err "locked by another gbf process"
done
# Readers take no lock: a query works and sees the file as it was.
expect_rc 0 "$GBF" query f.gbf a.u64 --count -q --backend cpu
[[ $(cat out) -lt 100 ]] || fail "a reader saw keys that were not added yet: $(cat out)"

# --wait: the second writer waits for the first, then adds to its result.
"$GBF" add f.gbf b.u64 -q --backend cpu --wait 2>waiter.err &
waiter=$!
sleep 0.3
kill -0 $waiter 2>/dev/null || fail "add --wait did not wait for the lock: $(cat waiter.err)"
cat a.u64 >keys.fifo
wait $holder || fail "the first writer failed: $(cat holder.err)"
wait $waiter || fail "the waiting writer failed: $(cat waiter.err)"
[[ $(count_present f.gbf a.u64) == 1000 ]] || fail "the first writer's keys are lost"
[[ $(count_present f.gbf b.u64) == 1000 ]] || fail "the waiting writer's keys are lost"
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"

# The issue's race: two writers started together, 100,000 keys each. With
# --wait both succeed and the file holds both sets; without it each either
# succeeds or fails naming the lock, and no successful write is lost.
for round in 1 2 3; do
  u64_keys x.u64 $((round * 10000000)) 100000
  u64_keys y.u64 $((round * 10000000 + 5000000)) 100000
  expect_rc 0 "$GBF" create --capacity 700000 -o race.gbf -q
  # Readers in a loop during the writes: every read is a whole filter.
  ( for _ in $(seq 15); do "$GBF" info race.gbf >/dev/null 2>>reader.err || echo bad >>reader.bad; done ) &
  readers=$!
  "$GBF" add race.gbf x.u64 -q --backend cpu --wait 2>x.err & px=$!
  "$GBF" add race.gbf y.u64 -q --backend cpu --wait 2>y.err & py=$!
  wait $px || fail "round $round: writer x failed: $(cat x.err)"
  wait $py || fail "round $round: writer y failed: $(cat y.err)"
  wait $readers
  [[ $(count_present race.gbf x.u64) == 100000 ]] || fail "round $round (--wait): writer x's keys are lost"
  [[ $(count_present race.gbf y.u64) == 100000 ]] || fail "round $round (--wait): writer y's keys are lost"

  expect_rc 0 "$GBF" create --capacity 700000 -o race.gbf -q
  "$GBF" add race.gbf x.u64 -q --backend cpu 2>x.err & px=$!
  "$GBF" add race.gbf y.u64 -q --backend cpu 2>y.err & py=$!
  wait $px; rx=$?
  wait $py; ry=$?
  for w in x y; do
    rc=$([[ $w == x ]] && echo $rx || echo $ry)
    if [[ $rc == 0 ]]; then
      [[ $(count_present race.gbf $w.u64) == 100000 ]] || fail "round $round: writer $w exited 0 but its keys are lost"
    else
      grep -q "locked by another gbf process" $w.err || fail "round $round: writer $w failed otherwise: $(cat $w.err)"
    fi
  done
done
[[ -e reader.bad ]] && fail "a reader failed during the writes: $(cat reader.err)"
[[ -z $(leftovers) ]] || fail "files left behind: $(leftovers)"
finish
