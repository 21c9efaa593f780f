"""gbf.dask: gbf filters built and probed on a Dask cluster, the way Spark runs runtime
Bloom-filter joins (docs/distributed.md).

    import gbf.dask as gd
    bf = gd.build_filter(build["user_id"], fpp=0.01)      # one filter from every partition
    small = gd.prefilter(probe, "user_id", bf)            # lazy: rows that may match
    joined = gd.semi_join(probe, build, on="user_id")     # prefilter, then dd.merge

build_filter sizes one layout on the client (capacity given, or Dask's HyperLogLog
estimate of the distinct keys), computes each partition's bits in exactly that layout on
the workers, and ORs them with a tree of merges (split_every at a time): OR is exact,
associative, commutative and idempotent, so the result is bit for bit the filter of all
keys built on one machine, whatever the partitioning, the order or a retried task. A
partition's bits travel sparse (only its nonzero blocks) when that is at most half their
dense size, as it is with many partitions: a partition of n keys touches at most n blocks,
and one small enough that n blocks would be sparse hashes its keys straight into sparse
bits, never holding a filter of the layout's size; merges of sparse bits stay sparse
while their union is.

Keys are hashed the same way on both sides, whatever the column's dtype: integers (any
signed width as int64, any unsigned width as uint64: 8 little-endian bytes, so an int32
build column matches an int64 probe column by value) and strings / bytes (UTF-8 bytes, via
Arrow: object, string, string[pyarrow] and ArrowDtype columns). A filter made elsewhere
that hashed 32-bit integers as 4 bytes (a Parquet INT32 column's, gbf.Filter.add of an
int32 array) is probed with int_keys="column" (integers at the column's own width).
Nulls are never added;
prefilter keeps rows whose key is null (pandas' merge pairs nulls with nulls, so dropping
them could change a join). Other dtypes (float, bool, datetime) raise TypeError.

Filters travel as their native bytes (pickle: layout, bits, capacity, fpp, keys added;
checked on load), and are rebuilt on the backend they were asked for: backend="auto"
makes each worker's filters on its GPU when it has one.

Needs dask[dataframe]; prefilter broadcasts through dask.distributed when a Client is
active (client.scatter(..., broadcast=True): once per worker), else the filter is one
shared key of the task graph.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.dataframe as dd
    from dask.delayed import Delayed
    import pandas as pd
    import pyarrow as pa
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError(f"gbf.dask needs dask[dataframe], pandas and pyarrow ({e}); "
                      "install them with `pip install ./python[dask]`") from e

from . import _core
from ._block_bits import unite_blocks
from ._errors import InvalidArgument, LayoutMismatch
from ._filter import Filter, Layout, _capacity, _count, size_for
from ._kinds import CountingFilter, CuckooFilter, ScalingFilter

#: Head-room on Dask's distinct-count estimate (HyperLogLog, standard error about 1%):
#: an under-estimate would fill the filter past its capacity and raise its FPR.
ESTIMATE_MARGIN = 1.05


# --- Keys ---------------------------------------------------------------------------------

#: How integer keys are hashed (keys_of's int_keys): "int64" as 8 bytes whatever the
#: column's width (what build_filter adds), "column" at the column's own width (4 bytes up
#: to 32 bits, 8 beyond: as gbf.Filter.add hashes a NumPy array, and as Parquet hashes
#: INT32 / INT64 columns).
INT_KEYS = ("int64", "column")


def _check_int_keys(int_keys: str) -> None:
    if int_keys not in INT_KEYS:
        raise ValueError(f"int_keys must be one of {INT_KEYS}, got {int_keys!r}")


def keys_of(values: Any, int_keys: str = "int64") -> Any:
    """The host keys of a partition's key column (pandas Series / Index, NumPy array, or
    anything with to_arrow(), e.g. Polars or cuDF) in the form gbf hashes identically on
    the build and probe sides: NumPy integers (int64 / uint64, or with int_keys="column"
    int32 / uint32 for columns of at most 32 bits), or an Arrow integer / string / binary
    array (nulls kept as nulls). TypeError for float, bool, datetime and mixed columns."""
    _check_int_keys(int_keys)
    if isinstance(values, (pd.Series, pd.Index)):
        dtype = values.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "iu":
            return _widen(values.to_numpy(), int_keys)
        if isinstance(dtype, np.dtype) and dtype.kind not in "OSU":
            raise _bad_dtype(dtype)
        array = _arrow_of(values, from_pandas=True)
    elif isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"key arrays must be 1-D, got {values.ndim} dimensions")
        if values.dtype.kind in "iu":
            return _widen(values, int_keys)
        if values.dtype.kind not in "OSU":
            raise _bad_dtype(values.dtype)
        array = _arrow_of(values)
    elif hasattr(values, "to_arrow"):
        array = values.to_arrow()
    else:
        raise TypeError(f"key column of type {type(values).__name__}: expected a pandas Series, a NumPy "
                        "array or an object with to_arrow()")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    if pa.types.is_dictionary(t):
        array, t = array.dictionary_decode(), t.value_type
    if pa.types.is_integer(t):
        narrow = int_keys == "column" and t.bit_width <= 32
        if pa.types.is_signed_integer(t):
            return array.cast(pa.int32() if narrow else pa.int64())
        return array.cast(pa.uint32() if narrow else pa.uint64())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t):
        return array
    if pa.types.is_null(t):  # every key null: nothing to add, nothing found
        return pa.array([], pa.int64()) if len(array) == 0 else pa.nulls(len(array), pa.int64())
    raise _bad_dtype(t)


def _arrow_of(values: Any, **options: Any) -> Any:
    """pa.array(values) of an object column; TypeError (as for other unsupported columns)
    when its objects are of mixed kinds or do not fit an Arrow type."""
    try:
        return pa.array(values, **options)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise TypeError(f"key column of objects gbf.dask cannot read as one key type ({e}): give "
                        "integers, or strings / bytes, not a mix") from e


def _widen(values: np.ndarray, int_keys: str) -> np.ndarray:
    if int_keys == "column" and values.dtype.itemsize <= 4:
        return values.astype(np.int32 if values.dtype.kind == "i" else np.uint32, copy=False)
    return values.astype(np.int64 if values.dtype.kind == "i" else np.uint64, copy=False)


def _bad_dtype(dtype: Any) -> TypeError:
    return TypeError(f"key column of dtype {dtype}: gbf.dask hashes integers (as 8 bytes) and strings / "
                     "bytes; convert other types first (e.g. datetimes with .astype('int64'))")


# --- Building -----------------------------------------------------------------------------

def _filled_filter(part: Any, column: Optional[str], shape: Layout, capacity: Optional[int], fpp: Optional[float],
                   backend: str, int_keys: str) -> tuple:
    """One partition's filter, of exactly `shape` (so that all partitions' filters merge),
    and the number of keys it added (nulls are not), which stats() would popcount for."""
    f = Filter(capacity, fpp, layout=shape, backend=backend)
    values = part if column is None else part[column]
    if not len(values):
        return f, 0
    keys = keys_of(values, int_keys)
    f.add(keys)
    return f, len(keys) - (keys.null_count if isinstance(keys, pa.Array) else 0)



def merge_filters(filters: Sequence[Filter]) -> Filter:
    """The OR of `filters` (all of one layout) as a new filter; the inputs are unchanged, so a
    task Dask retries computes the same bits. gbf.LayoutMismatch names the layouts when
    they differ; ValueError for an empty list."""
    if not filters:
        raise ValueError("merge_filters needs at least one filter")
    out = filters[0].copy()
    for f in filters[1:]:
        if f.backend != out.backend:
            f = f.copy(out.backend)
        out.merge(f)
    return out


@dataclass(frozen=True, eq=False)  # no == / hash over NumPy arrays
class _Bits:
    """A filter's bits on their way through build_filter's OR-reduce, dense or sparse, with
    what the result records.

    dense:  `blocks` is None and `words` is every word (uint32, layout.num_bits // 32).
    sparse: `blocks` holds the ascending indices (uint32) of the blocks with a bit set and
            `words` their rows as _block_rows lays them out (len(blocks) rows).

    A partition of n keys sets bits in at most n of the filter's B blocks (about
    B (1 - exp(-n / B)) of them), and a sparse block costs 4 bytes of index beside its
    4 W bytes of words. Sparse is taken when it is at most half the dense size (fewer than
    W / (2 (W + 1)) of the blocks touched: a partition of less than about 1 / 40 of the
    keys at fpp 0.01, some 24 keys per 256-bit block): between that and the dense size,
    scattering the rows back costs more than the bytes it saves (python/benchmarks/
    dask_build.py, docs/distributed.md)."""

    layout: Layout
    capacity: Optional[int]
    fpp: Optional[float]
    keys_added: int
    blocks: Optional[np.ndarray]
    words: np.ndarray

    @classmethod
    def of(cls, words: np.ndarray, layout: Layout, capacity: Optional[int], fpp: Optional[float],
           keys_added: int) -> "_Bits":
        """`words` (every word of a filter of `layout`), sparse when that is at most half as big."""
        rows = _block_rows(words, layout.words_per_block)
        # A block is nonzero when the OR of its columns is (2.5x faster than rows.any(axis=1)).
        nonzero = rows[:, 0].copy()
        for column in range(1, rows.shape[1]):
            nonzero |= rows[:, column]
        touched = int(np.count_nonzero(nonzero))  # decided before any index array is made
        if 2 * touched * (4 + layout.words_per_block * 4) > words.nbytes:
            return cls(layout, capacity, fpp, keys_added, None, words)
        blocks = np.flatnonzero(nonzero).astype(np.uint32)
        return cls(layout, capacity, fpp, keys_added, blocks, rows[blocks])

    @property
    def nbytes(self) -> int:
        return self.words.nbytes + (0 if self.blocks is None else self.blocks.nbytes)

    def or_into(self, words: np.ndarray) -> None:
        """words |= these bits (`words`: every word of a filter of this layout)."""
        if self.blocks is None:
            np.bitwise_or(words, self.words, out=words)
        else:
            # The indices are distinct, so the gather-OR-scatter loses no update.
            _block_rows(words, self.layout.words_per_block)[self.blocks] |= self.words

    def dense_words(self) -> np.ndarray:
        """Every word (a new array when sparse; the dense words themselves otherwise)."""
        if self.blocks is None:
            return self.words
        words = np.zeros(self.layout.num_bits // 32, dtype=np.uint32)
        self.or_into(words)
        return words

    def to_filter(self, backend: str) -> Filter:
        """The filter of these bits on `backend`: dense words are adopted (from_words);
        sparse ones go into an empty filter block by block (Filter.merge of block bits,
        a kernel's scatter on a GPU), so no second m-byte array is made for them."""
        if self.blocks is None:
            return Filter.from_words(self.words, self.layout, capacity=self.capacity, fpp=self.fpp,
                                     keys_added=self.keys_added, backend=backend)
        f = Filter(self.capacity, self.fpp, layout=self.layout, backend=backend)
        f._merge_block_bits(self.blocks, np.ascontiguousarray(self.words).view(np.uint32), self.keys_added)
        return f


def _block_rows(words: np.ndarray, words_per_block: int) -> np.ndarray:
    """A filter's words as one row per block, in 64-bit columns where the block allows
    (half the elements for NumPy to touch): a view, not a copy."""
    if words_per_block % 2 == 0:
        return words.view(np.uint64).reshape(-1, words_per_block // 2)
    return words.reshape(-1, words_per_block)


def _partition_bits(part: Any, column: Optional[str], shape: Layout, capacity: Optional[int], fpp: Optional[float],
                    backend: str, int_keys: str = "int64") -> _Bits:
    """One partition's bits for a filter of exactly `shape` (so that all partitions merge).

    A partition of n keys touches at most n blocks: when even n blocks would be sparse
    (_Bits' rule), its bits are computed straight from the keys (gbf::block_bits, on the
    CPU whatever the backend: a hash and a radix sort by block, O(n) memory) and no
    filter of the layout's size is ever made. Otherwise a filter of `backend` adds them
    and its words are scanned."""
    values = part if column is None else part[column]
    words_per_block = shape.words_per_block
    if 2 * len(values) * _sparse_block_bytes(shape) <= shape.size_bytes:
        if not len(values):
            return _Bits(shape, capacity, fpp, 0, np.zeros(0, np.uint32), _block_rows(np.zeros(0, np.uint32),
                                                                                        words_per_block))
        blocks, words, keys_added = _core._block_bits(keys_of(values, int_keys), words_per_block,
                                                      shape.bits_per_key, shape.seed, shape._blocks())
        return _Bits(shape, capacity, fpp, keys_added, blocks, _block_rows(words, words_per_block))
    f, keys_added = _filled_filter(part, column, shape, capacity, fpp, backend, int_keys)
    words = f.words()
    del f  # the words are a copy: the filter's own m bytes go before the blocks are scanned
    return _Bits.of(words, shape, capacity, fpp, keys_added)


def _sparse_block_bytes(layout: Layout) -> int:
    """Bytes of one block in _Bits' sparse form: its 4-byte index and its words."""
    return 4 + 4 * layout.words_per_block


def _merge_bits(*parts: _Bits) -> _Bits:
    """The OR of partitions' bits (keys_added summed, as Filter.merge sums them), in the form
    _Bits.of picks; gbf.LayoutMismatch when the layouts differ (they never do in a build).

    Sparse inputs whose blocks together are at most half the dense size are united sparse
    (sorted by block, rows of one block ORed): no dense array, so a tree of small
    partitions stays O(keys) until the union itself is dense."""
    first = parts[0]
    for p in parts[1:]:
        if p.layout != first.layout:
            raise LayoutMismatch(f"cannot merge filters of different layouts: {first.layout} and {p.layout}")
    keys_added = sum(p.keys_added for p in parts)
    dense = [p for p in parts if p.blocks is None]
    sparse = [p.blocks for p in parts if p.blocks is not None]
    if not dense and 2 * sum(b.size for b in sparse) * _sparse_block_bytes(first.layout) <= \
            first.layout.size_bytes:
        blocks, rows = unite_blocks(sparse, [p.words for p in parts])
        return _Bits(first.layout, first.capacity, first.fpp, keys_added, blocks, rows)
    # Inputs are never changed (a retried task must see them as they were): the
    # accumulator is a copy of one dense input, or zeros.
    words = dense[0].words.copy() if dense else np.zeros(first.layout.num_bits // 32, dtype=np.uint32)
    for p in parts:
        if not dense or p is not dense[0]:
            p.or_into(words)
    if dense:  # a union holds at least the blocks of each input: dense stays dense
        return _Bits(first.layout, first.capacity, first.fpp, keys_added, None, words)
    return _Bits.of(words, first.layout, first.capacity, first.fpp, keys_added)


def _tree_merge(parts: List[Any], split_every: int) -> Any:
    """A tree of _merge_bits tasks over delayed _Bits: ceil(log_split_every(P)) levels."""
    while len(parts) > 1:
        parts = [dask.delayed(_merge_bits, pure=True)(*parts[i:i + split_every])
                 for i in range(0, len(parts), split_every)]
    return parts[0]


# Dask sizes what a task returns with dask.sizeof (for its memory limits, spilling, and the
# transfers it weighs when placing tasks); unregistered, a filter of any size counts as the
# few hundred bytes of its Python object. A GPU filter counts its device bytes, as Dask
# counts a CuPy array's. (Registered when gbf.dask is imported.)
@dask.sizeof.sizeof.register(Filter)
def _sizeof_filter(f: Filter) -> int:
    return int(f.layout.size_bytes)


@dask.sizeof.sizeof.register(CountingFilter)
def _sizeof_counting(f: CountingFilter) -> int:
    return int(f.layout.num_bits * f.counter_bits // 8)


@dask.sizeof.sizeof.register(CuckooFilter)
def _sizeof_cuckoo(f: CuckooFilter) -> int:
    return int(f.num_buckets * 32)  # 8 words per bucket


@dask.sizeof.sizeof.register(ScalingFilter)
def _sizeof_scaling(f: ScalingFilter) -> int:
    return int(f._size_bytes)


@dask.sizeof.sizeof.register(_Bits)
def _sizeof_bits(bits: _Bits) -> int:
    return bits.nbytes


def _partitions(data: Any, column: Optional[str]) -> tuple:
    """(delayed partitions, column inside a partition, the key column as a dask Series or
    Array for estimating its distinct count)."""
    if isinstance(data, dd.DataFrame):
        if column is None:
            raise ValueError("build_filter on a dask DataFrame needs column=")
        _check_column("build_filter", data, column)
        # The key column alone: the partitions' other columns never reach the tasks.
        keys = data[column]
        return keys.to_delayed(), None, keys
    if column is not None:
        raise ValueError("column= is for a dask DataFrame; pass the Series or Array alone")
    if isinstance(data, (dd.Series, dd.Index)):
        return data.to_delayed(), None, data
    if isinstance(data, da.Array):
        if data.ndim != 1:
            raise ValueError(f"build_filter takes a 1-D dask Array, got {data.ndim} dimensions")
        return list(data.to_delayed().ravel()), None, data
    raise TypeError(f"build_filter takes a dask Series, DataFrame (with column=) or 1-D Array, "
                    f"not {type(data).__name__}")


def _check_column(what: str, frame: Any, column: Any) -> None:
    """ValueError naming the columns when `column` is not one key column of `frame`."""
    try:
        found = column in frame.columns
    except TypeError:  # unhashable: a list of columns
        found = False
    if not found:
        raise ValueError(f"{what}: the key column must be one column of the DataFrame, got {column!r}; "
                         f"the columns are {list(frame.columns)}")


def estimate_distinct(keys: Any) -> int:
    """Dask's approximate distinct count of a dask Series or 1-D Array (HyperLogLog,
    Series.nunique_approx: one pass over the data, about 1% standard error), nulls not
    counted."""
    if isinstance(keys, da.Array):
        keys = dd.from_dask_array(keys)
    return int(keys.nunique_approx().compute())


def _build_layout(capacity: Any, fpp: Optional[float], layout: Any) -> Layout:
    """The layout gbf.Filter(capacity, fpp, layout=layout) would have, with its refusals,
    computed without making that filter (the client never holds the m bytes)."""
    target = 0.01 if fpp is None else fpp  # as gbf.Filter sizes for fpp=None
    if layout == "parquet":
        return Layout(*_core._parquet_layout(_capacity(capacity, "layout='parquet'"), target))
    shape = Layout.parse(layout) if isinstance(layout, str) else Layout() if layout is None else layout
    if not isinstance(shape, Layout):
        raise TypeError(f"layout must be None, 'parquet', 'W/K[/SEED]' or a gbf.Layout, not {type(layout).__name__}")
    if shape.num_blocks is None:
        return size_for(_capacity(capacity, "sizing"), target, shape)
    if capacity is not None:
        _count(capacity, "capacity")
    if fpp is not None and not 0 < fpp < 1:
        raise InvalidArgument(f"fpp must be in (0, 1), or None (unknown) with an explicit layout; got {fpp!r}")
    shape.expected_fpr(0)  # gbf.InvalidArgument naming what is wrong with the layout
    return shape


def build_filter(data: Any, capacity: Optional[int] = None, fpp: Optional[float] = 0.01, *, column: Optional[str] = None,
                 layout: Any = None, backend: str = "cpu", split_every: int = 8, compute: bool = True,
                 int_keys: str = "int64") -> Any:
    """One gbf filter holding every key of a dask Series, DataFrame column (column=) or 1-D
    Array, built in parallel: one filter per partition on the workers, merged by a tree of
    ORs, split_every filters per task.

    capacity: distinct keys to size for; None: Dask's HyperLogLog estimate (an extra pass
        over the key column, computed here even with compute=False; Dask's HyperLogLog
        holds about 500 bytes per row of a partition while it runs, so give capacity= for
        partitions of 10^7 rows and more) times ESTIMATE_MARGIN; not needed (and not
        estimated) with a layout that has num_blocks. Every partition gets the same layout,
        sized here once on the client for the whole column. With compute=True, a filter
        that ends past its capacity (stats().over_capacity) gives a RuntimeWarning: its
        FPR is above fpp.
    fpp, layout: as gbf.Filter (fpp may be None with a layout that has num_blocks).
    backend: where the partition filters live on the workers ("cpu", "gpu", "auto": each
        worker's GPU when it has one). The result unpickles on the client as this backend.
    compute: True: the filter; False: a dask Delayed of it (to compute alongside other work).
    int_keys: "int64" (integers as 8 bytes, whatever their width) or "column" (at the
        column's width); prefilter must be given the same.

    Bit for bit equal to gbf.Filter(capacity, fpp, layout=...) with all keys added on one
    machine. TypeError / ValueError for unsupported inputs (see keys_of).
    """
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    _check_int_keys(int_keys)
    parts, inner_column, key_column = _partitions(data, column)
    fixed_size = isinstance(layout, Layout) and layout.num_blocks is not None
    if fpp is None and not fixed_size:  # refused before the estimate's pass, not after
        raise InvalidArgument("fpp may be None (unknown) only with a layout that has num_blocks")
    if capacity is None and not fixed_size:
        capacity = max(1, math.ceil(estimate_distinct(key_column) * ESTIMATE_MARGIN))
    fpp = None if fpp is None else float(fpp)
    shape = _build_layout(capacity, fpp, layout)
    capacity = None if capacity is None else int(capacity)
    bits = [dask.delayed(_partition_bits, pure=True)(p, inner_column, shape, capacity, fpp, backend, int_keys)
            for p in parts]
    root = dask.delayed(_Bits.to_filter, pure=True)(_tree_merge(bits, split_every), backend)
    if not compute:
        return root
    bloom = root.compute()
    _warn_over_capacity(bloom)
    return bloom


def _warn_over_capacity(bloom: Filter) -> None:
    stats = bloom.stats()
    if stats.over_capacity:
        warnings.warn(f"gbf.dask.build_filter: the filter holds about {stats.estimated_keys:,.0f} distinct keys, "
                      f"past its capacity of {stats.capacity:,}: its false-positive rate is about "
                      f"{stats.estimated_fpr:.3g}, above the fpp asked for (give a larger capacity=, or None "
                      f"to estimate it)", RuntimeWarning, stacklevel=3)


# --- Probing ------------------------------------------------------------------------------

def _keep_rows(part: Any, column: Optional[str], bloom: Filter, int_keys: str = "int64") -> Any:
    values = part if column is None else part[column]
    if len(values) == 0:
        return part
    keep = np.asarray(bloom.contains(keys_of(values, int_keys)), dtype=bool)
    nulls = values.isna()
    if nulls.any():
        keep |= nulls.to_numpy()
    return part[keep]


def _keep_keys(block: np.ndarray, bloom: Filter, int_keys: str = "int64") -> np.ndarray:
    if block.size == 0:
        return block
    keep = np.asarray(bloom.contains(keys_of(block, int_keys)), dtype=bool)
    if block.dtype.kind == "O":  # null keys are kept, as _keep_rows keeps them
        keep |= np.asarray(pd.isna(block), dtype=bool)
    return block[keep]


def _client() -> Any:
    try:
        from distributed import get_client
        return get_client()
    except (ImportError, ValueError):
        return None


_KINDS = (Filter, CountingFilter, CuckooFilter, ScalingFilter)


def _is_future(obj: Any) -> bool:
    try:
        from distributed import Future
    except ImportError:
        return False
    return isinstance(obj, Future)


def broadcast(bloom: Any) -> Any:
    """The filter as one object every task can name: with a dask.distributed Client, a
    Future replicated to every worker (client.scatter(..., broadcast=True): sent once per
    worker, pickled as its native bytes); without one, a Delayed (one key of the graph)."""
    client = _client()
    if client is None:
        return dask.delayed(bloom, pure=True)
    return client.scatter(bloom, broadcast=True, hash=False)


def prefilter(probe: Any, column: Optional[str], bloom: Any, *, int_keys: str = "int64") -> Any:
    """The rows of `probe` (a dask DataFrame: key column `column`; a dask Series or 1-D
    Array: column=None) whose key may be in `bloom`, lazily, partition by partition. Rows
    with a null key are kept. `bloom` is a gbf filter of any kind (broadcast here, once) or
    what broadcast() returned (with a Client, a Future: the result is then computed on
    that Client). No row whose key was added (hashed as int_keys says: "int64", as
    build_filter adds by default; "column" for a filter that hashed 32-bit integers as 4
    bytes, e.g. a Parquet INT32 column's or gbf.Filter.add of an int32 array) is ever
    dropped; an absent key survives with the filter's false-positive rate."""
    _check_int_keys(int_keys)
    if isinstance(bloom, _KINDS):
        bloom = broadcast(bloom)  # every kind: sent once, not pickled into each task
    elif not isinstance(bloom, Delayed) and not _is_future(bloom):
        raise TypeError(f"prefilter takes a gbf filter (Filter, CountingFilter, CuckooFilter, ScalingFilter) or "
                        f"what broadcast() returned, not {type(bloom).__name__}")
    if isinstance(probe, dd.DataFrame):
        if column is None:
            raise ValueError("prefilter on a dask DataFrame needs the key column")
        _check_column("prefilter", probe, column)
    elif isinstance(probe, (dd.Series, da.Array)):
        if column is not None:
            raise ValueError("column is for a dask DataFrame; pass a Series or Array with column=None")
    else:
        raise TypeError(f"prefilter takes a dask DataFrame, Series or 1-D Array, not {type(probe).__name__}")
    if isinstance(probe, da.Array):
        if probe.ndim != 1:
            raise ValueError(f"prefilter takes a 1-D dask Array, got {probe.ndim} dimensions")
        if not isinstance(bloom, Delayed):
            bloom = dask.delayed(bloom)
        blocks = [da.from_delayed(dask.delayed(_keep_keys, pure=True)(b, bloom, int_keys), shape=(np.nan,),
                                  dtype=probe.dtype, meta=np.empty(0, probe.dtype))
                  for b in probe.to_delayed().ravel()]
        return da.concatenate(blocks) if blocks else probe
    return probe.map_partitions(_keep_rows, column, bloom, int_keys, meta=probe._meta)


def _key_bytes(frame: Any, column: str) -> Optional[int]:
    """Bytes an integer key of `frame[column]` hashes under int_keys="column" (from the
    collection's meta, an empty partition); None for a column of strings or bytes."""
    empty = keys_of(frame._meta[column], "column")
    if isinstance(empty, np.ndarray):
        return int(empty.dtype.itemsize)
    return empty.type.bit_width // 8 if pa.types.is_integer(empty.type) else None


def semi_join(probe: Any, build: Any, on: Optional[str] = None, *, left_on: Optional[str] = None,
              right_on: Optional[str] = None, capacity: Optional[int] = None, fpp: float = 0.01,
              backend: str = "cpu", int_keys: str = "int64", **merge_options: Any) -> Any:
    """The inner join of two dask DataFrames with a gbf prefilter pushed into the probe side:
    a filter of build's keys (build_filter), the probe rows that may match (prefilter),
    then dd.merge(prefiltered probe, build, how="inner", ...). Equal to
    dd.merge(probe, build, how="inner", ...) (no key is lost: a Bloom filter has no false
    negatives), with fewer probe rows shuffled. on / left_on / right_on and merge_options as
    dd.merge; capacity, fpp, backend, int_keys as build_filter (int_keys="column" with key
    columns of different widths hashes both at 8 bytes, so that their keys meet). Key
    columns of integers or strings / bytes; float, bool, datetime and decimal keys are a
    TypeError (cast them first), where dd.merge would join them."""
    if on is not None:
        if left_on is not None or right_on is not None:
            raise ValueError("give on= or left_on= and right_on=, not both")
        left_on = right_on = on
    if left_on is None or right_on is None:
        raise ValueError("semi_join needs on= or both left_on= and right_on=")
    if merge_options.get("how", "inner") != "inner":
        raise ValueError("semi_join is an inner join (a prefilter drops probe rows, which other joins keep)")
    merge_options.pop("how", None)
    _check_int_keys(int_keys)
    if int_keys == "column" and _key_bytes(build, right_on) != _key_bytes(probe, left_on):
        # Each side would hash at its own column's width (an int32 key as 4 bytes, an int64
        # one as 8) and no key would meet its match. The filter never leaves this join, so
        # both sides hash 8 bytes: the answer is the merge's either way.
        int_keys = "int64"
    bloom = build_filter(build, capacity, fpp, column=right_on, backend=backend, int_keys=int_keys)
    kept = prefilter(probe, left_on, bloom, int_keys=int_keys)
    return dd.merge(kept, build, how="inner", left_on=left_on, right_on=right_on, **merge_options)


__all__ = ["build_filter", "prefilter", "semi_join", "broadcast", "merge_filters", "estimate_distinct", "keys_of",
           "ESTIMATE_MARGIN", "INT_KEYS"]
