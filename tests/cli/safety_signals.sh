#!/usr/bin/env bash
# Issue 22, item 5 (and issue 19, item 3): SIGINT/SIGTERM/SIGHUP remove the
# temporary and lock files before the process ends as the signal would (130,
# 143, 129); temporaries are unnamed (O_TMPFILE) where the file system has
# them; the next save of a path removes the temporaries of dead processes.
# Signals are sent with kill (by tests/cli/mid_save.py and by this script).
# Usage: safety_signals.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"
MID_SAVE=$CLI_TESTS/mid_save.py

# A ~75 MB filter: its save takes long enough to be caught in the middle.
big=(create --capacity 60000000 -o big.gbf -q --backend cpu)
expect_rc 0 "$GBF" "${big[@]}"
cp big.gbf big.orig

modes=(named)
if has_tmpfile; then modes+=(unnamed); else echo "note: no O_TMPFILE here; only named temporaries tested"; fi
for mode in "${modes[@]}"; do
  for sig in INT:130 TERM:143 HUP:129; do
    status=$(python3 "$MID_SAVE" "$mode" "${sig%%:*}" . "$GBF" "${big[@]}" 2>err)
    rc=$?
    [[ $rc == 0 ]] || { fail "$mode SIG${sig%%:*}: mid_save.py exit $rc: $(cat err)"; continue; }
    [[ $status == "${sig##*:}" ]] || fail "$mode SIG${sig%%:*} mid-save: status $status, want ${sig##*:}"
    [[ -z $(leftovers) ]] || fail "$mode SIG${sig%%:*} mid-save left: $(leftovers)"
    cmp -s big.gbf big.orig || fail "$mode SIG${sig%%:*} mid-save changed the target"
  done
done

# A signal that arrives once the output is in place no longer ends the
# command: its write happened, and a script retrying on 143 would add the keys
# to a counting filter twice. Caught between the rename (the target's inode
# changes) and the exit, the writer exits 0 with the new file in place.
u64_keys after.u64 5000000 1000
python3 - "$GBF" <<'PY' || fail "signal after the output was in place"
import os, signal, subprocess, sys
gbf = sys.argv[1]
for kind, create in (("plain", ["create", "--capacity", "60000000"]),
                     ("counting", ["create", "--counting", "--capacity", "20000000"])):
    target = kind + "-after.gbf"
    assert subprocess.run([gbf] + create + ["-o", target, "-q", "--backend", "cpu"]).returncode == 0
    add = [gbf, "add", target, "after.u64", "--keys-format", "u64", "--backend", "cpu"]
    caught = 0
    for attempt in range(20):
        before = os.stat(target).st_ino
        p = subprocess.Popen(add, stderr=subprocess.PIPE)
        while p.poll() is None and os.stat(target).st_ino == before:
            pass
        if p.poll() is not None:
            p.communicate()
            continue
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate()
        assert p.returncode == 0, "%s: SIGTERM after the rename: status %d: %s" % (kind, p.returncode, err)
        caught += 1
        if caught == 3:
            break
    assert caught > 0, "%s: every add finished before its rename could be caught" % kind
    print("note: %s: %d of %d adds signalled after the rename" % (kind, caught, attempt + 1))
PY
[[ -z $(leftovers) ]] || fail "a signal after the output was in place left: $(leftovers)"

# A reader of stderr that went away does not cost the save: the summary line
# ("added N keys") is printed once the command is done, after the rename, and
# the SIGPIPE it then raises ends nothing. (It used to come first: the add died
# of SIGPIPE, 141, with the file unchanged.)
expect_rc 0 "$GBF" create --capacity 10000 -o pipe.gbf -q --backend cpu
python3 - "$GBF" <<'PY' || fail "an add whose stderr reader had gone"
import os, subprocess, sys
gbf = sys.argv[1]
read_end, write_end = os.pipe()
os.close(read_end)
done = subprocess.run([gbf, "add", "pipe.gbf", "after.u64", "--keys-format", "u64", "--backend", "cpu"],
                      stderr=write_end)
os.close(write_end)
assert done.returncode == 0, "status %d" % done.returncode
PY
[[ $("$GBF" query pipe.gbf after.u64 --keys-format u64 --count -q --backend cpu) == 1000 ]] ||
  fail "the add whose stderr reader had gone did not save its keys"

# While the lock is held before any temporary exists (add waits for its keys
# on a FIFO), a signal removes the lock file. Run from a job-control shell so
# that the background job does not inherit SIGINT ignored. The holder holds the
# lock once the lock file names its pid (written after the flock): the file
# alone exists from the open before it, and a waiter started then could take
# the lock first (under load it did: the holder failed and the waiter wrote).
u64_keys k.u64 0 1000
mkfifo keys.fifo
for sig in INT:130 TERM:143; do
  status=$(bash -c 'set -m
    "$1" add big.gbf keys.fifo --keys-format u64 -q --backend cpu 2>/dev/null & p=$!
    for _ in $(seq 500); do [[ $(cat .big.gbf.gbf-lock 2>/dev/null) == "$p" ]] && break; sleep 0.02; done
    kill -'"${sig%%:*}"' $p; wait $p; echo $?' bash "$GBF" 2>/dev/null)
  [[ $status == "${sig##*:}" ]] || fail "SIG${sig%%:*} while locked: status $status, want ${sig##*:}"
  [[ -z $(leftovers) ]] || fail "SIG${sig%%:*} while locked left: $(leftovers)"
done

# A writer waiting with --wait for another's lock still ends on a signal,
# promptly and without touching the holder's lock file; the holder, signalled
# in turn, removes it.
for sig in INT:130 TERM:143; do
  status=$(bash -c 'set -m
    "$1" add big.gbf keys.fifo --keys-format u64 -q --backend cpu 2>/dev/null & holder=$!
    for _ in $(seq 500); do [[ $(cat .big.gbf.gbf-lock 2>/dev/null) == "$holder" ]] && break; sleep 0.02; done
    "$1" add big.gbf k.u64 -q --backend cpu --wait 2>/dev/null & waiter=$!
    sleep 0.3
    kill -0 $waiter 2>/dev/null || { echo "waiter did not wait"; kill -INT $holder; exit; }
    kill -'"${sig%%:*}"' $waiter
    for _ in $(seq 250); do kill -0 $waiter 2>/dev/null || break; sleep 0.02; done
    kill -0 $waiter 2>/dev/null && { kill -KILL $waiter; echo -n "ignored, "; }
    wait $waiter; w=$?
    [[ -e .big.gbf.gbf-lock ]] || w="$w, holder lock gone"
    kill -INT $holder; wait $holder; echo "$w $?"' bash "$GBF" 2>/dev/null)
  [[ $status == "${sig##*:} 130" ]] || fail "SIG${sig%%:*} while waiting for a lock: status $status, want ${sig##*:} 130"
  [[ -z $(leftovers) ]] || fail "SIG${sig%%:*} while waiting for a lock left: $(leftovers)"
done
cmp -s big.gbf big.orig || fail "signals while locked or waiting changed the target"

# SIGKILL cannot be handled: a named temporary (and the lock file) stay, and
# the next save of the same path removes them. Also for a 254-byte name,
# whose temporaries use a shortened name.
long=$(printf 'n%.0s' $(seq 254))
expect_rc 0 "$GBF" create --capacity 10 -o "$long" -q
for target in big.gbf "$long"; do
  status=$(python3 "$MID_SAVE" named KILL . "$GBF" create --capacity 60000000 -o "$target" -q --backend cpu 2>err)
  [[ $status == 137 ]] || { fail "SIGKILL of a named-temporary save of ${target:0:20}...: $status $(cat err)"; continue; }
  stale=$(leftovers | grep '\.tmp\.')
  [[ -n $stale ]] || fail "SIGKILL mid-save left no temporary to clean up (the test caught nothing)"
  for name in $stale; do (( ${#name} <= 255 )) || fail "temporary name of ${#name} bytes"; done
  expect_rc 0 "$GBF" create --capacity 10 -o "$target" -q
  [[ -z $(leftovers) ]] || fail "the next save of ${target:0:20}... did not clean up: $(leftovers)"
done

# The sweep removes only temporaries of dead processes of the same target:
# not a live process's, not one held under flock (a writer in another pid
# namespace), not another target's, not names that only look similar.
dead=$(bash -c 'echo $$')  # a process that has exited
python3 - "$GBF" "$dead" <<'PY' || fail "stale-temporary sweep"
import fcntl, os, subprocess, sys
gbf, dead = sys.argv[1], int(sys.argv[2])
live = os.getpid()
names = {
    "f.gbf.tmp.%d.0" % dead: False,     # dead: removed
    "f.gbf.tmp.%d.7" % dead: False,
    "f.gbf.tmp.%d.1" % live: True,      # alive: kept
    "f.gbf.tmp.%d.2" % dead: True,      # dead pid but held under flock: kept
    "g.gbf.tmp.%d.0" % dead: True,      # another target: kept
    "f.gbf.tmp.%d.x" % dead: True,      # not gbf's pattern: kept
    "f.gbf.tmp.%d" % dead: True,
    "xf.gbf.tmp.%d.0" % dead: True,
}
for name in names:
    open(name, "w").write("partial")
held = open("f.gbf.tmp.%d.2" % dead)
fcntl.flock(held, fcntl.LOCK_EX)
for mode in ("named", "unnamed"):
    env = dict(os.environ, GBF_TEMP_FILES=mode)
    r = subprocess.run([gbf, "create", "--capacity", "10", "-o", "f.gbf", "-q"], env=env)
    assert r.returncode == 0
    for name, kept in names.items():
        assert os.path.exists(name) == kept, "%s mode: %s %s" % (mode, name, "removed" if not kept else "kept")
    for name in names:
        if not names[name] or not os.path.exists(name):
            open(name, "w").write("partial")
PY
finish
