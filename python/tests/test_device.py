"""Device keys (CuPy / DLPack): the stream-ordered path. The GPU tests skip without a GPU;
the refusals run everywhere."""

import numpy as np
import pytest

import gbf

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

    class DLPackOnly:
        def __dlpack__(self, **kwargs):
            return keys.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return keys.__dlpack_device__()

    f = gbf.Filter(1000, 0.01, backend="gpu")
    f.add(DLPackOnly())
    found = f.contains(DLPackOnly())
    assert bool(cupy.from_dlpack(found).all())


def test_device_keys_on_a_gpu_filter_via_torch():
    if not gpu_available:
        pytest.skip(f"no GPU: {gpu_reason}")
    torch = pytest.importorskip("torch", reason="the PyTorch test needs torch with CUDA")
    keys = torch.arange(10_000, dtype=torch.int64, device="cuda")
    f = gbf.Filter(10_000, 0.01, backend="gpu")
    f.add(keys)
    found = f.contains(keys)
    assert isinstance(found, torch.Tensor) and bool(found.all())
