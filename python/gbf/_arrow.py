"""Arrow results: contains(..., format="arrow") hands its bitmap to pyarrow here."""


def boolean_array(bitmap, length):
    """A pyarrow.BooleanArray of `length` values over `bitmap` (LSB-first bits, no nulls)."""
    try:
        import pyarrow as pa
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("contains(..., format='arrow') needs pyarrow (pip install pyarrow)") from e
    return pa.Array.from_buffers(pa.bool_(), length, [None, pa.py_buffer(bitmap)])
