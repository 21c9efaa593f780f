#!/usr/bin/env python3
"""`gbf parquet` against DuckDB on Parquet files DuckDB writes.

Writes fixture files with DuckDB (INT32, INT64 and VARCHAR columns over
several row groups, dictionary-encoded so that DuckDB stores a Bloom filter per
column chunk; a high-cardinality column that gets none), checks that the
filters are there, and then, for every column:

  * every value present in the files and `--absent` values absent from them
    are pruned by `gbf parquet --per-key`; for each (file, value) the row
    groups gbf says may hold the value must be exactly those for which
    DuckDB's parquet_bloom_probe(file, column, value) does not exclude it;
  * no false negatives: each row group that holds a value (read back with
    DuckDB's file_row_number) is among gbf's answers for it;
  * the row-group table (no --per-key) is the union of the per-key answers.

Then: integer keys outside INT32 do not alias (2^32 + v is not v), extracted
filters are byte for byte the file's bitsets, the union of a column's filters
finds every value, and a column without filters fails with a clear message
(and is kept, unpruned, under --allow-missing).

usage: check_duckdb.py GBF [--absent N] [--seed S] [--workdir DIR]
Exit 0 on success, 1 on a mismatch, 77 (CTest: skipped) without duckdb.
"""
import argparse
import fcntl
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import duckdb
except ImportError:
    print("check_duckdb.py: the duckdb Python package is missing (scripts/setup.sh installs it)")
    sys.exit(77)

COLUMNS = {"i32": "int", "i64": "int", "s": "str"}

# File name -> (rows, ROW_GROUP_SIZE, SELECT producing the columns from range(rows) t(i)).
# Each row group holds 256 (f1) or 256 (f2) distinct values per column; f2's values
# overlap f1's in part, so some values are in both files.
FIXTURES = {
    "f1.parquet": (16384, 4096, "i // 16"),
    "f2.parquet": (6144, 2048, "i // 8 + 700"),
}


def select_sql(rows, base):
    return f"""SELECT ({base} - 300)::INTEGER AS i32,
                      (({base}) * 1000003 - 1099511627776)::BIGINT AS i64,
                      'key-' || ((({base}) * 7919) % 100003)::VARCHAR AS s,
                      i::BIGINT AS unique_id
               FROM range({rows}) t(i)"""


def literal(kind, v):
    return str(v) if kind == "int" else "'" + v + "'"


def write_fixtures(con, workdir):
    paths = []
    for name, (rows, group, base) in FIXTURES.items():
        path = os.path.join(workdir, name)
        con.execute(f"COPY ({select_sql(rows, base)}) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {group})")
        paths.append(path)
    return paths


def check_filters_present(con, paths, failures):
    for path in paths:
        rows = con.execute(
            "SELECT row_group_id, path_in_schema, bloom_filter_offset FROM parquet_metadata(?)", [path]).fetchall()
        groups = {r[0] for r in rows}
        if len(groups) < 3:
            failures.append(f"{path}: only {len(groups)} row groups; the fixture needs several")
        for rg, column, offset in rows:
            if column in COLUMNS and offset is None:
                failures.append(f"{path}: row group {rg} column {column} has no Bloom filter")
            if column == "unique_id" and offset is not None:
                failures.append(f"{path}: row group {rg}: the high-cardinality column has a filter")
        print(f"fixture {os.path.basename(path)}: {len(groups)} row groups, filters on {sorted(COLUMNS)}")


def membership(con, path, column):
    """value -> set of row groups holding it (ground truth, from row numbers)."""
    sizes = con.execute("SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata(?) ORDER BY 1",
                        [path]).fetchall()
    starts = []
    first = 0
    for _, n in sizes:
        starts.append(first)
        first += n
    found = {}
    for value, row in con.execute(f"SELECT {column}, file_row_number FROM read_parquet(?, file_row_number=true)",
                                  [path]).fetchall():
        rg = max(g for g, s in enumerate(starts) if s <= row)
        found.setdefault(value, set()).add(rg)
    return found


def absent_values(kind, present, count, rng, column):
    out, seen = [], set(present)
    while len(out) < count:
        if kind == "str":
            v = "absent-%016x" % rng.getrandbits(64)
        elif column == "i32":
            v = rng.randrange(-(1 << 31), 1 << 31)
        else:
            v = rng.randrange(-(1 << 63), 1 << 63)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def gbf_per_key(gbf, paths, column, values, workdir):
    """value -> set((file, row group)) from `gbf parquet --per-key`."""
    keys = os.path.join(workdir, f"keys-{column}.txt")
    with open(keys, "w") as f:
        for v in values:
            f.write(f"{v}\n")
    out = subprocess.run([gbf, "parquet", *paths, "--column", column, "--keys", keys, "--per-key", "-q",
                          "--backend", "cpu"], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert lines[0] == "key\trow_groups", lines[0]
    answers = {}
    for line, v in zip(lines[1:], values):
        key, _, groups = line.rpartition("\t")
        assert key == str(v), (key, v)
        pairs = set()
        for item in filter(None, groups.split(",")):
            file, _, rg = item.rpartition(":")
            pairs.add((file, int(rg)))
        answers[v] = pairs
    if len(lines) - 1 != len(values):
        raise SystemExit(f"gbf printed {len(lines) - 1} keys for {len(values)}")
    return answers


def gbf_table(gbf, paths, column, values, workdir):
    keys = os.path.join(workdir, f"keys-{column}.txt")
    out = subprocess.run([gbf, "parquet", *paths, "--column", column, "--keys", keys, "-q"],
                         check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    return {(r[0], int(r[1])) for r in rows if r[4] == "yes"}


def duckdb_probe(con, paths, column, kind, values, batch=10):
    """value -> set((file, row group)) DuckDB's parquet_bloom_probe does not exclude."""
    files = "[" + ", ".join("'" + p + "'" for p in paths) + "]"
    answers = {v: set() for v in values}
    for first in range(0, len(values), batch):
        part = values[first:first + batch]
        query = " UNION ALL ".join(
            f"SELECT {i} AS k, file_name, row_group_id FROM parquet_bloom_probe({files}, '{column}', "
            f"{literal(kind, v)}) WHERE NOT bloom_filter_excludes" for i, v in enumerate(part))
        for k, file, rg in con.execute(query).fetchall():
            answers[part[k]].add((file, rg))
    return answers


def check_column(con, gbf, paths, column, kind, absent, rng, workdir, failures):
    truth = {p: membership(con, p, column) for p in paths}
    present = sorted({v for p in paths for v in truth[p]}, key=str)
    values = present + absent_values(kind, present, absent, rng, column)
    t0 = time.time()
    ours = gbf_per_key(gbf, paths, column, values, workdir)
    t1 = time.time()
    theirs = duckdb_probe(con, paths, column, kind, values)
    t2 = time.time()
    mismatches = [v for v in values if ours[v] != theirs[v]]
    missed = [(v, p, g) for p in paths for v, groups in truth[p].items() for g in groups if (p, g) not in ours[v]]
    pairs = sum(len(a) for a in ours.values())
    print(f"column {column}: {len(present)} present + {len(values) - len(present)} absent values, "
          f"{pairs} (value, row group) pairs may match; gbf {t1 - t0:.1f} s, DuckDB {t2 - t1:.1f} s; "
          f"{len(mismatches)} mismatches, {len(missed)} false negatives")
    for v in mismatches[:10]:
        failures.append(f"column {column} value {v!r}: gbf {sorted(ours[v])} != DuckDB {sorted(theirs[v])}")
    for v, p, g in missed[:10]:
        failures.append(f"column {column} value {v!r} is in {p} row group {g} but gbf left it out")
    union = set().union(*ours.values())
    table = gbf_table(gbf, paths, column, values, workdir)
    if table != union:
        failures.append(f"column {column}: the row-group table {sorted(table)} is not the union "
                        f"of the per-key answers {sorted(union)}")
    return truth


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def extra_checks(con, gbf, paths, truth_s, workdir, failures):
    f1 = paths[0]
    # 2^32 + v must not alias v on an INT32 column (nor 2^63 on INT64: not a signed value).
    present = -300  # the first i32 value of f1
    keys = os.path.join(workdir, "alias.txt")
    with open(keys, "w") as f:
        f.write(f"{present}\n{present + (1 << 32)}\n{present - (1 << 32)}\n2147483648\n")
    lines = run([gbf, "parquet", f1, "--column", "i32", "--keys", keys, "--per-key", "-q"], check=True).stdout.splitlines()
    groups = [line.split("\t")[1] for line in lines[1:]]
    if not groups[0] or any(groups[1:]):
        failures.append(f"INT32 out-of-range keys: expected only {present} to match, got {lines[1:]}")
    with open(keys, "w") as f:
        f.write("9223372036854775808\n-9223372036854775809\nnot-a-number\n")
    r = run([gbf, "parquet", f1, "--column", "i64", "--keys", keys, "--per-key", "-q"])
    if r.returncode != 1 or "line 3: 'not-a-number' is not a decimal integer" not in r.stderr:
        failures.append(f"a non-integer key for an INT64 column: rc {r.returncode}, stderr {r.stderr!r}")

    # A raw .u32 / .u64 file carries no sign: keys of the column's width are its values
    # with those bytes, so negative ids written raw find the same row groups as in text.
    for column, width in (("i32", 4), ("i64", 8)):
        negative = con.execute(f"SELECT min({column}) FROM read_parquet(?)", [f1]).fetchone()[0]
        assert negative < 0, f"the fixture's {column} column has no negative value"
        text_keys = os.path.join(workdir, f"negative-{column}.txt")
        raw_keys = os.path.join(workdir, f"negative-{column}.u{width * 8}")
        with open(text_keys, "w") as f:
            f.write(f"{negative}\n")
        with open(raw_keys, "wb") as f:
            f.write(negative.to_bytes(width, "little", signed=True))
        answers = [run([gbf, "parquet", f1, "--column", column, "--keys", keys, "--per-key", "-q"],
                       check=True).stdout.splitlines()[1].split("\t")[1] for keys in (text_keys, raw_keys)]
        if not answers[0] or answers[1] != answers[0]:
            failures.append(f"{column} value {negative}: as text in {answers[0]!r}, "
                            f"from a raw u{width * 8} file in {answers[1]!r}")

    # Integer keys cannot probe a string column: the error names the key file and the column.
    r = run([gbf, "parquet", f1, "--column", "s", "--keys", os.path.join(workdir, "negative-i64.u64"), "-q"])
    if r.returncode != 1 or "negative-i64.u64' holds u64 integer keys, and column 's' is BYTE_ARRAY" not in r.stderr:
        failures.append(f"u64 keys for a string column: rc {r.returncode}, stderr {r.stderr!r}")

    # Extracted filters are the file's bitsets, byte for byte.
    meta = con.execute("SELECT row_group_id, path_in_schema, bloom_filter_offset, bloom_filter_length "
                       "FROM parquet_metadata(?) WHERE path_in_schema IN ('i32', 'i64', 's')", [f1]).fetchall()
    data = open(f1, "rb").read()
    for rg, column, offset, length in meta:
        out = os.path.join(workdir, f"extract-{column}-{rg}.sbbf")
        run([gbf, "parquet", f1, "--column", column, "--extract", "--row-group", str(rg), "-o", out,
             "--format", "parquet-sbbf", "--no-header", "-q"], check=True)
        bitset = open(out, "rb").read()
        if data[offset + length - len(bitset):offset + length] != bitset or len(bitset) >= length:
            failures.append(f"extracted filter of {column} row group {rg} differs from the file's bitset")

    # The union of a string column's filters finds every value of the file.
    union = os.path.join(workdir, "union.gbf")
    r = run([gbf, "parquet", f1, "--column", "s", "--extract", "-o", union], check=True)
    if "union of the filters of its" not in r.stderr:
        failures.append(f"--extract without --row-group: {r.stderr!r}")
    keys = os.path.join(workdir, "present-s.txt")
    with open(keys, "w") as f:
        for v in truth_s[f1]:
            f.write(v + "\n")
    count = run([gbf, "query", union, keys, "--count", "-q", "--backend", "cpu"], check=True).stdout.strip()
    if count != str(len(truth_s[f1])):
        failures.append(f"the union filter finds {count} of {len(truth_s[f1])} present values")

    # --extract never writes over its input (it once replaced the Parquet file by
    # the filter), and waits for or refuses another writer's lock like every writer.
    before = open(f1, "rb").read()
    r = run([gbf, "parquet", f1, "--column", "s", "--extract", "-o", f1])
    if r.returncode != 2 or "refusing to overwrite an input" not in r.stderr or open(f1, "rb").read() != before:
        failures.append(f"--extract -o over its input: rc {r.returncode}, stderr {r.stderr!r}")
    locked = os.path.join(workdir, "locked.gbf")
    with open(os.path.join(workdir, ".locked.gbf.gbf-lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = run([gbf, "parquet", f1, "--column", "s", "--extract", "-o", locked])
        if r.returncode != 1 or "locked by another gbf process" not in r.stderr or os.path.exists(locked):
            failures.append(f"--extract under another writer's lock: rc {r.returncode}, stderr {r.stderr!r}")
    # A FIFO is refused at once (it used to block in open() waiting for a writer).
    fifo = os.path.join(workdir, "pipe.parquet")
    os.mkfifo(fifo)
    r = run([gbf, "parquet", fifo, "--column", "s", "--keys", keys], timeout=20)
    if r.returncode != 1 or "not a regular file (a FIFO)" not in r.stderr:
        failures.append(f"a FIFO as the Parquet file: rc {r.returncode}, stderr {r.stderr!r}")
    r = run([gbf, "parquet", f1, "--column", "s", "--keys", keys, "--threads", "1025"])
    if r.returncode != 2 or "--threads: 1025 is out of range (0 to 1024)" not in r.stderr:
        failures.append(f"--threads past 1024: rc {r.returncode}, stderr {r.stderr!r}")

    # A column without filters.
    r = run([gbf, "parquet", f1, "--column", "unique_id", "--keys", keys])
    if r.returncode != 1 or "has no Bloom filter in any of its" not in r.stderr:
        failures.append(f"column without filters: rc {r.returncode}, stderr {r.stderr!r}")
    with open(keys, "w") as f:
        f.write("1\n")
    r = run([gbf, "parquet", f1, "--column", "unique_id", "--keys", keys, "--allow-missing"])
    if r.returncode != 0 or r.stdout.count("\tyes") != 4:
        failures.append(f"--allow-missing: rc {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}")
    r = run([gbf, "parquet", f1, "--column", "nope", "--keys", keys])
    if r.returncode != 1 or "no column 'nope'" not in r.stderr or "i32 (INT32)" not in r.stderr:
        failures.append(f"unknown column: rc {r.returncode}, stderr {r.stderr!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gbf")
    ap.add_argument("--absent", type=int, default=100000, help="absent values probed per column")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="keep the fixtures here (default: a temporary directory, removed)")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="gbf-parquet-")
    os.makedirs(workdir, exist_ok=True)
    rng = random.Random(args.seed)
    failures = []
    try:
        con = duckdb.connect()
        print(f"duckdb {duckdb.__version__}")
        paths = write_fixtures(con, workdir)
        check_filters_present(con, paths, failures)
        truth = {}
        for column, kind in COLUMNS.items():
            truth[column] = check_column(con, args.gbf, paths, column, kind, args.absent, rng, workdir, failures)
        extra_checks(con, args.gbf, paths, truth["s"], workdir, failures)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
