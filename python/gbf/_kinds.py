"""gbf.CountingFilter, gbf.ScalingFilter and gbf.CuckooFilter: the Python faces of
gbf::counting_filter, gbf::scaling_filter and gbf::cuckoo_filter (docs/counting.md,
docs/scaling.md, docs/cuckoo.md). The batch operations are the C++ ones, inherited from
gbf._core.*FilterBase (python/src/kinds.cpp); this module adds construction, files,
pickling and the stats dataclasses.

Keys are those of gbf.Filter, read by the same code: 32- or 64-bit integers (NumPy int32,
uint32, int64, uint64; a key hashes its little-endian bytes) or byte strings (Arrow string
and binary arrays read in place, str as UTF-8, bytes), a list, or one key (a Python int,
str, bytes or NumPy scalar), for which answers come back as Python scalars. Nulls (Arrow)
are never added, removed nor found.

Device keys (CuPy, PyTorch, DLPack, gbf.DeviceStrings) run on a GPU filter as they do on a
gbf.Filter (without out=), on the stream `stream=` names (else the framework's current
stream), with per-key answers in new device memory (CuPy for CuPy keys, torch for torch
keys, else an object with __dlpack__). Unlike gbf.Filter's add and contains,
every call here is synchronous: it returns when its work is done. Device keys on a CPU
filter raise gbf.InvalidArgument.

Errors, as for gbf.Filter: gbf.InvalidArgument (a ValueError) for bad arguments,
gbf.FormatError for corrupt bytes or a file of another kind, OSError for files, TypeError
for objects that are not keys, gbf.NoGPU for backend="gpu" without one, and gbf.FilterFull
when a cuckoo filter or a non-scaling chain has no room.
"""

from __future__ import annotations

import enum
import os
import pickle
from dataclasses import dataclass
from typing import Any, List, Optional, SupportsIndex, Tuple, Type, TypeVar, Union

import numpy as np

from . import _core
from ._filter import Filter, Layout, PathOrFile, _count, _is_path, _placement

PathLike = Union[str, "os.PathLike[str]"]


def _path(target: PathLike) -> Union[str, bytes]:
    if not isinstance(target, (str, bytes, os.PathLike)):
        raise TypeError(f"expected a path, not {type(target).__name__}")
    return os.fspath(target)  # str or bytes: the binding encodes it (os.fsencode)


def _select(found: Any) -> Any:
    """Ascending row numbers (int64) of the keys that may be present, from contains()."""
    return np.flatnonzero(np.atleast_1d(found)).astype(np.int64, copy=False)


def _fpp(fpp: Optional[float]) -> float:
    """A kind's target false-positive rate: None means the default 0.01, as for gbf.Filter."""
    return 0.01 if fpp is None else float(fpp)


def _shape(layout: Union[None, str, Layout]) -> Layout:
    shape = Layout.parse(layout) if isinstance(layout, str) else Layout() if layout is None else layout
    if not isinstance(shape, Layout):
        raise TypeError(f"layout must be None, 'W/K[/SEED]' or a gbf.Layout, not {type(layout).__name__}")
    if shape.num_blocks is not None:
        raise ValueError("layout is a shape here (W/K/seed); the number of blocks follows from capacity and fpp")
    return shape


_Kind = TypeVar("_Kind", bound="_FileBacked")


class _FileBacked:
    """Files, bytes, copies and pickling, which every kind does through its gbf container:
    a kind sets _deserialize_core and _load_core (its gbf._core readers) and has
    _serialize, _save, _adopt, requested_backend and threads from its C++ base."""

    _deserialize_core: Any
    _load_core: Any

    def to_bytes(self) -> bytes:
        """The filter in gbf's container (its kind's file: what save writes and the CLI reads)."""
        return self._serialize()  # type: ignore[attr-defined]

    def save(self, target: PathOrFile) -> None:
        """Writes the filter: a path atomically (temp file in the same folder, fsync,
        rename), a binary file object through write(); OSError."""
        if _is_path(target):
            self._save(_path(target))  # type: ignore[arg-type, attr-defined]
        elif hasattr(target, "write"):
            target.write(self.to_bytes())
        else:
            raise TypeError(f"save() needs a path or a binary file object, not {type(target).__name__}")

    @classmethod
    def from_bytes(cls: Type[_Kind], data: Any, *, backend: str = "auto", threads: int = 0) -> _Kind:
        """A filter from to_bytes() output; gbf.FormatError (also for a file of another kind)."""
        return cls._adopt(cls._deserialize_core(data, *_placement(backend, threads)))  # type: ignore[attr-defined]

    @classmethod
    def load(cls: Type[_Kind], source: PathOrFile, *, backend: str = "auto", threads: int = 0) -> _Kind:
        """A filter read from a path (streamed, checksum verified) or a binary file object
        (read()); gbf.FormatError (also for a file of another kind), OSError."""
        if _is_path(source):
            return cls._adopt(cls._load_core(_path(source), *_placement(backend, threads)))  # type: ignore[arg-type, attr-defined]
        if hasattr(source, "read"):
            return cls.from_bytes(source.read(), backend=backend, threads=threads)
        raise TypeError(f"load() needs a path or a binary file object, not {type(source).__name__}")

    def select(self, keys: Any, *, stream: Any = None) -> Any:
        """Row numbers (int64, ascending) of the keys that may be present: a join
        prefilter, as gbf.Filter.select (nulls are never selected). NumPy for host keys
        (computed from contains); for device keys the library's select on the GPU, a
        device array of the keys' kind."""
        rows = self._device_select(keys, stream)  # type: ignore[attr-defined]
        return rows if rows is not None else _select(self.contains(keys))  # type: ignore[attr-defined]

    def copy(self: _Kind, backend: Optional[str] = None, *, threads: Optional[int] = None) -> _Kind:
        """A deep copy (same contents, same stats) on `backend` ("cpu", "gpu" or "auto";
        default: the backend this filter was asked for)."""
        return type(self)._adopt(self._copy(*_placement(backend or self.requested_backend,  # type: ignore[attr-defined]
                                                        self.threads if threads is None else threads)))  # type: ignore[attr-defined]

    def __copy__(self: _Kind) -> _Kind:
        return self.copy()

    def __deepcopy__(self: _Kind, memo: dict) -> _Kind:
        return self.copy()

    def __reduce_ex__(self, protocol: SupportsIndex):
        # Protocol 5 hands the file bytes over as a PickleBuffer: with a buffer_callback
        # (Dask's transport) they travel out of band, uncopied.
        data = self.to_bytes()
        return (_unpickle, (type(self), pickle.PickleBuffer(data) if int(protocol) >= 5 else data,
                            self.requested_backend, self.threads))  # type: ignore[attr-defined]


def _unpickle(kind: Type[_Kind], data: bytes, backend: str, threads: int) -> _Kind:
    return kind.from_bytes(data, backend=backend, threads=threads)


# --- Counting --------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoveReport:
    """What a checked remove did with a batch's non-null keys."""

    removed: int  #: keys that tested present at their turn and were removed
    refused: int  #: keys that did not test present: nothing was decremented


@dataclass(frozen=True)
class CountingStats:
    """A counting filter's occupancy (CountingFilter.stats()).

    counter_bits:       bits per counter (4 or 8).
    num_counters:       counters: the layout's bit count.
    nonzero_counters:   counters above 0 (the projection's bits set).
    saturated_counters: counters stuck at 2**counter_bits - 1 (they never change again).
    fill_ratio:         nonzero_counters / num_counters.
    estimated_keys:     distinct keys held, inferred from the projection.
    estimated_fpr:      expected false-positive rate at estimated_keys.
    keys_added:         keys passed to add so far (duplicates included, nulls not).
    keys_removed:       keys remove took out.
    capacity:           keys it was sized for; None when unknown.
    size_bytes:         bytes of the counter array.
    bytes_per_key:      size_bytes / capacity (0 when the capacity is unknown).
    over_capacity:      past capacity beyond the estimate's noise.
    """

    counter_bits: int
    num_counters: int
    nonzero_counters: int
    saturated_counters: int
    fill_ratio: float
    estimated_keys: float
    estimated_fpr: float
    keys_added: int
    keys_removed: int
    capacity: Optional[int]
    size_bytes: int
    bytes_per_key: float
    over_capacity: bool


class CountingFilter(_FileBacked, _core.CountingFilterBase):
    """A counting blocked Bloom filter: keys can be removed (gbf::counting_filter).

    CountingFilter(capacity, fpp=0.01, *, backend="auto", counter_bits=4, layout=None, threads=0)

    Every bit of gbf.Filter's layout becomes a saturating counter of `counter_bits` bits
    (4 or 8): memory is counter_bits times a gbf.Filter's of the same capacity and fpp.
    capacity: expected distinct keys (> 0); fpp: target false-positive probability in
    (0, 1); layout: the shape "W/K[/SEED]" or a gbf.Layout without num_blocks (default
    8/8/0); backend: "auto", "cpu" or "gpu"; threads: CPU threads, 0 = all.
    gbf.InvalidArgument for capacity 0, fpp outside (0, 1), counter_bits other than 4 or 8.

    projection() is the gbf.Filter of the keys held: bit for bit what a gbf.Filter of the
    same capacity, fpp and layout would hold after adding them (while no counter saturated).
    """


    _deserialize_core = staticmethod(_core._counting_deserialize)
    _load_core = staticmethod(_core._counting_load)
    def __init__(self, capacity: int, fpp: Optional[float] = 0.01, *, backend: str = "auto", counter_bits: int = 4,
                 layout: Union[None, str, Layout] = None, threads: int = 0) -> None:
        s = _shape(layout)
        backend, threads = _placement(backend, threads)
        super().__init__(_core._counting_create(_count(capacity, "capacity"), _fpp(fpp), backend,
                                                s.words_per_block, s.bits_per_key, s.seed,
                                                _count(counter_bits, "counter_bits", 32),
                                                _count(threads, "threads", 32)))

    @classmethod
    def _adopt(cls, made: Any) -> "CountingFilter":
        obj = cls.__new__(cls)
        _core.CountingFilterBase.__init__(obj, made)
        return obj

    def remove(self, keys: Any, *, unchecked: bool = False, per_key: bool = False, stream: Any = None) -> Any:
        """Removes keys (decrements the counters of their bits).

        Checked (default): a key is removed only when it tests present at its turn, in batch
        order (removing twice a key added once refuses the second); returns a RemoveReport
        (removed, refused), or with per_key=True a bool array (NumPy, or device for device
        keys), removed[i] = key i was
        removed (a bool for one key). unchecked=True decrements without testing and returns
        None: only for keys known to be held (removing one that is not may cause false
        negatives for other keys)."""
        removed, refused, status = self._remove(keys, unchecked, per_key, stream)
        if unchecked:
            return None
        if per_key:
            return status
        return RemoveReport(int(removed or 0), int(refused or 0))

    def projection(self) -> Filter:
        """The gbf.Filter with a bit set where a counter is nonzero (same layout, backend,
        capacity and fpp): the plain filter of the keys held, ready for save or Parquet."""
        return Filter._adopt(self._projection())

    @property
    def layout(self) -> Layout:
        """The layout (that of the projection)."""
        return Layout(*self._layout)

    @property
    def capacity(self) -> Optional[int]:
        """Keys it was sized for; None when unknown."""
        return self._capacity or None

    @property
    def fpp(self) -> Optional[float]:
        """Target false-positive probability; None when unknown."""
        return self._fpp or None

    def stats(self) -> CountingStats:
        """Counters, saturation, fill, estimated keys and FPR (one pass over the counters)."""
        s = self._stats()
        return CountingStats(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9] or None, s[10], s[11],
                             s[12])

    def __repr__(self) -> str:
        return f"<gbf.CountingFilter on {self.backend}: {self.layout}, {self.counter_bits}-bit counters>"



# --- Scaling ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingLevel:
    """One level of a scaling chain (oldest first in ScalingStats.levels)."""

    layout: Layout     #: its geometry (W, K and seed are the chain's)
    capacity: int      #: keys it takes before the next level opens
    fpp: float         #: the target it was sized for
    keys: int          #: new keys inserted into it
    bits_set: int      #: popcount of its bit array
    fill_ratio: float  #: bits_set / its bits
    fpr: float         #: its expected false-positive rate at its key count


@dataclass(frozen=True)
class ScalingStats:
    """A chain's occupancy (ScalingFilter.stats()); the first five are RedisBloom's BF.INFO.

    capacity:      sum of the levels' capacities.
    size_bytes:    bytes of the levels' bit arrays.
    num_levels:    levels opened.
    keys_inserted: new keys inserted, all levels.
    expansion:     growth factor of level capacities; None for a non-scaling chain (as
                   RedisBloom's BF.INFO and `gbf info --json` give it).
    fpp:           the bound the chain's false-positive rate stays under (tightening < 1);
                   with tightening 1, each level's target (no bound).
    compound_fpr:  the chain's expected false-positive rate now: 1 - prod(1 - level fpr).
    levels:        the levels, oldest first.
    """

    capacity: int
    size_bytes: int
    num_levels: int
    keys_inserted: int
    expansion: Optional[int]
    fpp: float
    compound_fpr: float
    levels: List[ScalingLevel]


class ScalingFilter(_FileBacked, _core.ScalingFilterBase):
    """A Bloom filter that grows past its capacity and keeps its false-positive bound: a
    chain of gbf filters, each `expansion` times larger and stricter (gbf::scaling_filter,
    RedisBloom's scalable filters).

    ScalingFilter(capacity, fpp=0.01, *, backend="auto", expansion=2, tightening=0.5,
                  non_scaling=False, layout=None, threads=0)

    capacity: keys level 0 takes (> 0); fpp: the bound on the chain's false-positive rate,
    in (0, 1); expansion: level i + 1 takes expansion times the keys of level i (>= 1);
    tightening: r in (0, 1], level i's target is fpp (1 - r) r**i (1: every level at fpp,
    Hadoop's DynamicBloomFilter with expansion=1; the chain's FPR then grows with its
    levels, about levels * fpp, instead of staying under fpp); non_scaling: one level
    at the whole fpp that never grows: an add that would pass its capacity raises
    gbf.FilterFull (with `fits`) and inserts nothing of that chunk (batches run in chunks of
    chunk_keys keys; keys of earlier chunks stay inserted). layout: the levels' shape
    "W/K[/SEED]" or a gbf.Layout without num_blocks. gbf.InvalidArgument for bad values.

    add counts new keys in batch order (a key already present is not inserted again) and
    returns how many were inserted; add_new gives them per key.
    """


    _deserialize_core = staticmethod(_core._scaling_deserialize)
    _load_core = staticmethod(_core._scaling_load)
    def __init__(self, capacity: int, fpp: Optional[float] = 0.01, *, backend: str = "auto", expansion: int = 2,
                 tightening: float = 0.5, non_scaling: bool = False, layout: Union[None, str, Layout] = None,
                 threads: int = 0) -> None:
        s = _shape(layout)
        backend, threads = _placement(backend, threads)
        super().__init__(_core._scaling_create(_count(capacity, "capacity"), _fpp(fpp), backend,
                                               s.words_per_block, s.bits_per_key, s.seed,
                                               _count(expansion, "expansion", 32), float(tightening),
                                               bool(non_scaling), _count(threads, "threads", 32)))

    @classmethod
    def _adopt(cls, made: Any) -> "ScalingFilter":
        obj = cls.__new__(cls)
        _core.ScalingFilterBase.__init__(obj, made)
        return obj

    @property
    def capacity(self) -> int:
        """Keys level 0 takes (the initial capacity; stats().capacity is the chain's now)."""
        return self._config[0]

    @property
    def fpp(self) -> float:
        """The bound on the chain's false-positive rate."""
        return self._config[1]

    @property
    def expansion(self) -> Optional[int]:
        """Level i + 1's capacity over level i's; None for a non-scaling chain (as stats())."""
        return None if self._config[4] else self._config[2]

    @property
    def tightening(self) -> float:
        return self._config[3]

    @property
    def non_scaling(self) -> bool:
        return self._config[4]

    @property
    def layout(self) -> Layout:
        """The levels' shape (W, K, seed; no num_blocks: each level has its own)."""
        c = self._config
        return Layout(c[5], c[6], c[7])

    def stats(self) -> ScalingStats:
        """Levels, their fill and the compound expected FPR (one popcount per level)."""
        s = self._stats()
        levels = [ScalingLevel(Layout(*l[0:4]), l[4], l[5], l[6], l[7], l[8], l[9]) for l in s[7]]
        return ScalingStats(s[0], s[1], s[2], s[3], s[4] or None, s[5], s[6], levels)

    def __repr__(self) -> str:
        return f"<gbf.ScalingFilter on {self.backend}: capacity {self.capacity:,}, fpp {self.fpp:g}>"



# --- Cuckoo ----------------------------------------------------------------------------


class CuckooStatus(enum.IntEnum):
    """What CuckooFilter.add(unique=True) did with each key (the uint8 values of its array)."""

    SKIPPED = 0   #: a null key: nothing done
    INSERTED = 1  #: its tag is in the table (CF.ADDNX answers 1)
    PRESENT = 2   #: it tested present already (CF.ADDNX answers 0); nothing done
    FAILED = 3    #: no room within max_kicks moves: not inserted


@dataclass(frozen=True)
class CuckooStats:
    """A cuckoo filter's occupancy and history (CuckooFilter.stats(); RedisBloom's CF.INFO).

    occupied_slots: tags in the table (duplicates included).
    num_slots:      slots in the table.
    load_factor:    occupied_slots / num_slots.
    max_load:       load up to which inserts never fail for its tag width (measured).
    estimated_fpr:  expected false-positive rate at occupied_slots.
    capacity:       keys it was sized for; None when unknown.
    keys_added, keys_removed, evictions, failed_inserts: totals so far.
    over_capacity:  load_factor > max_load (inserts may now fail), or more keys held
                    than the capacity (the FPR is past its target).
    """

    occupied_slots: int
    num_slots: int
    load_factor: float
    max_load: float
    estimated_fpr: float
    capacity: Optional[int]
    keys_added: int
    keys_removed: int
    evictions: int
    failed_inserts: int
    over_capacity: bool


class CuckooFilter(_FileBacked, _core.CuckooFilterBase):
    """A cuckoo filter with RedisBloom's CF semantics (gbf::cuckoo_filter): keys can be
    removed and counted.

    CuckooFilter(capacity, fpp=0.01, *, backend="auto", tag_bits=0, max_kicks=20, seed=0, threads=0)

    capacity: keys (> 0) it holds without failing inserts; fpp: target false-positive rate
    in (0, 1); tag_bits: 8, 16 or 32 bits per tag, 0 = the width with the smallest table;
    max_kicks: most moves one insert may make (CF's MAXITERATIONS); seed: the key hash's.
    gbf.InvalidArgument for bad values.
    """


    _deserialize_core = staticmethod(_core._cuckoo_deserialize)
    _load_core = staticmethod(_core._cuckoo_load)
    def __init__(self, capacity: int, fpp: Optional[float] = 0.01, *, backend: str = "auto", tag_bits: int = 0,
                 max_kicks: int = _core.cuckoo_default_max_kicks, seed: int = 0, threads: int = 0) -> None:
        backend, threads = _placement(backend, threads)
        super().__init__(_core._cuckoo_create(_count(capacity, "capacity"), _fpp(fpp), backend,
                                              _count(tag_bits, "tag_bits", 32), _count(max_kicks, "max_kicks", 32),
                                              _count(seed, "seed"), _count(threads, "threads", 32)))

    @classmethod
    def _adopt(cls, made: Any) -> "CuckooFilter":
        obj = cls.__new__(cls)
        _core.CuckooFilterBase.__init__(obj, made)
        return obj

    def add(self, keys: Any, *, unique: bool = False, deterministic: bool = False, stream: Any = None) -> Any:
        """Adds keys.

        unique=False (CF.ADD): every key is inserted (a key added twice is stored twice);
        returns None. When some keys find no room, the others are still inserted and
        gbf.FilterFull is raised with not_inserted = how many were not.
        unique=True (CF.ADDNX): only keys that test absent are inserted, in batch order;
        returns a uint8 array of CuckooStatus values per key (NumPy; a device array for
        device keys; a CuckooStatus for one key) and never raises FilterFull: failures are
        FAILED in the array.
        deterministic=True: the table depends only on the table before and the batch's keys
        (the same on CPU and GPU), not on thread timing."""
        status = self._add(keys, unique, deterministic, stream)
        if unique and isinstance(status, int):  # one host key; arrays (any kind) as they are
            return CuckooStatus(status)
        return status

    def remove(self, keys: Any, *, per_key: bool = False, stream: Any = None) -> Any:
        """CF.DEL: removes one copy of each key's tag where one is found. Returns how many
        were removed (the others were refused: not present), or with per_key=True a bool
        array (NumPy; a device array for device keys), removed[i] = key i was removed (a
        bool for one key). Removing a key that
        was never added is unsafe: when its tag collides with a present key's (probability:
        the FPR), that key is removed instead."""
        removed, status = self._remove(keys, per_key, stream)
        return status if per_key else removed

    @property
    def tag_bits(self) -> int:
        return self._layout[0]

    @property
    def num_buckets(self) -> int:
        return self._layout[1]

    @property
    def seed(self) -> int:
        return self._layout[2]

    @property
    def capacity(self) -> Optional[int]:
        return self._capacity or None

    @property
    def fpp(self) -> Optional[float]:
        return self._fpp or None

    def stats(self) -> CuckooStats:
        """Occupancy, expected FPR and the totals (CF.INFO)."""
        s = self._stats()
        return CuckooStats(s[0], s[1], s[2], s[3], s[4], s[5] or None, s[6], s[7], s[8], s[9], s[10])

    def __repr__(self) -> str:
        return (f"<gbf.CuckooFilter on {self.backend}: {self.tag_bits}-bit tags, "
                f"{self.num_buckets:,} buckets>")

