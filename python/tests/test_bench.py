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
    result = subprocess.run([sys.executable, "-m", "gbf", "bench", "--backends", "tpu"], capture_output=True,
                            text=True)
    assert result.returncode != 0 and "unknown backend" in result.stderr
