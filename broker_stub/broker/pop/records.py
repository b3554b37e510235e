"""The rows of the revive log: checkpoints (CK), acks (ACK) and retirements (DONE), as packed
message rows (staticmq_spark/protocol/rows/codec.py) whose tag names the kind and whose body is a
little-endian binary record. Pure encoding and decoding; no I/O.

CK body (one popped batch of one queue):

    version u8 | flags u8 (1 retry, 2 order) | reserved u16 | count u32
    queue_id i32 | source_queue i32 | gen i32 | reserved i32
    pop_time i64 | invisible_ms i64 | start_offset i64 | offset_delta i64 | next_begin i64
    group, topic, origin_topic, source_bname: u16 length + UTF-8 each
    order CKs only: state u8[count] (1 = already done before this delivery), attempts i32[count]

`start_offset` is the physical offset of the first message in `source_bname/topic/source_queue`
(empty bname: this broker); logic offset = physical + offset_delta. `next_begin` is where the
queue's pop offset stands once this CK is stored (-1: the CK does not move it, as for the CK of
change_invisible_time). A CK's id is the revive-log offset of its row.

ACK body, as runs of consecutive messages of one CK (a whole batch acked is one run):
runs u32 | ck_ids i64[runs] | first indices u32[runs] | lengths u32[runs]. A SUP row has the same
body: those messages were moved to a newer CK by change_invisible_time (in the same append as it).
DONE body: count u32 | ck_ids i64[count] - the CKs revived or replaced; their state ends here.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from staticmq_spark.protocol.rows.codec import FLAG_TAGS, HEADER_SIZE, PackedBatch

TAG_CK = b"ck"
TAG_ACK = b"ack"
TAG_SUPERSEDE = b"sup"
TAG_DONE = b"done"
FLAG_RETRY = 1
FLAG_ORDER = 2
RECORD_VERSION = 1

_ROW_HEADER = struct.Struct("<qIiiii")  # born_ts, flags, key_len, tags_len, body_len, props_len
_CK_HEAD = struct.Struct("<BBHIiiiiqqqqq")
_COUNT = struct.Struct("<I")
_STR_LEN = struct.Struct("<H")


class RecordFormatError(ValueError):
    """A revive-log row that does not decode (a bug or foreign data): it is skipped, loudly."""


@dataclass(frozen=True, slots=True)
class CkRecord:
    group: str
    topic: str  # the popped topic: the retry topic for retried messages
    origin_topic: str  # the topic consumers asked for
    queue_id: int
    source_bname: str  # "" = this broker
    source_queue: int
    gen: int
    pop_time: int
    invisible_ms: int
    start_offset: int
    offset_delta: int
    count: int
    next_begin: int
    retry: bool = False
    order: bool = False
    done_before: bytes = b""  # order: u8 per message, 1 = done before this delivery (not handed out)
    attempts: bytes = b""  # order: i32 per message, deliveries including this one

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms


@dataclass(frozen=True, slots=True)
class AckRecord:
    ck_ids: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int64]
    superseded: bool = False  # a SUP row: moved to a newer CK, not consumed


@dataclass(frozen=True, slots=True)
class DoneRecord:
    ck_ids: npt.NDArray[np.int64]


Record = CkRecord | AckRecord | DoneRecord


# ------------------------------------------------------------------------------------ encode


def encode_ck(ck: CkRecord) -> bytes:
    flags = (FLAG_RETRY if ck.retry else 0) | (FLAG_ORDER if ck.order else 0)
    parts = [
        _CK_HEAD.pack(
            RECORD_VERSION,
            flags,
            0,
            ck.count,
            ck.queue_id,
            ck.source_queue,
            ck.gen,
            0,
            ck.pop_time,
            ck.invisible_ms,
            ck.start_offset,
            ck.offset_delta,
            ck.next_begin,
        )
    ]
    for text in (ck.group, ck.topic, ck.origin_topic, ck.source_bname):
        raw = text.encode()
        parts += [_STR_LEN.pack(len(raw)), raw]
    if ck.order:
        if len(ck.done_before) != ck.count or len(ck.attempts) != 4 * ck.count:
            raise RecordFormatError("an order CK needs one done flag and one attempt count per message")
        parts += [ck.done_before, ck.attempts]
    return _row(TAG_CK, b"".join(parts))


def encode_ack(ck_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64], *, superseded: bool = False) -> bytes:
    if len(ck_ids) == 0:
        return _row(TAG_SUPERSEDE if superseded else TAG_ACK, _COUNT.pack(0))
    order = np.lexsort((indices, ck_ids))
    ids, idx = ck_ids[order], indices[order]
    starts = np.flatnonzero(np.concatenate(([True], (ids[1:] != ids[:-1]) | (idx[1:] != idx[:-1] + 1))))
    lengths = np.diff(np.concatenate((starts, [len(ids)])))
    body = b"".join(
        [
            _COUNT.pack(len(starts)),
            ids[starts].astype("<i8").tobytes(),
            idx[starts].astype("<u4").tobytes(),
            lengths.astype("<u4").tobytes(),
        ]
    )
    return _row(TAG_SUPERSEDE if superseded else TAG_ACK, body)


def encode_done(ck_ids: npt.NDArray[np.int64]) -> bytes:
    return _row(TAG_DONE, _COUNT.pack(len(ck_ids)) + ck_ids.astype("<i8").tobytes())


def _row(tag: bytes, body: bytes) -> bytes:
    head = _ROW_HEADER.pack(int(time.time() * 1000), FLAG_TAGS, 0, len(tag), len(body), 0)
    return head + tag + body


def pack_rows(rows: list[bytes]) -> PackedBatch:
    return PackedBatch(b"".join(rows), np.array([len(r) for r in rows], dtype=np.int32))


# ------------------------------------------------------------------------------------ decode


def decode_rows(data: bytes, sizes: npt.NDArray[np.int32]) -> list[Record]:
    """The records of consecutive revive-log rows, in order."""
    out: list[Record] = []
    pos = 0
    for size in sizes.tolist():
        out.append(decode_row(memoryview(data)[pos : pos + size]))
        pos += size
    return out


def decode_row(row: memoryview) -> Record:
    if len(row) < HEADER_SIZE:
        raise RecordFormatError(f"revive-log row of {len(row)} bytes is shorter than a row header")
    _, _, key_len, tags_len, body_len, props_len = _ROW_HEADER.unpack_from(row)
    if HEADER_SIZE + key_len + tags_len + body_len + props_len != len(row):
        raise RecordFormatError("revive-log row lengths do not add up")
    tag = bytes(row[HEADER_SIZE + key_len : HEADER_SIZE + key_len + tags_len])
    body = row[HEADER_SIZE + key_len + tags_len : HEADER_SIZE + key_len + tags_len + body_len]
    try:
        if tag == TAG_CK:
            return _decode_ck(body)
        if tag in (TAG_ACK, TAG_SUPERSEDE):
            return _decode_ack(body, superseded=tag == TAG_SUPERSEDE)
        if tag == TAG_DONE:
            n = _COUNT.unpack_from(body)[0]
            return DoneRecord(np.frombuffer(body, dtype="<i8", count=n, offset=4).astype(np.int64))
    except (struct.error, ValueError) as exc:
        raise RecordFormatError(f"revive-log {tag!r} row is malformed: {exc}") from None
    raise RecordFormatError(f"revive-log row has unknown tag {tag!r}")


def _decode_ack(body: memoryview, *, superseded: bool) -> AckRecord:
    runs = _COUNT.unpack_from(body)[0]
    ids = np.frombuffer(body, dtype="<i8", count=runs, offset=4).astype(np.int64)
    firsts = np.frombuffer(body, dtype="<u4", count=runs, offset=4 + 8 * runs).astype(np.int64)
    lengths = np.frombuffer(body, dtype="<u4", count=runs, offset=4 + 12 * runs).astype(np.int64)
    total = int(lengths.sum())
    run_starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    indices = np.repeat(firsts - run_starts, lengths) + np.arange(total, dtype=np.int64)
    return AckRecord(np.repeat(ids, lengths), indices, superseded)


def _decode_ck(body: memoryview) -> CkRecord:
    (version, flags, _, count, queue_id, source_queue, gen, _, pop_time, invisible_ms, start, delta, nxt) = (
        _CK_HEAD.unpack_from(body)
    )
    if version != RECORD_VERSION:
        raise RecordFormatError(f"CK record version {version} is not {RECORD_VERSION}")
    pos = _CK_HEAD.size
    texts = []
    for _ in range(4):
        (length,) = _STR_LEN.unpack_from(body, pos)
        pos += 2
        texts.append(bytes(body[pos : pos + length]).decode())
        pos += length
    order = bool(flags & FLAG_ORDER)
    done_before = attempts = b""
    if order:
        done_before = bytes(body[pos : pos + count])
        attempts = bytes(body[pos + count : pos + 5 * count])
        if len(attempts) != 4 * count:
            raise RecordFormatError("order CK record is truncated")
    group, topic, origin_topic, bname = texts
    return CkRecord(
        group=group,
        topic=topic,
        origin_topic=origin_topic,
        queue_id=queue_id,
        source_bname=bname,
        source_queue=source_queue,
        gen=gen,
        pop_time=pop_time,
        invisible_ms=invisible_ms,
        start_offset=start,
        offset_delta=delta,
        count=count,
        next_begin=nxt,
        retry=bool(flags & FLAG_RETRY),
        order=order,
        done_before=done_before,
        attempts=attempts,
    )
