#!/usr/bin/env python3
"""Runs the example sessions of docs/cli.md and compares what each command prints
with what the page shows, so the page cannot drift from the command.

Usage: test_doc_sessions.py path/to/gbf path/to/docs/cli.md

Every ```console block after "# Example sessions" runs, in order, in one scratch
directory holding the inputs the page describes. A block line "$ CMD" is a command
("gbf" is the binary under test; others run through bash); the lines after it, up
to a blank line, are its stdout and stderr as the page shows them, and
"(exit N)" its exit status (0 when absent). Lines starting with "# " are notes.
Compared with timings masked ("in 0.00 s (112 M keys/s)" -> "in T"): the same
lines, and stdout's in the page's order. The page shows a machine without a
GPU, so the commands run with CUDA_VISIBLE_DEVICES="" (on a GPU machine too), and
those that name `--backend gpu` (whose message says why there is no GPU) are skipped.
"""
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile

TIMING = re.compile(r"in \d+(\.\d+)? s \([^)]*keys/s\)")


def make_inputs(directory):
    # The inputs docs/cli.md names before its sessions.
    with open(os.path.join(directory, "users.u64"), "wb") as f:
        f.write(struct.pack("<100000Q", *range(100000)))
    probe = [5, 99999, 1000000, 10000000, 7, 123456789, 42, 1000000000]
    with open(os.path.join(directory, "probe.u64"), "wb") as f:
        f.write(struct.pack("<8Q", *probe))
    with open(os.path.join(directory, "names.txt"), "w") as f:
        f.write("".join(f"user-{i}\n" for i in range(1, 6)))
    with open(os.path.join(directory, "ask.txt"), "w") as f:
        f.write("user-3\nuser-9\nuser-1\n")


def sessions(page):
    text = open(page, encoding="utf-8").read()
    text = text[text.index("# Example sessions"):]
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        command, shown = None, []
        for line in block.split("\n") + [""]:
            if line.startswith("$ "):
                if command is not None:
                    yield command, shown
                command, shown = line[2:], []
            elif line == "":
                if command is not None:
                    yield command, shown
                command, shown = None, []
            elif not line.startswith("# "):
                shown.append(line)


def masked(lines):
    return [TIMING.sub("in T", line) for line in lines]


def main():
    gbf, page = os.path.abspath(sys.argv[1]), sys.argv[2]
    failures, ran = [], 0
    environment = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    with tempfile.TemporaryDirectory() as directory:
        make_inputs(directory)
        for command, shown in sessions(page):
            if "--backend gpu" in command:
                continue
            want_status = 0
            if shown and re.fullmatch(r"\(exit \d+\)", shown[-1]):
                want_status = int(shown.pop()[6:-1])
            words = shlex.split(command)
            if words[0] == "gbf":
                run = subprocess.run([gbf] + words[1:], cwd=directory, env=environment, capture_output=True,
                                     text=True)
            else:
                run = subprocess.run(["bash", "-c", command], cwd=directory, env=environment, capture_output=True,
                                     text=True)
            ran += 1
            out, err = run.stdout.splitlines(), run.stderr.splitlines()
            want = masked(shown)
            # The same lines, and stdout's in the page's order (a terminal interleaves
            # the two streams as they come; the pipes here keep them apart).
            stdout_lines = masked(out)
            same = sorted(masked(out + err)) == sorted(want) and \
                [line for line in want if line in stdout_lines] == stdout_lines
            if run.returncode != want_status or not same:
                failures.append(f"$ {command}\n  exit {run.returncode} (page: {want_status})\n"
                                "  page shows:\n" + "".join(f"    {l}\n" for l in want) +
                                "  command printed (stdout, then stderr):\n" +
                                "".join(f"    {l}\n" for l in masked(out)) + "    --\n" +
                                "".join(f"    {l}\n" for l in masked(err)))
    if ran < 15:
        failures.append(f"only {ran} commands found in {page}: the session parser is broken")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{ran} commands of {page} run, {len(failures)} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
