"""gbf against the Python Bloom filters people already use, on the same keys at the same
bits per key: rbloom, pybloomfiltermmap3 (module pybloomfilter) and fastbloom-rs, each
where pip installs it (pip install rbloom pybloomfiltermmap3 fastbloom-rs). Not part of
the test suite; docs/python.md records a run.

    python3 python/benchmarks/compare_peers.py [--keys 1000000] [--fpp 0.01]

Keys are random 64-bit integers (a NumPy uint64 array for gbf; the same values as a list
of Python ints for the others, made before timing, since that is what they take). gbf is
sized for (keys, fpp); each peer is given the false-positive rate at which the classic
formula m = -n ln p / ln(2)^2 gives gbf's number of bits, so all hold about the same bits
per key; the table shows the bits each actually allocated. Probes are half present, half
absent keys; the FPR column is measured on the absent half. Each timing is the best of 3.
"""

import argparse
import math
import time

import numpy as np

import gbf


def best_of(fn, repeats=3):
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--fpp", type=float, default=0.01)
    args = parser.parse_args()
    n = args.keys
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**63 - 1, size=n, dtype=np.uint64)
    absent = rng.integers(0, 2**63 - 1, size=n // 2, dtype=np.uint64)
    probe = np.concatenate([keys[: n // 2], absent])
    keys_list, probe_list = keys.tolist(), probe.tolist()

    rows = []
    not_installed = []

    def record(name, bits, add_s, contains_s, answers):
        answers = np.asarray(answers, dtype=bool)
        assert answers[: n // 2].all(), f"{name}: false negative"
        fpr = answers[n // 2:].mean()
        rows.append((name, bits / n, n / add_s, len(probe) / contains_s, fpr))

    for threads, label in ((0, "gbf (CPU, all threads)"), (1, "gbf (CPU, 1 thread)")):
        def build():
            f = gbf.Filter(n, args.fpp, backend="cpu", threads=threads)
            f.add(keys)
            return f
        add_s, f = best_of(build)
        contains_s, answers = best_of(lambda: f.contains(probe))
        record(label, f.num_bits, add_s, contains_s, answers)
    bits = gbf.Filter(n, args.fpp).num_bits
    # The rate at which a classic Bloom filter of n keys takes `bits` bits.
    peer_fpp = math.exp(-(bits / n) * math.log(2) ** 2)

    try:
        import rbloom

        def build_rbloom():
            b = rbloom.Bloom(n, peer_fpp)
            b.update(keys_list)
            return b
        add_s, b = best_of(build_rbloom)
        contains_s, answers = best_of(lambda: [k in b for k in probe_list])
        record(f"rbloom {getattr(rbloom, '__version__', '')}".strip(), b.size_in_bits, add_s, contains_s, answers)
    except ImportError:
        not_installed.append("rbloom")

    try:
        import pybloomfilter

        def build_pybloom():
            b = pybloomfilter.BloomFilter(n, peer_fpp)  # anonymous mmap (no file)
            b.update(keys_list)
            return b
        add_s, b = best_of(build_pybloom)
        contains_s, answers = best_of(lambda: [k in b for k in probe_list])
        record("pybloomfiltermmap3", b.num_bits, add_s, contains_s, answers)
    except ImportError:
        not_installed.append("pybloomfiltermmap3")

    try:
        from fastbloom_rs import FilterBuilder

        def build_fastbloom():
            b = FilterBuilder(n, peer_fpp).build_bloom_filter()
            b.add_int_batch(keys_list)
            return b
        add_s, b = best_of(build_fastbloom)
        contains_s, answers = best_of(lambda: b.contains_int_batch(probe_list))
        record("fastbloom-rs (batch calls)", len(b.get_bytes()) * 8, add_s, contains_s, answers)
    except ImportError:
        not_installed.append("fastbloom-rs")

    gbf_contains = rows[0][3]
    gbf_add = rows[0][2]
    print(f"{n:,} keys, {len(probe):,} probes (half absent); gbf sized for fpp {args.fpp}; "
          f"peers given fpp {peer_fpp:.4f} for the same bits")
    print("| filter | bits/key | add keys/s | contains keys/s | measured FPR | gbf add / it | gbf contains / it |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, bpk, add, contains, fpr in rows:
        print(f"| {name} | {bpk:.2f} | {add:.3g} | {contains:.3g} | {fpr:.4f} | {gbf_add / add:.1f}x | "
              f"{gbf_contains / contains:.1f}x |")
    if not_installed:
        print(f"not installed (pip could not install them here): {', '.join(not_installed)}")


if __name__ == "__main__":
    main()
