"""gbf: a blocked Bloom filter on the GPU or the CPU, the same bits on both.

    import gbf, numpy as np
    f = gbf.Filter(capacity=10_000_000, fpp=0.01)    # GPU if present, else CPU
    f.add(np.arange(1_000_000, dtype=np.uint64))      # NumPy, Arrow, CuPy, PyTorch, lists
    hits = f.contains(queries)                        # NumPy bool array (device array for device keys)
    rows = f.select(probe_keys)                       # row numbers that may match (join prefilter)
    f.save("users.gbf"); g = gbf.load("users.gbf")

See docs/python.md in the repository for keys, zero-copy rules, streams, errors and
measured speed.
"""

from ._errors import (AllocationError, CudaError, Error, FilterFull, FormatError, InvalidArgument, LayoutMismatch,
                      NoGPU, WrongBackend)
from . import _core
from ._filter import Filter, FilterStats, Layout, classic_bits_per_key, gpu_status, load, size_for
from ._device import DeviceStrings
from ._block_bits import BlockBits
from ._kinds import (CountingFilter, CountingStats, CuckooFilter, CuckooStats, CuckooStatus, RemoveReport,
                     ScalingFilter, ScalingLevel, ScalingStats)

#: The version of the gbf library this package runs (include/gbf/version.hpp; the
#: package's metadata is held to it by tests/test_packaging.py).
__version__: str = _core.library_version

#: Whether this build has the CUDA backend (a GPU is still needed to use it: gpu_status()).
has_cuda_build: bool = _core.has_cuda_build

__all__ = [
    "Filter", "FilterStats", "Layout", "BlockBits", "DeviceStrings", "load", "size_for", "classic_bits_per_key", "gpu_status",
    "has_cuda_build", "Error", "InvalidArgument", "LayoutMismatch", "FormatError", "NoGPU", "WrongBackend",
    "CudaError", "AllocationError", "FilterFull", "CountingFilter", "CountingStats", "RemoveReport", "ScalingFilter",
    "ScalingStats", "ScalingLevel", "CuckooFilter", "CuckooStats", "CuckooStatus",
]
