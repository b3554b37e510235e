"""MurmurHash3 x86 32-bit (Austin Appleby's reference) over Arrow binary columns, vectorized with
numpy: the hash behind staticmq's key -> logic queue rule (`staticmq_spark/hashing.py`) and the tag
codes of tag filters (`protocol/consume/tag_filter.py`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.protocol.rows import arrays

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_M5 = np.uint32(5)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_MASK = 0xFFFFFFFF


def _rotl(x: npt.NDArray[np.uint32], r: int) -> npt.NDArray[np.uint32]:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of one byte string (unsigned result)."""
    return int(murmur3_32_many(arrays.large_binaries([data]), seed)[0])


def murmur3_32_many(values: Any, seed: int = 0) -> npt.NDArray[np.uint32]:
    """MurmurHash3 x86_32 of every element of a string/binary Arrow array (nulls hash as b"")."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    arr = values.cast(pa.large_binary())
    arr = arrays.large_binary_nulls_empty(arr)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + n + 1)[arr.offset :]
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = np.concatenate([data, np.zeros(4, dtype=np.uint8)])  # reads past a tail are masked out
    starts = offsets[:-1]
    lens = np.diff(offsets)
    nblocks = lens // 4
    h = np.full(n, seed & _MASK, dtype=np.uint32)
    with np.errstate(over="ignore"):
        active = np.flatnonzero(nblocks > 0)
        b = 0
        while active.size:
            at = starts[active] + 4 * b
            k = (
                data[at].astype(np.uint32)
                | (data[at + 1].astype(np.uint32) << np.uint32(8))
                | (data[at + 2].astype(np.uint32) << np.uint32(16))
                | (data[at + 3].astype(np.uint32) << np.uint32(24))
            )
            k = _rotl(k * _C1, 15) * _C2
            hv = _rotl(h[active] ^ k, 13)
            h[active] = hv * _M5 + _N
            b += 1
            active = active[nblocks[active] > b]
        rem = lens & 3
        tail_at = starts + nblocks * 4
        k1 = np.zeros(n, dtype=np.uint32)
        k1 ^= np.where(rem >= 3, data[tail_at + 2].astype(np.uint32) << np.uint32(16), 0).astype(np.uint32)
        k1 ^= np.where(rem >= 2, data[tail_at + 1].astype(np.uint32) << np.uint32(8), 0).astype(np.uint32)
        k1 ^= np.where(rem >= 1, data[tail_at].astype(np.uint32), 0).astype(np.uint32)
        k1 = _rotl(k1 * _C1, 15) * _C2
        h = np.where(rem > 0, h ^ k1, h).astype(np.uint32)
        h ^= lens.astype(np.uint32)
        h ^= h >> np.uint32(16)
        h *= _F1
        h ^= h >> np.uint32(13)
        h *= _F2
        h ^= h >> np.uint32(16)
    return h
