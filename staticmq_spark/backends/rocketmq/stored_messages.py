"""RocketMQ's stored-message format (a pull answer's body) decoded into Arrow columns, vectorized.

Only the record walk (each record starts where the previous one's TOTALSIZE ends) touches every
message in Python, and it handles ints only; every field is then gathered with numpy, and key,
body and properties are zero-copy slices of the pulled buffer.
"""

from __future__ import annotations

import zlib

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.rocketmq.frames import FrameError
from staticmq_spark.backends.types import MessageColumns
from staticmq_spark.protocol import arrays
from staticmq_spark.protocol.codec import DECODED_SCHEMA

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB: topic length is 2 bytes
COMPRESSED = 0x1
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
INNER_BATCH = 0x80
KEY_SEPARATOR = " "
# MessageConst names RocketMQ itself writes: not user properties.
SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET",
        "INNER_MULTI_DISPATCH",
        "INNER_NUM",
        "INNER_BASE",
        "__SHARDINGKEY",
        "__CRC32#",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_MS",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY",
        "__STARTDELIVERTIME",
        "bname",
        "TRACE_CONTEXT",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
    }
)

I64 = npt.NDArray[np.int64]
_SYSTEM_NAMES = arrays.strings(sorted(SYSTEM_PROPERTIES))  # not pa.array: it would import pandas (0.3 s)


def record_starts(body: bytes) -> I64:
    """Where each record begins. Records chain by their TOTALSIZE, so this walk is sequential;
    a run of equal sizes (the usual case: one producer, one message shape) is checked and
    skipped with one vectorized read, so the Python loop runs once per change of size."""
    end = len(body)
    raw = np.frombuffer(body, dtype=np.uint8)
    pieces: list[I64] = []
    pos = 0
    while pos < end:
        size = _size_at(body, pos, end)
        count = (end - pos) // size
        run = 1
        if count > 1 and _size_at(body, pos + size, end) == size:
            at = pos + size * np.arange(count, dtype=np.int64)
            same = _be(raw, at, 4) == size
            run = count if bool(same.all()) else int(np.argmin(same))
        pieces.append(pos + size * np.arange(run, dtype=np.int64))
        pos += size * run
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)


def _size_at(body: bytes, pos: int, end: int) -> int:
    if end - pos < 4:
        raise FrameError(f"pulled body ends with {end - pos} stray byte(s) at {pos}")
    size = int.from_bytes(body[pos : pos + 4], "big", signed=True)
    if size < 92 or pos + size > end:
        raise FrameError(f"stored message at byte {pos} has size {size}: the pulled body is corrupt")
    return size


def _be(raw: npt.NDArray[np.uint8], at: I64, width: int) -> I64:
    idx = at[:, None] + np.arange(width, dtype=np.int64)
    dtype = {1: ">u1", 2: ">u2", 4: ">i4", 8: ">i8"}[width]
    return np.ascontiguousarray(raw[idx]).view(dtype).reshape(-1).astype(np.int64)


def decode_stored(body: bytes, *, properties: bool = True) -> MessageColumns:
    raw = np.frombuffer(body, dtype=np.uint8)
    s = record_starts(body)
    n = len(s)
    sizes = _be(raw, s, 4)
    magic = _be(raw, s + 4, 4)
    if np.any((magic != MAGIC_V1) & (magic != MAGIC_V2)):
        i = int(np.flatnonzero((magic != MAGIC_V1) & (magic != MAGIC_V2))[0])
        raise FrameError(f"stored message {i} has magic {int(magic[i]) & 0xFFFFFFFF:#x}: not a RocketMQ record")
    sys_flag = _be(raw, s + 36, 4)
    if np.any(sys_flag & INNER_BATCH):
        raise FrameError("inner-batch records (queue.type=BatchCQ topics) are not supported by the staticmq reader")
    queue_offsets = _be(raw, s + 20, 8)
    born = _be(raw, s + 40, 8)
    store_ts_at = s + 48 + np.where(sys_flag & BORNHOST_V6, 20, 8)
    store_ts = _be(raw, store_ts_at, 8)
    body_len_at = store_ts_at + 8 + np.where(sys_flag & STOREHOST_V6, 20, 8) + 4 + 8
    body_len = _be(raw, body_len_at, 4)
    body_at = body_len_at + 4
    topic_len_at = body_at + body_len
    v2 = magic == MAGIC_V2
    topic_len = np.where(v2, _be(raw, topic_len_at, 2), _be(raw, topic_len_at, 1))
    props_len_at = topic_len_at + np.where(v2, 2, 1) + topic_len
    props_len = _be(raw, props_len_at, 2)
    props_at = props_len_at + 2
    if np.any(props_at + props_len != s + sizes):
        i = int(np.flatnonzero(props_at + props_len != s + sizes)[0])
        raise FrameError(f"stored message {i}: its fields do not add up to its size {int(sizes[i])}")
    bounds = np.empty(4 * n + 1, dtype=np.int64)  # per record: fixed | body | topic | props
    bounds[0:-1:4], bounds[1::4], bounds[2::4], bounds[3::4] = s, body_at, topic_len_at, props_at
    bounds[-1] = len(body)
    pieces = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), 4 * n, [None, pa.py_buffer(bounds), pa.py_buffer(body)]
    )
    idx = np.arange(n, dtype=np.int64) * 4
    bodies = pieces.take(pa.array(idx + 1)).cast(pa.binary())
    if np.any(sys_flag & COMPRESSED):
        bodies = _decompressed(bodies, sys_flag)
    props = pieces.take(pa.array(idx + 3)).cast(pa.string())
    key, tags, user_props = _split_properties(props, user=properties)
    columns = pa.RecordBatch.from_arrays(
        [key, tags, bodies, user_props, pa.array(born, pa.int64())], schema=DECODED_SCHEMA
    )
    return MessageColumns(columns, queue_offsets, store_ts)


def _decompressed(bodies: pa.Array, sys_flag: I64) -> pa.Array:
    """Per-record decompression (compression is per message in RocketMQ); rare, so a slow path."""
    out: list[bytes | None] = []
    for i, value in enumerate(bodies.to_pylist()):
        flag = int(sys_flag[i])
        out.append(_decompress(value, (flag >> 8) & 0x7) if flag & COMPRESSED and value is not None else value)
    return pa.array(out, pa.binary())


def _decompress(data: bytes, kind: int) -> bytes:
    if kind in (0, 3):
        return zlib.decompress(data)
    if kind == 1:
        import lz4.frame  # type: ignore[import-not-found,import-untyped,unused-ignore]

        return bytes(lz4.frame.decompress(data))
    if kind == 2:
        import zstandard  # type: ignore[import-not-found,import-untyped,unused-ignore]

        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(data))
    raise FrameError(f"unknown RocketMQ compression type {kind}")


def _split_properties(props: pa.Array, *, user: bool) -> tuple[pa.Array, pa.Array, pa.Array]:
    """`k\x01v\x02…` strings -> (KEYS, TAGS, map of the user's own properties), one split for all."""
    n = len(props)
    entries = pc.split_pattern(pc.utf8_rtrim(props, characters="\x02"), "\x02")
    parents = np.asarray(pc.list_parent_indices(entries), dtype=np.int64)
    pairs = pc.split_pattern(pc.list_flatten(entries), "\x01", max_splits=1)
    whole = np.asarray(pc.equal(pc.list_value_length(pairs), 2), dtype=bool)
    names = pc.list_element(pairs.filter(pa.array(whole)), 0)
    values = pc.list_element(pairs.filter(pa.array(whole)), 1)
    owner = parents[whole]
    key = _scatter_named(names, values, owner, "KEYS", n)
    tags = _scatter_named(names, values, owner, "TAGS", n)
    if not user:
        return key, tags, arrays.empty_maps(n)
    keep = np.asarray(pc.invert(pc.is_in(names, _SYSTEM_NAMES)), dtype=bool) & np.asarray(
        pc.not_equal(names, ""), dtype=bool
    )
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner[keep], minlength=n), out=offsets[1:])
    mask = pa.array(keep)
    return key, tags, pa.MapArray.from_arrays(pa.array(offsets), names.filter(mask), values.filter(mask))


def _scatter_named(names: pa.Array, values: pa.Array, owner: I64, name: str, n: int) -> pa.Array:
    """The value of property `name` per message (null where absent or empty; the last one wins)."""
    hit = np.asarray(pc.equal(names, name), dtype=bool)
    index = np.full(n, -1, dtype=np.int64)
    index[owner[hit]] = np.flatnonzero(hit)
    found = values.take(pa.array(index, mask=index < 0))
    return pc.if_else(pc.equal(found, ""), pa.scalar(None, pa.string()), found)
