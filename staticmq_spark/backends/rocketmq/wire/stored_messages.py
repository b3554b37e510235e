"""RocketMQ's stored-message format (a pull answer's body) decoded into Arrow columns, vectorized.

Only the record walk (each record starts where the previous one's TOTALSIZE ends) touches every
message in Python, and it handles ints only; every field is then gathered with numpy, and key,
body and properties are zero-copy slices of the pulled buffer.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.rocketmq.wire.frames import FrameError
from staticmq_spark.backends.types import MessageColumns
from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.codec import DECODED_SCHEMA

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
        "ORIGIN_GROUP",
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
_KEYS, _TAGS = int.from_bytes(b"KEYS", "big"), int.from_bytes(b"TAGS", "big")
# The fixed head of every record (MessageDecoder's layout), read for all records in one gather.
_HEAD = np.dtype(
    {
        "names": ["size", "magic", "queue_offset", "sys_flag", "born"],
        "formats": [">i4", ">i4", ">i8", ">i4", ">i8"],
        "offsets": [0, 4, 20, 36, 40],
        "itemsize": 48,
    }
)
_MAGIC_HEAD = np.frombuffer(MAGIC_V1.to_bytes(4, "big", signed=True)[:3], dtype=np.uint8)
_MAGIC_LAST = (MAGIC_V1 & 0xFF, MAGIC_V2 & 0xFF)
_I32 = struct.Struct(">i")


def record_starts(body: bytes) -> I64:
    """Where each record begins. Records chain by their TOTALSIZE, which only a walk follows for
    sure, at ~0.3 us a record in Python. Two shortcuts come first: records all of one size (one
    vectorized check), then a vectorized scan for the magic word whose finds are kept only if they
    are exactly the chain (every one's size ends where the next begins, the last at the body's
    end; a body that holds the magic bytes by chance fails that check and is walked)."""
    raw = np.frombuffer(body, dtype=np.uint8)
    end = len(body)
    if end == 0:
        return np.zeros(0, dtype=np.int64)
    first = _size_at(body, 0, end)
    if end % first == 0:
        same = np.arange(0, end, first, dtype=np.int64)
        if bool(np.all(_be(raw, same, 4) == first)):
            return same
    starts = _magic_candidates(raw)
    if len(starts) and starts[0] == 0 and _chained(raw, starts):
        return starts
    return _walk(body)


def _magic_candidates(raw: npt.NDArray[np.uint8]) -> I64:
    if len(raw) < 8:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(raw[4:-3] == _MAGIC_HEAD[0])
    for i in (1, 2):
        at = at[raw[at + 4 + i] == _MAGIC_HEAD[i]]
    last = raw[at + 7]
    found: I64 = at[(last == _MAGIC_LAST[0]) | (last == _MAGIC_LAST[1])].astype(np.int64)
    return found


def _chained(raw: npt.NDArray[np.uint8], starts: I64) -> bool:
    sizes = _be(raw, starts, 4)
    ends = starts + sizes
    return bool(np.all(sizes >= 92)) and bool(np.array_equal(ends[:-1], starts[1:])) and int(ends[-1]) == len(raw)


def _walk(body: bytes) -> I64:
    """The record chain followed one size at a time."""
    end = len(body)
    starts: list[int] = []
    pos = 0
    while pos < end:
        starts.append(pos)
        pos += _size_at(body, pos, end)
    return np.array(starts, dtype=np.int64)


def _size_at(body: bytes, pos: int, end: int) -> int:
    if end - pos < 4:
        raise FrameError(f"pulled body ends with {end - pos} stray byte(s) at {pos}")
    size: int = _I32.unpack_from(body, pos)[0]
    if size < 92 or pos + size > end:
        raise FrameError(f"stored message at byte {pos} has size {size}: the pulled body is corrupt")
    return size


def _be(raw: npt.NDArray[np.uint8], at: I64, width: int) -> I64:
    """The big-endian integers of `width` bytes at each position `at`."""
    dtype = {1: ">u1", 2: ">u2", 4: ">i4", 8: ">i8"}[width]
    return _rows(raw, at, width).view(dtype).reshape(-1).astype(np.int64)


def _rows(raw: npt.NDArray[np.uint8], at: I64, width: int) -> npt.NDArray[np.uint8]:
    """raw[a : a + width] for each a in `at`, as the rows of one array (a row gather of a strided
    view: several times faster than indexing byte by byte)."""
    if len(raw) < width:
        return np.zeros((0, width), dtype=np.uint8)
    windows = np.lib.stride_tricks.as_strided(raw, shape=(len(raw) - width + 1, width), strides=(1, 1), writeable=False)
    return windows[at]


def decode_stored(body: bytes, *, properties: bool = True) -> MessageColumns:
    head, sys_flag, store_ts, pieces = _layout(body)
    n = len(head)
    idx = np.arange(n, dtype=np.int64) * 4
    bodies = pieces.take(arrays.numbers(idx + 1)).cast(pa.binary())
    if np.any(sys_flag & COMPRESSED):
        bodies = _decompressed(bodies, sys_flag)
    key, tags, user_props = _split_properties(pieces.take(arrays.numbers(idx + 3)), user=properties)
    columns = pa.RecordBatch.from_arrays(
        [key, tags, bodies, user_props, arrays.numbers(head["born"].astype(np.int64))], schema=DECODED_SCHEMA
    )
    return MessageColumns(columns, head["queue_offset"].astype(np.int64), store_ts)


def stored_uniq_keys(body: bytes) -> pa.Array:
    """Each stored record's UNIQ_KEY system property (null where it has none), in record order."""
    head, _sys_flag, _store_ts, pieces = _layout(body)
    idx = np.arange(len(head), dtype=np.int64) * 4
    props = pieces.take(arrays.numbers(idx + 3)).cast(pa.string())
    return pc.struct_field(pc.extract_regex(props, _UNIQ_KEY), "k")


_UNIQ_KEY = "(?:^|\x02)UNIQ_KEY\x01(?P<k>[^\x02]*)"


def _layout(body: bytes) -> tuple[npt.NDArray[np.void], I64, I64, pa.LargeBinaryArray]:
    """Each record's fixed head, its sysFlag, its store time, and its pieces (fixed | body | topic | properties, 4 per
    record) as slices of `body`."""
    raw = np.frombuffer(body, dtype=np.uint8)
    s = record_starts(body)
    n = len(s)
    head = _rows(raw, s, _HEAD.itemsize).view(_HEAD).reshape(-1)
    sizes = head["size"].astype(np.int64)
    magic = head["magic"].astype(np.int64)
    if np.any((magic != MAGIC_V1) & (magic != MAGIC_V2)):
        i = int(np.flatnonzero((magic != MAGIC_V1) & (magic != MAGIC_V2))[0])
        raise FrameError(f"stored message {i} has magic {int(magic[i]) & 0xFFFFFFFF:#x}: not a RocketMQ record")
    sys_flag = head["sys_flag"].astype(np.int64)
    if np.any(sys_flag & INNER_BATCH):
        raise FrameError("inner-batch records (queue.type=BatchCQ topics) are not supported by the staticmq reader")
    store_ts_at = s + 48 + np.where(sys_flag & BORNHOST_V6, 20, 8)
    store_ts = _be(raw, store_ts_at, 8)
    body_len_at = store_ts_at + 8 + np.where(sys_flag & STOREHOST_V6, 20, 8) + 4 + 8
    body_len = _be(raw, body_len_at, 4)
    body_at = body_len_at + 4
    topic_len_at = body_at + body_len
    v2 = magic == MAGIC_V2
    topic_len = (
        np.where(v2, _be(raw, topic_len_at, 2), _be(raw, topic_len_at, 1)) if v2.any() else _be(raw, topic_len_at, 1)
    )
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
    return head, sys_flag, store_ts, pieces


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
    """Each record's properties, `name\x01value\x02…`, -> (KEYS, TAGS, map of the user's own
    properties), read as RocketMQ's MessageDecoder.string2messageProperties reads them: entries end
    at \x02, the name at an entry's first \x01, an entry without one is skipped. The separators of
    all records are found in one scan, and names and values are slices of the same bytes."""
    n = len(props)
    at = np.frombuffer(props.buffers()[1], dtype=np.int64, count=n + 1 + props.offset)[props.offset :]
    data = props.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    starts, ends = at[:-1], at[1:]
    entry_seps = np.flatnonzero(raw == 2)
    pair_seps = np.flatnonzero(raw == 1)
    # entries begin at each record's properties and after each \x02 but the last of a record
    after = np.searchsorted(starts, entry_seps, side="right") - 1  # the record holding each \x02
    inner = entry_seps + 1 < ends[after]
    nonempty = np.flatnonzero(ends > starts)
    begin = np.concatenate([starts[nonempty], entry_seps[inner] + 1])
    owner = np.concatenate([nonempty, after[inner]])
    order = np.argsort(begin, kind="stable")
    begin, owner = begin[order], owner[order]
    stop = np.minimum(ends[owner], np.append(entry_seps, len(raw))[np.searchsorted(entry_seps, begin)])
    sep = np.append(pair_seps, len(raw))[np.searchsorted(pair_seps, begin)]
    whole = sep < stop
    begin, owner, stop, sep = begin[whole], owner[whole], stop[whole], sep[whole]
    entries = len(begin)
    name_len, value_len = sep - begin, stop - sep - 1
    names = _slices(raw, begin, sep)
    values = _slices(raw, sep + 1, stop)
    word = np.zeros(entries, dtype=np.int64)
    four = name_len == 4
    word[four] = _be(raw, begin[four], 4)
    key = _last_named(values, owner, value_len, four & (word == _KEYS), n)
    tags = _last_named(values, owner, value_len, four & (word == _TAGS), n)
    if not user:
        return key, tags, arrays.empty_maps(n)
    every = arrays.numbers(np.arange(entries, dtype=np.int64) * 2)
    name_text = names.take(every).cast(pa.string())
    system = arrays.flag_values(pc.is_in(name_text, value_set=_SYSTEM_NAMES))
    kept = np.flatnonzero(~system & (name_len > 0))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner[kept], minlength=n), out=offsets[1:])
    return (
        key,
        tags,
        pa.MapArray.from_arrays(
            arrays.numbers(offsets),
            name_text.take(arrays.numbers(kept)),
            values.take(arrays.numbers(kept * 2)).cast(pa.string()),
        ),
    )


def _slices(raw: npt.NDArray[np.uint8], begin: I64, end: I64) -> pa.Array:
    """raw[begin[i]:end[i]] as element 2i of a string array over raw's bytes (odd elements are what
    lies between; the slices are in order and do not overlap)."""
    bounds = np.empty(2 * len(begin) + 1, dtype=np.int64)
    bounds[0:-1:2], bounds[1::2], bounds[-1] = begin, end, len(raw)
    if not len(begin):
        bounds[-1] = 0
    return pa.LargeStringArray.from_buffers(2 * len(begin), pa.py_buffer(bounds), pa.py_buffer(raw))


def _last_named(values: pa.Array, owner: I64, value_len: I64, hit: npt.NDArray[np.bool_], n: int) -> pa.Array:
    """The value of the entries `hit` per message (the last one wins; null where absent or empty)."""
    index = np.full(n, -1, dtype=np.int64)
    index[owner[hit]] = np.flatnonzero(hit)
    present = index >= 0
    present[present] = value_len[index[present]] > 0
    if not len(values):
        return pa.nulls(n, pa.string())
    taken = values.take(arrays.numbers(np.where(present, index, 0) * 2)).cast(pa.string())
    return arrays.nullable_strings(taken, present)
