"""gbf.parquet: the Bloom filters Parquet writers store per column chunk, read straight out
of .parquet files, and row-group pruning for a batch of keys over many files.

    import gbf.parquet as pq
    pq.columns("f1.parquet")                       # [Column(path='i32', type='INT32', ...), ...]
    groups = pq.column_filters("f1.parquet", "user_id")
    groups[0].filter.contains(ids)                 # a gbf.Filter: ids at the column's width
    r = pq.prune(["f1.parquet", "f2.parquet"], "user_id", ids, per_key=True)
    r.may_hold                                     # uint8 per row group: 0 = no key is in it
    r.row_groups_of(i)                             # the row groups key i may be in
    pq.extract_filter("f1.parquet", "user_id").save("ids.sbbf", format="parquet-sbbf")

Keys are hashed the way Parquet hashes the column's values (its PLAIN encoding, xxh64 seed
0): integers by value, converted to the column's width (an INT32 column hashes 4 bytes, so a
key it cannot hold, e.g. 2**32 + 5, is in no row group), strings as their bytes. Integer
keys come from NumPy arrays (optionally with a mask, True = null, as in numpy.ma), numpy
masked arrays, Arrow integer arrays (nulls skipped), lists of ints; string keys from Arrow
string / binary arrays (read in place) or lists of str / bytes. See docs/parquet.md and
docs/python.md.

Errors: OSError (the file cannot be read), gbf.FormatError (not Parquet, a malformed footer
or filter, an encrypted file), gbf.InvalidArgument (no such column, listing the file's
columns; a column without Bloom filters, naming the row groups, unless allow_missing; a
column type gbf cannot hash; string keys for an integer column or the reverse).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _core
from ._errors import InvalidArgument
from ._filter import Filter, _placement

#: A Parquet file: a path, or the bytes of the whole file (bytes, bytearray, memoryview, ...).
Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


class Column(NamedTuple):
    """A leaf column of a Parquet file's schema."""

    path: str          #: dotted path from the root ("user.id"); a top-level column: its name
    type: str          #: Parquet physical type: "INT32", "INT64", "BYTE_ARRAY", ...
    is_unsigned: bool  #: annotated UINT_8..UINT_64 or INTEGER(isSigned=false)
    type_length: int   #: bytes of a FIXED_LEN_BYTE_ARRAY value, else 0


class RowGroupFilter(NamedTuple):
    """One row group's Bloom filter for a column (column_filters)."""

    row_group: int              #: index of the row group in its file
    num_rows: int               #: rows in the row group
    column_bytes: int           #: the column chunk's compressed bytes: what a reader skips
    filter: Optional[Filter]    #: the SBBF as a gbf.Filter; None only under allow_missing


class RowGroup(NamedTuple):
    """A row group as a Pruner numbers it (Pruner.row_groups[g])."""

    file: int          #: index into Pruner.files
    row_group: int     #: index in that file
    num_rows: int
    column_bytes: int
    has_filter: bool   #: False: no Bloom filter (allow_missing), so it may hold any key


@dataclass(frozen=True)
class PruneResult:
    """What Pruner.prune found. Row groups are numbered across the files (Pruner.row_groups).

    may_hold:    uint8 per row group: 1 when some non-null key may be in it (a row group
                 without a filter may hold any key), 0 when none is: it can be skipped.
    key_offsets: per_key only (else None): uint64, n + 1 entries; key i may be in row
                 groups row_groups[key_offsets[i]:key_offsets[i + 1]] (ascending; a null
                 key has none).
    row_groups:  per_key only (else None): uint32 row-group numbers.
    num_keys:    keys in the batch (nulls included).
    """

    may_hold: np.ndarray
    key_offsets: Optional[np.ndarray]
    row_groups: Optional[np.ndarray]
    num_keys: int

    def row_groups_of(self, key: int) -> np.ndarray:
        """The row groups key number `key` may be in (needs per_key=True)."""
        if self.key_offsets is None or self.row_groups is None:
            raise ValueError("prune(..., per_key=True) lists each key's row groups; this result has none")
        keys = len(self.key_offsets) - 1
        if not 0 <= key < keys:  # a negative index would read another key's slice
            raise IndexError(f"row_groups_of: key number {key} is out of range (the batch has {keys} keys)")
        return self.row_groups[int(self.key_offsets[key]):int(self.key_offsets[key + 1])]


def _source(source: Any) -> Any:
    if isinstance(source, (str, os.PathLike)):
        return os.fsdecode(os.fspath(source))
    try:
        memoryview(source)  # the file's bytes: anything with the buffer protocol
    except TypeError:
        raise TypeError(f"a Parquet source is a path or the file's bytes, not {type(source).__name__}") from None
    return source


def columns(source: Source) -> List[Column]:
    """The leaf columns of a Parquet file (a path, or the file's bytes), in schema order
    (OSError, gbf.FormatError)."""
    return [Column(*c) for c in _core._parquet_columns(_source(source))]


def column_filters(source: Source, column: str, allow_missing: bool = False, *, backend: str = "cpu",
                   threads: int = 0) -> List[RowGroupFilter]:
    """The Bloom filters of `column` (a name or dotted path) in every row group of a Parquet
    file (a path, or the file's bytes), in file order: one RowGroupFilter (row_group,
    num_rows, column_bytes, filter) each. The filters are ordinary gbf.Filters of Parquet's
    layout (8/8/0) on `backend` (default the CPU): probe, merge or save them. A Filter
    hashes a key at its dtype's width, so probe an INT32 column's filter with int32 keys
    (int64 keys, or a list of ints, hash 8 bytes: false negatives); prune() converts keys
    to the column's width itself.

    allow_missing: False: a row group without a filter for the column raises
    gbf.InvalidArgument naming it; True: it comes back with filter=None.
    """
    if not isinstance(column, str):
        raise TypeError(f"column must be a str (a column's dotted path), not {type(column).__name__}")
    _, _, groups = _core._parquet_column_filters(_source(source), column, allow_missing, *_placement(backend, threads))
    return [RowGroupFilter(g, rows, size, None if made is None else Filter._adopt(made))
            for g, rows, size, made in groups]


def _keys_and_validity(keys: Any, mask: Optional[Any]):
    """Keys as the extension reads them, plus an Arrow bitmap of the valid keys (or None)."""
    if isinstance(keys, np.ma.MaskedArray):
        if mask is not None:
            raise ValueError("give either a masked array or mask=, not both")
        mask = np.ma.getmaskarray(keys)
        keys = np.ma.getdata(keys)
    if mask is None:
        return keys, None
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.ndim != 1:
        raise TypeError(f"mask must be a 1-D bool array (True = null), got {mask.dtype} of shape {mask.shape}")
    if not isinstance(keys, np.ndarray):
        keys = np.asarray(keys)
    if mask.shape != keys.shape:
        raise ValueError(f"mask has {mask.size} entries for {keys.size} keys")
    return keys, np.packbits(~mask, bitorder="little")


class Pruner(_core._PrunerBase):
    """The Bloom filters of one column over many Parquet files, packed for probing.

    Pruner(files, column, *, allow_missing=False, backend="auto", threads=0)

    files: paths or whole files' bytes (the row groups are numbered across them in order).
    column: the column's name or dotted path; every file must have it with the same type.
    allow_missing: keep row groups without a filter (never pruned) instead of raising.
    backend: "auto" (the GPU when one is usable, else the CPU), "cpu" or "gpu": where
        prune() runs (CPU: threads over keys; GPU: one launch over all (key, filter) pairs).
    threads: CPU threads, 0 = all.

    Build it once, prune as many batches as you like.
    """

    def __init__(self, files: Sequence[Source], column: str, *, allow_missing: bool = False,
                 backend: str = "auto", threads: int = 0) -> None:
        if isinstance(files, (str, bytes, os.PathLike)):
            files = [files]
        if not isinstance(column, str):
            raise TypeError(f"column must be a str (a column's dotted path), not {type(column).__name__}")
        super().__init__([_source(f) for f in files], column, allow_missing, *_placement(backend, threads))
        self.row_groups: List[RowGroup] = [RowGroup(*r) for r in self._row_groups()]

    @property
    def column_info(self) -> Column:
        """The column, as the first file describes it."""
        return Column(*self.column)

    def prune(self, keys: Any, per_key: bool = False, *, mask: Optional[Any] = None) -> PruneResult:
        """Which row groups may hold some of `keys` (and, with per_key, which each key may be
        in). mask: for NumPy keys, a bool array, True where the key is null (as numpy.ma);
        null keys are in no row group. See the module's docstring for keys and errors."""
        keys, validity = _keys_and_validity(keys, mask)
        may_hold, key_offsets, row_groups, n = self._prune(keys, validity, per_key)
        return PruneResult(may_hold, key_offsets, row_groups, n)

    def __len__(self) -> int:
        """Row groups over all files."""
        return len(self.row_groups)

    def __repr__(self) -> str:
        c = self.column_info
        return (f"<gbf.parquet.Pruner on {self.backend}: column {c.path!r} ({c.type}), "
                f"{len(self.row_groups)} row groups in {len(self.files)} files>")


def prune(files: Sequence[Source], column: str, keys: Any, per_key: bool = False, *,
          mask: Optional[Any] = None, allow_missing: bool = False, backend: str = "auto",
          threads: int = 0) -> PruneResult:
    """Pruner(files, column, ...).prune(keys, per_key, mask=mask): which row groups of which
    files may hold the keys. For many batches against the same files, keep a Pruner."""
    return Pruner(files, column, allow_missing=allow_missing, backend=backend,
                  threads=threads).prune(keys, per_key, mask=mask)


def extract_filter(source: Source, column: str, row_group: Optional[int] = None, *, backend: str = "cpu",
                   threads: int = 0) -> Filter:
    """A column's Bloom filter out of a Parquet file (a path or its bytes) as one gbf.Filter,
    as `gbf parquet FILE --column C --extract` writes it: row group `row_group`'s filter, or
    (None) the union (OR) of every row group's filter, which holds every value of the
    column and needs all of them present and of one size. Save it with Filter.save(path,
    format="gbf" or "parquet-sbbf"). gbf.InvalidArgument when the row group does not exist
    or has no filter, when some row groups have none, or when their sizes differ (naming
    them); the errors of column_filters otherwise."""
    groups = column_filters(source, column, allow_missing=True, backend=backend, threads=threads)
    what = f"column {column!r} of {_name(source)}"
    if not groups:
        raise InvalidArgument(f"{what}: the file has no row groups")
    if row_group is not None:
        if not 0 <= row_group < len(groups):
            raise InvalidArgument(f"row_group={row_group}: {_name(source)} has {len(groups)} row groups "
                                  f"(0 to {len(groups) - 1})")
        chosen = groups[row_group].filter
        if chosen is None:
            raise InvalidArgument(f"{what}: row group {row_group} has no Bloom filter")
        return chosen
    filters = [g.filter for g in groups if g.filter is not None]
    if len(filters) < len(groups):
        missing = [g.row_group for g in groups if g.filter is None]
        raise InvalidArgument(f"{what}: row groups {', '.join(map(str, missing))} have no Bloom filter, so "
                              "there is no union of all; pass row_group= for one that has")
    sizes = {f.layout.size_bytes for f in filters}
    if len(sizes) > 1:
        listed = ", ".join(f"{g.row_group}: {f.layout.size_bytes} bytes" for g, f in zip(groups, filters))
        raise InvalidArgument(f"{what}: the row groups' filters differ in size ({listed}), so they have no "
                              "union; pass row_group= to extract one")
    union = filters[0]
    for f in filters[1:]:
        union.merge(f)
    return union


def _name(source: Any) -> str:
    return repr(os.fsdecode(os.fspath(source))) if isinstance(source, (str, os.PathLike)) else "the Parquet bytes"


__all__ = ["Column", "RowGroupFilter", "RowGroup", "PruneResult", "Pruner", "columns", "column_filters",
           "prune", "extract_filter"]
