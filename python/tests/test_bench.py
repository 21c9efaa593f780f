"""python -m gbf bench: a tiny run prints its rows, verifies them and writes JSON."""

import json
import subprocess
import sys


def test_bench_quick_run(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "gbf", "bench", "--quick", "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "per-call overhead" in result.stdout
    data = json.loads(out.read_text())
    rows = [r for r in data["rows"] if r["op"] != "overhead"]
    assert {(r["op"], r["batch"]) for r in rows} == {("contains", 1000), ("contains", 100000), ("add", 1000),
                                                     ("add", 100000)}
    assert all(r["verified"] and r["python_keys_per_s"] > 0 and r["cpp_keys_per_s"] > 0 for r in rows)
    overhead = [r for r in data["rows"] if r["op"] == "overhead"]
    assert overhead and overhead[0]["python_ns"] > 0


def test_bench_usage_errors():
    result = subprocess.run([sys.executable, "-m", "gbf"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage" in result.stderr
    # Every bad value is argparse's usage error (exit 2) naming it; they were tracebacks,
    # silently truncated (1.5 keys), or rows of a "-1 MiB" filter.
    for args, words in ((["--backends", "tpu"], "unknown backends ['tpu']"),
                        (["--batches", "abc"], "'abc' is not a number of keys"),
                        (["--batches", "-1"], "'-1' is not a whole number of keys"),
                        (["--batches", "1.5"], "'1.5' is not a whole number of keys"),
                        (["--filter-mib", "nan"], "'nan' is not a size in MiB"),
                        (["--filter-mib", "-1"], "'-1' is not a size in MiB"),
                        (["--ops", "insert"], "unknown ops ['insert']"),
                        (["--quick", "--backends", "cpu1"], "--quick sets --backends itself")):
        result = subprocess.run([sys.executable, "-m", "gbf", "bench", *args], capture_output=True, text=True)
        assert result.returncode == 2 and words in result.stderr, (args, result.stderr)


def test_bench_fails_before_measuring_when_its_json_cannot_be_written(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gbf", "bench", "--quick", "--json",
                             str(tmp_path / "no-such-dir" / "b.json")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "cannot write --json" in result.stderr, result.stderr
    assert "per-call overhead" not in result.stdout  # nothing was measured
    assert list(tmp_path.iterdir()) == []


def test_bench_with_no_backend_that_can_run_measures_nothing_and_says_so():
    # gpu-device needs a GPU and CuPy: where either is missing no row runs, which exited 0
    # with "verified": true.
    result = subprocess.run([sys.executable, "-m", "gbf", "bench", "--backends", "gpu-device", "--batches", "1e3",
                             "--filter-mib", "1"], capture_output=True, text=True, timeout=60)
    if "skipped" not in result.stdout + result.stderr:
        return  # a machine with a GPU and CuPy runs the rows
    assert result.returncode == 1 and "nothing was measured" in result.stderr, result.stderr
