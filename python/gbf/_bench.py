"""python -m gbf bench: the CPU-versus-GPU comparison of `gbf bench`, made from Python,
with the same call timed from C++ beside each row so the binding's cost shows.

For each backend (cpu1: one CPU thread; cpu: all threads; gpu-host: GPU with keys in
host memory; gpu-device: GPU with keys in device memory, needs CuPy), filter size and
batch size it times contains (and add) on a filter filled to its design load, with probe
batches half present and half absent keys:

  py keys/s    the call from Python: f.contains(numpy_keys) (a new result array each call)
  C++ keys/s   the same call on the same arrays from C++ (gbf._core._time_op: no Python,
               no result allocation in the loop)
  py/C++       the ratio of the two throughputs
  overhead     (Python call - C++ call) in microseconds
Python and C++ calls alternate and each side's best call counts (other processes on a
shared machine only ever slow a call down); at least 5 calls, more to fill --min-seconds.

plus a per-call overhead row: one-key batches, Python versus C++. Every row checks that
every present key is found (no false negatives) and that the C++ count agrees.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Callable, List, Literal, Optional, Tuple

import numpy as np

from . import _core
from ._filter import Filter, Layout

BITS_PER_KEY_AT_DESIGN_LOAD = 10.5  # a 1% filter of the default layout


def _median_seconds(fn: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _calls_for(seconds_per_call: float, min_seconds: float, most: int) -> int:
    return int(min(most, max(5, math.ceil(min_seconds / max(seconds_per_call, 1e-9)))))


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


class _Backend:
    def __init__(self, name: str, backend: str, threads: int, device_keys: bool):
        self.name, self.backend, self.threads, self.device_keys = name, backend, threads, device_keys


def _backends(names: List[str], gpu: bool, notes: List[str]) -> List[_Backend]:
    known = {
        "cpu1": _Backend("cpu1", "cpu", 1, False),
        "cpu": _Backend("cpu", "cpu", 0, False),
        "gpu-host": _Backend("gpu-host", "gpu", 0, False),
        "gpu-device": _Backend("gpu-device", "gpu", 0, True),
    }
    chosen = []
    for name in names:
        if name not in known:
            raise SystemExit(f"gbf bench: unknown backend {name!r} (cpu1, cpu, gpu-host, gpu-device)")
        if name.startswith("gpu") and not gpu:
            notes.append(f"{name}: skipped, no GPU ({_core.query_gpu()[1]})")
            continue
        if name == "gpu-device":
            try:
                import cupy  # noqa: F401
            except ImportError:
                notes.append("gpu-device: skipped, needs CuPy for device arrays (pip install cupy-cuda12x)")
                continue
        chosen.append(known[name])
    return chosen


def _time_cpp(f: Filter, keys, op: Literal["contains", "add"], calls: int, device: bool) -> float:
    timer = _core._time_device_op if device else _core._time_op
    return statistics.median(timer(f, keys, op, calls))


def run(batches: List[int], filter_mib: List[float], backend_names: List[str], ops: List[str],
        min_seconds: float, out=sys.stdout) -> dict:
    gpu, gpu_description = _core.query_gpu()
    notes: List[str] = []
    backends = _backends(backend_names, gpu, notes)
    rng = np.random.default_rng(42)
    rows = []
    print(f"gbf python bench: {_cpu_name()}, {os.cpu_count()} hardware threads; "
          f"GPU: {gpu_description if gpu else 'none (' + gpu_description + ')'}", file=out)
    header = (f"{'backend':<10} {'filter':>8} {'op':<8} {'batch':>10} {'py keys/s':>11} {'C++ keys/s':>11} "
              f"{'py/C++':>7} {'overhead':>10}")
    print(header, file=out)
    for b in backends:
        for mib in filter_mib:
            num_blocks = max(1, int(mib * 2**20) // 32)
            layout = Layout(8, 8, 0, num_blocks)
            capacity = int(layout.num_bits / BITS_PER_KEY_AT_DESIGN_LOAD)
            f = Filter(capacity, layout=layout, backend=b.backend, threads=b.threads)
            present = rng.integers(0, 2**64 - 1, size=capacity, dtype=np.uint64)
            f.add(present)
            for op in ops:
                for n in batches:
                    half = n // 2
                    keys = np.concatenate([present[rng.integers(0, capacity, size=half)],
                                           rng.integers(0, 2**64 - 1, size=n - half, dtype=np.uint64)])
                    probe = keys
                    if b.device_keys:
                        import cupy
                        probe = cupy.asarray(keys)

                    if op == "contains":
                        def py_call():
                            r = f.contains(probe)
                            if b.device_keys:
                                f.synchronize()
                            return r
                    else:
                        def py_call():
                            f.add(probe)
                            if b.device_keys:
                                f.synchronize()

                    first = _median_seconds(py_call, 1)
                    calls = _calls_for(first, min_seconds, 20_000)
                    cpp_op: Literal["contains", "add"] = "add" if op == "add" else "contains"
                    # Python and C++ calls alternate, so that a change in the machine's load
                    # (other processes) falls on both alike; the best call of each, since
                    # other processes only ever slow a call down.
                    py_times, cpp_times = [], []
                    for _ in range(calls):
                        start = time.perf_counter()
                        py_call()
                        py_times.append(time.perf_counter() - start)
                        cpp_times.append(_time_cpp(f, probe, cpp_op, 1, b.device_keys))
                    py, cpp = min(py_times), min(cpp_times)
                    # Verification: no present key is missed; Python and C++ agree on the count.
                    found = f.contains(keys)
                    ok = bool(found[:half].all()) and f.count(keys) == int(found.sum())
                    row = {"backend": b.name, "filter_mib": mib, "op": op, "batch": n, "calls": calls,
                           "python_seconds": py, "cpp_seconds": cpp, "python_keys_per_s": n / py,
                           "cpp_keys_per_s": n / cpp, "ratio": cpp / py, "overhead_us": (py - cpp) * 1e6,
                           "verified": ok}
                    rows.append(row)
                    print(f"{b.name:<10} {_mib(mib):>8} {op:<8} {n:>10,} {n / py:>11.3g} {n / cpp:>11.3g} "
                          f"{cpp / py:>7.1%} {(py - cpp) * 1e6:>8.2f}us" + ("" if ok else "  VERIFY FAILED"),
                          file=out)
        overhead = _overhead_row(b, rng)
        rows.append(overhead)
        print(f"{b.name:<10} per-call overhead, one key: Python contains {overhead['python_ns']:.0f} ns, "
              f"`key in f` {overhead['in_ns']:.0f} ns, C++ {overhead['cpp_ns']:.0f} ns: "
              f"binding {overhead['python_ns'] - overhead['cpp_ns']:.0f} ns per call", file=out)
    for note in notes:
        print(f"note: {note}", file=out)
    failed = [r for r in rows if r.get("verified") is False]
    if failed:
        print(f"gbf bench: {len(failed)} rows failed verification", file=out)
    return {"machine": {"cpu": _cpu_name(), "threads": os.cpu_count(), "gpu": gpu_description if gpu else None,
                        "python": platform.python_version(), "numpy": np.__version__},
            "rows": rows, "notes": notes, "verified": not failed}


def _mib(mib: float) -> str:
    return f"{mib:g} MiB"


def _overhead_row(b: _Backend, rng) -> dict:
    f = Filter(10_000, 0.01, backend=b.backend, threads=b.threads)
    one = np.array([12345], dtype=np.uint64)
    f.add(one)
    key = 12345
    calls = 20_000

    # Medians of many one-key calls, taken in batches of 100 to get past the clock's resolution.
    def per_call(fn, rounds=200, inner=100):
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - start) / inner)
        return statistics.median(samples)
    # Two rounds of each, alternating, and the better median of each (load from other
    # processes only ever slows a round down).
    python_s = in_s = cpp_s = float("inf")
    for _ in range(2):
        python_s = min(python_s, per_call(lambda: f.contains(one)))
        in_s = min(in_s, per_call(lambda: key in f))
        # The same statistic as the Python side: the median of means of 100 calls (a
        # median of single calls is lower than a median of means whenever calls vary).
        cpp_calls = _core._time_op(f, one, "contains", calls)
        cpp_s = min(cpp_s, statistics.median(statistics.fmean(cpp_calls[i:i + 100])
                                             for i in range(0, len(cpp_calls) - 99, 100)))
    return {"backend": b.name, "op": "overhead", "batch": 1, "python_ns": python_s * 1e9, "in_ns": in_s * 1e9,
            "cpp_ns": cpp_s * 1e9, "overhead_ns": (python_s - cpp_s) * 1e9}


_BACKENDS = ("cpu1", "cpu", "gpu-host", "gpu-device")


def _numbers(text: str, noun: str, fits: Callable[[float], bool], requirement: str) -> List[float]:
    """Comma-separated numbers (1e3 notation too) with fits(value) true; else argparse's
    error naming the value: not `noun` (not a number at all), or not `requirement`."""
    values = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not {noun}") from None
        if not fits(value):  # nan fits nothing
            raise argparse.ArgumentTypeError(f"{item!r} is not {requirement}")
        values.append(value)
    return values


def _batches(text: str) -> List[int]:
    """--batches: whole numbers of keys in [1, 1e12]."""
    return [int(v) for v in _numbers(text, "a number of keys", lambda v: 1 <= v <= 1e12 and v.is_integer(),
                                     "a whole number of keys in [1, 1e12]")]


def _sizes(text: str) -> List[float]:
    """--filter-mib: sizes in MiB from one 32-byte block to 128 GiB."""
    return _numbers(text, "a size in MiB", lambda v: 32 / 2**20 <= v <= 128 * 1024,
                    "a size in MiB from 32 B (one block) to 131072")


def _names(allowed: Tuple[str, ...], what: str):
    def parse(text: str) -> List[str]:
        names = text.split(",")
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {unknown} (one of {', '.join(allowed)})")
        return names
    return parse


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gbf bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=_batches, help="batch sizes in keys (default 1e3,1e4,1e5,1e6,1e7)")
    parser.add_argument("--filter-mib", type=_sizes, help="filter sizes in MiB (default 1,64)")
    parser.add_argument("--backends", type=_names(_BACKENDS, "backends"),
                        help="backends to run (default cpu1,cpu,gpu-host,gpu-device; GPU ones only where there "
                             "is a GPU)")
    parser.add_argument("--ops", type=_names(("contains", "add"), "ops"), default=["contains", "add"],
                        help="operations (default contains,add)")
    parser.add_argument("--min-seconds", type=float, default=None, help="time per measurement (default 0.2)")
    parser.add_argument("--quick", action="store_true",
                        help="a small CPU-only run (batches 1e3,1e5; 1 MiB; 0.05 s); not with the options it sets")
    parser.add_argument("--json", help="also write the rows as JSON to this path")
    args = parser.parse_args(argv)
    chosen = [name for name in ("batches", "filter_mib", "backends", "min_seconds") if getattr(args, name) is not None]
    if args.quick and chosen:
        parser.error(f"--quick sets --{chosen[0].replace('_', '-')} itself; drop one of them")
    if args.quick:
        args.batches, args.filter_mib, args.backends, args.min_seconds = [1000, 100000], [1.0], ["cpu"], 0.05
    # The JSON goes to a temporary beside its path, made before the measurements (a path that
    # cannot be written fails now, not after the run) and renamed over it at the end (an
    # existing file is replaced whole or not at all).
    json_file = None
    if args.json:
        try:
            json_file = tempfile.NamedTemporaryFile("w", dir=os.path.dirname(os.path.abspath(args.json)),
                                                    prefix=os.path.basename(args.json) + ".", suffix=".tmp",
                                                    delete=False)
        except OSError as e:
            parser.exit(1, f"python -m gbf bench: cannot write --json {args.json}: {e.strerror}\n")
    try:
        result = run(args.batches or [10**3, 10**4, 10**5, 10**6, 10**7], args.filter_mib or [1.0, 64.0],
                     args.backends or list(_BACKENDS), args.ops, 0.2 if args.min_seconds is None else args.min_seconds)
        if json_file is not None:
            json.dump(result, json_file, indent=1)
            json_file.close()
            os.replace(json_file.name, args.json)
    finally:
        if json_file is not None and not json_file.closed:
            json_file.close()
        if json_file is not None and os.path.exists(json_file.name):
            os.unlink(json_file.name)
    if not result["rows"]:
        print("gbf python bench: no backend could run here (see the notes above); nothing was measured",
              file=sys.stderr)
        return 1
    return 0 if result["verified"] else 1
