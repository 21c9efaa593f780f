#!/usr/bin/env bash
# Issue 19, item 3: a crash leaves nothing behind. gbf add is killed with
# SIGKILL at random moments (uniform over its run time, so before, during and
# after the save); after each kill the filter is whole, old or new, and holds
# every key of every add that finished; what stays in the directory is only
# what a crash cannot avoid, and the next save removes it:
# - unnamed temporaries (O_TMPFILE): nothing, except, if the kill lands in the
#   instant between linking the complete file and renaming it, that complete file;
# - named temporaries (GBF_TEMP_FILES=named): a partial NAME.tmp.PID.N;
# - the lock file (empty, reused by the next writer).
# Set GBF_CRASH_SEED to replay a run.
# Usage: safety_crash.sh path/to/gbf
source "$(dirname "$0")/safety_common.sh"

modes=named
if has_tmpfile; then modes="named unnamed"; else echo "note: no O_TMPFILE here; only named temporaries tested"; fi
python3 - "$GBF" "${GBF_CRASH_SEED:-$RANDOM}" $modes <<'PY' || fail "random kills"
import json, os, random, re, signal, struct, subprocess, sys, time

gbf, seed, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("seed", seed)
rng = random.Random(seed)
temp = re.compile(r"^big\.gbf\.tmp\.\d+\.\d+$")
allowed = {"big.gbf", ".big.gbf.gbf-lock"}

def gbf_run(*args, env=None):
    return subprocess.run([gbf, *args], capture_output=True, text=True, env=env)

def keys_inserted(path):
    r = gbf_run("info", path, "--json")
    assert r.returncode == 0, "%s does not load: %s" % (path, r.stderr)
    return json.loads(r.stdout)["keys_inserted"]

def part(i):
    name = "part%d.u64" % i
    open(name, "wb").write(struct.pack("<1000Q", *range(i * 1000, i * 1000 + 1000)))
    return name

failures = 0
for mode in modes:
    env = dict(os.environ)
    env.pop("GBF_TEMP_FILES", None)
    if mode == "named":
        env["GBF_TEMP_FILES"] = "named"
    assert gbf_run("create", "--capacity", "6000000", "-o", "big.gbf", "-q").returncode == 0
    start = time.monotonic()
    assert gbf_run("add", "big.gbf", part(0), "-q", "--backend", "cpu", env=env).returncode == 0
    duration = time.monotonic() - start
    committed, inserted, caught_temps = [0], 1000, 0
    for i in range(1, 16):
        keys = part(i)
        p = subprocess.Popen([gbf, "add", "big.gbf", keys, "-q", "--backend", "cpu"], env=env,
                             stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, 1.2 * duration))
        p.send_signal(signal.SIGKILL)
        p.wait()
        now = keys_inserted("big.gbf")
        assert now in (inserted, inserted + 1000), "%s mode, kill %d: %d keys inserted, was %d" % (mode, i, now, inserted)
        if now > inserted:
            committed.append(i)
        inserted = now
        for name in os.listdir("."):
            if name in allowed or name.endswith(".u64"):
                continue
            assert temp.match(name), "%s mode, kill %d: unexpected file %s" % (mode, i, name)
            caught_temps += 1
            if mode == "unnamed":
                # Only a complete file can have a name in this mode.
                keys_inserted(name)
        os.remove(keys)
    # Every add that finished kept its keys; the next save cleans up.
    assert gbf_run("add", "big.gbf", part(99), "-q", env=env).returncode == 0
    for i in committed:
        r = gbf_run("query", "big.gbf", part(i), "--count", "-q")
        assert r.stdout.strip() == "1000", "%s mode: keys of finished add %d lost" % (mode, i)
    left = sorted(n for n in os.listdir(".") if n != "big.gbf" and not n.endswith(".u64"))
    assert not left, "%s mode: the next save left %s" % (mode, left)
    print("%s temporaries: %d random kills, %d adds finished, %d temporaries left by kills and removed"
          % (mode, 15, len(committed) - 1, caught_temps))
PY
finish
