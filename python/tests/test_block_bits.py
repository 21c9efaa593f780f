"""gbf.BlockBits: a batch's bits as the blocks it touches. Pinned: they are the nonzero
blocks of a Filter that added the same keys (every shape, key kind, nulls), they unite
as the filters would, and Filter.merge of them sets the filter's bits."""

import pickle

import numpy as np
import pyarrow as pa
import pytest

import gbf
from conftest import backends


def _nonzero_blocks(f):
    rows = f.words().reshape(-1, f.layout.words_per_block)
    touched = np.flatnonzero(rows.any(axis=1))
    return touched.astype(np.uint32), rows[touched]


@pytest.mark.parametrize("shape", ["8/8", "1/1", "2/5/3", "4/8", "16/16"])
def test_block_bits_are_the_nonzero_blocks_of_a_filter_that_added_the_same_keys(shape):
    rng = np.random.default_rng(1)
    like = gbf.Filter(200_000, 0.01, layout=shape, backend="cpu")
    batches = [rng.integers(-2**62, 2**62, 5_000), rng.integers(0, 2**31, 3_000).astype(np.uint32),
               pa.array(["a", None, "bc", "é"] * 100), pa.array([1, None, 3], pa.int64()), [7, 8, 9], "one"]
    bits = gbf.BlockBits(like.layout)
    f = gbf.Filter(200_000, 0.01, layout=like.layout, backend="cpu")
    for batch in batches:
        bits.add(batch)
        f.add(batch)
    blocks, rows = _nonzero_blocks(f)
    assert np.array_equal(bits.blocks, blocks) and np.array_equal(bits.words, rows)
    assert bits.keys_added == f.stats().keys_added and len(bits) == len(blocks)
    assert bits.nbytes == len(blocks) * 4 * (1 + like.layout.words_per_block)
    g = gbf.Filter(200_000, 0.01, layout=like.layout, backend="cpu")
    g.merge(bits)
    assert np.array_equal(g.words(), f.words()) and g.stats().keys_added == f.stats().keys_added


def test_block_bits_unite_as_their_filters_merge_and_pickle_as_their_arrays():
    rng = np.random.default_rng(2)
    layout = gbf.Filter(100_000, 0.01, backend="cpu").layout
    parts = [rng.integers(0, 2**62, n) for n in (4_000, 1_000, 0, 2_500)]
    bits = [gbf.BlockBits(layout, p) for p in parts]
    union = bits[3] | bits[0] | bits[1] | bits[2]
    expected = gbf.BlockBits(layout, np.concatenate(parts))
    assert np.array_equal(union.blocks, expected.blocks) and np.array_equal(union.words, expected.words)
    assert union.keys_added == sum(len(p) for p in parts)
    before = bits[0].blocks.copy()
    bits[0] |= bits[1]
    assert len(bits[0]) >= len(before) and bits[0].keys_added == 5_000
    same = bits[1] | bits[1]  # x | x is x, its count kept
    assert np.array_equal(same.words, bits[1].words) and same.keys_added == 1_000
    back = pickle.loads(pickle.dumps(union, protocol=5))
    assert np.array_equal(back.words, union.words) and back.layout == layout and back.keys_added == union.keys_added
    f = union.to_filter(capacity=100_000, fpp=0.01, backend="cpu")
    assert f.contains(np.concatenate(parts)).all()
    h = gbf.Filter(100_000, 0.01, backend="cpu")
    h |= union
    assert np.array_equal(h.words(), f.words())
    assert np.array_equal((gbf.Filter(100_000, 0.01, backend="cpu") | union).words(), f.words())


def test_many_small_adds_and_unions_with_reads_between_equal_one_add():
    # 4,000 adds of 16 keys each. Pieces wait until they are as large as the bits held,
    # so reads between adds, pickles and copies by | must see every piece so far.
    rng = np.random.default_rng(5)
    layout = gbf.Filter(1_000_000, 0.01, backend="cpu").layout
    keys = rng.integers(0, 2**63, 64_000)
    bits = gbf.BlockBits(layout)
    other = gbf.BlockBits(layout)
    for i in range(0, len(keys), 16):
        (bits if i % 32 == 0 else other).add(keys[i:i + 16])
        if i in (16, 4_000, 40_000):
            so_far = gbf.BlockBits(layout, keys[:i + 16])
            both = bits | other
            assert np.array_equal(both.blocks, so_far.blocks) and np.array_equal(both.words, so_far.words)
            back = pickle.loads(pickle.dumps(bits))
            assert np.array_equal(back.words, bits.words) and back.keys_added == bits.keys_added
    bits |= other
    with pytest.raises(ValueError, match="read-only"):
        bits.words[0, 0] = 0  # the bits' own arrays: a write would skip from_blocks' checks
    with pytest.raises(AttributeError):
        bits.blocks = bits.blocks[::-1]
    whole = gbf.BlockBits(layout, keys)
    assert np.array_equal(bits.blocks, whole.blocks) and np.array_equal(bits.words, whole.words)
    assert bits.keys_added == len(keys) and len(bits) == len(whole) and bits.nbytes == whole.nbytes


def test_block_bits_read_from_threads_while_pieces_wait_and_old_pickles_load():
    import threading
    rng = np.random.default_rng(6)
    layout = gbf.Filter(200_000, 0.01, backend="cpu").layout
    keys = rng.integers(0, 2**63, 40_000)
    whole = gbf.BlockBits(layout, keys)
    for _ in range(5):
        bits = gbf.BlockBits(layout, keys[:30_000])
        for i in range(30_000, 40_000, 500):
            bits.add(keys[i:i + 500])  # pieces wait: fewer blocks than the bits hold
        seen = []
        readers = [threading.Thread(target=lambda: seen.append((bits.blocks, bits.words, bits | bits)))
                   for _ in range(8)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        for blocks, words, union in seen:
            assert np.array_equal(blocks, whole.blocks) and np.array_equal(words, whole.words)
            assert np.array_equal(union.words, whole.words)
    # A pickle of the class before the lazy union held its slots: (None, {slot: value}).
    old_state = (None, {"layout": layout, "blocks": whole.blocks.copy(), "words": whole.words.copy(),
                        "keys_added": 40_000})
    back = gbf.BlockBits.__new__(gbf.BlockBits)
    back.__setstate__(old_state)
    assert np.array_equal(back.words, whole.words) and back.keys_added == 40_000
    back.add([1, 2, 3])
    assert back.keys_added == 40_003


def test_block_bits_refuse_other_layouts_and_what_is_no_layout():
    small = gbf.Filter(1_000, 0.01, backend="cpu")
    big = gbf.Filter(100_000, 0.01, backend="cpu")
    bits = gbf.BlockBits(small.layout, [1, 2, 3])
    with pytest.raises(gbf.LayoutMismatch):
        big.merge(bits)
    with pytest.raises(gbf.LayoutMismatch):
        bits | gbf.BlockBits(big.layout)
    assert big.stats().bits_set == 0
    with pytest.raises(TypeError, match="needs a gbf.Layout with num_blocks"):
        gbf.BlockBits(gbf.Layout(8, 8))
    with pytest.raises(gbf.InvalidArgument):
        gbf.BlockBits(gbf.Layout(3, 8, 0, 10))
    with pytest.raises(TypeError, match="unite with BlockBits, not int"):
        bits | 3
    # Arrays that break block_bits' rules are refused before the filter changes.
    broken = gbf.BlockBits(small.layout, [1, 2, 3])
    broken._bits = (broken.blocks[::-1].copy(), broken.words)  # read-only to users; a test reaches past that
    if len(broken.blocks) > 1:
        with pytest.raises(gbf.InvalidArgument, match="does not follow"):
            small.merge(broken)
    assert small.stats().bits_set == 0


@pytest.mark.parametrize("backend", backends())
def test_merging_block_bits_sets_the_same_bits_on_every_backend(backend):
    # On the GPU: the rows go over and a kernel scatters them (several 2^20-block steps
    # here: 3 x 10^6 keys in a 1/1 layout of about 10^7 blocks).
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**62, 3_000_000)
    for shape, n in (("1/1", 3_000_000), ("8/8", 50_000), ("16/16", 50_000)):
        layout = gbf.Filter(10_000_000, 0.01, layout=shape, backend="cpu").layout
        bits = gbf.BlockBits(layout, keys[:n])
        f = gbf.Filter(10_000_000, 0.01, layout=layout, backend=backend)
        f.add(keys[-1000:])
        f.merge(bits)
        expected = gbf.Filter(10_000_000, 0.01, layout=layout, backend="cpu")
        expected.add(keys[:n])
        expected.add(keys[-1000:])
        assert np.array_equal(f.words(), expected.words()), (backend, shape)
