"""Keys from every source the package reads: the same key always gives the same answer,
whatever array holds it; odd arrays are copied or refused, never misread."""

import array
import ctypes

import numpy as np
import pyarrow as pa
import pytest

import gbf
from conftest import DLPackOnly


@pytest.fixture
def f():
    return gbf.Filter(100_000, 0.01, backend="cpu")


def random_keys(rng, dtype, n):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_no_false_negatives_for_every_dtype(f, rng, dtype):
    keys = random_keys(rng, dtype, 50_000)
    f.add(keys)
    assert f.contains(keys).all()
    assert f.count(keys) == keys.size
    assert f.select(keys).tolist() == list(range(keys.size))
    assert f.stats().keys_added == keys.size


def test_a_key_is_its_bytes(f):
    f.add(np.array([-1, 5], dtype=np.int64))
    # int64 -1 and uint64 2**64-1 have the same 8 bytes; int32 5 has 4 bytes: another key.
    assert np.uint64(2**64 - 1) in f
    assert (2**64 - 1) in f and -1 in f and 5 in f
    g = gbf.Filter(1000, 1e-6)
    g.add(np.array([5], dtype=np.int64))
    assert not g.contains(np.array([5], dtype=np.int32))[0]
    assert g.contains(np.array([5], dtype=np.uint64))[0]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64])
def test_strided_readonly_and_byteswapped_arrays_answer_like_a_contiguous_copy(f, rng, dtype):
    base = random_keys(rng, dtype, 40_000)
    f.add(base[::4])
    assert f.contains(base[::4]).all()
    probe = base[::2]  # every other key: strided, half of them added
    assert not probe.flags.c_contiguous
    expected = f.contains(np.ascontiguousarray(probe))
    assert expected[::2].all()
    assert np.array_equal(f.contains(probe), expected)

    readonly = np.ascontiguousarray(probe)
    readonly.setflags(write=False)
    assert np.array_equal(f.contains(readonly), expected)

    swapped = probe.astype(probe.dtype.newbyteorder(">"))
    assert np.array_equal(f.contains(swapped), expected)
    assert f.count(swapped) == expected.sum()

    reversed_view = probe[::-1]
    assert np.array_equal(f.contains(reversed_view), expected[::-1])


def test_misaligned_array_is_copied(f, rng):
    keys = random_keys(rng, np.uint64, 1000)
    f.add(keys)
    raw = np.zeros(keys.nbytes + 1, dtype=np.uint8)
    misaligned = raw[1:].view(np.uint64)
    misaligned[:] = keys
    assert not misaligned.flags.aligned
    assert f.contains(misaligned).all()


def test_buffer_protocol_and_array_interface(f):
    f.add(array.array("q", [1, 2, 3]))
    assert f.contains(memoryview(np.array([1, 2, 3], dtype=np.int64))).all()

    class Interface:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self._a = a

    assert f.contains(Interface(np.array([1, 2, 3], dtype=np.int64))).all()


def test_dlpack_cpu_tensor(f):
    keys = np.arange(100, dtype=np.uint64)
    f.add(DLPackOnly(keys))
    assert f.contains(keys).all()


class _DLPackAs:
    """Host memory announced under another DLPack device (type, id)."""

    def __init__(self, a, device):
        self._a = a
        self._device = device

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


def test_dlpack_pinned_host_memory_is_read_as_host_keys(f):
    # kDLCUDAHost (3): host memory the GPU can reach, which NumPy reads as host memory.
    keys = np.arange(100, dtype=np.uint64)
    f.add(_DLPackAs(keys, (3, 0)))
    assert f.contains(keys).all()
    assert f.stats().keys_added == 100


def test_dlpack_device_that_is_not_a_pair_of_ints_is_a_type_error_naming_it(f):
    for device in ([1, 0], ("cuda", 0), (1,)):
        with pytest.raises(TypeError, match=r"__dlpack_device__\(\) must return a \(device_type, device_id\)"):
            f.add(_DLPackAs(np.arange(4, dtype=np.uint64), device))
    assert f.stats().keys_added == 0


def test_a_list_spanning_int64_and_uint64_is_read_as_uint64(f):
    # NumPy makes float64 of [1, 2**63]; read as such, 2**63 + 1 would round to 2**63.
    f.add([1, 2**63 + 1])
    assert 1 in f and 2**63 + 1 in f
    assert f.contains([2**63 + 1, 2**64 - 1, 1]).tolist() == [True, False, True]
    assert f.contains(np.array([1, 2**63 + 1], dtype=np.uint64)).all()


def test_a_list_of_numpy_scalars_hashes_each_as_it_would_alone_or_is_refused(f):
    # A 4-byte scalar alone hashes as 4 bytes; so does a list of them. Mixed with keys
    # NumPy widens to 8 bytes it would be another key (a false negative): refused.
    f.add(np.int32(5))
    f.add(np.uint32(6))
    assert f.contains([np.int32(5), np.int32(5)]).tolist() == [True, True]
    assert f.contains([np.uint32(6)]).tolist() == [True]
    for mixed, item in (([np.int32(5), 7], "item 0 .*int32"), ([7, np.int32(5)], "item 1 .*int32"),
                        ([np.int32(5), np.int64(7)], "item 0"), ([np.int32(5), np.uint32(6)], "item 0"),
                        ([np.uint32(6), 2**63], "item 0 .*uint32")):
        with pytest.raises(TypeError, match=item + ".*hashed as 4 bytes"):
            f.contains(mixed)
        with pytest.raises(TypeError, match="give one width"):
            f.add(mixed)
    assert f.stats().keys_added == 2
    # 8-byte scalars with Python ints are one width: NumPy's float64 for uint64 + int is
    # read as uint64 values, each key the 8 bytes it is alone.
    f.add([np.uint64(2**63 + 5), 7])
    assert f.contains(np.uint64(2**63 + 5)) and 7 in f
    assert f.contains([7, np.uint64(2**63 + 5), np.uint64(8)]).tolist() == [True, True, False]
    f.add([np.int64(-3), 9])
    assert -3 in f and f.contains([9, np.int64(-3)]).all()


def test_byte_buffers_and_arrow_scalars_are_refused_saying_what_to_pass(f):
    for buffer in (bytearray(b"ab"), memoryview(b"ab")):
        with pytest.raises(TypeError, match=r"not read as keys: pass bytes\(x\) for one key, or numpy.frombuffer"):
            f.add(buffer)
    with pytest.raises(TypeError, match=r"pyarrow StringScalar is not read as a key: pass scalar.as_py\(\)"):
        f.contains(pa.scalar("abc"))
    assert f.stats().keys_added == 0
    f.add(bytes(bytearray(b"ab")))
    assert b"ab" in f and f.contains(pa.array([pa.scalar("ab")])).tolist() == [True]


def test_an_object_column_arrow_cannot_export_is_a_type_error_saying_so(f):
    pd = pytest.importorskip("pandas")
    for column, cause in ((pd.Series([2**63, 1], dtype=object), "OverflowError"),
                          (pd.Series(["a", 1], dtype=object), "ArrowTypeError")):
        if not hasattr(column, "__arrow_c_stream__"):
            pytest.skip("this pandas exports no Arrow C stream: NumPy's way reads the column")
        with pytest.raises(TypeError, match=f"cannot read keys from a Series: its Arrow export .* failed: {cause}"):
            f.add(column)
    assert f.stats().keys_added == 0


def test_scalars_and_lists(f):
    f.add(7)
    f.add("seven")
    f.add(b"bytes")
    f.add([10, 11, 12])
    f.add(("x", "y"))
    assert 7 in f and "seven" in f and b"seven" in f and b"bytes" in f and "bytes" in f
    assert f.contains([10, 11, 12]).all()
    assert f.contains(np.int64(7)) is True
    assert f.add_new(7) is False
    assert f.add_new("brand new") is True
    assert f.contains(["x", "y"]).all()


@pytest.mark.parametrize("bad, error", [
    (np.zeros(3, dtype=np.float64), TypeError),
    (np.zeros(3, dtype=np.int16), TypeError),
    (np.zeros(3, dtype=bool), TypeError),
    (np.zeros((2, 3), dtype=np.int64), ValueError),
    (1.5, TypeError),
    (True, TypeError),
    (object(), TypeError),
    ([1, "a"], TypeError),
    (["a", 1], TypeError),
    ([2, True], TypeError),           # NumPy would read True as 1; a lone True is refused
    ([1, 2.5], TypeError),
    ([-1, 2**63], TypeError),         # no integer type holds both
    ([1, 2**64], ValueError),
    (2**64, ValueError),
    (-(2**63) - 1, ValueError),
    (pa.array([1.0, 2.0]), TypeError),
    (pa.array([1, 2], type=pa.int16()), TypeError),
    (np.ma.masked_array(np.arange(3), mask=[0, 1, 0]), TypeError),
])
def test_bad_keys_are_refused_with_a_reason(f, bad, error):
    with pytest.raises(error) as info:
        f.add(bad)
    assert str(info.value)


def test_none_as_the_keys_is_named_not_an_argument_type_mismatch(f):
    # nanobind's own error listed the signature ("incompatible function arguments").
    kinds = [f, gbf.CountingFilter(100, 0.01, backend="cpu"), gbf.ScalingFilter(100, 0.01, backend="cpu"),
             gbf.CuckooFilter(100, 0.01)]
    for target in kinds:
        for call in (target.add, target.contains, target.count, lambda k: k in target):
            with pytest.raises(TypeError, match="None is not a key or a batch of keys"):
                call(None)
    assert f.stats().keys_added == 0


def test_in_needs_one_key(f):
    with pytest.raises(TypeError, match="one key"):
        np.arange(3) in f


class _ArrowWithRaisingDlpack:
    """An Arrow array as newer pyarrow shows it: __arrow_c_array__ for the data, and a
    __dlpack_device__ that raises for strings and arrays with nulls (pyarrow 2x on the
    GPU machine did; the 26.0 here returns (1, 0))."""

    def __init__(self, array):
        self.array = array

    def __arrow_c_array__(self, requested_schema=None):
        return self.array.__arrow_c_array__(requested_schema)

    def __dlpack_device__(self):
        raise TypeError("Can only use DLPack on arrays with no nulls.")


def test_arrow_arrays_are_read_as_arrow_even_when_their_dlpack_raises():
    words = [f"w{i}" if i % 5 else None for i in range(500)]
    numbers = pa.array([i if i % 3 else None for i in range(500)], type=pa.uint64())
    for arr in (pa.array(words), numbers):
        f = gbf.Filter(2_000, 0.001, backend="cpu")
        f.add(_ArrowWithRaisingDlpack(arr))
        expected = np.array([v is not None for v in arr.to_pylist()])
        assert f.stats().keys_added == expected.sum()
        assert np.array_equal(f.contains(_ArrowWithRaisingDlpack(arr)), expected)
        assert np.array_equal(f.contains(arr), expected)


def test_arrow_strings_with_nulls_and_slices(rng):
    words = [f"w{i}" if i % 5 else None for i in range(1_000)]
    arr = pa.array(words)
    f = gbf.Filter(2_000, 0.001)
    f.add(arr)
    assert f.stats().keys_added == sum(w is not None for w in words)  # nulls are not added
    found = f.contains(arr)
    assert np.array_equal(found, np.array([w is not None for w in words]))
    for start, length in [(0, 1000), (1, 500), (3, 17), (7, 993), (13, 0), (999, 1)]:
        part = arr.slice(start, length)
        expected = np.array([w is not None for w in words[start:start + length]], dtype=bool)
        assert np.array_equal(f.contains(part), expected), (start, length)
        assert f.count(part) == expected.sum()
        assert f.select(part).tolist() == np.flatnonzero(expected).tolist()
        bits = f.contains(part, format="bitmap")
        assert np.array_equal(np.unpackbits(bits, bitorder="little")[:length].astype(bool), expected)
        boolean = f.contains(part, format="arrow")
        assert isinstance(boolean, pa.BooleanArray) and boolean.to_pylist() == expected.tolist()
    # A slice's keys are added as the slice says, not from the start of the buffers.
    g = gbf.Filter(2_000, 0.001)
    g.add(arr.slice(501, 100))
    assert g.stats().keys_added == sum(w is not None for w in words[501:601])
    assert g.contains(pa.array(words[501:601])).sum() == g.stats().keys_added


def test_arrow_add_new_and_select_skip_nulls():
    f = gbf.Filter(1_000, 0.001)
    is_new = f.add_new(pa.array(["a", None, "a", "b"]))
    assert is_new.tolist() == [True, False, False, True]
    assert f.select(pa.array([None, "a", "zz", "b"])).tolist() == [1, 3]


def test_arrow_integers_with_nulls():
    f = gbf.Filter(1_000, 0.0001)
    ints = pa.array([1, None, 3, None, 5] * 3, type=pa.int64())
    assert f.add_new(ints).tolist() == [True, False, True, False, True] + [False] * 10
    assert f.stats().keys_added == 9
    assert f.contains(ints).tolist() == [True, False, True, False, True] * 3
    assert f.count(ints) == 9
    assert f.select(ints.slice(1, 5)).tolist() == [1, 3, 4]  # [null, 3, null, 5, 1]
    # The value under a null slot (0 here) is not a key that was added.
    assert 0 not in f
    for t in (pa.int32(), pa.uint32(), pa.uint64()):
        g = gbf.Filter(100, 0.0001)
        g.add(pa.array([7, None], type=t))
        assert g.stats().keys_added == 1
        width = np.int32 if t in (pa.int32(), pa.uint32()) else np.int64
        assert g.contains(np.array([7], dtype=width))[0]


def test_arrow_null_type_arrays_are_all_nulls():
    # pa.array([None]) has Arrow's null type: like a typed array's nulls, nothing is
    # added and nothing is found, on every kind.
    kinds = [gbf.Filter(100, 0.001), gbf.CountingFilter(100, 0.001), gbf.ScalingFilter(100, 0.001),
             gbf.CuckooFilter(100, 0.001)]
    for f in kinds:
        for nulls in (pa.array([None, None, None]), pa.nulls(70), pa.chunked_array([pa.nulls(2), pa.nulls(9)])):
            f.add(nulls)
            assert f.contains(nulls).tolist() == [False] * len(nulls)
            assert f.count(nulls) == 0
        s = f.stats()
        assert (s.keys_inserted if isinstance(f, gbf.ScalingFilter) else s.keys_added) == 0, type(f).__name__
        assert 0 not in f
    g = gbf.Filter(100, 0.001)
    assert g.add_new(pa.nulls(3)).tolist() == [False] * 3
    assert g.select(pa.nulls(4)).tolist() == []


class _ArrowArray(ctypes.Structure):
    _fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
                ("buffers", ctypes.c_void_p), ("children", ctypes.c_void_p), ("dictionary", ctypes.c_void_p),
                ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


class _Exported:
    """An Arrow array exported through the C data interface with its ArrowArray struct
    edited as another producer might send it (pyarrow's release callback ignores both fields)."""

    def __init__(self, array, **fields):
        self.array, self.fields = array, fields

    def __arrow_c_array__(self, requested_schema=None):
        schema, exported = self.array.__arrow_c_array__()
        pointer = ctypes.pythonapi.PyCapsule_GetPointer
        pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        struct = _ArrowArray.from_address(pointer(exported, b"arrow_array"))
        for name, value in self.fields.items():
            setattr(struct, name, value)
        return schema, exported


def test_arrow_arrays_are_read_by_their_buffer_count():
    # The null type has no buffers: a producer may send a NULL (or dangling) buffer list,
    # which gbf must not read (it read buffers[0] first and crashed). A producer that sends
    # fewer buffers than a format has is refused rather than read past its list.
    f = gbf.Filter(100, 0.001, backend="cpu")
    assert f.contains(_Exported(pa.nulls(10), buffers=None)).tolist() == [False] * 10
    f.add(_Exported(pa.nulls(5), buffers=None))
    assert f.stats().keys_added == 0
    for array, needed in ((pa.array([1, 2], type=pa.int64()), 2), (pa.array(["a", "b"]), 3)):
        with pytest.raises(ValueError, match=f"with 1 buffers; the Arrow C data interface gives it {needed}"):
            f.add(_Exported(array, n_buffers=1))
    assert f.stats().keys_added == 0


def test_arrow_dictionary_and_nested_arrays_are_refused_naming_what_they_are():
    with pytest.raises(TypeError, match="dictionary arrays .* decode them first"):
        gbf.Filter(100, 0.01).add(pa.array(["a", "b", "a"]).dictionary_encode())
    with pytest.raises(TypeError, match="nested format '\\+l'"):
        gbf.Filter(100, 0.01).add(pa.array([[1], [2]]))


def test_object_arrays_from_dunder_array_are_string_keys():
    # What a pandas Index of str gives: __array__ returning a 1-d object array.
    class StringIndex:
        def __array__(self, dtype=None, copy=None):
            return np.array(["a", "bc", None], dtype=object)

    f = gbf.Filter(100, 0.001, backend="cpu")
    f.add(StringIndex())
    assert f.contains(["a", "bc", "zz"]).tolist() == [True, True, False]
    assert f.stats().keys_added == 2  # None is a null key
    with pytest.raises(TypeError, match="cannot read keys from a object"):
        f.add(object())


def test_a_list_of_ints_in_int64_is_read_as_int64(f):
    # The one-pass conversion gives NumPy's int64 array: the same keys, the same hashes.
    keys = [0, -1, 2**63 - 1, -2**63, 12345, 12345]
    f.add(keys)
    assert f.contains(np.array(keys, dtype=np.int64)).all()
    assert f.contains(keys).all()
    assert f.stats().keys_added == 6
    # A non-int after ints, a big int or a bool anywhere still take NumPy's way or refuse.
    with pytest.raises(TypeError, match="item 3 of the list is a bool"):
        f.add([1, 2, 3, True])
    with pytest.raises(TypeError):
        f.add([1, 2, 1.5])
    f.add([7, 2**64 - 1])
    assert f.contains(np.array([7, 2**64 - 1], dtype=np.uint64)).all()
    assert f.contains(np.array([np.int64(99), 100])).tolist() == [False, False]
    f.add([np.int64(99), 100])
    assert f.contains([99, 100]).all()


@pytest.mark.parametrize("null_rate", [0.0, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("width", [pa.int64(), pa.uint32()])
def test_arrow_integer_nulls_gather_the_valid_keys_in_order(null_rate, width):
    # Runs of whole valid bytes, mixed bytes and a ragged tail, over several chunks
    # (the gathered keys' room is reused from chunk to chunk).
    rng = np.random.default_rng(int(null_rate * 100) + width.bit_width)
    n = 20_003
    values = rng.integers(0, 2**31, n)
    mask = rng.random(n) < null_rate
    mask[:4_000] = False  # a long all-valid run
    keys = pa.array(values, type=width, mask=mask)
    f = gbf.Filter(n, 0.0001, backend="cpu")
    f.chunk_keys = 4_096
    is_new = f.add_new(keys)
    expect = gbf.Filter(n, 0.0001, backend="cpu")
    kept = values[~mask].astype(np.int64 if width == pa.int64() else np.uint32)
    expect_new = expect.add_new(kept)
    assert np.array_equal(f.words(), expect.words())
    assert is_new[mask].sum() == 0
    assert np.array_equal(is_new[~mask], expect_new)
    assert f.stats().keys_added == len(kept)
    assert np.array_equal(f.contains(keys), ~mask & expect.contains(values.astype(kept.dtype)))
    assert f.count(keys) == int((~mask).sum())
    g = gbf.Filter(n, 0.0001, backend="cpu")
    g.chunk_keys = 4_096
    g.add(keys)
    assert np.array_equal(g.words(), expect.words())


def test_numpy_text_arrays_are_the_keys_their_elements_are():
    # 'U' (UCS-4) and 'S' arrays are packed straight from the array; the keys must
    # be the bytes of the str / bytes each element becomes, as tolist() gives them
    # (trailing NULs dropped, embedded ones kept, any code point as UTF-8).
    rng = np.random.default_rng(12)
    alphabet = ["a", "Z", "0", "\x00", "é", "€", "中", "\U0001F600", "\x7f", "\u07ff", "\u0800", "\uffff"]
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 9))) for _ in range(2_000)] + ["", "\x00\x00", "x\x00"]
    unicode = np.array(texts)
    raw = np.array([t.encode("utf-8") for t in texts])
    for array in (unicode, raw, unicode[::3], raw[1::2], unicode.astype(">U12"), np.array(texts, dtype=object)):
        f = gbf.Filter(10_000, 0.0001, backend="cpu")
        g = gbf.Filter(10_000, 0.0001, backend="cpu")
        f.add(array)
        g.add(array.tolist())
        assert np.array_equal(f.words(), g.words()), array.dtype
        assert f.contains(array).all()
        assert f.count(array) == len(array)
    # A 0-d array is one key; a lone surrogate is refused as Python refuses to encode it.
    f = gbf.Filter(100, 0.001)
    assert f.contains(np.array("é")) is False
    f.add(np.array("é"))
    assert "é" in f and b"\xc3\xa9" in f
    with pytest.raises(UnicodeEncodeError):
        f.add(np.array(["ok", "\ud800"]))


def test_numpy_string_dtype_arrays_are_read_in_place_as_their_elements_keys():
    # NumPy 2's StringDType ('T') is read from its packed strings, not through tolist():
    # the same keys as the str elements, short (stored inline) and long (on the heap),
    # any stride; its missing value, whatever the dtype's na_object, is a null key.
    dtypes = pytest.importorskip("numpy.dtypes")
    if not hasattr(dtypes, "StringDType"):
        pytest.skip("NumPy %s has no StringDType" % np.__version__)
    rng = np.random.default_rng(13)
    alphabet = ["a", "Z", "0", "\x00", "é", "€", "中", "\U0001F600"]
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 40))) for _ in range(3_000)] + ["", "x" * 15, "y" * 16]
    strings = np.array(texts, dtype=dtypes.StringDType())
    for array in (strings, strings[::3], strings[5:6], strings[:0]):
        f = gbf.Filter(10_000, 0.0001, backend="cpu")
        g = gbf.Filter(10_000, 0.0001, backend="cpu")
        f.add(array)
        g.add(array.tolist())
        assert np.array_equal(f.words(), g.words())
        assert f.contains(array).all() and f.count(array) == len(array)
    f = gbf.Filter(100, 0.001)
    f.add(np.array("中文", dtype=dtypes.StringDType()))
    assert "中文" in f
    for na in (None, np.nan, "<missing>"):
        with_na = np.array(["a", na, "b", na], dtype=dtypes.StringDType(na_object=na))
        h = gbf.Filter(100, 0.0001, backend="cpu")
        assert h.add_new(with_na).tolist() == [True, False, True, False], repr(na)
        assert h.contains(with_na).tolist() == [True, False, True, False], repr(na)
        assert h.stats().keys_added == 2
        if na == "<missing>":
            assert "<missing>" not in h  # the dtype's missing value, not the text


def test_arrow_chunked_array_and_stream_rows_are_global():
    f = gbf.Filter(1_000, 0.0001)
    f.add(pa.array(["k1", "k3"]))
    chunked = pa.chunked_array([["k0", "k1"], [], ["k2", "k3", None]])
    assert f.contains(chunked).tolist() == [False, True, False, True, False]
    assert f.select(chunked).tolist() == [1, 3]
    assert f.count(pa.table({"c": chunked})["c"]) == 2


def test_chunking_gives_the_answers_of_one_call(rng):
    keys = rng.integers(0, 2**64 - 1, size=10_001, dtype=np.uint64)
    probe = np.concatenate([keys[::2], rng.integers(0, 2**64 - 1, size=10_000, dtype=np.uint64)])
    whole = gbf.Filter(10_000, 0.05, backend="cpu")
    chunked = gbf.Filter(10_000, 0.05, backend="cpu")
    chunked.chunk_keys = 1_000
    assert chunked.chunk_keys == 1_000
    chunked.chunk_keys = 999
    assert chunked.chunk_keys == 1_000  # rounded up to a multiple of 8
    repeated = np.concatenate([keys, keys[:500]])
    assert np.array_equal(whole.add_new(repeated), chunked.add_new(repeated))
    assert np.array_equal(whole.words(), chunked.words())
    assert whole.contains(keys).all() and chunked.contains(keys).all()
    assert np.array_equal(whole.contains(probe), chunked.contains(probe))
    assert whole.count(probe) == chunked.count(probe)
    assert np.array_equal(whole.select(probe), chunked.select(probe))
    words = pa.array([f"s{i}" if i % 3 else None for i in range(5_000)]).slice(3)
    assert np.array_equal(whole.contains(words), chunked.contains(words))
    assert np.array_equal(whole.select(words), chunked.select(words))


def test_out_arrays(f, rng):
    keys = rng.integers(0, 2**64 - 1, size=1000, dtype=np.uint64)
    f.add(keys[:500])
    out = np.zeros(1000, dtype=bool)
    result = f.contains(keys, out=out)
    assert result is out and out[:500].all()
    as_bytes = np.zeros(1000, dtype=np.uint8)
    f.contains(keys, out=as_bytes)
    assert np.array_equal(as_bytes.astype(bool), out)
    for bad in (np.zeros(999, dtype=bool), np.zeros(1000, dtype=np.int64), np.zeros(2000, dtype=bool)[::2]):
        with pytest.raises(ValueError):
            f.contains(keys, out=bad)
    ro = np.zeros(1000, dtype=bool)
    ro.setflags(write=False)
    with pytest.raises(ValueError):
        f.contains(keys, out=ro)
    with pytest.raises(ValueError, match="format"):
        f.contains(keys, format="pandas")
    with pytest.raises(ValueError, match="stream"):
        f.contains(keys, stream=1)


def test_empty_batches(f):
    for empty in (np.array([], dtype=np.int64), [], pa.array([], type=pa.string())):
        f.add(empty)
        assert f.contains(empty).shape == (0,)
        assert f.count(empty) == 0
        assert f.select(empty).shape == (0,)
    assert f.stats().keys_added == 0
