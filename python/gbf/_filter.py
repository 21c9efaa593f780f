"""gbf.Filter: the Python face of gbf::filter (the batch operations are the C++ ones,
inherited from gbf._core.FilterBase; this module adds construction, files, pickling,
copies, set operators and the dataclasses)."""

from __future__ import annotations

import operator
import os
import pickle
from dataclasses import dataclass
from typing import Any, BinaryIO, Optional, SupportsIndex, Tuple, Type, Union

from . import _core
from ._errors import InvalidArgument, LayoutMismatch

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]

_FORMATS = ("gbf", "parquet-sbbf")


@dataclass(frozen=True)
class Layout:
    """The geometry and hash of a filter (docs/layout.md).

    words_per_block: W, 32-bit words per block (1, 2, 4, 8 or 16).
    bits_per_key:    k, bits set per key (W <= k <= 32).
    seed:            xxh64 seed (Parquet uses 0).
    num_blocks:      blocks in the filter (1 .. 2**32); None in a shape that sizing fills in.

    The default 8/8/0 is Apache Parquet's split-block Bloom filter (SBBF).
    """

    words_per_block: int = 8
    bits_per_key: int = 8
    seed: int = 0
    num_blocks: Optional[int] = None

    def __post_init__(self) -> None:
        # The ranges the binding's integers hold; which W, k and sizes are valid is the
        # library's to say (gbf.InvalidArgument naming the field).
        _count(self.words_per_block, "words_per_block", 32)
        _count(self.bits_per_key, "bits_per_key", 32)
        _count(self.seed, "seed")
        if self.num_blocks is not None:
            _count(self.num_blocks, "num_blocks")

    @classmethod
    def parse(cls, text: str) -> "Layout":
        """A shape from the CLI's "W/K[/SEED]" (e.g. "8/8", "16/16/42"); ValueError if malformed."""
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"layout must be 'W/K' or 'W/K/SEED' (e.g. '8/8'), got {text!r}")
        numbers = [int(p) for p in parts]
        return cls(numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else 0)

    @property
    def num_bits(self) -> int:
        """Bits in the filter (needs num_blocks)."""
        return self._blocks() * self.words_per_block * 32

    @property
    def size_bytes(self) -> int:
        """Bytes of the bit array (needs num_blocks)."""
        return self._blocks() * self.words_per_block * 4

    def parquet_problem(self) -> str:
        """Empty when this layout can be written as a Parquet SBBF, else every reason it cannot."""
        return _core.parquet_problem(self.words_per_block, self.bits_per_key, self.seed, self._blocks())

    def expected_fpr(self, keys: float) -> float:
        """Expected false-positive rate with `keys` distinct keys added (exact blocked-filter model);
        ValueError for a negative or NaN key count."""
        keys = float(keys)
        if not keys >= 0:
            raise ValueError(f"expected_fpr: keys must be a number >= 0, got {keys}")
        return _core.expected_fpr(self.words_per_block, self.bits_per_key, self.seed, self._blocks(), keys)

    def _blocks(self) -> int:
        if self.num_blocks is None:
            raise ValueError("this layout is a shape without num_blocks; size it with gbf.size_for")
        return self.num_blocks

    def __str__(self) -> str:
        if self.num_blocks is None:
            return f"{self.words_per_block}/{self.bits_per_key}/{self.seed}"
        return _core.layout_description(self.words_per_block, self.bits_per_key, self.seed, self.num_blocks)


@dataclass(frozen=True)
class FilterStats:
    """A filter's occupancy and what it implies (Filter.stats()).

    bits_set:       popcount of the bit array.
    num_bits:       size of the bit array in bits.
    fill_ratio:     bits_set / num_bits.
    estimated_keys: distinct keys inferred from bits_set (inf when every bit is set).
    estimated_fpr:  expected false-positive rate at estimated_keys.
    keys_added:     keys passed to add / add_new so far, duplicates included, nulls not.
    capacity:       keys the filter was sized for; None when unknown.
    over_capacity:  estimated_keys > capacity + 3 sqrt(capacity): past capacity beyond the
                    estimate's noise, so the false-positive rate is climbing past its target.
    """

    bits_set: int
    num_bits: int
    fill_ratio: float
    estimated_keys: float
    estimated_fpr: float
    keys_added: int
    capacity: Optional[int]
    over_capacity: bool


def _check_format(format: str) -> None:
    if format not in _FORMATS:
        raise ValueError(f"format must be 'gbf' or 'parquet-sbbf', got {format!r}")


def _is_path(target: object) -> bool:
    return isinstance(target, (str, bytes, os.PathLike))


class Filter(_core.FilterBase):
    """A blocked Bloom filter on the GPU or the CPU: the same bits on both.

    Filter(capacity, fpp=0.01, *, backend="auto", layout=None, threads=0)

    capacity: expected distinct keys (> 0). The filter is sized with the exact false-positive
        model of its blocked layout (more bits per key than a classic Bloom filter; see
        gbf.size_for). Optional with an explicit layout, where it only feeds stats().
    fpp: target false-positive probability in (0, 1); default 0.01.
    backend: "auto" (a GPU when one is usable and its memory can hold the filter, else the
        CPU; backend_description says why), "cpu" or "gpu" (NoGPU when there is none,
        AllocationError when its memory cannot hold the filter).
    layout: None (Parquet's 8/8/0 shape), "parquet" (the default shape rounded up to a
        power-of-two size Parquet accepts, 32 B .. 128 MiB), a shape "W/K[/SEED]" or
        Layout(W, K, seed) sized from capacity and fpp, or a Layout with num_blocks: that
        exact layout.
    threads: CPU worker threads, 0 = all.

    Keys: 32- or 64-bit integers (signed or unsigned; a key hashes its little-endian bytes,
    so int32 5 and int64 5 are different keys, while int64 -1 and uint64 2**64-1 are the
    same) or byte strings (str as UTF-8). A batch is a NumPy array (read in place when it is
    1-D, C-contiguous and native-endian; otherwise copied, values kept), anything NumPy
    reads without copying, an Arrow array or chunked array (pyarrow, Polars, nanoarrow,
    through the Arrow PyCapsule interface: strings read in place, nulls never added nor
    found), a CUDA array (CuPy, PyTorch, Numba: __cuda_array_interface__ or DLPack; keys
    stay on the GPU) or a list. One key: a Python int (64-bit), str, bytes or NumPy scalar.

    Host batches run in chunks of `chunk_keys` keys (4 Mi keys on the CPU, 32 Mi on a GPU)
    with the GIL released; Ctrl-C stops a long batch at the next chunk boundary with
    KeyboardInterrupt, leaving the filter whole (the chunks before it are added).

    A Filter has no len(): a Bloom filter does not know how many keys it holds (duplicates
    and false positives are indistinguishable from new keys). stats() gives keys_added (calls'
    keys, duplicates included) and estimated_keys (distinct keys estimated from the bits).

    Errors: ValueError subclasses for bad input (gbf.InvalidArgument with the library's
    message, gbf.LayoutMismatch, gbf.FormatError), TypeError for objects that are not keys,
    gbf.NoGPU, gbf.CudaError, gbf.AllocationError (a MemoryError), OSError for files.

    A Filter may be used from several threads; its batches run one at a time.
    """

    def __init__(
        self,
        capacity: Optional[int] = None,
        fpp: Optional[float] = None,
        *,
        backend: str = "auto",
        layout: Union[None, str, Layout] = None,
        threads: int = 0,
    ) -> None:
        target = 0.01 if fpp is None else float(fpp)
        backend, threads = _placement(backend, threads)
        if layout == "parquet":
            made = _core._parquet_compatible(_capacity(capacity, "layout='parquet'"), target, backend,
                                             _count(threads, "threads", 32))
        else:
            shape = Layout.parse(layout) if isinstance(layout, str) else Layout() if layout is None else layout
            if not isinstance(shape, Layout):
                raise TypeError(f"layout must be None, 'parquet', 'W/K[/SEED]' or a gbf.Layout, "
                                f"not {type(layout).__name__}")
            if shape.num_blocks is None:
                made = _core._create(_capacity(capacity, "sizing"), target, backend, shape.words_per_block,
                                     shape.bits_per_key, shape.seed, _count(threads, "threads", 32))
            else:
                if fpp is not None and not 0 < target < 1:  # the binding reads 0 as None
                    raise InvalidArgument(f"fpp must be in (0, 1), or None (unknown) with an explicit "
                                          f"layout; got {fpp!r}")
                made = _core._from_layout(shape.words_per_block, shape.bits_per_key, shape.seed, shape.num_blocks,
                                          0 if capacity is None else _count(capacity, "capacity"),
                                          0.0 if fpp is None else target, backend, _count(threads, "threads", 32))
        super().__init__(made)

    @classmethod
    def from_words(cls, words: Any, layout: Layout, *, capacity: Optional[int] = None, fpp: Optional[float] = None,
                   keys_added: int = 0, backend: str = "auto", threads: int = 0) -> "Filter":
        """A filter of `layout` (a gbf.Layout with num_blocks) holding `words`: a 1-D NumPy
        uint32 array of layout.num_bits // 32 words, as words() returns them (C++
        gbf::filter::from_words). capacity and fpp are recorded as a file records them
        (None: unknown), keys_added is the count stats() reports. TypeError for another
        kind of array; gbf.InvalidArgument for another number of words or a bad layout."""
        if not isinstance(layout, Layout) or layout.num_blocks is None:
            raise TypeError("from_words: layout must be a gbf.Layout with num_blocks (e.g. other.layout)")
        if fpp is not None and not 0 < float(fpp) < 1:
            raise InvalidArgument(f"from_words: fpp must be in (0, 1), or None (unknown); got {fpp!r}")
        return cls._adopt(_core._from_words(words, layout.words_per_block, layout.bits_per_key, layout.seed,
                                            layout.num_blocks, 0 if capacity is None else _count(capacity, "capacity"),
                                            0.0 if fpp is None else float(fpp), _count(keys_added, "keys_added"),
                                            backend, _count(threads, "threads", 32)))

    @classmethod
    def _adopt(cls, made: "_core._NewFilter") -> "Filter":
        obj = cls.__new__(cls)
        _core.FilterBase.__init__(obj, made)
        return obj

    # --- Properties ---------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """The layout (geometry, hash, seed, num_blocks)."""
        return Layout(*self._layout)

    @property
    def capacity(self) -> Optional[int]:
        """Keys the filter was sized for; None when unknown (e.g. loaded from Parquet)."""
        return self._capacity or None

    @property
    def fpp(self) -> Optional[float]:
        """Target false-positive probability; None when unknown. Written by save()."""
        return self._fpp or None

    def stats(self) -> FilterStats:
        """Fill ratio, estimated distinct keys and false-positive rate, over-capacity flag
        (one popcount of the bit array: O(size), GIL released)."""
        s = self._stats()
        return FilterStats(s[0], s[1], s[2], s[3], s[4], s[5], s[6] or None, s[7])

    # --- Files and bytes ----------------------------------------------------------

    def to_bytes(self, format: str = "gbf", *, header: bool = True) -> bytes:
        """The filter as bytes: "gbf" (native: layout, capacity, fpp, keys added, words,
        checksum; docs/file-format.md) or "parquet-sbbf" (Parquet's Thrift BloomFilterHeader
        then the bitset; header=False: the bare bitset). Parquet needs the 8/8/0 layout at a
        power-of-two size of 32 B .. 128 MiB: gbf.InvalidArgument names what fails."""
        _check_format(format)
        return self._serialize() if format == "gbf" else self._to_parquet_sbbf(header)

    def save(self, target: PathOrFile, format: str = "gbf", *, header: bool = True) -> None:
        """Writes the filter (see to_bytes for the formats). A path is written atomically
        (temp file in the same folder, fsync, rename); a binary file object gets write()."""
        _check_format(format)
        if _is_path(target):
            path = os.fspath(target)  # type: ignore[arg-type]  # str or bytes: the binding encodes it
            if format == "gbf":
                self._save(path)
            else:
                self._save_parquet_sbbf(path, header)
        elif hasattr(target, "write"):
            target.write(self.to_bytes(format, header=header))
        else:
            raise TypeError(f"save() needs a path or a binary file object, not {type(target).__name__}")

    @classmethod
    def from_bytes(cls, data: bytes, format: str = "gbf", *, header: bool = True, backend: str = "auto",
                   threads: int = 0) -> "Filter":
        """A filter from to_bytes() output (any bytes-like object); gbf.FormatError when the
        bytes are corrupt, truncated or not a filter."""
        _check_format(format)
        backend, threads = _placement(backend, threads)
        if format == "gbf":
            return cls._adopt(_core._deserialize(data, backend, threads))
        return cls._adopt(_core._from_parquet_sbbf(data, header, backend, threads))

    @classmethod
    def load(cls, source: PathOrFile, format: str = "gbf", *, header: bool = True, backend: str = "auto",
             threads: int = 0) -> "Filter":
        """A filter read from a path (streamed, checksum verified) or a binary file object.
        A Parquet SBBF has no magic: pass format="parquet-sbbf" (header=False for a bare
        bitset). gbf.FormatError for corrupt data, OSError when the file cannot be read."""
        _check_format(format)
        backend, threads = _placement(backend, threads)
        if _is_path(source):
            path = os.fspath(source)  # type: ignore[arg-type]
            if format == "gbf":
                return cls._adopt(_core._load(path, backend, threads))
            return cls._adopt(_core._load_parquet_sbbf(path, header, backend, threads))
        if hasattr(source, "read"):
            return cls.from_bytes(source.read(), format, header=header, backend=backend, threads=threads)
        raise TypeError(f"load() needs a path or a binary file object, not {type(source).__name__}")

    # --- Copies, pickling, set operators ------------------------------------------

    def copy(self, backend: Optional[str] = None, *, threads: Optional[int] = None) -> "Filter":
        """A deep copy (same layout, same bits, same stats) on `backend` ("cpu", "gpu" or
        "auto"; default: the backend this filter was asked for)."""
        return type(self)._adopt(self._copy(*_placement(backend or self.requested_backend,
                                                        self.threads if threads is None else threads)))

    def __copy__(self) -> "Filter":
        return self.copy()

    def __deepcopy__(self, memo: dict) -> "Filter":
        return self.copy()

    def __reduce_ex__(self, protocol: SupportsIndex):
        # The native bytes (layout, bits, capacity, fpp, keys added) and the backend asked
        # for: a filter pickled on a GPU machine as "auto" unpickles on the CPU elsewhere.
        # Protocol 5 hands the bytes over as a PickleBuffer: with a buffer_callback (Dask's
        # transport) they travel out of band, uncopied.
        data = self._serialize()
        return (_unpickle, (pickle.PickleBuffer(data) if int(protocol) >= 5 else data, self.requested_backend,
                            self.threads, type(self)))

    def merge(self, other: Any) -> None:
        """self |= other: another Filter of the same layout (bits ORed, keys_added summed),
        or a gbf.BlockBits of this layout (its blocks ORed in, on the GPU by a kernel:
        the cost is the bits' bytes, not the filter's). gbf.LayoutMismatch names the layouts."""
        from ._block_bits import BlockBits  # it imports this module
        if isinstance(other, BlockBits):
            if other.layout != self.layout:
                raise LayoutMismatch(f"cannot merge block bits of layout {other.layout} into a filter of "
                                     f"{self.layout}")
            self._merge_block_bits(other.blocks, other.words, other.keys_added)
        else:
            super().merge(other)

    def __ior__(self, other: Any) -> "Filter":
        from ._block_bits import BlockBits
        if not isinstance(other, (_core.FilterBase, BlockBits)):
            return NotImplemented
        self.merge(other)
        return self

    def __iand__(self, other: "Filter") -> "Filter":
        if not isinstance(other, _core.FilterBase):
            return NotImplemented
        self.intersect(other)
        return self

    def __ixor__(self, other: "Filter") -> "Filter":
        if not isinstance(other, _core.FilterBase):
            return NotImplemented
        self.symmetric_difference(other)
        return self

    # f | f is f |= f on a copy: a filter combined with itself (keys_added not doubled),
    # not with another filter that happens to hold the same keys. Anything but a plain
    # filter (an int, a CountingFilter) is NotImplemented: Python's TypeError names both.
    def __or__(self, other: Any) -> "Filter":
        from ._block_bits import BlockBits
        if not isinstance(other, (_core.FilterBase, BlockBits)):
            return NotImplemented
        result = self.copy()
        result.merge(result if other is self else other)
        return result

    def __and__(self, other: "Filter") -> "Filter":
        if not isinstance(other, _core.FilterBase):
            return NotImplemented
        result = self.copy()
        result.intersect(result if other is self else other)
        return result

    def __xor__(self, other: "Filter") -> "Filter":
        if not isinstance(other, _core.FilterBase):
            return NotImplemented
        result = self.copy()
        result.symmetric_difference(result if other is self else other)
        return result

    def __repr__(self) -> str:
        capacity = "unknown" if self.capacity is None else f"{self.capacity:,}"
        fpp = "unknown" if self.fpp is None else f"{self.fpp:g}"
        return f"<gbf.Filter on {self.backend}: {self.layout}; capacity {capacity}, fpp {fpp}>"


def _capacity(capacity: Optional[int], why: str) -> int:
    if capacity is None:
        raise TypeError(f"Filter() needs capacity= for {why} (or a Layout with num_blocks)")
    return _count(capacity, "capacity")


def _count(value: Any, name: str, bits: int = 64) -> int:
    """A count argument (capacity, threads, ...) as the binding's unsigned integer of `bits`
    bits: an int, a NumPy integer or a whole float (1e6). TypeError for other types,
    ValueError for a fraction, gbf.InvalidArgument outside [0, 2**bits)."""
    if isinstance(value, bool):  # an int to Python, but never a count (True would be 1)
        raise TypeError(f"{name} must be an integer, not bool")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        number = int(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not 0 <= number < 2**bits:
        raise InvalidArgument(f"{name} must be in [0, 2**{bits}), got {number}")
    return number


def _placement(backend: Any, threads: Any) -> Tuple[str, int]:
    """backend= and threads= of a public call, checked here so that a wrong type or a negative
    count is named (TypeError / gbf.InvalidArgument), not nanobind's "incompatible function
    arguments" of a private binding; the library names a bad backend string."""
    if not isinstance(backend, str):
        raise TypeError(f"backend must be 'auto', 'cpu' or 'gpu', not {type(backend).__name__}")
    return backend, _count(threads, "threads", 32)


def _unpickle(data: bytes, backend: str, threads: int, cls: Optional[Type[Filter]] = None) -> Filter:
    # cls: the pickled object's class (a subclass of Filter comes back as itself, as
    # copy() keeps it); pickles written before it was recorded have none.
    return (cls or Filter)._adopt(_core._deserialize(data, backend, threads))


def load(source: PathOrFile, format: str = "gbf", *, header: bool = True, backend: str = "auto",
         threads: int = 0) -> Filter:
    """Filter.load: a filter from a path or a binary file object."""
    return Filter.load(source, format, header=header, backend=backend, threads=threads)


def size_for(capacity: int, fpp: float, shape: Union[None, str, Layout] = None) -> Layout:
    """The smallest layout of `shape` (default 8/8/0) whose expected false-positive rate at
    `capacity` keys is at most `fpp`; gbf.InvalidArgument for capacity 0, fpp outside (0, 1)
    or a bad shape."""
    if isinstance(shape, str):
        shape = Layout.parse(shape)
    shape = shape or Layout()
    return Layout(*_core.size_for(_count(capacity, "capacity"), float(fpp), shape.words_per_block,
                                  shape.bits_per_key, shape.seed))


def classic_bits_per_key(fpp: float) -> float:
    """Bits per key a classic (unblocked) Bloom filter needs for `fpp`: -ln(fpp) / ln(2)^2."""
    return _core.classic_bits_per_key(fpp)


def gpu_status() -> tuple:
    """(available, description): whether a usable GPU exists, its name and memory, or why not."""
    return _core.query_gpu()

