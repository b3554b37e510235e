"""Packed message rows: the one wire and storage format of a batch of messages.

A row is a fixed 28-byte little-endian header followed by its variable parts:

    offset size field
    0      8    born_timestamp   int64, ms since epoch
    8      4    flags            bit 0: key present, bit 1: tags present
    12     4    key_len
    16     4    tags_len
    20     4    body_len
    24     4    props_len        properties as "k\\0v\\0k\\0v" (UTF-8; no NUL inside keys or values)
    28     ...  key, tags, body, properties bytes

A batch is the concatenation of its rows plus one int32 size per row. The broker validates and
stores these bytes unchanged; readers turn them into Arrow columns. Encoding, validation and
decoding work on whole columns with numpy and pyarrow kernels: no per-message Python loop.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.errors import InvalidBatchError, MessageTooLargeError

HEADER_DTYPE = np.dtype(
    [
        ("born_timestamp", "<i8"),
        ("flags", "<u4"),
        ("key_len", "<i4"),
        ("tags_len", "<i4"),
        ("body_len", "<i4"),
        ("props_len", "<i4"),
    ]
)
HEADER_SIZE = HEADER_DTYPE.itemsize  # 28
FLAG_KEY = 1
FLAG_TAGS = 2
_KNOWN_FLAGS = FLAG_KEY | FLAG_TAGS
_PARTS = 5  # header, key, tags, body, properties

PROPERTIES_TYPE = pa.map_(pa.string(), pa.string())
DECODED_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("tags", pa.string()),
        ("body", pa.binary()),
        ("properties", PROPERTIES_TYPE),
        ("born_timestamp", pa.int64()),
    ]
)

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class PackedBatch:
    """Rows packed back to back in `data`; `sizes[i]` is the byte length of row i."""

    data: bytes
    sizes: Int32Array

    @property
    def count(self) -> int:
        return int(self.sizes.shape[0])

    def sizes_bytes(self) -> bytes:
        return self.sizes.astype("<i4", copy=False).tobytes()

    def row_starts(self) -> Int64Array:
        starts = np.zeros(self.count + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=starts[1:])
        return starts

    def slice(self, start: int, stop: int) -> PackedBatch:
        """Rows [start, stop) as a batch of their own (one bytes copy)."""
        starts = self.row_starts()
        return PackedBatch(self.data[starts[start] : starts[stop]], self.sizes[start:stop].copy())

    @staticmethod
    def from_wire(data: bytes, sizes: bytes) -> PackedBatch:
        if len(sizes) % 4:
            raise InvalidBatchError(f"batch sizes field is {len(sizes)} bytes, not a multiple of 4")
        return PackedBatch(data, np.frombuffer(sizes, dtype="<i4").astype(np.int32))

    @staticmethod
    def concat(batches: Sequence[PackedBatch]) -> PackedBatch:
        if len(batches) == 1:
            return batches[0]
        return PackedBatch(
            b"".join(b.data for b in batches),
            np.concatenate([b.sizes for b in batches]).astype(np.int32),
        )


# ------------------------------------------------------------------------------------ encode


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
        first = int(np.flatnonzero(~_valid_mask(body_arr))[0])
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
        _check_body_sizes(header["body_len"], max_message_bytes)

    header_arr = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int64) * HEADER_SIZE), pa.py_buffer(header.view(np.uint8))],
    )
    every_part = pa.concat_arrays([header_arr, *parts])
    rows_in_order = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if rows_in_order.shape != (n,):
        raise ValueError(f"order has {rows_in_order.shape[0]} positions for {n} rows")
    interleave = (np.arange(_PARTS, dtype=np.int64)[None, :] * n + rows_in_order[:, None]).ravel()
    rows = every_part.take(pa.array(interleave))
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64, count=_PARTS * n + 1)
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
        return _empty_strings(n), np.zeros(n, dtype=bool)
    if not isinstance(values, pa.Array | pa.ChunkedArray):
        values = pa.array([None if v is None else str(v) for v in values], type=pa.large_string())
    arr = _as_large_binary(values, name)
    if len(arr) != n:
        raise InvalidBatchError(f"column {name!r} has {len(arr)} values for {n} bodies")
    present = _valid_mask(arr)
    if arr.null_count:
        arr = arr.fill_null(b"")
    return arr, present


def _empty_strings(n: int) -> pa.Array:
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int64)), pa.py_buffer(b"")]
    )


def _valid_mask(arr: pa.Array) -> npt.NDArray[np.bool_]:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


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
        now = int(time.time() * 1000)
        return np.asarray(values.fill_null(now).to_numpy(zero_copy_only=False), dtype=np.int64)
    arr = np.asarray(values, dtype=np.int64)
    if arr.shape != (n,):
        raise InvalidBatchError(f"born_timestamp has {arr.shape[0]} values for {n} bodies")
    return arr


def _check_body_sizes(body_len: npt.NDArray[np.int32], limit: int) -> None:
    too_big = np.flatnonzero(body_len > limit)
    if too_big.size:
        i = int(too_big[0])
        raise MessageTooLargeError(f"message {i}: body is {int(body_len[i])} bytes; the limit is {limit} bytes")


def _ranges_to_indices(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Concatenate the index ranges [starts[i], starts[i] + lengths[i]) without a loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    run_starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=run_starts[1:])
    return np.repeat(starts - run_starts, lengths) + np.arange(total, dtype=np.int64)


def _encode_properties(properties: Any, n: int) -> pa.Array:
    if properties is None:
        return _empty_strings(n)
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
    offsets = np.asarray(properties.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    counts = np.diff(offsets) * _valid_mask(properties)
    take = pa.array(_ranges_to_indices(offsets[:-1], counts))
    keys = properties.keys.take(take)
    values = properties.items.take(take)
    if values.null_count:
        values = values.fill_null("")
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
    as_lists = pa.LargeListArray.from_arrays(pa.array(list_offsets), both.take(pa.array(pairs)))
    return pc.binary_join(as_lists, pa.scalar(b"\x00", pa.large_binary()))


# ------------------------------------------------------------------------------------ decode


def parse_headers(batch: PackedBatch) -> npt.NDArray[Any]:
    """The row headers of a batch, checked for consistency with `sizes` and `data`."""
    sizes = batch.sizes
    n = batch.count
    if n == 0:
        raise InvalidBatchError("a batch needs at least one message")
    if int(sizes.min()) < HEADER_SIZE:
        i = int(np.flatnonzero(sizes < HEADER_SIZE)[0])
        raise InvalidBatchError(f"message {i}: size {int(sizes[i])} is below the {HEADER_SIZE}-byte header")
    total = int(sizes.sum(dtype=np.int64))
    if total != len(batch.data):
        raise InvalidBatchError(f"batch sizes add up to {total} bytes but the data is {len(batch.data)} bytes")
    rows = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(batch.row_starts()), pa.py_buffer(batch.data)]
    )
    heads = pc.binary_slice(rows, 0, HEADER_SIZE)  # every row has at least HEADER_SIZE bytes (checked above)
    header = np.frombuffer(heads.buffers()[2], dtype=HEADER_DTYPE, count=n)
    lens = [header[f].astype(np.int64) for f in ("key_len", "tags_len", "body_len", "props_len")]
    bad = (header["flags"] & ~np.uint32(_KNOWN_FLAGS)) != 0
    for arr in lens:
        bad |= arr < 0
    bad |= ((header["flags"] & FLAG_KEY) == 0) & (lens[0] != 0)
    bad |= ((header["flags"] & FLAG_TAGS) == 0) & (lens[1] != 0)
    bad |= HEADER_SIZE + lens[0] + lens[1] + lens[2] + lens[3] != sizes
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidBatchError(f"message {i}: header lengths and flags do not match its {int(sizes[i])} bytes")
    return header


def validate_batch(batch: PackedBatch, max_message_bytes: int) -> npt.NDArray[Any]:
    """Everything the broker checks before storing a batch: structure, sizes, UTF-8, properties."""
    header = parse_headers(batch)
    _check_body_sizes(header["body_len"], max_message_bytes)
    if not (header["flags"].any() or header["props_len"].any()):
        return header  # no key, tag or property: nothing textual to check
    pieces = _pieces(batch, header)
    n = batch.count
    # The same pieces with header and body masked as null: casting checks only keys, tags and
    # properties, in place (no copy of them).
    textual = np.zeros((n, _PARTS), dtype=bool)
    textual[:, [1, 2, 4]] = True
    texts = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        _PARTS * n,
        [pa.py_buffer(np.packbits(textual.ravel(), bitorder="little")), *pieces.buffers()[1:]],
        null_count=2 * n,
    )
    try:
        texts.cast(pa.large_string())
    except pa.ArrowInvalid as exc:
        raise InvalidBatchError(f"a key, tag or property is not valid UTF-8: {exc}") from None
    if header["props_len"].any():  # else every row has no property: nothing to split
        _split_properties(pieces.take(pa.array(np.arange(n, dtype=np.int64) * _PARTS + 4)))
    return header


def decode_batch(batch: PackedBatch, *, properties: bool = True) -> pa.RecordBatch:
    """Rows -> an Arrow record batch of DECODED_SCHEMA, with vectorized kernels only
    (`properties=False` skips decoding them: the column is then all empty maps)."""
    header = parse_headers(batch)
    pieces = _pieces(batch, header)
    n = batch.count
    idx = np.arange(n, dtype=np.int64) * _PARTS
    key = _nullable_text(pieces.take(pa.array(idx + 1)), header["flags"] & FLAG_KEY)
    tags = _nullable_text(pieces.take(pa.array(idx + 2)), header["flags"] & FLAG_TAGS)
    body = pieces.take(pa.array(idx + 3)).cast(pa.binary())
    if properties:
        props = _split_properties(pieces.take(pa.array(idx + 4)))
    else:
        props = pa.MapArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
        )
    born = pa.array(header["born_timestamp"].astype(np.int64), type=pa.int64())
    return pa.RecordBatch.from_arrays([key, tags, body, props, born], schema=DECODED_SCHEMA)


def _pieces(batch: PackedBatch, header: npt.NDArray[Any]) -> pa.Array:
    """A large_binary array of 5 pieces per row (header, key, tags, body, props), zero-copy."""
    n = batch.count
    seg = np.empty((n, _PARTS), dtype=np.int64)
    seg[:, 0] = HEADER_SIZE
    seg[:, 1] = header["key_len"]
    seg[:, 2] = header["tags_len"]
    seg[:, 3] = header["body_len"]
    seg[:, 4] = header["props_len"]
    offsets = np.zeros(_PARTS * n + 1, dtype=np.int64)
    np.cumsum(seg.ravel(), out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), _PARTS * n, [None, pa.py_buffer(offsets), pa.py_buffer(batch.data)]
    )


def _nullable_text(values: pa.Array, present: npt.NDArray[Any]) -> pa.Array:
    text = values.cast(pa.string())
    if bool(np.all(present)):
        return text
    mask = pa.array(present != 0)
    return pc.if_else(mask, text, pa.scalar(None, pa.string()))


def _split_properties(props: pa.Array) -> pa.Array:
    """Property pieces "k\\0v\\0k\\0v" -> map<string,string>; odd structure is an error."""
    n = len(props)
    po = np.frombuffer(props.buffers()[1], dtype=np.int64, count=n + 1)
    po = po - po[0]
    data_buf = props.buffers()[2]
    if po[-1] == 0:
        return pa.MapArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
        )
    base = int(np.frombuffer(props.buffers()[1], dtype=np.int64, count=1)[0])
    raw = np.frombuffer(data_buf, dtype=np.uint8, count=base + int(po[-1]))[base:]
    nul = np.flatnonzero(raw == 0).astype(np.int64)
    nonempty = np.diff(po) > 0
    per_row = (np.searchsorted(nul, po[1:]) - np.searchsorted(nul, po[:-1])) + nonempty
    if np.any(per_row % 2):
        i = int(np.flatnonzero(per_row % 2)[0])
        raise InvalidBatchError(f"message {i}: properties are not key/value pairs")
    starts = np.sort(np.concatenate([po[:-1][nonempty], nul + 1]))
    ends = np.sort(np.concatenate([nul, po[1:][nonempty]]))
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = ends
    spans = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(bounds) - 1,
        [None, pa.py_buffer(bounds), pa.py_buffer(raw)],
    )
    m = len(starts)
    keys = spans.take(pa.array(np.arange(0, 2 * m, 4, dtype=np.int64))).cast(pa.string())
    values = spans.take(pa.array(np.arange(2, 2 * m, 4, dtype=np.int64))).cast(pa.string())
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(per_row // 2, out=map_offsets[1:])
    return pa.MapArray.from_arrays(pa.array(map_offsets), keys, values)


def take_rows(batch: PackedBatch, indices: npt.NDArray[np.int64]) -> PackedBatch:
    """The rows at `indices`, in that order, as a new batch (one vectorized copy)."""
    starts = batch.row_starts()
    rows = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), batch.count, [None, pa.py_buffer(starts), pa.py_buffer(batch.data)]
    )
    picked = rows.take(pa.array(indices))
    offsets = np.frombuffer(picked.buffers()[1], dtype=np.int64, count=len(indices) + 1)
    data = picked.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
    return PackedBatch(data, batch.sizes[indices].astype(np.int32))


def split_by_bytes(batch: PackedBatch, max_bytes: int) -> list[PackedBatch]:
    """Consecutive slices of at most `max_bytes` each (a single larger row stays alone)."""
    if len(batch.data) <= max_bytes:
        return [batch]
    starts = batch.row_starts()
    pieces = []
    i = 0
    while i < batch.count:
        j = int(np.searchsorted(starts, starts[i] + max_bytes, side="right")) - 1
        j = max(j, i + 1)
        pieces.append(batch.slice(i, j))
        i = j
    return pieces
