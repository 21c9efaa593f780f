"""gbf.DeviceStrings: string keys in GPU memory, in Apache Arrow's layout.

Integer keys in GPU memory need no wrapper: a CuPy / PyTorch / Numba array goes to
Filter.add and friends as it is (__cuda_array_interface__ or DLPack). String keys are
three arrays (offsets, bytes, validity), which no array protocol describes as one object,
so they travel together in a DeviceStrings.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _core


class DeviceStrings:
    """String keys in GPU memory in the Arrow layout: key i is bytes
    data[offsets[i]:offsets[i+1]].

    DeviceStrings(offsets, data, validity=None)

    offsets:  a CUDA array (__cuda_array_interface__ or DLPack) of n + 1 int32 (Arrow
              string) or int64 (large_string) offsets, non-decreasing, within data.
    data:     a CUDA array of bytes (uint8 or int8): the keys' bytes, end to end.
    validity: None (every key valid) or a CUDA uint8 Arrow bitmap, bit i of byte i // 8
              LSB first is key i's (0 = null: never added, found, counted or selected).

    Pass it to Filter.add, add_new, contains, count and select like any device array: the
    work runs on the filter's GPU on the stream of the `offsets` array (or `stream=`),
    after the producers of data and validity. Bad offsets raise gbf.InvalidArgument (from
    add / contains: at the next synchronize()). A CPU filter refuses it
    (gbf.InvalidArgument). Results are device arrays of the offsets' family (CuPy for
    CuPy offsets).

    From cuDF: DeviceStrings.from_arrow(column) for any object with
    __arrow_c_device_array__ (a pylibcudf Column, a pyarrow array on a CUDA device).
    """

    #: Marks the object for the extension's device-key dispatch (python/src/device.cpp).
    __gbf_device_strings__ = True

    def __init__(self, offsets: Any, data: Any, validity: Optional[Any] = None) -> None:
        self.offsets = offsets
        self.data = data
        self.validity = validity

    @classmethod
    def from_arrow(cls, array: Any) -> "DeviceStrings":
        """The buffers of an Arrow string / large_string / binary / large_binary array on a
        CUDA device, read in place through the Arrow C device data interface
        (__arrow_c_device_array__). Waits for the producer's sync event. ValueError for a
        host array (pass that to the filter directly), another device type, or a slice
        with nulls that does not start at a multiple of 8 rows; TypeError for other types;
        gbf.NoGPU in a build without CUDA."""
        (offsets, typestr, count, data, data_bytes, validity, validity_bytes, device,
         owner) = _core._arrow_device_strings(array)
        return cls(_CudaBuffer(offsets, count, typestr, owner),
                   _CudaBuffer(data, data_bytes, "|u1", owner),
                   _CudaBuffer(validity, validity_bytes, "|u1", owner) if validity else None)

    def __repr__(self) -> str:
        return f"<gbf.DeviceStrings offsets={self.offsets!r} validity={'yes' if self.validity is not None else 'none'}>"


class _CudaBuffer:
    """A read-only 1-D CUDA array over memory another object owns (`owner` keeps it)."""

    def __init__(self, pointer: int, count: int, typestr: str, owner: Any) -> None:
        self._owner = owner
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": typestr, "data": (pointer, True),
                                         "strides": None, "version": 3}
