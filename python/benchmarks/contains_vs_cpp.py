"""contains from NumPy against the C++ library, same filter, same keys, same run: the
numbers of docs/python.md "Benchmark".

    python3 python/benchmarks/contains_vs_cpp.py [--rounds 15] [--threads 1,0] [--filter-mib 1,64]

For every (threads, filter size, batch) it runs, in a shuffled order each round:
  python       f.contains(keys)            a new NumPy result array per call
  python out=  f.contains(keys, out=out)   a preallocated result array
  C++          gbf._core._time_op(...)     filter::contains on the same pointers, timed in C++
and prints median keys/s (and the best) and the ratios python / C++. Shuffled rounds and
medians make the comparison fair on a machine shared with other processes. A batch of 1
key measures the per-call cost: there the columns are nanoseconds per call (10,000 calls
per sample; 100 per sample for 1,000 keys).
"""

import argparse
import random
import statistics
import time

import numpy as np

import gbf
from gbf import _core


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", default="1,0", help="CPU threads (0 = all)")
    parser.add_argument("--filter-mib", default="1,64")
    parser.add_argument("--batches", default="1,1e3,1e5,1e7")
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    print(f"gbf {gbf.__version__}, CUDA build {gbf.has_cuda_build}, GPU: {gbf.gpu_status()[1]}; "
          f"{args.rounds} shuffled rounds, medians (best in parentheses)")
    print("| threads | filter | batch | python keys/s | python out= keys/s | C++ keys/s | python / C++ | "
          "out= / C++ |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for threads in (int(t) for t in args.threads.split(",")):
        for mib in (float(m) for m in args.filter_mib.split(",")):
            layout = gbf.Layout(8, 8, 0, int(mib * 2**20) // 32)
            f = gbf.Filter(layout=layout, backend="cpu", threads=threads)
            present = rng.integers(0, 2**64 - 1, size=int(layout.num_bits / 10.5), dtype=np.uint64)
            f.add(present)
            for n in (int(float(b)) for b in args.batches.split(",")):
                keys = np.concatenate([present[rng.integers(0, present.size, size=n // 2)],
                                       rng.integers(0, 2**64 - 1, size=n - n // 2, dtype=np.uint64)])
                out = np.empty(n, dtype=bool)
                inner = 10_000 if n == 1 else 100 if n <= 1000 else 1
                samples = {"python": [], "python out=": [], "C++": []}
                for _ in range(args.rounds):
                    order = list(samples)
                    random.shuffle(order)
                    for name in order:
                        if name == "C++":
                            samples[name].append(statistics.median(_core._time_op(f, keys, "contains", inner)))
                            continue
                        call = (lambda: f.contains(keys)) if name == "python" else (lambda: f.contains(keys, out=out))
                        start = time.perf_counter()
                        for _ in range(inner):
                            call()
                        samples[name].append((time.perf_counter() - start) / inner)
                assert f.contains(keys)[: n // 2].all(), "false negative"
                med = {k: statistics.median(v) for k, v in samples.items()}
                best = {k: min(v) for k, v in samples.items()}
                if n == 1:
                    cells = [f"{med[k] * 1e9:.0f} ns ({best[k] * 1e9:.0f})" for k in samples]
                else:
                    cells = [f"{n / med[k]:.3g} ({n / best[k]:.3g})" for k in samples]
                print(f"| {threads or 'all'} | {mib:g} MiB | {n:,} | {' | '.join(cells)} | "
                      f"{med['C++'] / med['python']:.1%} | {med['C++'] / med['python out=']:.1%} |")


if __name__ == "__main__":
    main()
