"""Validating packed message rows and decoding them into Arrow columns, vectorized."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import (
    DECODED_SCHEMA,
    FLAG_KEY,
    FLAG_TAGS,
    HEADER_DTYPE,
    HEADER_SIZE,
    KNOWN_FLAGS,
    PARTS,
    PackedBatch,
    check_body_sizes,
)


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
    header = np.frombuffer(_header_bytes(batch), dtype=HEADER_DTYPE, count=n)
    lens = [header[f].astype(np.int64) for f in ("key_len", "tags_len", "body_len", "props_len")]
    bad = (header["flags"] & ~np.uint32(KNOWN_FLAGS)) != 0
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
    check_body_sizes(header["body_len"], max_message_bytes)
    if not (header["flags"].any() or header["props_len"].any()):
        return header  # no key, tag or property: nothing textual to check
    pieces = _pieces(batch, header)
    n = batch.count
    # The same pieces with header and body masked as null: casting checks only keys, tags and
    # properties, in place (no copy of them).
    textual = np.zeros((n, PARTS), dtype=bool)
    textual[:, [1, 2, 4]] = True
    texts = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        PARTS * n,
        [pa.py_buffer(np.packbits(textual.ravel(), bitorder="little")), *pieces.buffers()[1:]],
        null_count=2 * n,
    )
    try:
        texts.cast(pa.large_string())
    except pa.ArrowInvalid as exc:
        raise InvalidBatchError(f"a key, tag or property is not valid UTF-8: {exc}") from None
    if header["props_len"].any():  # else every row has no property: nothing to split
        _split_properties(pieces.take(arrays.numbers(np.arange(n, dtype=np.int64) * PARTS + 4)))
    return header


def decode_batch(batch: PackedBatch, *, properties: bool = True) -> pa.RecordBatch:
    """Rows -> an Arrow record batch of DECODED_SCHEMA, with vectorized kernels only
    (`properties=False` skips decoding them: the column is then all empty maps)."""
    header = parse_headers(batch)
    pieces = _pieces(batch, header)
    n = batch.count
    idx = np.arange(n, dtype=np.int64) * PARTS
    key = arrays.nullable_strings(pieces.take(arrays.numbers(idx + 1)), header["flags"] & FLAG_KEY)
    tags = arrays.nullable_strings(pieces.take(arrays.numbers(idx + 2)), header["flags"] & FLAG_TAGS)
    body = pieces.take(arrays.numbers(idx + 3)).cast(pa.binary())
    props = _split_properties(pieces.take(arrays.numbers(idx + 4))) if properties else arrays.empty_maps(n)
    born = arrays.numbers(header["born_timestamp"].astype(np.int64))
    return pa.RecordBatch.from_arrays([key, tags, body, props, born], schema=DECODED_SCHEMA)


def tags_of(batch: PackedBatch, header: npt.NDArray[Any] | None = None) -> pa.Array:
    """The batch's tag column alone (binary, empty where a row has none), zero-copy. `header`: the
    batch's parse_headers, when the caller has it."""
    if header is None:
        header = parse_headers(batch)
    idx = np.arange(batch.count, dtype=np.int64) * PARTS + 2
    return _pieces(batch, header).take(arrays.numbers(idx)).cast(pa.binary())


def _header_bytes(batch: PackedBatch) -> pa.Buffer:
    """Every row's first HEADER_SIZE bytes, back to back (each row has at least that many: checked
    before). Two pieces per row, [start, start + HEADER_SIZE) and the rest, keep the offsets
    monotonic; taking the even ones copies the headers alone."""
    n = batch.count
    starts = batch.row_starts()
    bounds = np.empty(2 * n + 1, dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = starts[:-1] + HEADER_SIZE
    halves = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(batch.data)]
    )
    heads = halves.take(arrays.numbers(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return heads.buffers()[2]


def _pieces(batch: PackedBatch, header: npt.NDArray[Any]) -> pa.Array:
    """A large_binary array of 5 pieces per row (header, key, tags, body, props), zero-copy."""
    n = batch.count
    seg = np.empty((n, PARTS), dtype=np.int64)
    seg[:, 0] = HEADER_SIZE
    seg[:, 1] = header["key_len"]
    seg[:, 2] = header["tags_len"]
    seg[:, 3] = header["body_len"]
    seg[:, 4] = header["props_len"]
    offsets = np.zeros(PARTS * n + 1, dtype=np.int64)
    np.cumsum(seg.ravel(), out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), PARTS * n, [None, pa.py_buffer(offsets), pa.py_buffer(batch.data)]
    )


def _split_properties(props: pa.Array) -> pa.Array:
    """Property pieces "k\\0v\\0k\\0v" -> map<string,string>; odd structure is an error."""
    n = len(props)
    po = np.frombuffer(props.buffers()[1], dtype=np.int64, count=n + 1)
    po = po - po[0]
    data_buf = props.buffers()[2]
    if po[-1] == 0:
        return arrays.empty_maps(n)
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
    keys = spans.take(arrays.numbers(np.arange(0, 2 * m, 4, dtype=np.int64))).cast(pa.string())
    values = spans.take(arrays.numbers(np.arange(2, 2 * m, 4, dtype=np.int64))).cast(pa.string())
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(per_row // 2, out=map_offsets[1:])
    return pa.MapArray.from_arrays(arrays.numbers(map_offsets), keys, values)
