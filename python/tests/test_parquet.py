"""gbf.parquet: column Bloom filters read out of Parquet files written here by pyarrow, and
row-group pruning, checked against the values actually in each row group (no false
negatives), against each row group's own filter, and against DuckDB's parquet_bloom_probe."""

import numpy as np
import pytest

import gbf

pa = pytest.importorskip("pyarrow", reason="gbf.parquet's tests write their Parquet files with pyarrow")
pp = pytest.importorskip("pyarrow.parquet", reason="gbf.parquet's tests need pyarrow.parquet")
import gbf.parquet as pq  # noqa: E402

ROWS_PER_GROUP = 2000
GROUPS = 3


def _table(seed):
    rng = np.random.default_rng(seed)
    n = ROWS_PER_GROUP * GROUPS
    return pa.table({
        "i32": pa.array(rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)),
        "i64": pa.array(rng.integers(-2**62, 2**62, n, dtype=np.int64)),
        "s": pa.array([f"key-{x}" for x in rng.integers(0, 10**12, n)]),
        "plain": pa.array(np.arange(n, dtype=np.int64)),  # written without a filter
    })


def _write(path, table):
    pp.write_table(table, path, row_group_size=ROWS_PER_GROUP,
                   bloom_filter_options={c: {"ndv": ROWS_PER_GROUP, "fpp": 0.01} for c in ("i32", "i64", "s")})
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    base = tmp_path_factory.mktemp("parquet")
    tables = [_table(1), _table(2)]
    paths = [_write(base / f"part{i}.parquet", t) for i, t in enumerate(tables)]
    return paths, tables


def _group_values(table, column, g):
    return table[column].slice(g * ROWS_PER_GROUP, ROWS_PER_GROUP)


def _absent(table, column, n=3000, seed=99):
    rng = np.random.default_rng(seed)
    if column == "s":
        return pa.array([f"absent-{x}" for x in rng.integers(0, 10**12, n)])
    dtype = np.int32 if column == "i32" else np.int64
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, n, dtype=dtype)
    return pa.array(np.setdiff1d(values, table[column].to_numpy()))


def test_columns_lists_leaf_columns_with_physical_types(files):
    cols = pq.columns(files[0][0])
    assert [(c.path, c.type) for c in cols] == [("i32", "INT32"), ("i64", "INT64"), ("s", "BYTE_ARRAY"),
                                                ("plain", "INT64")]


def test_columns_reads_the_files_bytes_like_column_filters(files):
    # As column_filters and Pruner take them; they were read as a path and quoted whole
    # in a "holds a NUL byte" error.
    path = files[0][0]
    with open(path, "rb") as fh:
        data = fh.read()
    assert pq.columns(data) == pq.columns(memoryview(data)) == pq.columns(bytearray(data)) == pq.columns(path)
    with pytest.raises(gbf.FormatError, match="Parquet bytes"):
        pq.columns(data[:-5])
    with pytest.raises(ValueError, match="holds a NUL byte") as raised:
        gbf.load("PAR1" + "\0" * 100_000)
    assert len(str(raised.value)) < 200  # the first bytes and the length, not the whole name


@pytest.mark.parametrize("column", ["i32", "i64", "s"])
def test_column_filters_hold_every_value_of_their_row_group(files, column):
    path, table = files[0][0], files[1][0]
    groups = pq.column_filters(path, column)
    assert [g.row_group for g in groups] == list(range(GROUPS))
    assert all(g.num_rows == ROWS_PER_GROUP and g.column_bytes > 0 for g in groups)
    absent = _absent(table, column)
    for g in groups:
        f = g.filter
        assert isinstance(f, gbf.Filter) and f.layout.words_per_block == 8
        assert bool(f.contains(_group_values(table, column, g.row_group)).all())  # no false negatives
        # A Parquet filter sized for 2000 values at fpp 0.01: absent values mostly miss.
        assert f.contains(absent).mean() < 0.05


def test_column_filters_from_the_files_bytes_equal_those_from_its_path(files):
    path = files[0][0]
    with open(path, "rb") as fh:
        data = fh.read()
    for a, b in zip(pq.column_filters(path, "s"), pq.column_filters(data, "s")):
        assert a[:3] == b[:3] and np.array_equal(a.filter.words(), b.filter.words())


@pytest.mark.parametrize("column", ["i32", "i64", "s"])
def test_prune_per_key_equals_each_row_groups_filter(files, column):
    paths, tables = files
    filters = [g.filter for p in paths for g in pq.column_filters(p, column)]
    present = pa.concat_arrays([tables[0][column].combine_chunks().slice(0, 500),
                                tables[1][column].combine_chunks().slice(5000, 500)])
    keys = pa.concat_arrays([present, _absent(tables[0], column, n=1000)])
    pruner = pq.Pruner(paths, column, backend="cpu")
    assert len(pruner) == 2 * GROUPS
    assert [(r.file, r.row_group) for r in pruner.row_groups] == [(f, g) for f in range(2) for g in range(GROUPS)]
    result = pruner.prune(keys, per_key=True)
    assert result.num_keys == len(keys)
    answers = np.stack([f.contains(keys) for f in filters], axis=1)  # key x row group
    for i in range(len(keys)):
        assert list(result.row_groups_of(i)) == list(np.flatnonzero(answers[i]))
    assert list(result.may_hold) == list(answers.any(axis=0).astype(np.uint8))
    # The present keys' row groups (file 0 group 0, file 1 group 2) are never pruned.
    assert result.may_hold[0] == 1 and result.may_hold[GROUPS + 2] == 1
    for i in range(500):
        assert 0 in result.row_groups_of(i)
        assert GROUPS + 2 in result.row_groups_of(500 + i)
    for out_of_range in (-1, len(keys)):
        with pytest.raises(IndexError, match="out of range"):
            result.row_groups_of(out_of_range)


def test_prune_skips_row_groups_no_key_is_in(files):
    paths, tables = files
    keys = _group_values(tables[0], "i64", 1).to_numpy()[:50]
    result = pq.prune(paths[0], "i64", keys)
    assert result.key_offsets is None and result.may_hold[1] == 1
    assert result.may_hold.sum() == 1, "50 keys of row group 1 against two 1%-filters: pruned"
    with pytest.raises(ValueError, match="per_key"):
        result.row_groups_of(0)


def test_integer_keys_hash_by_value_at_the_columns_width(files):
    paths, tables = files
    values = tables[0]["i32"].to_numpy()[:100]
    for keys in (values.astype(np.int64), values.astype(np.int32), [int(v) for v in values]):
        result = pq.prune(paths[0], "i32", keys, per_key=True)
        assert all(0 in result.row_groups_of(i) for i in range(100))
    # A key an INT32 column cannot hold is in no row group.
    wide = pq.prune(paths[0], "i32", np.array([2**32 + 5, -2**40], dtype=np.int64), per_key=True)
    assert wide.may_hold.sum() == 0 and len(wide.row_groups) == 0


def test_null_keys_are_in_no_row_group(files):
    paths, tables = files
    values = tables[0]["i64"].to_numpy()[:10]
    mask = np.zeros(10, dtype=bool)
    mask[::2] = True
    for result in (pq.prune(paths[0], "i64", values, per_key=True, mask=mask),
                   pq.prune(paths[0], "i64", np.ma.array(values, mask=mask), per_key=True),
                   pq.prune(paths[0], "i64", pa.array(values, mask=mask), per_key=True)):
        for i in range(10):
            assert (len(result.row_groups_of(i)) == 0) == mask[i]
    strings = pa.array(["nope", None, tables[0]["s"][0].as_py()])
    result = pq.prune(paths[0], "s", strings, per_key=True)
    assert len(result.row_groups_of(1)) == 0 and 0 in result.row_groups_of(2)


def test_missing_filters_and_columns_are_clear_errors(files, tmp_path):
    path = files[0][0]
    with pytest.raises(gbf.InvalidArgument, match="no Bloom filter"):
        pq.column_filters(path, "plain")
    groups = pq.column_filters(path, "plain", allow_missing=True)
    assert len(groups) == GROUPS and all(g.filter is None for g in groups)
    pruner = pq.Pruner([path], "plain", allow_missing=True, backend="cpu")
    assert not any(r.has_filter for r in pruner.row_groups)
    assert list(pruner.prune(np.array([-5], dtype=np.int64)).may_hold) == [1] * GROUPS  # never pruned
    with pytest.raises(gbf.InvalidArgument, match="no column 'nope'.*i32 \\(INT32\\)"):
        pq.column_filters(path, "nope")
    with pytest.raises(gbf.InvalidArgument):
        pq.prune(path, "s", np.arange(3, dtype=np.int64))  # integer keys for a string column
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
    with pytest.raises(gbf.FormatError):
        pq.column_filters(str(junk), "i32")
    with pytest.raises(OSError):
        pq.columns(str(tmp_path / "missing.parquet"))
    with pytest.raises(ValueError, match="mask"):
        pq.prune(path, "i64", np.arange(3, dtype=np.int64), mask=np.zeros(4, dtype=bool))
    with pytest.raises(TypeError, match="integer keys with nulls go as a pyarrow array or a NumPy masked array"):
        pq.prune(path, "i64", [None, 5])


def test_a_column_name_that_is_not_utf8_is_listed_escaped(tmp_path):
    # Thrift strings should be UTF-8; a writer that stores other bytes made columns()
    # fail whole with UnicodeDecodeError. The name is patched in place (same length).
    path = tmp_path / "names.parquet"
    pp.write_table(pa.table({"ok": pa.array([1, 2]), "Q7": pa.array([3, 4])}), path)
    data = path.read_bytes()
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    footer = data[footer_start:-8].replace(b"Q7", b"\xff\xfe")
    path.write_bytes(data[:footer_start] + footer + data[-8:])
    assert [c.path for c in pq.columns(str(path))] == ["ok", "\\xff\\xfe"]


def test_column_filters_are_ordinary_filters(files, tmp_path):
    paths, tables = files
    a, b = pq.column_filters(paths[0], "s")[:2]
    union = a.filter.copy()
    union.merge(b.filter)  # same Parquet layout and size: OR of the bits
    both = pa.concat_arrays([_group_values(tables[0], "s", 0).combine_chunks(),
                             _group_values(tables[0], "s", 1).combine_chunks()])
    assert bool(union.contains(both).all())
    out = tmp_path / "s0.gbf"
    a.filter.save(str(out))
    assert np.array_equal(gbf.load(str(out)).words(), a.filter.words())


def test_answers_equal_duckdbs_parquet_bloom_probe(files):
    duckdb = pytest.importorskip("duckdb", reason="the DuckDB cross-check needs the duckdb package")
    paths, tables = files
    path, table = paths[0], tables[0]
    con = duckdb.connect()
    for column in ("i32", "i64", "s"):
        pruner = pq.Pruner([path], column, backend="cpu")
        values = table[column].to_pylist()[::100] + _absent(table, column, n=60).to_pylist()
        result = pruner.prune(pa.array(values, type=table[column].type), per_key=True)
        for i, v in enumerate(values):
            rows = con.execute("SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe(?, ?, ?)",
                               [path, column, v]).fetchall()
            duck = sorted(g for g, excludes in rows if not excludes)
            assert list(result.row_groups_of(i)) == duck, (column, v)


@pytest.mark.parametrize("row_group", [None, 1])
def test_extract_filter_equals_the_clis_extract(files, run_cli, tmp_path, row_group):
    path, table = files[0][0], files[1][0]
    ours = pq.extract_filter(path, "s", row_group)
    args = ["parquet", path, "--column", "s", "--extract", "-o", tmp_path / "cli.gbf"]
    if row_group is not None:
        args += ["--row-group", row_group]
    run_cli(*args)
    assert np.array_equal(ours.words(), gbf.load(str(tmp_path / "cli.gbf")).words())
    values = table["s"] if row_group is None else _group_values(table, "s", row_group)
    assert bool(ours.contains(values).all())
    ours.save(str(tmp_path / "ours.sbbf"), format="parquet-sbbf")  # Parquet's shape: writable as SBBF
    # --no-header shapes only an SBBF output; with the gbf format it was silently ignored.
    refused = run_cli(*args, "--no-header", check=False)
    assert refused.returncode == 2 and "--no-header: applies to parquet-sbbf files only" in refused.stderr
    bare_args = [tmp_path / "bare.sbbf" if a == tmp_path / "cli.gbf" else a for a in args]
    run_cli(*bare_args, "--format", "parquet-sbbf", "--no-header")
    bare = gbf.load(str(tmp_path / "bare.sbbf"), format="parquet-sbbf", header=False)
    assert np.array_equal(bare.words(), ours.words())


def test_cli_prints_raw_keys_with_the_columns_sign(files, run_cli, tmp_path):
    # A .u32 file's bytes carry no sign: for an INT32 column they are its values,
    # probed as signed, and --per-key printed them unsigned (-1 as 4294967295).
    path, table = files[0][0], files[1][0]
    negative = table["i32"].to_numpy()
    negative = negative[negative < 0][:3]
    keys = tmp_path / "k.u32"
    negative.astype(np.int32).tofile(keys)
    out = run_cli("parquet", path, "--column", "i32", "--keys", keys, "--per-key", "-q").stdout.splitlines()
    assert out[0] == "key\trow_groups"
    assert [line.split("\t")[0] for line in out[1:]] == [str(v) for v in negative]
    assert all(line.split("\t")[1] for line in out[1:])  # each in some row group
    # A key file refused before any answer leaves stdout empty (the header once came first).
    bad = tmp_path / "bad.txt"
    bad.write_text("12\nnot-a-number\n")
    refused = run_cli("parquet", path, "--column", "i32", "--keys", bad, "--per-key", "-q", check=False)
    assert refused.returncode == 1 and refused.stdout == "" and "not a decimal integer" in refused.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert run_cli("parquet", path, "--column", "i32", "--keys", empty, "--per-key", "-q").stdout == "key\trow_groups\n"


def test_extract_filter_errors_name_the_row_groups(files):
    path = files[0][0]
    with pytest.raises(gbf.InvalidArgument, match="row groups 0, 1, 2 have no Bloom filter"):
        pq.extract_filter(path, "plain")
    with pytest.raises(gbf.InvalidArgument, match="row group 1 has no Bloom filter"):
        pq.extract_filter(path, "plain", 1)
    with pytest.raises(gbf.InvalidArgument, match="has 3 row groups"):
        pq.extract_filter(path, "s", 3)
