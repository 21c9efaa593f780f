"""Device keys (CuPy / DLPack): the stream-ordered path. The GPU tests skip without a GPU;
the refusals run everywhere."""

import numpy as np
import pytest

import gbf
from conftest import DLPackOnly

gpu_available, gpu_reason = gbf.gpu_status()


class FakeCudaArray:
    """Claims to be a CUDA array (__cuda_array_interface__ v3) over host memory."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False), "version": 3,
            "strides": None, "stream": 1,
        }


def test_device_keys_on_a_cpu_filter_are_refused():
    f = gbf.Filter(1000, 0.01, backend="cpu")
    keys = FakeCudaArray(np.arange(10, dtype=np.uint64))
    for call in (f.add, f.contains, f.count, f.select, f.add_new):
        with pytest.raises(gbf.InvalidArgument, match="device memory but this filter uses the CPU"):
            call(keys)
    with pytest.raises(TypeError):
        keys in f
    assert f.stats().keys_added == 0


@pytest.fixture
def cupy():
    if not gpu_available:
        pytest.skip(f"no GPU: {gpu_reason}")
    return pytest.importorskip("cupy", reason="the device-array tests need CuPy on a GPU machine")


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_cupy_keys_stay_on_the_device(cupy, dtype):
    rng = np.random.default_rng(7)
    host = rng.integers(0, 2**31 - 1, size=1_000_000).astype(dtype)
    keys = cupy.asarray(host)
    f = gbf.Filter(1_000_000, 0.01, backend="gpu")
    f.add(keys)
    found = f.contains(keys)
    assert isinstance(found, cupy.ndarray) and found.dtype == cupy.bool_
    assert bool(found.all())
    probe = cupy.asarray(rng.integers(0, 2**31 - 1, size=100_000).astype(dtype))
    cpu = f.copy("cpu")
    expected = cpu.contains(cupy.asnumpy(probe))
    assert np.array_equal(cupy.asnumpy(f.contains(probe)), expected)
    assert f.count(probe) == expected.sum()
    assert np.array_equal(cupy.asnumpy(f.select(probe)), np.flatnonzero(expected))
    out = cupy.zeros(probe.size, dtype=cupy.bool_)
    assert f.contains(probe, out=out) is out
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        on_stream = f.contains(probe, stream=stream)
    f.synchronize()
    stream.synchronize()
    assert np.array_equal(cupy.asnumpy(on_stream), expected)
    is_new = f.add_new(probe)
    assert np.array_equal(cupy.asnumpy(is_new) & expected, np.zeros_like(expected))




def test_dlpack_device_keys(cupy):
    keys = cupy.arange(1000, dtype=cupy.uint64)
    f = gbf.Filter(1000, 0.01, backend="gpu")
    f.add(DLPackOnly(keys))
    found = f.contains(DLPackOnly(keys))
    # Not a bare capsule: an object with __dlpack__, readable more than once.
    assert hasattr(found, "__dlpack__") and hasattr(found, "__dlpack_device__")
    assert bool(cupy.from_dlpack(found).all())
    assert bool(cupy.from_dlpack(found).all())


def test_misaligned_device_keys_are_refused_before_any_kernel(cupy):
    # uint64 keys viewed at byte 4 of a buffer: a kernel's 8-byte loads would fault.
    raw = cupy.zeros(8 * 101, dtype=cupy.uint8)
    keys = raw[4:4 + 8 * 100].view(cupy.uint64)
    f = gbf.Filter(1000, 0.01, backend="gpu")
    with pytest.raises(ValueError, match="not a multiple of the item size"):
        f.add(keys)
    assert f.stats().keys_added == 0
    f.add(cupy.arange(10, dtype=cupy.uint64))  # the context survived
    assert bool(f.contains(cupy.arange(10, dtype=cupy.uint64)).all())


def test_out_on_another_gpu_is_refused(cupy):
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    f = gbf.Filter(1000, 0.01, backend="gpu")
    keys = cupy.arange(10, dtype=cupy.uint64)
    with cupy.cuda.Device(1):
        out = cupy.zeros(10, dtype=cupy.bool_)
    with pytest.raises(ValueError, match="out is on GPU 1"):
        f.contains(keys, out=out)


def test_device_keys_on_a_gpu_filter_via_torch():
    if not gpu_available:
        pytest.skip(f"no GPU: {gpu_reason}")
    torch = pytest.importorskip("torch", reason="the PyTorch test needs torch with CUDA")
    keys = torch.arange(10_000, dtype=torch.int64, device="cuda")
    f = gbf.Filter(10_000, 0.01, backend="gpu")
    f.add(keys)
    found = f.contains(keys)
    assert isinstance(found, torch.Tensor) and bool(found.all())


# --- stream= : which stream device work runs on (the resolution runs without a GPU) ---------

class CupyLikeStream:
    ptr = 0x5000


class TorchLikeStream:
    cuda_stream = 0x6000


class ProtocolStream:
    """The CUDA stream protocol (__cuda_stream__ -> (version, handle))."""

    def __cuda_stream__(self):
        return (0, 0x7000)


@pytest.mark.parametrize("stream, expected", [
    (None, None), (0, 0), (1, 1), (2, 2), (0xABC000, 0xABC000), (2**64 - 1, 2**64 - 1),
    (CupyLikeStream(), 0x5000), (TorchLikeStream(), 0x6000), (ProtocolStream(), 0x7000),
])
def test_stream_argument_forms_name_the_stream(stream, expected):
    keys = FakeCudaArray(np.arange(4, dtype=np.uint64))
    assert gbf._core._stream_value(keys, stream) == expected


@pytest.mark.parametrize("stream, error", [
    ("s", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError), (object(), TypeError),
    (2**64, ValueError),  # was a bare RuntimeError: std::bad_cast
])
def test_bad_stream_arguments_are_refused(stream, error):
    keys = FakeCudaArray(np.arange(4, dtype=np.uint64))
    with pytest.raises(error, match="stream"):
        gbf._core._stream_value(keys, stream)


def test_bad_stream_object_handle_is_refused():
    class Bad:
        ptr = "not a handle"

    with pytest.raises(TypeError, match="stream.ptr must be an int"):
        gbf._core._stream_value(FakeCudaArray(np.arange(4, dtype=np.uint64)), Bad())


def _fake_framework(monkeypatch, name):
    """A module `name` in sys.modules whose current stream is 0x8000, and an array type of it."""
    import sys
    import types

    module = types.ModuleType(name)
    module.cuda = types.SimpleNamespace()
    calls = []
    if name == "torch":
        def current_stream(device):
            calls.append(device)
            return types.SimpleNamespace(cuda_stream=0x8000)
        module.cuda.current_stream = current_stream
    else:
        def get_current_stream(device_id=None):
            calls.append(device_id)
            return types.SimpleNamespace(ptr=0x8000)
        module.cuda.get_current_stream = get_current_stream
    monkeypatch.setitem(sys.modules, name, module)
    # torch names a device "cuda:1"; CuPy's has an id (its current stream is per device).
    device = "cuda:1" if name == "torch" else types.SimpleNamespace(id=1)
    array_type = type("Tensor", (FakeCudaArray,), {"__module__": name, "device": device})
    return array_type(np.arange(4, dtype=np.uint64)), calls


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_default_stream_is_the_frameworks_current_stream(monkeypatch, framework):
    keys, calls = _fake_framework(monkeypatch, framework)
    assert gbf._core._stream_value(keys, None) == 0x8000
    # The stream of the array's GPU, not of the current device.
    assert calls == (["cuda:1"] if framework == "torch" else [1])
    # An explicit stream wins and the framework is not asked.
    assert gbf._core._stream_value(keys, 0x9000) == 0x9000
    assert len(calls) == 1


def test_device_strings_take_the_stream_of_their_offsets(monkeypatch):
    offsets, _ = _fake_framework(monkeypatch, "torch")
    strings = gbf.DeviceStrings(offsets, FakeCudaArray(np.zeros(8, dtype=np.uint8)))
    assert gbf._core._stream_value(strings, None) == 0x8000


def test_a_stream_for_host_keys_is_refused():
    f = gbf.Filter(1000, 0.01, backend="cpu")
    with pytest.raises(ValueError, match="stream is for device keys"):
        f.contains(np.arange(10, dtype=np.uint64), stream=1)


def test_torch_stream_orders_device_work():
    if not gpu_available:
        pytest.skip(f"no GPU: {gpu_reason}")
    torch = pytest.importorskip("torch", reason="the PyTorch stream test needs torch with CUDA")
    keys = torch.arange(100_000, dtype=torch.int64, device="cuda")
    f = gbf.Filter(100_000, 0.01, backend="gpu")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # the arange ran on the default stream
    with torch.cuda.stream(s):
        f.add(keys)                      # on s: the current stream
        found = f.contains(keys)
    s.synchronize()
    assert bool(found.all())
    other = torch.cuda.Stream()
    found = f.contains(keys, stream=other)
    other.synchronize()
    assert bool(found.all())
    assert f.count(keys, stream=other.cuda_stream) == 100_000


# --- gbf.DeviceStrings: string keys in device memory -----------------------------------------

def test_device_strings_on_a_cpu_filter_are_refused():
    f = gbf.Filter(1000, 0.01, backend="cpu")
    strings = gbf.DeviceStrings(FakeCudaArray(np.array([0, 1, 3], dtype=np.int32)),
                                FakeCudaArray(np.frombuffer(b"abc", dtype=np.uint8)))
    for call in (f.add, f.contains, f.count):
        with pytest.raises(gbf.InvalidArgument, match="device memory but this filter uses the CPU"):
            call(strings)


def test_device_strings_from_a_host_arrow_array_is_refused():
    pa = pytest.importorskip("pyarrow")
    array = pa.array(["a", "bb", None])
    if not hasattr(array, "__arrow_c_device_array__"):
        pytest.skip("this pyarrow has no __arrow_c_device_array__")
    error = (ValueError, "in host memory") if gbf.has_cuda_build else (gbf.NoGPU, "without CUDA")
    with pytest.raises(error[0], match=error[1]):
        gbf.DeviceStrings.from_arrow(array)


def test_device_strings_match_host_strings(cupy):
    words = [f"key-{i}".encode() for i in range(10_000)]
    offsets = np.zeros(len(words) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(w) for w in words])
    data = np.frombuffer(b"".join(words), dtype=np.uint8)
    strings = gbf.DeviceStrings(cupy.asarray(offsets), cupy.asarray(data))
    f = gbf.Filter(10_000, 0.01, backend="gpu")
    f.add(strings)
    assert bool(f.contains(strings).all())
    cpu = gbf.Filter(10_000, 0.01, backend="cpu")
    cpu.add(words)
    f.synchronize()
    assert np.array_equal(f.copy("cpu").words(), cpu.words())


# --- The other kinds: counting, scaling and cuckoo filters take device keys too ------------

def _kinds_on(backend):
    return (gbf.CountingFilter(10_000, 0.01, backend=backend),
            gbf.ScalingFilter(1_000, 0.01, backend=backend),
            gbf.CuckooFilter(10_000, 0.01, backend=backend))


def _calls(f, keys, **kw):
    """Every batch call of f's kind on keys (name, thunk)."""
    calls = [("add", lambda: f.add(keys, **kw)), ("contains", lambda: f.contains(keys, **kw)),
             ("count", lambda: f.count(keys, **kw)), ("select", lambda: f.select(keys, **kw)),
             ("remove", lambda: f.remove(keys, **kw)) if hasattr(f, "remove") else None,
             ("approximate_count", lambda: f.approximate_count(keys, **kw)) if hasattr(f, "approximate_count") else None,
             ("add_new", lambda: f.add_new(keys, **kw)) if hasattr(f, "add_new") else None]
    return [c for c in calls if c is not None]


def test_device_keys_on_a_cpu_filter_of_any_kind_are_refused_and_change_nothing():
    keys = FakeCudaArray(np.arange(10, dtype=np.uint64))
    strings = gbf.DeviceStrings(FakeCudaArray(np.array([0, 1, 3], dtype=np.int32)),
                                FakeCudaArray(np.frombuffer(b"abc", dtype=np.uint8)))
    for f in _kinds_on("cpu"):
        before = f.to_bytes()
        for batch in (keys, strings):
            for name, call in _calls(f, batch):
                with pytest.raises(gbf.InvalidArgument, match="device memory but this filter uses the CPU"):
                    call()
        with pytest.raises(TypeError, match="one host key"):
            keys in f
        assert f.to_bytes() == before, type(f).__name__


def test_a_stream_for_host_keys_is_refused_by_every_kind():
    for f in _kinds_on("cpu"):
        for name, call in _calls(f, np.arange(10, dtype=np.uint64), stream=0):
            with pytest.raises(ValueError, match="stream is for device keys"):
                call()
        assert f.count(np.arange(10, dtype=np.uint64)) == 0, type(f).__name__


@pytest.mark.parametrize("dtype", ["int32", "uint64"])
def test_counting_filter_answers_device_keys_as_host_keys(cupy, dtype):
    rng = np.random.default_rng(11)
    host = rng.integers(0, 2**31 - 1, size=200_000).astype(dtype)
    probe = np.concatenate([host[:50_000], rng.integers(0, 2**31 - 1, size=50_000).astype(dtype)])
    gpu = gbf.CountingFilter(200_000, 0.01, backend="gpu")
    cpu = gbf.CountingFilter(200_000, 0.01, backend="cpu")
    gpu.add(cupy.asarray(host))
    gpu.add(cupy.asarray(host[:1000]))  # counts of 2
    cpu.add(host)
    cpu.add(host[:1000])
    assert np.array_equal(gpu.counters(), cpu.counters())
    keys = cupy.asarray(probe)
    found = gpu.contains(keys)
    assert isinstance(found, cupy.ndarray) and found.dtype == cupy.bool_
    assert np.array_equal(cupy.asnumpy(found), cpu.contains(probe))
    assert gpu.count(keys) == cpu.count(probe)
    assert np.array_equal(cupy.asnumpy(gpu.select(keys)), cpu.select(probe))
    counts = gpu.approximate_count(keys)
    assert counts.dtype == cupy.uint8
    assert np.array_equal(cupy.asnumpy(counts), cpu.approximate_count(probe))
    removed = cupy.asarray(host[:2000])
    assert gpu.remove(removed) == cpu.remove(host[:2000])
    assert np.array_equal(cupy.asnumpy(gpu.remove(removed, per_key=True)), cpu.remove(host[:2000], per_key=True))
    gpu.remove(cupy.asarray(host[5000:6000]), unchecked=True)
    cpu.remove(host[5000:6000], unchecked=True)
    assert np.array_equal(gpu.counters(), cpu.counters())
    assert gpu.stats() == cpu.stats()


def test_scaling_filter_answers_device_keys_as_host_keys(cupy):
    rng = np.random.default_rng(12)
    host = rng.integers(0, 2**63, size=20_000, dtype=np.int64)
    gpu = gbf.ScalingFilter(2_000, 0.01, backend="gpu")
    cpu = gbf.ScalingFilter(2_000, 0.01, backend="cpu")
    for batch in np.array_split(host, 4):
        assert gpu.add(cupy.asarray(batch)) == cpu.add(batch)
    batch = np.concatenate([host[:100], rng.integers(0, 2**63, size=5_000, dtype=np.int64)])
    is_new = gpu.add_new(cupy.asarray(batch))
    assert isinstance(is_new, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(is_new), cpu.add_new(batch))
    assert gpu.stats().num_levels == cpu.stats().num_levels > 1
    for level in range(cpu.stats().num_levels):
        assert np.array_equal(gpu.level_words(level), cpu.level_words(level)), level
    probe = np.concatenate([host[::7], rng.integers(0, 2**63, size=50_000, dtype=np.int64)])
    keys = cupy.asarray(probe)
    assert np.array_equal(cupy.asnumpy(gpu.contains(keys)), cpu.contains(probe))
    assert gpu.count(keys) == cpu.count(probe)
    assert np.array_equal(cupy.asnumpy(gpu.select(keys)), cpu.select(probe))
    full = gbf.ScalingFilter(100, 0.01, backend="gpu", non_scaling=True)
    with pytest.raises(gbf.FilterFull):
        full.add(cupy.arange(1_000, dtype=cupy.uint64))
    assert full.stats().keys_inserted == 0


def test_cuckoo_filter_answers_device_keys_as_host_keys(cupy):
    rng = np.random.default_rng(13)
    host = rng.integers(0, 2**63, size=50_000, dtype=np.int64)
    gpu = gbf.CuckooFilter(60_000, 0.01, backend="gpu")
    cpu = gbf.CuckooFilter(60_000, 0.01, backend="cpu")
    assert gpu.add(cupy.asarray(host), deterministic=True) is None
    cpu.add(host, deterministic=True)
    assert np.array_equal(gpu.words(), cpu.words())
    batch = np.concatenate([host[:100], rng.integers(0, 2**63, size=1_000, dtype=np.int64)])
    status = gpu.add(cupy.asarray(batch), unique=True, deterministic=True)
    assert isinstance(status, cupy.ndarray) and status.dtype == cupy.uint8
    assert np.array_equal(cupy.asnumpy(status), cpu.add(batch, unique=True, deterministic=True))
    assert np.array_equal(gpu.words(), cpu.words())
    probe = np.concatenate([host[::5], rng.integers(0, 2**63, size=20_000, dtype=np.int64)])
    keys = cupy.asarray(probe)
    assert np.array_equal(cupy.asnumpy(gpu.contains(keys)), cpu.contains(probe))
    assert gpu.count(keys) == cpu.count(probe)
    assert np.array_equal(cupy.asnumpy(gpu.select(keys)), cpu.select(probe))
    assert np.array_equal(cupy.asnumpy(gpu.approximate_count(keys)), cpu.approximate_count(probe))
    removed = gpu.remove(cupy.asarray(host[:3000]), per_key=True)
    assert np.array_equal(cupy.asnumpy(removed), cpu.remove(host[:3000], per_key=True))
    assert gpu.remove(cupy.asarray(host[3000:4000])) == cpu.remove(host[3000:4000])
    assert np.array_equal(gpu.words(), cpu.words())
    tiny = gbf.CuckooFilter(100, 0.01, backend="gpu")
    with pytest.raises(gbf.FilterFull) as full:
        tiny.add(cupy.arange(10_000, dtype=cupy.uint64))
    assert full.value.not_inserted == tiny.stats().failed_inserts > 0


def test_every_kind_takes_device_strings_and_a_stream(cupy):
    words = [f"key-{i}".encode() for i in range(5_000)]
    offsets = np.zeros(len(words) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(w) for w in words])
    strings = gbf.DeviceStrings(cupy.asarray(offsets), cupy.asarray(np.frombuffer(b"".join(words), dtype=np.uint8)))
    stream = cupy.cuda.Stream(non_blocking=True)
    for gpu, cpu in zip(_kinds_on("gpu"), _kinds_on("cpu")):
        gpu.add(strings, stream=stream)
        cpu.add(words)
        found = gpu.contains(strings, stream=stream)
        assert bool(found.all()), type(gpu).__name__  # synchronous: ready on return
        assert gpu.to_bytes() == cpu.to_bytes() or isinstance(gpu, gbf.CuckooFilter), type(gpu).__name__
        assert gpu.count(strings) == cpu.count(words)


def test_kinds_answer_torch_keys_with_torch_tensors():
    if not gpu_available:
        pytest.skip(f"no GPU: {gpu_reason}")
    torch = pytest.importorskip("torch", reason="the PyTorch test needs torch with CUDA")
    keys = torch.arange(5_000, dtype=torch.int64, device="cuda")
    for f in _kinds_on("gpu"):
        f.add(keys)
        found = f.contains(keys)
        assert isinstance(found, torch.Tensor) and found.is_cuda and bool(found.all()), type(f).__name__
        rows = f.select(keys)
        assert isinstance(rows, torch.Tensor) and rows.dtype == torch.int64 and rows.numel() == 5_000


def test_kinds_answer_dlpack_only_keys_with_dlpack_objects(cupy):
    keys = cupy.arange(1000, dtype=cupy.uint64)
    f = gbf.CuckooFilter(10_000, 0.01, backend="gpu")
    status = f.add(DLPackOnly(keys), unique=True)  # neither CuPy nor torch: no .shape
    assert hasattr(status, "__dlpack__")
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(status)), np.full(1000, gbf.CuckooStatus.INSERTED))
    assert f.stats().keys_added == 1000
    counting = gbf.CountingFilter(10_000, 0.01, backend="gpu")
    counting.add(DLPackOnly(keys))
    assert bool(cupy.from_dlpack(counting.contains(DLPackOnly(keys))).all())
