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
stores these bytes unchanged; readers turn them into Arrow columns. Encoding (encode.py),
validation and decoding (decode.py) work on whole columns with numpy and pyarrow kernels:
no per-message Python loop. This module holds the format, the batch value and row operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

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
KNOWN_FLAGS = FLAG_KEY | FLAG_TAGS
PARTS = 5  # header, key, tags, body, properties

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
    """Rows packed back to back in `data`; `sizes[i]` is the byte length of row i. `data` is a
    view where a broker keeps received rows without copying them (StageRows)."""

    data: bytes | memoryview
    sizes: Int32Array

    def data_bytes(self) -> bytes:
        """`data` as bytes (a copy only if it is a view)."""
        return self.data if isinstance(self.data, bytes) else bytes(self.data)

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
    def from_wire(data: bytes | memoryview, sizes: bytes | memoryview) -> PackedBatch:
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


def check_body_sizes(body_len: npt.NDArray[np.int32], limit: int) -> None:
    too_big = np.flatnonzero(body_len > limit)
    if too_big.size:
        i = int(too_big[0])
        raise MessageTooLargeError(f"message {i}: body is {int(body_len[i])} bytes; the limit is {limit} bytes")


def ranges_to_indices(starts: Int64Array, lengths: Int64Array) -> Int64Array:
    """Concatenate the index ranges [starts[i], starts[i] + lengths[i]) without a loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    run_starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=run_starts[1:])
    return np.repeat(starts - run_starts, lengths) + np.arange(total, dtype=np.int64)


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


def byte_runs(starts: npt.NDArray[np.int64], max_bytes: int) -> list[tuple[int, int]]:
    """The one splitter of rows into requests: row ranges [a, b) whose bytes fit in `max_bytes`,
    consecutive and covering every row (a single larger row stays alone). `starts` holds the n + 1
    boundaries of n rows laid back to back."""
    n = len(starts) - 1
    if n <= 0:
        return []
    if starts[n] - starts[0] <= max_bytes:
        return [(0, n)]
    out = []
    a = 0
    while a < n:
        b = int(np.searchsorted(starts, starts[a] + max_bytes, side="right")) - 1
        b = min(max(b, a + 1), n)
        out.append((a, b))
        a = b
    return out


def split_by_bytes(batch: PackedBatch, max_bytes: int) -> list[PackedBatch]:
    """Consecutive slices of at most `max_bytes` each (a single larger row stays alone)."""
    if len(batch.data) <= max_bytes:
        return [batch]
    return [batch.slice(a, b) for a, b in byte_runs(batch.row_starts(), max_bytes)]
