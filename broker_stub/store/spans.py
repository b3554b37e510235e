"""Pure array helpers for reading many spans of the commit log at once."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Int64Array = npt.NDArray[np.int64]


def pieces_of(span: bytes, starts: Int64Array, sizes: Int64Array) -> bytes:
    """The pieces [starts[i], starts[i] + sizes[i]) of `span` (ascending, not overlapping),
    concatenated: one Arrow take over a view of the span whose elements alternate between the
    wanted pieces and the gaps between them."""
    k = int(starts.shape[0])
    bounds = np.empty(2 * k, dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = starts + sizes
    view = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 2 * k - 1, [None, pa.py_buffer(bounds), pa.py_buffer(span)]
    )
    taken = view.take(pa.array(np.arange(0, 2 * k, 2, dtype=np.int64)))
    data = taken.buffers()[2]
    return b"" if data is None else data.to_pybytes()


def distinct_sorted(values: Int64Array) -> Int64Array:
    """The distinct values of an ascending array (np.unique without its sort)."""
    if values.shape[0] == 0:
        return values
    keep = np.empty(values.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
