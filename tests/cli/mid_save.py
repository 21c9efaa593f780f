#!/usr/bin/env python3
"""Catches a gbf writer in the middle of a save and signals it.

Usage: mid_save.py MODE SIGNAL OUTPUT_DIR GBF ARGS...

Runs GBF ARGS (MODE named: with GBF_TEMP_FILES=named; unnamed: the default,
O_TMPFILE) and waits until it has its temporary file open: named, a file
NAME.tmp.<pid>.<n> in OUTPUT_DIR; unnamed, a descriptor in /proc/<pid>/fd on an
unnamed file of OUTPUT_DIR ("OUTPUT_DIR/#<inode> (deleted)"), while no
NAME.tmp.<pid>.<n> exists. Then sends SIGNAL (INT, TERM, HUP, KILL) and prints
the writer's status as a shell reports it: 128 + the signal, or its exit code.
Exit 3 when five runs all finished before they could be caught; 4 when an
unnamed-mode writer showed a named temporary while writing.
"""
import os
import re
import signal
import subprocess
import sys


def main():
    mode, sig, out_dir, cmd = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3]), sys.argv[4:]
    env = dict(os.environ)
    env.pop("GBF_TEMP_FILES", None)
    if mode == "named":
        env["GBF_TEMP_FILES"] = "named"
    for _ in range(5):
        # Default dispositions in the child: a shell's background job would
        # otherwise inherit SIGINT ignored.
        p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        named = re.compile(r"\.tmp\.%d\.\d+$" % p.pid)
        caught = False
        while p.poll() is None and not caught:
            names = [n for n in os.listdir(out_dir) if named.search(n)]
            if mode == "named":
                caught = bool(names)
                continue
            try:
                fds = os.listdir("/proc/%d/fd" % p.pid)
                links = [os.readlink("/proc/%d/fd/%s" % (p.pid, fd)) for fd in fds]
            except OSError:
                continue
            if any(l.startswith(out_dir + "/#") and l.endswith(" (deleted)") for l in links):
                if names:
                    print("named temporary %s while writing an unnamed one" % names, file=sys.stderr)
                    p.kill()
                    return 4
                caught = True
        if not caught:
            p.communicate()
            continue
        p.send_signal(getattr(signal, "SIG" + sig))
        _, err = p.communicate()
        sys.stderr.write(err.decode(errors="replace"))
        print(128 - p.returncode if p.returncode < 0 else p.returncode)
        return 0
    print("the save finished before it could be caught", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
