"""Encoding columns into packed message rows (see codec.py for the format), vectorized."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.errors import InvalidBatchError, MessageTooLargeError
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import (
    FLAG_KEY,
    FLAG_TAGS,
    HEADER_DTYPE,
    HEADER_SIZE,
    PARTS,
    PROPERTIES_TYPE,
    Int32Array,
    Int64Array,
    PackedBatch,
    check_body_sizes,
    ranges_to_indices,
)

_NUL = arrays.large_binaries([b"\x00"])[0]  # the separator of a property list's key/value pieces


def encode_columns(
    body: Any,
    *,
    key: Any = None,
    tags: Any = None,
    properties: Any = None,
    born_timestamp: Any = None,
    max_message_bytes: int | None = None,
) -> PackedBatch:
    """Pack columns (pyarrow arrays or Python sequences, `None` for absent) into rows."""
    data, sizes = encode_columns_to_buffer(
        body,
        key=key,
        tags=tags,
        properties=properties,
        born_timestamp=born_timestamp,
        max_message_bytes=max_message_bytes,
    )
    return PackedBatch(data.to_pybytes(), sizes)


def encode_columns_to_buffer(
    body: Any,
    *,
    key: Any = None,
    tags: Any = None,
    properties: Any = None,
    born_timestamp: Any = None,
    max_message_bytes: int | None = None,
    order: Int64Array | None = None,
) -> tuple[pa.Buffer, Int32Array]:
    """`encode_columns` without the final copy into `bytes`: the packed rows as an Arrow buffer
    and their sizes. With `order` (a permutation of the input rows), row i of the output is input
    row order[i] (checks and their messages still refer to input positions)."""
    body_arr = _as_large_binary(body, "body")
    n = len(body_arr)
    if n == 0:
        raise InvalidBatchError("a batch needs at least one message")
    if body_arr.null_count:
        first = int(np.flatnonzero(~arrays.valid(body_arr))[0])
        raise InvalidBatchError(f"message {first}: body is null")
    key_arr, key_present = _optional_column(key, n, "key")
    tags_arr, tags_present = _optional_column(tags, n, "tags")
    props_arr = _encode_properties(properties, n)

    header = np.zeros(n, dtype=HEADER_DTYPE)
    header["born_timestamp"] = _born_timestamps(born_timestamp, n)
    header["flags"] = key_present.astype(np.uint32) * FLAG_KEY + tags_present.astype(np.uint32) * FLAG_TAGS
    parts = [key_arr, tags_arr, body_arr, props_arr]
    for field, arr in zip(("key_len", "tags_len", "body_len", "props_len"), parts, strict=True):
        header[field] = _lengths(arr)
    if max_message_bytes is not None:
        check_body_sizes(header["body_len"], max_message_bytes)

    header_arr = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int64) * HEADER_SIZE), pa.py_buffer(header.view(np.uint8))],
    )
    every_part = pa.concat_arrays([header_arr, *parts])
    rows_in_order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if rows_in_order.shape != (n,):
        raise ValueError(f"order has {rows_in_order.shape[0]} positions for {n} rows")
    interleave = (np.arange(PARTS, dtype=np.int64)[None, :] * n + rows_in_order[:, None]).ravel()
    rows = every_part.take(arrays.numbers(interleave))
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64, count=PARTS * n + 1)
    data = rows.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    sizes = (
        HEADER_SIZE + header["key_len"].astype(np.int64) + header["tags_len"] + header["body_len"] + header["props_len"]
    )
    if int(sizes.max()) > np.iinfo(np.int32).max:
        raise MessageTooLargeError("a message is larger than 2 GiB")
    if order is not None:
        sizes = sizes[rows_in_order]
    return data, sizes.astype(np.int32)


def encode_messages(
    bodies: Sequence[bytes | str],
    *,
    keys: Sequence[str | None] | None = None,
    tags: Sequence[str | None] | None = None,
    properties: Sequence[dict[str, str] | None] | None = None,
) -> PackedBatch:
    """Convenience for small Python-side batches: the same encoder, fed from lists."""
    return encode_columns(bodies, key=keys, tags=tags, properties=properties)


def _as_large_binary(values: Any, name: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values, type=pa.large_binary())  # str values are stored as UTF-8
    if not _is_binary_like(values.type):
        raise InvalidBatchError(f"column {name!r} must be string or binary, not {values.type}")
    return values.cast(pa.large_binary())


def _is_binary_like(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_string_view(t)
        or pa.types.is_null(t)
    )


def _optional_column(values: Any, n: int, name: str) -> tuple[pa.Array, npt.NDArray[np.bool_]]:
    if values is None:
        return arrays.empty_large_binaries(n), np.zeros(n, dtype=bool)
    if not isinstance(values, pa.Array | pa.ChunkedArray):
        values = pa.array([None if v is None else str(v) for v in values], type=pa.large_string())
    arr = _as_large_binary(values, name)
    if len(arr) != n:
        raise InvalidBatchError(f"column {name!r} has {len(arr)} values for {n} bodies")
    present = arrays.valid(arr)
    return arrays.large_binary_nulls_empty(arr), present


def _lengths(arr: pa.Array) -> Int64Array:
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + len(arr) + 1)
    return np.diff(offsets[arr.offset :])


def _born_timestamps(values: Any, n: int) -> Int64Array:
    if values is None:
        return np.full(n, int(time.time() * 1000), dtype=np.int64)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_timestamp(values.type):
            values = values.cast(pa.timestamp("ms")).cast(pa.int64())
        return arrays.int64_filled(values, int(time.time() * 1000))
    arr = np.asarray(values, dtype=np.int64)
    if arr.shape != (n,):
        raise InvalidBatchError(f"born_timestamp has {arr.shape[0]} values for {n} bodies")
    return arr


def _encode_properties(properties: Any, n: int) -> pa.Array:
    if properties is None:
        return arrays.empty_large_binaries(n)
    if isinstance(properties, pa.ChunkedArray):
        properties = properties.combine_chunks()
    if not isinstance(properties, pa.Array):
        properties = pa.array(
            [None if p is None else {str(k): str(v) for k, v in p.items()} for p in properties],
            type=PROPERTIES_TYPE,
        )
    if not pa.types.is_map(properties.type):
        raise InvalidBatchError(f"column 'properties' must be map<string,string>, not {properties.type}")
    if len(properties) != n:
        raise InvalidBatchError(f"column 'properties' has {len(properties)} values for {n} bodies")
    offsets = arrays.int64_filled(properties.offsets, 0)
    counts = np.diff(offsets) * arrays.valid(properties)
    take = arrays.numbers(ranges_to_indices(offsets[:-1], counts))
    keys = properties.keys.take(take)
    values = arrays.large_binary_nulls_empty(properties.items.take(take).cast(pa.large_binary()))
    for part, what in ((keys, "key"), (values, "value")):
        part_str = part.cast(pa.large_string())
        if len(part_str) and pc.any(pc.match_substring(part_str, "\x00")).as_py():
            raise InvalidBatchError(f"a property {what} contains a NUL character")
    m = len(keys)
    both = pa.concat_arrays([keys.cast(pa.large_binary()), values.cast(pa.large_binary())])
    pairs = np.empty(2 * m, dtype=np.int64)
    pairs[0::2] = np.arange(m)
    pairs[1::2] = np.arange(m) + m
    list_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts * 2, out=list_offsets[1:])
    as_lists = pa.LargeListArray.from_arrays(arrays.numbers(list_offsets), both.take(arrays.numbers(pairs)))
    return pc.binary_join(as_lists, _NUL)
