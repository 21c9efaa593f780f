"""gbf.dask on a dask.distributed LocalCluster (two in-process workers, so that CI stays in
seconds; GBF_DASK_PROCESSES=1 runs the cluster tests on worker processes instead, which
pickles every filter between processes): distributed filters against one filter built on
one machine, prefilters against the exact pandas answer, semi_join against dd.merge and
DuckDB."""

import os

import numpy as np
import pytest

import gbf

dask = pytest.importorskip("dask", reason="gbf.dask's tests need dask (pip install ./python[dask])")
pytest.importorskip("dask.dataframe", reason="gbf.dask's tests need dask[dataframe]")
distributed = pytest.importorskip("distributed", reason="gbf.dask's tests need dask.distributed")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402

import gbf.dask as gd  # noqa: E402


@pytest.fixture(scope="module")
def client():
    processes = os.environ.get("GBF_DASK_PROCESSES") == "1"
    with dask.config.set({"dataframe.shuffle.method": "tasks", "distributed.logging.distributed": "error"}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            yield c


def _one_machine(keys, like):
    """The filter of `keys` built in this process, in the layout of `like`."""
    f = gbf.Filter(like.capacity, like.fpp, layout=like.layout, backend="cpu")
    f.add(keys)
    return f


@pytest.mark.parametrize("npartitions, split_every", [(1, 8), (3, 2), (7, 8), (16, 3), (64, 4)])
def test_distributed_filter_bits_equal_one_machine_filter(client, npartitions, split_every):
    rng = np.random.default_rng(npartitions)
    keys = rng.integers(-2**62, 2**62, 30_000, dtype=np.int64)
    series = dd.from_pandas(pd.Series(keys), npartitions=npartitions)
    bf = gd.build_filter(series, 30_000, 0.01, split_every=split_every)
    assert bf.capacity == 30_000 and bf.backend == "cpu"
    assert bf.stats().keys_added == len(keys)
    first = gd._partition_bits(series.partitions[0].compute(), None, bf.layout, 30_000, 0.01, "cpu")
    assert (first.blocks is not None) == (npartitions == 64)  # 470 keys of 30,000: sparse
    assert np.array_equal(bf.words(), _one_machine(keys, bf).words())
    assert bool(bf.contains(keys).all())  # no false negatives


@pytest.mark.parametrize("dtype", ["object", "string[pyarrow]", "arrow_string"])
def test_string_columns_of_every_pandas_dtype_hash_as_utf8(client, dtype):
    words = [f"user-{i}-é" for i in range(5_000)]
    if dtype == "arrow_string":
        column = pd.Series(pa.array(words + [None]), dtype=pd.ArrowDtype(pa.string()))
    else:
        column = pd.Series(words + [None], dtype=dtype)
    frame = dd.from_pandas(pd.DataFrame({"k": column, "v": np.arange(len(column))}), npartitions=4)
    bf = gd.build_filter(frame, 5_000, column="k")
    assert np.array_equal(bf.words(), _one_machine(words, bf).words())  # the null is not added
    assert bool(bf.contains(words).all())


def test_integer_widths_hash_by_value(client):
    values = np.arange(-5_000, 5_000, dtype=np.int32)
    narrow = gd.build_filter(dd.from_pandas(pd.Series(values), npartitions=3), 10_000)
    wide = gd.build_filter(dd.from_pandas(pd.Series(values.astype(np.int64)), npartitions=2), 10_000)
    assert np.array_equal(narrow.words(), wide.words())
    assert bool(narrow.contains(values.astype(np.int64)).all())
    nullable = gd.build_filter(dd.from_pandas(pd.Series(list(values) + [None], dtype="Int64"), npartitions=2),
                               10_000)
    assert np.array_equal(nullable.words(), wide.words())
    unsigned = gd.build_filter(dd.from_pandas(pd.Series(np.arange(100, dtype=np.uint16)), npartitions=2), 100)
    assert bool(unsigned.contains(np.arange(100, dtype=np.uint64)).all())


def test_a_filter_of_32_bit_keys_is_probed_at_the_column_width(client, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import gbf.parquet
    ids = np.arange(5_000, dtype=np.int32)
    path = str(tmp_path / "users.parquet")
    pq.write_table(pa.table({"user_id": ids}), path, bloom_filter_options={"user_id": {"ndv": 5_000, "fpp": 0.01}})
    probe = dd.from_pandas(pd.DataFrame({"user_id": np.arange(10_000, dtype=np.int32)}), npartitions=3)
    by_hand = gbf.Filter(5_000, 0.01, backend="cpu")
    by_hand.add(ids)  # an int32 array: 4-byte keys
    for bloom in (gbf.parquet.extract_filter(path, "user_id"), by_hand):
        kept = gd.prefilter(probe, "user_id", bloom, int_keys="column").compute()["user_id"]
        assert set(ids) <= set(kept)  # every match kept
        # The default widens to 8 bytes, as build_filter adds: these filters' keys are not found.
        widened = gd.prefilter(probe, "user_id", bloom).compute()["user_id"]
        assert (widened < 5_000).sum() < 500
    # build_filter with the same int_keys makes the hand-built filter's bits.
    built = gd.build_filter(dd.from_pandas(pd.Series(ids), npartitions=2), 5_000, 0.01, int_keys="column")
    assert np.array_equal(built.words(), by_hand.words())
    assert gd.keys_of(pd.Series(np.arange(3, dtype=np.uint16)), "column").dtype == np.uint32
    nullable_int8 = pd.Series(pa.array([1, None], pa.int8()), dtype=pd.ArrowDtype(pa.int8()))
    assert gd.keys_of(nullable_int8, "column").type == pa.int32()
    assert gd.keys_of(np.arange(3, dtype=np.int64), "column").dtype == np.int64
    with pytest.raises(ValueError, match="int_keys must be one of"):
        gd.prefilter(probe, "user_id", by_hand, int_keys="int32")


def test_dask_array_keys(client):
    keys = np.random.default_rng(3).integers(0, 2**40, 20_000)
    bf = gd.build_filter(da.from_array(keys, chunks=3_000), 20_000)
    assert np.array_equal(bf.words(), _one_machine(keys, bf).words())
    kept = gd.prefilter(da.from_array(np.concatenate([keys[:500], -keys[:500] - 1]), chunks=300), None, bf)
    kept = kept.compute()
    assert set(keys[:500]) <= set(kept) and len(kept) < 520


def test_capacity_defaults_to_the_estimated_distinct_count(client):
    keys = np.random.default_rng(5).integers(0, 2**50, 40_000)
    series = dd.from_pandas(pd.Series(np.concatenate([keys, keys[:10_000]])), npartitions=5)  # duplicates
    estimate = gd.estimate_distinct(series)
    assert abs(estimate - 40_000) < 0.05 * 40_000
    bf = gd.build_filter(series)
    assert bf.capacity == int(np.ceil(estimate * gd.ESTIMATE_MARGIN))
    assert bool(bf.contains(keys).all())
    assert bf.stats().estimated_fpr <= 0.011


def test_merges_are_exact_idempotent_and_order_free():
    rng = np.random.default_rng(9)
    parts = [rng.integers(0, 2**60, 2_000) for _ in range(4)]
    filters = [_one_machine(p, gbf.Filter(8_000, 0.01, backend="cpu")) for p in parts]
    before = [f.words().copy() for f in filters]
    once = gd.merge_filters(filters)
    assert np.array_equal(once.words(), gd.merge_filters(filters[::-1]).words())
    # A retried task merges a partition's filter twice: same bits.
    assert np.array_equal(once.words(), gd.merge_filters(filters + filters[1:3]).words())
    assert np.array_equal(once.words(), _one_machine(np.concatenate(parts), filters[0]).words())
    assert bool(once.contains(np.concatenate(parts)).all())
    assert all(np.array_equal(b, f.words()) for b, f in zip(before, filters))  # inputs unchanged


@pytest.mark.parametrize("shape", ["8/8", "1/1", "16/16", "4/8"])
def test_partition_bits_travel_sparse_while_that_is_smaller(shape):
    rng = np.random.default_rng(5)
    like = gbf.Filter(200_000, 0.01, layout=shape, backend="cpu")
    # 10^6 keys fill even the 1/1 layout (one bit per key in 32-bit blocks) past half its blocks.
    for keys, sparse in ((rng.integers(0, 2**62, 2_000), True), (rng.integers(0, 2**62, 1_000_000), False)):
        f = _one_machine(keys, like)
        bits = gd._partition_bits(pd.Series(keys), None, like.layout, 200_000, 0.01, "cpu")
        assert (bits.blocks is not None) == sparse, (shape, len(keys))
        if sparse:
            assert bits.nbytes < like.layout.size_bytes
            assert np.all(np.diff(bits.blocks.astype(np.int64)) > 0)  # ascending, distinct
        assert np.array_equal(bits.dense_words(), f.words())
        g = bits.to_filter("cpu")
        assert np.array_equal(g.words(), f.words()) and g.stats() == f.stats()
        assert (g.capacity, g.fpp, g.layout) == (200_000, 0.01, like.layout)


@pytest.mark.parametrize("shape", ["8/8", "1/1", "2/3/7", "16/16", "4/8"])
def test_a_small_partition_hashes_its_keys_into_sparse_bits_without_a_filter(shape, monkeypatch):
    """A partition small enough that even one block per key is sparse never makes a
    filter of the layout's size: its bits (integers of each width, strings, nulls, no
    keys) are the nonzero blocks of the filter that added its keys."""
    like = gbf.Filter(500_000, 0.01, layout=shape, backend="cpu")
    rng = np.random.default_rng(15)
    strings = pd.Series([f"k{i}" if i % 5 else None for i in range(3_000)], dtype=object)
    columns = [pd.Series(rng.integers(-2**62, 2**62, 3_000)), strings,
               pd.Series(rng.integers(0, 2**31, 3_000).astype(np.int32)),
               pd.Series(pa.array([1, None, 3] * 500), dtype=pd.ArrowDtype(pa.int64())),
               pd.Series([], dtype=np.int64)]

    def no_filter(*args, **kwargs):
        raise AssertionError("a partition of sparse bits made a filter")

    for int_keys in ("int64", "column"):
        for column in columns:
            expected = gbf.Filter(500_000, 0.01, layout=like.layout, backend="cpu")
            keys = gd.keys_of(column, int_keys)
            expected.add(keys)
            with monkeypatch.context() as m:
                m.setattr(gd, "_filled_filter", no_filter)
                bits = gd._partition_bits(column, None, like.layout, 500_000, 0.01, "cpu", int_keys)
            assert bits.blocks is not None and bits.blocks.dtype == np.uint32
            assert np.all(np.diff(bits.blocks.astype(np.int64)) > 0)  # ascending, distinct
            assert np.array_equal(bits.dense_words(), expected.words()), (shape, int_keys, column.dtype)
            assert bits.keys_added == expected.stats().keys_added
            assert bits.nbytes == len(bits.blocks) * (4 + 4 * like.layout.words_per_block)


def test_sparse_parts_unite_sparse_until_their_union_would_not_be():
    like = gbf.Filter(1_000_000, 0.01, backend="cpu")  # 8/8: a sparse block costs 36 bytes
    rng = np.random.default_rng(16)
    batches = [rng.integers(0, 2**62, n) for n in (3_000, 5_000, 2_000)]
    batches.append(batches[0][:100])  # blocks the first part holds already
    parts = [gd._partition_bits(pd.Series(b), None, like.layout, 1_000_000, 0.01, "cpu") for b in batches]
    assert all(p.blocks is not None for p in parts)
    merged = gd._merge_bits(*parts)
    everything = _one_machine(np.concatenate(batches), like)
    assert merged.blocks is not None and np.all(np.diff(merged.blocks.astype(np.int64)) > 0)
    assert np.array_equal(merged.dense_words(), everything.words())
    assert merged.keys_added == sum(len(b) for b in batches)
    assert gd._merge_bits(*[gd._partition_bits(pd.Series([], dtype=np.int64), None, like.layout, 1_000_000, 0.01,
                                               "cpu")] * 3).blocks.size == 0
    # 40 parts of 3,000 keys: 4.3 MB of sparse blocks against a 1.2 MB filter, so dense.
    many = [gd._partition_bits(pd.Series(rng.integers(0, 2**62, 3_000)), None, like.layout, 1_000_000, 0.01, "cpu")
            for _ in range(40)]
    assert gd._merge_bits(*many).blocks is None


def test_the_client_sizes_the_layout_as_a_filter_would_without_making_one():
    shape = gbf.Layout(16, 16, 3)
    sized = gbf.Layout(4, 8, 1, 1_000)
    for layout in (None, "8/8", "4/6/9", "parquet", shape, sized):
        expected = gbf.Filter(123_456, 0.001, layout=layout, backend="cpu").layout
        assert gd._build_layout(123_456, 0.001, layout) == expected, layout
    assert gd._build_layout(None, 0.001, sized) == gbf.Filter(None, 0.001, layout=sized).layout
    for capacity, fpp, layout, error in ((0, 0.01, None, gbf.InvalidArgument), (-1, 0.01, None, ValueError),
                                         (10, 1.5, None, gbf.InvalidArgument), (10, 0.0, sized, gbf.InvalidArgument),
                                         (10, 0.01, gbf.Layout(3, 8, 0, 10), gbf.InvalidArgument),
                                         (10, 0.01, "8/x", ValueError), (10, 0.01, 8, TypeError),
                                         (-5, 0.01, sized, gbf.InvalidArgument), (None, 0.01, None, TypeError)):
        with pytest.raises(error):
            gbf.Filter(capacity, fpp, layout=layout, backend="cpu")
        with pytest.raises(error):
            gd._build_layout(capacity, fpp, layout)


def test_merged_bits_are_the_or_of_their_inputs_which_stay_unchanged():
    rng = np.random.default_rng(6)
    like = gbf.Filter(100_000, 0.01, backend="cpu")
    batches = [rng.integers(0, 2**62, n) for n in (500, 100_000, 1_000, 40)]  # sparse, dense, sparse, sparse
    parts = [gd._partition_bits(pd.Series(b), None, like.layout, 100_000, 0.01, "cpu") for b in batches]
    assert [p.blocks is None for p in parts] == [False, True, False, False]
    before = [(None if p.blocks is None else p.blocks.copy(), p.words.copy()) for p in parts]
    everything = _one_machine(np.concatenate(batches), like)
    for group in (parts, parts[::-1], [parts[0], parts[2], parts[3]], parts + parts[:2]):
        merged = gd._merge_bits(*group)
        expected = _one_machine(np.concatenate([batches[parts.index(p)] for p in group]), like)
        assert np.array_equal(merged.dense_words(), expected.words())
        assert merged.keys_added == sum(p.keys_added for p in group)
    assert np.array_equal(gd._merge_bits(*parts).to_filter("cpu").words(), everything.words())
    for p, (blocks, words) in zip(parts, before):  # a retried merge sees its inputs as they were
        assert np.array_equal(p.words, words) and (blocks is None or np.array_equal(p.blocks, blocks))
    other = gd._partition_bits(pd.Series(batches[0]), None, gbf.Filter(5_000, 0.01).layout, 5_000, 0.01, "cpu")
    with pytest.raises(gbf.LayoutMismatch):
        gd._merge_bits(parts[0], other)


def test_dask_sizes_filters_by_their_bytes():
    from dask.sizeof import sizeof
    f = gbf.Filter(1_000_000, 0.01, backend="cpu")
    assert sizeof(f) == f.layout.size_bytes
    for kind in (gbf.CountingFilter(100_000, 0.01, backend="cpu"), gbf.CuckooFilter(100_000, 0.01, backend="cpu"),
                 gbf.ScalingFilter(100_000, 0.01, backend="cpu")):
        assert abs(sizeof(kind) - len(kind.to_bytes())) < 4096, type(kind).__name__
    bits = gd._partition_bits(pd.Series(np.arange(100)), None, f.layout, 1_000_000, 0.01, "cpu")
    assert sizeof(bits) == bits.nbytes < f.layout.size_bytes // 100


def test_filters_of_different_layouts_are_refused_at_merge():
    with pytest.raises(gbf.LayoutMismatch):
        gd.merge_filters([gbf.Filter(1_000, 0.01, backend="cpu"), gbf.Filter(100_000, 0.01, backend="cpu")])
    with pytest.raises(ValueError, match="at least one"):
        gd.merge_filters([])


def test_a_failed_partition_task_is_retried_with_identical_bits(client, tmp_path):
    keys = np.arange(12_000, dtype=np.int64) * 7919
    expected = gd.build_filter(dd.from_pandas(pd.Series(keys), npartitions=4), 12_000)
    failed_once = str(tmp_path / "failed-once")  # a file: tasks are pickled to the workers

    def flaky(part):
        # Fails the first time it runs on the partition holding key 0, as a lost worker would.
        if len(part) and part.iloc[0] == 0 and not os.path.exists(failed_once):
            open(failed_once, "w").close()
            raise ConnectionError("simulated worker loss")
        return part

    series = dd.from_pandas(pd.Series(keys), npartitions=4).map_partitions(flaky)
    delayed_filter = gd.build_filter(series, 12_000, compute=False)
    retried = client.compute(delayed_filter, retries=2).result()
    assert os.path.exists(failed_once)
    assert np.array_equal(retried.words(), expected.words())
    assert bool(retried.contains(keys).all())


def test_a_worker_lost_during_the_build_is_replaced_with_identical_bits(client, tmp_path):
    if os.environ.get("GBF_DASK_PROCESSES") != "1":
        pytest.skip("killing a worker needs worker processes: run with GBF_DASK_PROCESSES=1 (about 30 s)")
    keys = np.arange(12_000, dtype=np.int64) * 7919
    expected = gd.build_filter(dd.from_pandas(pd.Series(keys), npartitions=4), 12_000)
    died = str(tmp_path / "died")

    def die_once(part):
        # The worker process running the partition that holds key 0 exits, once.
        if len(part) and part.iloc[0] == 0 and not os.path.exists(died):
            open(died, "w").close()
            os._exit(1)
        return part

    series = dd.from_pandas(pd.Series(keys), npartitions=4).map_partitions(die_once)
    rebuilt = gd.build_filter(series, 12_000)
    assert os.path.exists(died)
    assert np.array_equal(rebuilt.words(), expected.words())
    assert bool(rebuilt.contains(keys).all())
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the lost worker


def test_broadcast_puts_the_filter_on_every_worker(client):
    bf = gbf.Filter(1_000, 0.01, backend="cpu")
    bf.add(np.arange(1_000))
    future = gd.broadcast(bf)
    holders = client.who_has(future)[future.key]
    assert len(holders) == len(client.scheduler_info()["workers"]) == 2
    assert np.array_equal(future.result().words(), bf.words())


def _frames(seed, selectivity, probe_rows=20_000, build_keys=4_000, strings=False):
    """A build frame of distinct keys and a probe frame in which `selectivity` of the rows
    hold a build key (the others hold keys absent from the build side)."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(2**40, size=build_keys + probe_rows, replace=False).astype(np.int64)
    build_k, absent = keys[:build_keys], keys[build_keys:]
    hits = rng.random(probe_rows) < selectivity
    probe_k = np.where(hits, build_k[rng.integers(0, build_keys, probe_rows)], absent)
    if strings:
        build_k = np.array([f"k{k}" for k in build_k], dtype=object)
        probe_k = np.array([f"k{k}" for k in probe_k], dtype=object)
    build = pd.DataFrame({"key": build_k, "b": np.arange(build_keys)})
    probe = pd.DataFrame({"key": probe_k, "p": np.arange(probe_rows)})
    return probe, build


def test_prefilter_keeps_every_match_and_few_others(client):
    probe, build = _frames(11, 0.1)
    bf = gd.build_filter(dd.from_pandas(build, npartitions=3), 4_000, 0.01, column="key")
    kept = gd.prefilter(dd.from_pandas(probe, npartitions=5), "key", bf)
    assert isinstance(kept, dd.DataFrame)
    kept = kept.compute()
    matches = probe["key"].isin(build["key"])
    assert set(probe.loc[matches, "p"]) <= set(kept["p"])  # no false negatives
    absent = (~matches).sum()
    false_positives = len(kept) - matches.sum()
    bound = bf.layout.expected_fpr(4_000)
    assert false_positives / absent <= bound + 4 * np.sqrt(bound / absent)


def test_prefilter_keeps_rows_with_null_keys(client):
    probe = pd.DataFrame({"key": pd.Series([1, None, 3, None, 10**12], dtype="Int64"), "p": range(5)})
    bf = gbf.Filter(100, 0.01, backend="cpu")
    bf.add(np.array([1, 3], dtype=np.int64))
    kept = gd.prefilter(dd.from_pandas(probe, npartitions=2), "key", bf).compute()
    assert sorted(kept["p"]) == [0, 1, 2, 3]


def test_prefilter_keeps_null_values_of_a_dask_array(client):
    # As a Series keeps its rows with null keys (it dropped them from an Array).
    bf = gbf.Filter(100, 0.01, backend="cpu")
    bf.add(["a", "c"])
    probe = da.from_array(np.array(["a", None, "b", "c", None], dtype=object), chunks=2)
    kept = gd.prefilter(probe, None, bf).compute()
    assert [v for v in kept if v is not None] == ["a", "c"] and sum(v is None for v in kept) == 2


@pytest.mark.filterwarnings("ignore:Merging dataframes with merge column data type mismatches")  # the point
def test_semi_join_with_column_int_keys_meets_keys_of_other_widths(client):
    # int_keys="column" hashed the int32 build side as 4 bytes and the int64 probe side as
    # 8: no key met its match and the join came back empty.
    build = pd.DataFrame({"key": np.array([1, 2, 3, 4], dtype=np.int32), "b": range(4)})
    probe = pd.DataFrame({"key": np.arange(10, dtype=np.int64), "p": range(10)})
    build_d, probe_d = dd.from_pandas(build, npartitions=2), dd.from_pandas(probe, npartitions=3)
    for int_keys in ("column", "int64"):
        ours = _sorted(gd.semi_join(probe_d, build_d, on="key", int_keys=int_keys).compute())
        theirs = _sorted(dd.merge(probe_d, build_d, on="key", how="inner").compute())
        pd.testing.assert_frame_equal(ours, theirs)
        assert sorted(ours["key"]) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="int_keys must be one of"):
        gd.semi_join(probe_d, build_d, on="key", int_keys="int32")


def _sorted(frame):
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.mark.parametrize("selectivity, strings", [(0.01, False), (0.2, True), (0.9, False)])
def test_semi_join_equals_dask_merge_and_duckdb(client, selectivity, strings):
    probe, build = _frames(int(selectivity * 100), selectivity, strings=strings)
    probe_d, build_d = dd.from_pandas(probe, npartitions=4), dd.from_pandas(build, npartitions=2)
    ours = _sorted(gd.semi_join(probe_d, build_d, on="key").compute())
    theirs = _sorted(dd.merge(probe_d, build_d, on="key", how="inner").compute())
    pd.testing.assert_frame_equal(ours, theirs)
    assert len(ours) == probe["key"].isin(build["key"]).sum()
    try:
        import duckdb
    except ImportError:
        return
    con = duckdb.connect()
    con.register("probe", probe)
    con.register("build", build)
    duck = con.execute("SELECT probe.key, p, b FROM probe JOIN build USING (key)").df()
    pd.testing.assert_frame_equal(ours, _sorted(duck), check_dtype=False)


def test_only_the_key_column_reaches_the_partition_tasks(monkeypatch, tmp_path):
    # Every column went to the tasks (28x the bytes for a table with a wide text column),
    # and a Parquet source read them all. Recorded in-process: the synchronous scheduler.
    keys = np.arange(5_000, dtype=np.int64)
    pd.DataFrame({"k": keys, "wide": ["x" * 200] * len(keys)}).to_parquet(tmp_path / "t.parquet")
    seen = []
    real = gd._partition_bits
    monkeypatch.setattr(gd, "_partition_bits", lambda part, *rest: seen.append(part) or real(part, *rest))
    with dask.config.set(scheduler="sync"):
        bloom = gd.build_filter(dd.read_parquet(tmp_path / "t.parquet"), 5_000, column="k")
    assert seen and all(isinstance(part, pd.Series) for part in seen)
    assert bool(bloom.contains(keys).all())


def test_a_fixed_layout_needs_no_estimate_and_an_overfull_filter_warns(client, monkeypatch):
    keys = np.arange(20_000, dtype=np.int64)
    series = dd.from_pandas(pd.Series(keys), npartitions=3)
    monkeypatch.setattr(gd, "estimate_distinct", lambda _: pytest.fail("estimated with a fixed layout"))
    layout = gbf.Filter(20_000, 0.01, backend="cpu").layout
    bloom = gd.build_filter(series, layout=layout, fpp=None)
    assert bloom.capacity is None and bloom.fpp is None and bool(bloom.contains(keys).all())
    monkeypatch.undo()
    with pytest.warns(RuntimeWarning, match="past its capacity of 1,000"):
        gd.build_filter(series, 1_000)


def test_prefilter_broadcasts_every_kind(client):
    keys = np.arange(0, 20_000, 2, dtype=np.int64)
    frame = dd.from_pandas(pd.DataFrame({"k": np.arange(20_000, dtype=np.int64)}), npartitions=4)
    for kind in (gbf.CountingFilter(10_000, 0.01, backend="cpu"), gbf.CuckooFilter(10_000, 0.01, backend="cpu"),
                 gbf.ScalingFilter(10_000, 0.01, backend="cpu")):
        kind.add(keys)
        kept = gd.prefilter(frame, "k", kind).compute()["k"].to_numpy()
        assert np.isin(keys, kept).all(), type(kind).__name__  # no match lost
        assert len(kept) < 12_000, type(kind).__name__


def test_bad_inputs_are_clear_errors(client):
    frame = dd.from_pandas(pd.DataFrame({"k": [1.5, 2.5], "s": ["a", "b"]}), npartitions=1)
    with pytest.raises(TypeError, match="dtype float64"):
        gd.build_filter(frame, 10, column="k")
    with pytest.raises(ValueError, match="needs column="):
        gd.build_filter(frame, 10)
    with pytest.raises(TypeError, match="dask Series, DataFrame"):
        gd.build_filter(np.arange(3), 10)
    with pytest.raises(ValueError, match="the key column must be one column of the DataFrame, got 'x'"):
        gd.prefilter(frame, "x", gbf.Filter(10, backend="cpu"))
    # build_filter said KeyError: 'x' (and a list "key column of type DataFrame" after a pass).
    with pytest.raises(ValueError, match="got 'x'; the columns are \\['k', 's'\\]"):
        gd.build_filter(frame, 10, column="x")
    with pytest.raises(ValueError, match="got \\['k', 's'\\]"):
        gd.build_filter(frame, 10, column=["k", "s"])
    with pytest.raises(ValueError, match="got \\['k', 's'\\]"):
        gd.prefilter(frame, ["k", "s"], gbf.Filter(10, backend="cpu"))
    with pytest.raises(TypeError, match="prefilter takes a gbf filter .* not str"):
        gd.prefilter(frame, "s", "not a filter")
    with pytest.raises(gbf.InvalidArgument, match="fpp may be None"):
        gd.build_filter(frame["s"], 10, None)
    with pytest.raises(ValueError, match="split_every"):
        gd.build_filter(frame["s"], 10, split_every=1)
    with pytest.raises(ValueError, match="inner join"):
        gd.semi_join(frame, frame, on="s", how="left")
    # Object columns mixing kinds, or holding ints no Arrow type takes, are TypeErrors
    # like every other unsupported column (Arrow's ValueError / OverflowError before).
    for values in ([1, "a"], ["a", 1], [2**64, 1]):
        with pytest.raises(TypeError, match="cannot read as one key type"):
            gd.keys_of(pd.Series(values, dtype=object))
        with pytest.raises(TypeError, match="cannot read as one key type"):
            gd.keys_of(np.array(values, dtype=object))
