"""Every operation of the Python package checked against the C++ CLI on the same files:
the same keys give the same bits, the same answers, the same counts, rows and stats."""

import json
from dataclasses import astuple

import numpy as np
import pyarrow as pa
import pytest

import gbf
from conftest import LAYOUTS


def cli_answers(run_cli, filter_path, keys_path, tmp_path, *extra):
    """The CLI's contains answers (one 0/1 byte per key) for keys_path."""
    out = tmp_path / "answers.bin"
    run_cli("query", filter_path, keys_path, "--out", out, "--out-format", "bytes", "-q", *extra)
    return np.fromfile(out, dtype=np.uint8).astype(bool)


def cli_info(run_cli, filter_path, *extra):
    return json.loads(run_cli("info", filter_path, "--json", *extra).stdout)


def test_decimal_lines_read_as_int_are_the_python_int_keys(run_cli, tmp_path, rng):
    # `--keys-format int` reads each line as the 8-byte key a Python int is.
    keys = [int(x) for x in rng.integers(-2**63, 2**63 - 1, size=5_000, dtype=np.int64, endpoint=True)]
    (tmp_path / "keys.txt").write_text("\n".join(map(str, keys)) + "\n")
    run_cli("build", tmp_path / "keys.txt", "--keys-format", "int", "-o", tmp_path / "cli.gbf",
            "--capacity", 5_000, "--fpp", 0.01, "-q")
    f = gbf.Filter(5_000, 0.01, backend="cpu")
    f.add(keys)
    assert np.array_equal(gbf.load(tmp_path / "cli.gbf").words(), f.words())
    f.save(tmp_path / "py.gbf")
    assert cli_answers(run_cli, tmp_path / "py.gbf", tmp_path / "keys.txt", tmp_path, "--keys-format", "int").all()


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_integer_keys_same_bits_and_answers_as_cli(run_cli, tmp_path, rng, dtype):
    info = np.iinfo(dtype)
    keys = rng.integers(info.min, info.max, size=20_000, dtype=dtype, endpoint=True)
    probe = np.concatenate([keys[::3], rng.integers(info.min, info.max, size=30_000, dtype=dtype)])
    np.save(tmp_path / "keys.npy", keys)
    np.save(tmp_path / "probe.npy", probe)

    run_cli("build", tmp_path / "keys.npy", "-o", tmp_path / "cli.gbf", "--capacity", 20_000, "--fpp", 0.01, "-q")
    f = gbf.Filter(20_000, 0.01, backend="cpu")
    f.add(keys)

    from_cli = gbf.load(tmp_path / "cli.gbf")
    assert from_cli.layout == f.layout
    assert np.array_equal(from_cli.words(), f.words()), "Python and the CLI set different bits"

    expected = cli_answers(run_cli, tmp_path / "cli.gbf", tmp_path / "probe.npy", tmp_path)
    assert np.array_equal(f.contains(probe), expected)
    assert f.contains(keys).all(), "false negative"

    count = int(run_cli("query", tmp_path / "cli.gbf", tmp_path / "probe.npy", "--count", "-q").stdout)
    assert f.count(probe) == count == expected.sum()

    rows = run_cli("query", tmp_path / "cli.gbf", tmp_path / "probe.npy", "--select", "--row-numbers", "-q").stdout
    assert f.select(probe).tolist() == [int(r) for r in rows.split()]


@pytest.mark.parametrize("shape", LAYOUTS)
def test_every_layout_matches_cli(run_cli, tmp_path, rng, shape):
    keys = rng.integers(0, 2**64 - 1, size=5_000, dtype=np.uint64)
    probe = rng.integers(0, 2**64 - 1, size=20_000, dtype=np.uint64)
    keys.tofile(tmp_path / "keys.u64")
    probe.tofile(tmp_path / "probe.u64")
    run_cli("build", tmp_path / "keys.u64", "-o", tmp_path / "cli.gbf", "--capacity", 5_000, "--fpp", 0.02,
            "--layout", shape, "-q")
    f = gbf.Filter(5_000, 0.02, layout=shape)
    f.add(keys)
    assert np.array_equal(gbf.load(tmp_path / "cli.gbf").words(), f.words())
    assert np.array_equal(f.contains(probe), cli_answers(run_cli, tmp_path / "cli.gbf", tmp_path / "probe.u64", tmp_path))
    assert f.contains(keys).all()


def test_python_file_read_by_cli(run_cli, tmp_path, rng):
    keys = rng.integers(0, 2**63, size=10_000, dtype=np.int64)
    probe = rng.integers(0, 2**63, size=10_000, dtype=np.int64)
    np.save(tmp_path / "probe.npy", probe)
    f = gbf.Filter(10_000, 0.001)
    f.add(keys)
    f.save(tmp_path / "py.gbf")
    assert np.array_equal(cli_answers(run_cli, tmp_path / "py.gbf", tmp_path / "probe.npy", tmp_path), f.contains(probe))

    info = cli_info(run_cli, tmp_path / "py.gbf")
    s = f.stats()
    assert info["bits_set"] == s.bits_set
    assert info["num_bits"] == s.num_bits
    assert info["keys_inserted"] == s.keys_added == 10_000
    assert info["capacity"] == s.capacity == 10_000
    assert info["fpp"] == pytest.approx(0.001)
    assert info["fill_ratio"] == pytest.approx(s.fill_ratio)
    assert info["estimated_keys"] == pytest.approx(s.estimated_keys, rel=1e-9)
    assert info["estimated_fpr"] == pytest.approx(s.estimated_fpr, rel=1e-6)
    assert info["over_capacity"] == s.over_capacity
    assert (info["words_per_block"], info["bits_per_key"], info["seed"], info["num_blocks"]) == astuple(f.layout)


def test_what_a_file_does_not_record_is_none_in_python_and_null_in_info_json(run_cli, tmp_path):
    # A filter shaped by its layout alone, its Parquet export and a non-scaling chain:
    # capacity, fpp and expansion are unknown, None in Python and null (not 0) in JSON.
    f = gbf.Filter(layout=gbf.Layout(8, 8, 0, num_blocks=64))
    f.add(np.arange(100, dtype=np.uint64))
    f.save(tmp_path / "shaped.gbf")
    f.save(tmp_path / "shaped.sbbf", format="parquet-sbbf")
    for path, extra in ((tmp_path / "shaped.gbf", ()), (tmp_path / "shaped.sbbf", ("--format", "parquet-sbbf"))):
        info = cli_info(run_cli, path, *extra)
        assert info["capacity"] is None and f.capacity is None, path
        assert info["fpp"] is None and f.fpp is None, path
        assert info["bits_set"] == f.stats().bits_set

    chain = gbf.ScalingFilter(1_000, 0.01, non_scaling=True, backend="cpu")
    chain.add(np.arange(10, dtype=np.uint64))
    chain.save(tmp_path / "chain.gbf")
    info = cli_info(run_cli, tmp_path / "chain.gbf")
    assert info["expansion"] is None and chain.stats().expansion is None
    assert info["capacity"] == chain.stats().capacity == 1_000


def test_cli_merge_of_counting_scaling_and_cuckoo_files_equals_python_merge(run_cli, tmp_path, rng):
    a_keys = rng.integers(0, 2**64 - 1, size=3_000, dtype=np.uint64)
    b_keys = np.concatenate([a_keys[:1_000], rng.integers(0, 2**64 - 1, size=2_000, dtype=np.uint64)])
    a_keys.tofile(tmp_path / "a.u64")
    b_keys.tofile(tmp_path / "b.u64")
    for kind, make in (("--counting", lambda: gbf.CountingFilter(10_000, 0.01, backend="cpu")),
                       ("--scaling", lambda: gbf.ScalingFilter(10_000, 0.01, backend="cpu")),
                       ("--cuckoo", lambda: gbf.CuckooFilter(10_000, 0.01, backend="cpu"))):
        a, b = make(), make()
        a.add(a_keys)
        b.add(b_keys)
        for name, f in (("a", a), ("b", b)):
            f.save(tmp_path / f"{name}.gbf")
        ops = ("merge", "intersect") if kind == "--counting" else ("merge",)
        for op in ops:
            run_cli(op, tmp_path / "a.gbf", tmp_path / "b.gbf", "-o", tmp_path / "c.gbf", "-q")
            expected = a.copy()
            getattr(expected, op)(b)
            got = type(a).load(tmp_path / "c.gbf")
            if kind == "--counting":
                assert np.array_equal(got.counters(), expected.counters()), op
            elif kind == "--cuckoo":
                assert np.array_equal(got.words(), expected.words())
                assert got.approximate_count(b_keys[:1_000]).min() >= 2  # held by both
            else:
                assert got.stats().num_levels == expected.stats().num_levels
                assert all(np.array_equal(got.level_words(i), expected.level_words(i))
                           for i in range(got.stats().num_levels))
            count = "keys_inserted" if kind == "--scaling" else "keys_added"
            assert getattr(got.stats(), count) == getattr(expected.stats(), count), (kind, op)
            assert np.array_equal(got.contains(b_keys), expected.contains(b_keys)), (kind, op)


def test_add_to_cli_file_matches_cli_add(run_cli, tmp_path, rng):
    first = rng.integers(0, 2**64 - 1, size=8_000, dtype=np.uint64)
    second = np.concatenate([first[:1_000], rng.integers(0, 2**64 - 1, size=7_000, dtype=np.uint64)])
    first.tofile(tmp_path / "first.u64")
    second.tofile(tmp_path / "second.u64")
    run_cli("build", tmp_path / "first.u64", "-o", tmp_path / "a.gbf", "--capacity", 16_000, "-q")
    before = cli_answers(run_cli, tmp_path / "a.gbf", tmp_path / "second.u64", tmp_path)

    f = gbf.load(tmp_path / "a.gbf")
    is_new = f.add_new(second)
    run_cli("add", tmp_path / "a.gbf", tmp_path / "second.u64", "-q")
    after_cli = gbf.load(tmp_path / "a.gbf")
    assert np.array_equal(f.words(), after_cli.words())
    assert f.stats().keys_added == after_cli.stats().keys_added == 16_000
    assert f.contains(first).all() and f.contains(second).all()
    # A key the CLI found before the batch is never new; add_new's new keys were absent before.
    assert not (is_new & before).any()
    assert is_new[:1_000].sum() == 0
    assert is_new.sum() <= (~before).sum()


@pytest.mark.parametrize("op", ["merge", "intersect"])
def test_merge_and_intersect_match_cli(run_cli, tmp_path, rng, op):
    a_keys = rng.integers(0, 2**64 - 1, size=6_000, dtype=np.uint64)
    b_keys = np.concatenate([a_keys[:2_000], rng.integers(0, 2**64 - 1, size=4_000, dtype=np.uint64)])
    a_keys.tofile(tmp_path / "a.u64")
    b_keys.tofile(tmp_path / "b.u64")
    for name in "ab":
        run_cli("build", tmp_path / f"{name}.u64", "-o", tmp_path / f"{name}.gbf", "--capacity", 10_000, "-q")
    run_cli(op, tmp_path / "a.gbf", tmp_path / "b.gbf", "-o", tmp_path / "c.gbf", "-q")

    a, b = gbf.load(tmp_path / "a.gbf"), gbf.load(tmp_path / "b.gbf")
    combined = (a | b) if op == "merge" else (a & b)
    assert np.array_equal(combined.words(), gbf.load(tmp_path / "c.gbf").words())
    in_place = gbf.load(tmp_path / "a.gbf")
    getattr(in_place, op)(b)
    assert np.array_equal(in_place.words(), combined.words())
    if op == "merge":
        assert combined.contains(a_keys).all() and combined.contains(b_keys).all()
    else:
        assert combined.contains(a_keys[:2_000]).all()


def test_clear_matches_cli_create(run_cli, tmp_path, rng):
    run_cli("create", "--capacity", 50_000, "--fpp", 0.01, "-o", tmp_path / "empty.gbf", "-q")
    f = gbf.Filter(50_000, 0.01)
    f.add(rng.integers(0, 2**64 - 1, size=10_000, dtype=np.uint64))
    f.clear()
    empty = gbf.load(tmp_path / "empty.gbf")
    assert np.array_equal(f.words(), empty.words())
    assert f.stats().keys_added == 0 and f.stats().bits_set == 0


@pytest.mark.parametrize("header", [True, False])
def test_parquet_sbbf_both_ways(run_cli, tmp_path, rng, header):
    keys = rng.integers(0, 2**64 - 1, size=10_000, dtype=np.uint64)
    probe = rng.integers(0, 2**64 - 1, size=10_000, dtype=np.uint64)
    keys.tofile(tmp_path / "keys.u64")
    probe.tofile(tmp_path / "probe.u64")
    no_header = [] if header else ["--no-header"]
    run_cli("build", tmp_path / "keys.u64", "--parquet-compatible", "--format", "parquet-sbbf", *no_header,
            "-o", tmp_path / "cli.sbbf", "-q")
    f = gbf.Filter(10_000, 0.01, layout="parquet")
    f.add(keys)
    cli_filter = gbf.load(tmp_path / "cli.sbbf", "parquet-sbbf", header=header)
    assert np.array_equal(cli_filter.words(), f.words())
    assert f.contains(keys).all()
    assert (tmp_path / "cli.sbbf").read_bytes() == f.to_bytes("parquet-sbbf", header=header)

    f.save(tmp_path / "py.sbbf", "parquet-sbbf", header=header)
    answers = cli_answers(run_cli, tmp_path / "py.sbbf", tmp_path / "probe.u64", tmp_path, "--format",
                          "parquet-sbbf", *no_header)
    assert np.array_equal(answers, f.contains(probe))


def test_text_keys_match_cli_from_lists_and_arrow(run_cli, tmp_path):
    names = [f"user-{i}" for i in range(3_000)] + ["", "ünïcode ✓"]
    probe = names[::7] + [f"other-{i}" for i in range(3_000)]
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    (tmp_path / "probe.txt").write_text("\n".join(probe) + "\n", encoding="utf-8")
    run_cli("build", tmp_path / "names.txt", "-o", tmp_path / "cli.gbf", "--capacity", 3_002, "-q")
    expected = cli_answers(run_cli, tmp_path / "cli.gbf", tmp_path / "probe.txt", tmp_path)

    for keys in (names, pa.array(names), pa.array(names, type=pa.large_string()),
                 pa.array([n.encode() for n in names], type=pa.binary())):
        f = gbf.Filter(3_002, 0.01)
        f.add(keys)
        assert np.array_equal(f.words(), gbf.load(tmp_path / "cli.gbf").words())
        assert f.contains(keys).all()
    for queries in (probe, pa.array(probe), pa.chunked_array([probe[:100], probe[100:]]),
                    np.array(probe, dtype=object)):
        assert np.array_equal(f.contains(queries), expected)
    rows = run_cli("query", tmp_path / "cli.gbf", tmp_path / "probe.txt", "--select", "--row-numbers", "-q").stdout
    assert f.select(pa.array(probe)).tolist() == [int(r) for r in rows.split()]


def test_info_names_no_target_fpp_for_a_filter_that_recorded_none(run_cli, tmp_path):
    # An exact layout given fpp=None records 0 (unknown); info's over-capacity warning
    # said "target 0%".
    f = gbf.Filter(5, None, layout=gbf.Layout(8, 8, 0, 4), backend="cpu")
    f.add(np.arange(1_000, dtype=np.int64))
    f.save(tmp_path / "unknown.gbf")
    text = run_cli("info", tmp_path / "unknown.gbf").stdout
    assert "WARNING: over capacity" in text and "(target unknown)" in text and "target 0%" not in text
    g = gbf.Filter(5, 0.01, layout=gbf.Layout(8, 8, 0, 4), backend="cpu")
    g.add(np.arange(1_000, dtype=np.int64))
    g.save(tmp_path / "known.gbf")
    assert "(target 1%)" in run_cli("info", tmp_path / "known.gbf").stdout
