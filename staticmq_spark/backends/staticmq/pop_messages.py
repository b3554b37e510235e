"""Popped messages as the PopConsumer hands them out, and ack results.

A pop answer is columnar (packed rows plus per-message arrays); it becomes one immutable
PopMessage tuple per message only here, at the end. The rows are split with numpy (headers
gathered and checked in one pass) and sliced into bytes once per message: a receive of a
thousand messages costs well under a millisecond of Python work.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from staticmq_spark.backends.types import PopMessage
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.consume import pop_properties
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from staticmq_spark.protocol.rows.codec import FLAG_KEY, FLAG_TAGS, HEADER_DTYPE, HEADER_SIZE

NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


def popped_messages(topic: str, resp: cpb.PopResponse) -> list[PopMessage]:
    """The messages of a pop answer, in answer order."""
    data = resp.batch.data
    sizes = np.frombuffer(resp.batch.sizes, dtype="<i4").astype(np.int64)
    n = len(sizes)
    if n == 0:
        return []
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    header = _headers(data, sizes, starts)
    key_len = header["key_len"].astype(np.int64)
    tags_len = header["tags_len"].astype(np.int64)
    body_at = starts[:-1] + HEADER_SIZE + key_len + tags_len
    body_end = body_at + header["body_len"]
    retried = np.frombuffer(resp.retried, dtype=np.uint8).astype(bool).tolist()
    size = resp.handle_size
    handles = resp.handles
    if len(handles) != n * size:
        raise InvalidBatchError(f"pop answer has {len(handles)} bytes of handles for {n} messages")
    columns = (
        repeat(topic, n),
        [data[a:b] for a, b in zip(body_at.tolist(), body_end.tolist(), strict=True)],
        _texts(data, starts[:-1] + HEADER_SIZE, key_len, header["flags"] & FLAG_KEY),
        _texts(data, starts[:-1] + HEADER_SIZE + key_len, tags_len, header["flags"] & FLAG_TAGS),
        _properties(data, body_end, header["props_len"].astype(np.int64), retried),
        np.frombuffer(resp.queue_ids, dtype="<i4").tolist(),
        np.frombuffer(resp.queue_offsets, dtype="<i8").tolist(),
        np.frombuffer(resp.reconsume_times, dtype="<i4").tolist(),
        [handles[i : i + size] for i in range(0, n * size, size)],
        repeat(resp.bname, n),
        header["born_timestamp"].tolist(),
        np.frombuffer(resp.store_timestamps, dtype="<i8").tolist(),
        repeat(resp.pop_time + resp.invisible_ms, n),
        retried,
    )
    return [tuple.__new__(PopMessage, row) for row in zip(*columns, strict=True)]


def _headers(data: bytes, sizes: npt.NDArray[np.int64], starts: npt.NDArray[np.int64]) -> npt.NDArray[np.void]:
    """Every row's 28-byte header, gathered in one numpy pass and checked against its size."""
    if int(sizes.min()) < HEADER_SIZE or int(starts[-1]) != len(data):
        raise InvalidBatchError("pop answer rows do not match their sizes")
    raw = np.frombuffer(data, dtype=np.uint8)
    gathered = raw[starts[:-1, None] + np.arange(HEADER_SIZE, dtype=np.int64)]
    header = np.ascontiguousarray(gathered).view(HEADER_DTYPE).reshape(-1)
    total = HEADER_SIZE + sum(header[f].astype(np.int64) for f in ("key_len", "tags_len", "body_len", "props_len"))
    if not np.array_equal(total, sizes):
        raise InvalidBatchError("pop answer row headers do not match their sizes")
    return header


def _texts(
    data: bytes, at: npt.NDArray[np.int64], length: npt.NDArray[np.int64], present: npt.NDArray[Any]
) -> list[str | None]:
    if not present.any():
        return [None] * len(at)
    ends = at + length
    return [
        data[a:b].decode() if p else None for a, b, p in zip(at.tolist(), ends.tolist(), present.tolist(), strict=True)
    ]


def _properties(
    data: bytes, at: npt.NDArray[np.int64], length: npt.NDArray[np.int64], retried: list[bool]
) -> list[Mapping[str, str]]:
    """Properties ("k\\0v\\0..."); the broker's own pop properties are hidden on retried messages."""
    if not length.any():
        return [NO_PROPERTIES] * len(at)
    out: list[Mapping[str, str]] = []
    for a, n, was_retried in zip(at.tolist(), length.tolist(), retried, strict=True):
        if n == 0:
            out.append(NO_PROPERTIES)
            continue
        parts = data[a : a + n].decode().split("\x00")
        pairs = dict(zip(parts[0::2], parts[1::2], strict=True))
        if was_retried:
            pairs = {k: v for k, v in pairs.items() if not k.startswith(pop_properties.PREFIX)}
        out.append(pairs)
    return out
