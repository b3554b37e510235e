"""Arrow arrays built on numpy buffers without `pa.array`.

`pa.array` looks for pandas on its first call in a process and imports it when it is installed:
0.3 CPU-seconds and about 50 MB in every Spark Python worker that reads messages, which never
needs pandas. These build the same arrays on the numpy buffers (zero-copy when contiguous)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def numbers(values: npt.NDArray[Any]) -> pa.Array:
    """A numeric numpy array (int32, int64, ...) as the Arrow array of its type."""
    v = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(v.dtype), len(v), [None, pa.py_buffer(v)])


def flags(values: npt.NDArray[np.bool_]) -> pa.Array:
    """A numpy bool array as an Arrow bool array (bit-packed)."""
    bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def strings(values: Iterable[str]) -> pa.Array:
    """Python strings as an Arrow string array."""
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded)))


def empty(type_: pa.DataType) -> pa.Array:
    """An array of no values of `type_`."""
    return pa.nulls(0, type_)


def empty_maps(n: int) -> pa.Array:
    """`n` empty map<string, string> values (messages without properties)."""
    return pa.MapArray.from_arrays(numbers(np.zeros(n + 1, dtype=np.int32)), empty(pa.string()), empty(pa.string()))


def int64_values(values: pa.Array) -> npt.NDArray[np.int64]:
    """An int64 Arrow array without nulls as a numpy view of its buffer (`np.asarray` and
    `to_numpy` import pandas too)."""
    if values.type != pa.int64() or values.null_count:
        raise TypeError(f"int64_values takes an int64 array without nulls, not {values.type} with {values.null_count}")
    return _int64_view(values)


def flag_values(values: pa.Array) -> npt.NDArray[np.bool_]:
    """A bool Arrow array without nulls as a numpy bool array."""
    if values.type != pa.bool_() or values.null_count:
        raise TypeError(f"flag_values takes a bool array without nulls, not {values.type} with {values.null_count}")
    return _bits(values.buffers()[1], values.offset, len(values))


def valid(values: pa.Array) -> npt.NDArray[np.bool_]:
    """Which values are not null, as a numpy bool array (`is_valid().to_numpy()` imports pandas)."""
    n = len(values)
    if values.null_count == 0:
        return np.ones(n, dtype=bool)
    bitmap = values.buffers()[0]
    if bitmap is None:  # the null type: every value is null
        return np.zeros(n, dtype=bool)
    return _bits(bitmap, values.offset, n)


def int64_filled(values: pa.Array, fill: int) -> npt.NDArray[np.int64]:
    """An integer Arrow array as an int64 numpy array, its nulls replaced by `fill`."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not pa.types.is_integer(values.type):
        raise TypeError(f"int64_filled takes an integer array, not {values.type}")
    values = values.cast(pa.int64())
    if values.null_count == 0:
        return _int64_view(values)
    return np.where(valid(values), _int64_view(values), np.int64(fill))


def nullable_strings(values: pa.Array, present: npt.NDArray[Any]) -> pa.Array:
    """`values` as strings, null where `present` is 0 (a validity bitmap over the same buffers)."""
    text = values.cast(pa.string())
    if bool(np.all(present)):
        return text
    valid = present != 0
    # a validity bitmap over the same buffers (its bits count from the array's offset too)
    bits = np.concatenate([np.ones(text.offset, dtype=bool), valid]) if text.offset else valid
    validity = pa.py_buffer(np.packbits(bits, bitorder="little"))
    nulls = len(valid) - int(np.count_nonzero(valid))
    return pa.StringArray.from_buffers(len(text), text.buffers()[1], text.buffers()[2], validity, nulls, text.offset)


def repeated(value: str | bytes, n: int) -> pa.Array:
    """`n` copies of one value: a string array for a str, a binary array for bytes."""
    raw = value.encode() if isinstance(value, str) else value
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    kind = pa.string() if isinstance(value, str) else pa.binary()
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def scalar(value: str | bool) -> pa.Scalar:
    """A string or bool Arrow scalar, for compute arguments (`pa.scalar`, and a Python value given
    to a kernel, which pyarrow turns into one, import pandas)."""
    if isinstance(value, bool):
        return flags(np.array([value]))[0]
    return strings([value])[0]


def empty_large_binaries(n: int) -> pa.Array:
    """`n` empty large_binary values."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(b"")])


def large_binary_nulls_empty(values: pa.Array) -> pa.Array:
    """A large_binary array with its nulls as empty values (`fill_null(b"")` imports pandas to
    make its scalar; a scalar taken from an array does not)."""
    if values.null_count == 0:
        return values
    return values.fill_null(_EMPTY_LARGE_BINARY)


def large_binaries(items: list[bytes]) -> pa.Array:
    """Python byte strings as a large_binary array."""
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in items], out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(items), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(items))]
    )


_EMPTY_LARGE_BINARY = empty_large_binaries(1)[0]


def _int64_view(values: pa.Array) -> npt.NDArray[np.int64]:
    """The values buffer of an int64 array as numpy (null slots hold whatever the buffer has)."""
    return np.frombuffer(values.buffers()[1], dtype=np.int64, count=values.offset + len(values))[values.offset :]


def _bits(buffer: pa.Buffer, start: int, n: int) -> npt.NDArray[np.bool_]:
    """Bits [start, start + n) of an Arrow bitmap (bool values or validity) as numpy bools."""
    packed = np.frombuffer(buffer, dtype=np.uint8, count=(start + n + 7) // 8)
    return np.unpackbits(packed, bitorder="little")[start : start + n].astype(bool)
