"""gbf's exceptions: one per kind of failure the C++ library reports (gbf/error.hpp).

Each carries the library's message, which names the problem (the argument, the two
layouts, the file and what is wrong with it, the CUDA call). Every class derives from
gbf.Error and from the built-in exception a Python caller would expect to catch.
An operating-system refusal (gbf::io_error) arrives as a plain OSError whose errno
picks the subclass (FileNotFoundError, PermissionError, ...).
"""


class Error(Exception):
    """Base of every gbf error."""


class InvalidArgument(Error, ValueError):
    """An argument is out of range or inconsistent (capacity 0, fpp outside (0, 1), a bad
    layout, string offsets that decrease, device keys given to a CPU filter, ...)."""


class LayoutMismatch(Error, ValueError):
    """Two filters whose layouts differ were combined (merge, intersect, symmetric_difference, |=, &=, ^=)."""


class FormatError(Error, ValueError):
    """Bytes or a file are not a valid gbf or Parquet filter: wrong magic, unsupported
    version, truncated, checksum mismatch, impossible layout, malformed header."""


class NoGPU(Error, RuntimeError):
    """backend='gpu' was asked for, but there is no usable GPU or CUDA driver (or this gbf
    was built without CUDA)."""


class WrongBackend(Error, RuntimeError):
    """The operation needs a backend this filter does not use."""


class CudaError(Error, RuntimeError):
    """A CUDA runtime call failed; `code` is the cudaError_t value."""

    code: int = 0


class AllocationError(Error, MemoryError):
    """A filter, staging buffer or packed key batch could not be allocated; `bytes` is the
    request (0 when the failed allocation did not say its size)."""

    bytes: int = 0


class FilterFull(Error, RuntimeError):
    """A filter has no room for keys: a cuckoo filter's add found no free slot for some
    keys within max_kicks moves (the others were inserted), a non-scaling
    gbf.ScalingFilter would pass its capacity (nothing of the chunk that would was
    inserted; a batch longer than chunk_keys keeps the chunks before it), or a growing
    one could not open its next level (the keys inserted before stay).

    not_inserted: keys of the batch that were not inserted (0 where no batch was involved,
        as in a merge); for a refused chunk, every row from that chunk on; for a level
        that could not open, the batch's keys the chain does not hold.
    fits: new keys the filter still takes (scaling filters; 0 for a cuckoo filter, whose
        room depends on which keys come).
    """

    not_inserted: int = 0
    fits: int = 0
