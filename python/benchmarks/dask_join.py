"""A join on a dask.distributed LocalCluster with and without the gbf prefilter
(docs/distributed.md): wall time, bytes moved between workers, and how the prefiltered
join's time splits (build, reduce, broadcast, probe + join).

    python3 python/benchmarks/dask_join.py --probe-rows 4000000 --build-keys 1000000 \
        --selectivity 0.01 --workers 2

Probe rows: an int64 key and an int64 payload; `selectivity` of them hold a build key.
Build rows: distinct int64 keys and a payload. Both joins use the task shuffle
(dataframe.shuffle.method = "tasks"), work stealing off, and are checked to have the same
number of rows. Bytes: dask.distributed's count of bytes workers sent one another.
"""

import argparse
import time

import numpy as np


def worker_bytes(client):
    """Bytes each worker has sent to other workers so far (dask.distributed's counter)."""
    def sent(dask_worker):
        return int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0))
    return sum(client.run(sent).values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe-rows", type=int, default=4_000_000)
    ap.add_argument("--build-keys", type=int, default=1_000_000)
    ap.add_argument("--selectivity", type=float, default=0.01)
    ap.add_argument("--fpp", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=16, help="probe partitions (build: a quarter)")
    args = ap.parse_args()

    import dask
    import dask.dataframe as dd
    import distributed
    import pandas as pd

    import gbf
    import gbf.dask as gd

    # Work stealing off: tasks run where their partition is, so the bytes counted are the
    # join's (and the filter's), not partitions moved to balance load.
    dask.config.set({"dataframe.shuffle.method": "tasks", "distributed.scheduler.work-stealing": False})
    rng = np.random.default_rng(1)
    keys = rng.choice(2**50, size=args.build_keys * 2, replace=False).astype(np.int64)
    build_k, absent = keys[:args.build_keys], keys[args.build_keys:]
    hits = rng.random(args.probe_rows) < args.selectivity
    probe_k = np.where(hits, build_k[rng.integers(0, args.build_keys, args.probe_rows)],
                       absent[rng.integers(0, len(absent), args.probe_rows)])
    probe = pd.DataFrame({"key": probe_k, "p": np.arange(args.probe_rows, dtype=np.int64)})
    build = pd.DataFrame({"key": build_k, "b": np.arange(args.build_keys, dtype=np.int64)})
    probe_bytes = int(probe.memory_usage(deep=True).sum())

    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        probe_d = client.persist(dd.from_pandas(probe, npartitions=args.partitions))
        build_d = client.persist(dd.from_pandas(build, npartitions=max(1, args.partitions // 4)))
        distributed.wait([probe_d, build_d])
        print(f"gbf {gbf.__version__}, dask {dask.__version__}, {args.workers} worker processes x 1 thread; "
              f"probe {args.probe_rows:,} rows ({probe_bytes / 2**20:.0f} MiB), build {args.build_keys:,} keys, "
              f"selectivity {args.selectivity}, fpp {args.fpp}")

        sent0 = worker_bytes(client)
        t0 = time.perf_counter()
        plain = dd.merge(probe_d, build_d, on="key", how="inner")
        plain_rows = len(plain.persist())
        plain_s = time.perf_counter() - t0
        plain_sent = worker_bytes(client) - sent0

        # The prefiltered join, step by step (gd.semi_join does the same in one call).
        sent0 = worker_bytes(client)
        t0 = time.perf_counter()
        parts, column, _ = gd._partitions(build_d, "key")
        shape = gbf.Filter(args.build_keys, args.fpp, backend="cpu").layout
        filters = [dask.delayed(gd._partition_bits, pure=True)(p, column, shape, args.build_keys, args.fpp, "cpu")
                   for p in parts]
        filters = client.persist(filters)
        distributed.wait(filters)
        t1 = time.perf_counter()
        bloom = dask.delayed(gd._Bits.to_filter)(gd._tree_merge(filters, 8), "cpu").compute()
        t2 = time.perf_counter()
        handle = gd.broadcast(bloom)
        distributed.wait(handle)
        t3 = time.perf_counter()
        kept = client.persist(gd.prefilter(probe_d, "key", handle))
        distributed.wait(kept)
        t4 = time.perf_counter()
        probe_sent = worker_bytes(client) - sent0
        joined = dd.merge(kept, build_d, on="key", how="inner")
        joined_rows = len(joined.persist())
        t5 = time.perf_counter()
        gbf_sent = worker_bytes(client) - sent0
        kept_rows = len(kept)

        assert joined_rows == plain_rows, (joined_rows, plain_rows)
        total = t5 - t0
        print(f"filter: {bloom.layout} ({bloom.layout.size_bytes / 2**20:.2f} MiB), "
              f"{len(filters)} partition filters")
        print(f"join without prefilter: {plain_s:6.2f} s, {plain_rows:,} rows out, "
              f"{plain_sent / 2**20:8.1f} MiB sent between workers")
        print(f"join with gbf prefilter: {total:6.2f} s, {joined_rows:,} rows out, "
              f"{gbf_sent / 2**20:8.1f} MiB sent between workers; probe rows kept {kept_rows:,} "
              f"of {args.probe_rows:,} ({kept_rows / args.probe_rows:.4f})")
        print(f"  build {t1 - t0:.2f} s, reduce {t2 - t1:.2f} s, broadcast {t3 - t2:.2f} s, "
              f"probe {t4 - t3:.2f} s ({probe_sent / 2**20:.1f} MiB sent up to here), join {t5 - t4:.2f} s")
        print(f"speed-up {plain_s / total:.2f}x, bytes between workers {plain_sent / max(gbf_sent, 1):.1f}x fewer")


if __name__ == "__main__":
    main()
