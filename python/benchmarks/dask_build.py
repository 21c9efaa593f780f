"""gbf.dask.build_filter on a dask.distributed LocalCluster, by partition count
(docs/distributed.md, "Building across many partitions"): the wall time of the build, what
workers sent one another during it (the OR-reduce's transfers, as Dask counts them: the
dask.sizeof sizes of what moved), and the pickled size of one
partition task's result (what a worker holds per finished partition until its merge).
Each build is checked bit for bit against the filter built on one machine.

    python3 python/benchmarks/dask_build.py --keys 10000000 --partitions 4,16,64,256 --compare

--compare also times, alternating with build_filter in the same run, the reduce over
whole filter objects (one Filter per partition, merged by gbf.dask.merge_filters in the
same tree): the design build_filter had before its bits travelled sparse.

--task times one partition task per partition count, each in a fresh process (so that its
peak RSS is its own): build_filter's partition task against the same bits made through a
filter of the layout's size (what the task did before small partitions hashed their keys
straight into sparse bits), with the peak RSS above the process's baseline.
"""

import argparse
import multiprocessing
import pickle
import resource
import statistics
import time

import numpy as np


def worker_bytes(client):
    """Bytes the workers have sent to other workers so far (dask.distributed's counter)."""
    def sent(dask_worker):
        return int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0))
    return sum(client.run(sent).values())


def filter_object_build(series, keys, fpp, split_every):
    """build_filter's tree over whole partition Filters (merge_filters at each node)."""
    import dask
    import gbf
    import gbf.dask as gd

    parts, column, _ = gd._partitions(series, None)
    shape = gd._build_layout(keys, fpp, None)
    level = [dask.delayed(lambda part: gd._filled_filter(part, column, shape, keys, fpp, "cpu", "int64")[0],
                          pure=True)(p) for p in parts]
    while len(level) > 1:
        level = [dask.delayed(lambda *fs: gd.merge_filters(fs), pure=True)(*level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0].compute()


def one_task(n, capacity, fpp, via_filter, results):
    """A partition task of n keys in this (fresh) process: seconds, peak RSS above the
    baseline (MiB), and whether its bits came out sparse."""
    import pandas as pd
    import gbf.dask as gd
    from gbf.dask import _Bits, _filled_filter, _build_layout

    part = pd.Series(np.random.default_rng(n).integers(-2**62, 2**62, n, dtype=np.int64))
    shape = _build_layout(capacity, fpp, None)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if via_filter:
        f, added = _filled_filter(part, None, shape, capacity, fpp, "cpu", "int64")
        words = f.words()
        del f
        bits = _Bits.of(words, shape, capacity, fpp, added)
    else:
        bits = gd._partition_bits(part, None, shape, capacity, fpp, "cpu")
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    results.put((seconds, (peak - baseline) / 1024, bits.blocks is not None))


def task_costs(keys, fpp, counts, repeat):
    """one_task in fresh processes, build_filter's task and the filter route alternating."""
    ctx = multiprocessing.get_context("spawn")
    print(f"one partition task, fresh process each (median of {repeat}): seconds and peak RSS above baseline")
    print(f"{'partitions':>10} {'keys':>10} {'task s':>7} {'peak MiB':>9} {'sparse':>6} "
          f"{'via filter s':>12} {'peak MiB':>9}")
    for count in counts:
        n = keys // count
        runs = {False: [], True: []}
        for _ in range(repeat):
            for via_filter in (False, True):
                results = ctx.Queue()
                proc = ctx.Process(target=one_task, args=(n, keys, fpp, via_filter, results))
                proc.start()
                runs[via_filter].append(results.get())
                proc.join()
        direct, filtered = runs[False], runs[True]
        print(f"{count:>10} {n:>10,} {statistics.median(r[0] for r in direct):>7.3f} "
              f"{statistics.median(r[1] for r in direct):>9.1f} {str(direct[0][2]):>6} "
              f"{statistics.median(r[0] for r in filtered):>12.3f} {statistics.median(r[1] for r in filtered):>9.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--partitions", default="4,16,64,256", help="partition counts, comma-separated")
    ap.add_argument("--fpp", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--split-every", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3, help="builds per partition count (median reported)")
    ap.add_argument("--compare", action="store_true", help="also time the reduce over whole Filter objects")
    ap.add_argument("--task", action="store_true",
                    help="also time one partition task per count in fresh processes, with its peak RSS")
    args = ap.parse_args()
    counts = [int(p) for p in args.partitions.split(",")]
    if args.task:
        task_costs(args.keys, args.fpp, counts, args.repeat)

    import dask
    import dask.dataframe as dd
    import distributed
    import pandas as pd

    import gbf
    import gbf.dask as gd

    dask.config.set({"distributed.scheduler.work-stealing": False})
    keys = np.random.default_rng(1).integers(-2**62, 2**62, args.keys, dtype=np.int64)
    one_machine = gbf.Filter(args.keys, args.fpp, backend="cpu")
    one_machine.add(keys)
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        print(f"gbf {gbf.__version__}, dask {dask.__version__}, {args.workers} worker processes x 1 thread; "
              f"{args.keys:,} int64 keys, fpp {args.fpp}, split_every {args.split_every}; filter "
              f"{one_machine.layout.size_bytes / 2**20:.2f} MiB")
        print(f"{'partitions':>10} {'build s':>8} {'MiB sent':>9} {'partition result':>17} {'of filter':>9}"
              + (f" {'Filter-object reduce s':>23} {'MiB sent':>9}" if args.compare else ""))
        for count in counts:
            series = client.persist(dd.from_pandas(pd.Series(keys), npartitions=count))
            distributed.wait(series)
            seconds, sent, object_seconds, object_sent = [], [], [], []
            for _ in range(args.repeat):
                sent0 = worker_bytes(client)
                t0 = time.perf_counter()
                bloom = gd.build_filter(series, args.keys, args.fpp, split_every=args.split_every)
                seconds.append(time.perf_counter() - t0)
                sent.append(worker_bytes(client) - sent0)
                assert np.array_equal(bloom.words(), one_machine.words()), "bits differ from one machine's"
                if args.compare:
                    sent0 = worker_bytes(client)
                    t0 = time.perf_counter()
                    bloom = filter_object_build(series, args.keys, args.fpp, args.split_every)
                    object_seconds.append(time.perf_counter() - t0)
                    object_sent.append(worker_bytes(client) - sent0)
                    assert np.array_equal(bloom.words(), one_machine.words()), "bits differ from one machine's"
            first = series.partitions[0].compute()
            payload = gd._partition_bits(first, None, one_machine.layout, args.keys, args.fpp, "cpu")
            payload_bytes = len(pickle.dumps(payload, protocol=5))
            print(f"{count:>10} {statistics.median(seconds):>8.2f} {statistics.median(sent) / 2**20:>9.1f} "
                  f"{payload_bytes / 2**20:>13.2f} MiB {payload_bytes / one_machine.layout.size_bytes:>9.2f}"
                  + (f" {statistics.median(object_seconds):>23.2f} {statistics.median(object_sent) / 2**20:>9.1f}"
                     if args.compare else ""))
            client.cancel(series)


if __name__ == "__main__":
    main()
