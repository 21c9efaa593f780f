"""gbf.BlockBits: the bits a batch of keys sets in a filter, held as only the blocks it
touches (C++ gbf::block_bits, include/gbf/block_bits.hpp)."""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _core
from ._errors import LayoutMismatch
from ._filter import Filter, Layout


def unite_blocks(blocks: Sequence[np.ndarray], rows: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The union of sparse bits, each given as ascending distinct block indices and their
    rows: sorted by block, the rows of one block ORed (the inputs are not changed)."""
    united = np.concatenate(blocks)
    united_rows = np.concatenate(rows)
    if len(blocks) > 1 and len(united):
        order = np.argsort(united, kind="stable")
        united, united_rows = united[order], united_rows[order]
        starts = np.flatnonzero(np.concatenate(([True], united[1:] != united[:-1])))
        united, united_rows = united[starts], np.bitwise_or.reduceat(united_rows, starts, axis=0)
    return united, united_rows


def _read_only(array: np.ndarray) -> np.ndarray:
    """`array`, no longer writable: a write into the bits' own arrays would change them
    without the checks (ascending blocks, no empty row) a merge relies on."""
    array.flags.writeable = False
    return array


class BlockBits:
    """The bits a batch of keys sets in a filter of `layout`, held as the blocks it
    touches: ascending block indices (uint32) and their words (uint32, one row of
    words_per_block per block). A partition of n keys costs at most n (4 + 4 W) bytes
    however large the filter, where a Filter of its own costs the whole bit array: what
    a worker of a distributed build (Ray, Spark, multiprocessing; gbf.dask does this
    itself) computes and sends.

        part = gbf.BlockBits(f.layout, keys)      # on a worker; pickles as its arrays
        total = part_a | part_b                   # union, on any machine
        f.merge(total)                            # f |= the keys' bits, CPU or GPU

    The bits are exactly those Filter.add sets for the same keys and layout (keys read as
    Filter.add reads host keys, nulls skipped). Computed on the CPU, one thread.
    gbf.LayoutMismatch when merging bits of another layout.

    Pieces added or united wait until they hold as many blocks as the bits do (or until
    the bits are read: `blocks`, `words`, `nbytes`, `len`, `repr`, `|`, a merge into a
    filter, a pickle), then are united in one sort: a partition added in many small
    batches costs O(n log n) in all, not a sort of everything per batch (a read after
    every add brings that back). Safe to read and unite from several threads.
    """

    __slots__ = ("layout", "keys_added", "_bits", "_pending", "_pending_blocks", "_lock")

    def __init__(self, layout: Layout, keys: Any = None) -> None:
        if not isinstance(layout, Layout) or layout.num_blocks is None:
            raise TypeError("BlockBits needs a gbf.Layout with num_blocks (e.g. some_filter.layout)")
        layout.expected_fpr(0)  # gbf.InvalidArgument naming what is wrong with the layout
        self._start(layout, np.zeros(0, dtype=np.uint32), np.zeros((0, layout.words_per_block), dtype=np.uint32), 0)
        if keys is not None:
            self.add(keys)

    def add(self, keys: Any) -> None:
        """Sets the bits of `keys` (host keys, as Filter.add takes them)."""
        l = self.layout
        blocks, words, added = _core._block_bits(keys, l.words_per_block, l.bits_per_key, l.seed, l._blocks())
        self._unite(_read_only(blocks), _read_only(words.reshape(-1, l.words_per_block)), added)

    @property
    def blocks(self) -> np.ndarray:
        """Ascending, distinct indices (uint32) of the blocks with a bit set (a read-only
        array: the bits' own, not a copy)."""
        return self._united()[0]

    @property
    def words(self) -> np.ndarray:
        """The words (uint32) of each of `blocks`, one row of words_per_block per block
        (read-only, as `blocks`)."""
        return self._united()[1]

    def __getstate__(self) -> dict:
        blocks, words = self._united()
        return {"layout": self.layout, "blocks": blocks, "words": words, "keys_added": self.keys_added}

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple):  # pickled by gbf 0.x before the lazy union: (None, slots)
            state = state[1]
        self._start(state["layout"], state["blocks"], state["words"], state["keys_added"])

    def __ior__(self, other: "BlockBits") -> "BlockBits":
        self._check(other)
        if other is not self:  # x | x is x, its count kept (as Filter.merge(self))
            blocks, words = other._united()
            self._unite(blocks, words, other.keys_added)
        return self

    def __or__(self, other: "BlockBits") -> "BlockBits":
        self._check(other)
        out = BlockBits(self.layout)
        out._unite(*self._united(), self.keys_added)
        if other is not self:
            out._unite(*other._united(), other.keys_added)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the indices and words: 4 (1 + W) per block."""
        blocks, words = self._united()
        return int(blocks.nbytes + words.nbytes)

    def __len__(self) -> int:
        """Blocks with a bit set."""
        return len(self._united()[0])

    def to_filter(self, *, capacity: Optional[int] = None, fpp: Optional[float] = None,
                  backend: str = "auto") -> Filter:
        """A new filter of this layout holding these bits (keys_added carried)."""
        f = Filter(capacity, fpp, layout=self.layout, backend=backend)
        f.merge(self)
        return f

    def __repr__(self) -> str:
        return (f"gbf.BlockBits({len(self):,} of {self.layout.num_blocks:,} blocks, {self.nbytes:,} bytes, "
                f"{self.keys_added:,} keys; {self.layout})")

    def _check(self, other: Any) -> None:
        if not isinstance(other, BlockBits):
            raise TypeError(f"BlockBits unite with BlockBits, not {type(other).__name__}")
        if other.layout != self.layout:
            raise LayoutMismatch(f"cannot merge block bits of different layouts: {self.layout} and {other.layout}")

    def _start(self, layout: Layout, blocks: np.ndarray, words: np.ndarray, keys_added: int) -> None:
        self.layout = layout
        # (blocks, words) is replaced as one object, so a reader never pairs one
        # union's blocks with another's words.
        self._bits = (_read_only(blocks), _read_only(words))
        self._pending: list = []
        self._pending_blocks = 0
        self.keys_added = int(keys_added)
        self._lock = threading.Lock()

    def _unite(self, blocks: np.ndarray, words: np.ndarray, keys_added: int) -> None:
        """self |= (blocks, words): read-only arrays, held as given (perhaps in _pending)."""
        with self._lock:
            if len(blocks):
                self._pending.append((blocks, words))
                self._pending_blocks += len(blocks)
                # A union sorts everything it holds: waiting until the pieces are as large
                # as the bits makes each block's share of the sorting O(log n), however
                # small the pieces.
                if self._pending_blocks >= len(self._bits[0]):
                    self._unite_pending_locked()
            self.keys_added += int(keys_added)

    def _united(self) -> Tuple[np.ndarray, np.ndarray]:
        """(blocks, words) with every pending piece united in."""
        with self._lock:
            self._unite_pending_locked()
            return self._bits

    def _unite_pending_locked(self) -> None:
        if not self._pending:
            return
        pieces = ([self._bits] if len(self._bits[0]) else []) + self._pending
        blocks, words = unite_blocks([b for b, _ in pieces], [w for _, w in pieces])
        self._bits = (_read_only(np.ascontiguousarray(blocks, dtype=np.uint32)),
                      _read_only(np.ascontiguousarray(words, dtype=np.uint32)))
        self._pending, self._pending_blocks = [], 0
