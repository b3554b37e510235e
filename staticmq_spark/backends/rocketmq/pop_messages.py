"""A RocketMQ pop answer as PopMessage tuples: the stored records of the body (decoded as a pull's,
plus each record's queue id, reconsume count and stored topic), each given its receipt handle as
the Java client builds it (`MQClientAPIImpl.processPopResponse`) and its logic position through
the static topic's mapping. A message stored in the group's retry topic has no logic position:
RocketMQ's revive writes it there without its origin queue or offset."""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from staticmq_spark.backends.rocketmq.pop_receipts import NORMAL, Receipt, parse_offset_info, parse_receipt, retry_mark
from staticmq_spark.backends.rocketmq.wire.stored_messages import (
    BORNHOST_V6,
    MAGIC_V2,
    STOREHOST_V6,
    decode_stored,
    record_starts,
)
from staticmq_spark.backends.types import NO_LOGIC_POSITION, PopMessage
from staticmq_spark.mapping.positions import LogicPosition

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
POP_CK = b"POP_CK"  # set by the broker on a message popped from the retry topic: its receipt handle

# (broker, physical queue, physical offset) -> logic position, None when no segment holds it
Locate = Callable[[str, int, int], LogicPosition | None]


def record_fields(body: bytes, starts: list[int]) -> list[tuple[int, int, str, str | None]]:
    """(queue id, reconsume times, stored topic, POP_CK property or None) of each record
    (MessageDecoder's layout)."""
    out = []
    for s in starts:
        magic = _I32.unpack_from(body, s + 4)[0]
        sys_flag = _I32.unpack_from(body, s + 36)[0]
        queue_id = _I32.unpack_from(body, s + 12)[0]
        at = s + 48 + (20 if sys_flag & BORNHOST_V6 else 8) + 8 + (20 if sys_flag & STOREHOST_V6 else 8)
        reconsume = _I32.unpack_from(body, at)[0]
        at += 4 + 8
        at += 4 + _I32.unpack_from(body, at)[0]
        if magic == MAGIC_V2:
            topic_len, at = _U16.unpack_from(body, at)[0], at + 2
        else:
            topic_len, at = body[at], at + 1
        topic = body[at : at + topic_len].decode()
        at += topic_len
        props = body[at + 2 : at + 2 + _U16.unpack_from(body, at)[0]]
        out.append((queue_id, reconsume, topic, _property(props, POP_CK)))
    return out


def _property(props: bytes, name: bytes) -> str | None:
    """One property of RocketMQ's `name\x01value\x02` string (the last one named so)."""
    found = None
    for entry in props.split(b"\x02"):
        key, sep, value = entry.partition(b"\x01")
        if sep and key == name:
            found = value.decode()
    return found


def popped_messages(
    topic: str, broker: str, header: Mapping[str, str], body: bytes, locate: Locate, *, order: bool
) -> list[PopMessage]:
    starts = record_starts(body)
    if not len(starts):
        return []
    columns = decode_stored(body)
    rows = columns.columns.to_pylist()
    offsets = columns.queue_offsets.tolist()
    stored = columns.store_timestamps.tolist()
    fields = record_fields(body, [int(s) for s in starts])
    pop_time = int(header.get("popTime", 0))
    invisible = int(header.get("invisibleTime", 0))
    revive_qid = int(header.get("reviveQid", 0))
    start_info = parse_offset_info(header.get("startOffsetInfo"))
    msg_info = parse_offset_info(header.get("msgOffsetInfo"))
    order_info = parse_offset_info(header.get("orderCountInfo")) if order else {}
    by_queue: dict[tuple[str, int], list[int]] = {}
    for (queue_id, _, stored_topic, _), offset in zip(fields, offsets, strict=True):
        by_queue.setdefault((retry_mark(stored_topic), queue_id), []).append(offset)
    sorted_offsets = {k: sorted(v) for k, v in by_queue.items()}
    out = []
    for row, offset, store_ts, (queue_id, reconsume, stored_topic, pop_ck) in zip(
        rows, offsets, stored, fields, strict=True
    ):
        if pop_ck is not None:  # from the retry topic, its handle built by the broker
            receipt = parse_receipt(pop_ck)
            out.append(_message(topic, broker, row, receipt, reconsume, int(store_ts), None))
            continue
        mark = retry_mark(stored_topic)
        key = (mark, queue_id)
        ck_offset = int(start_info[key]) if key in start_info else offset
        msg_offset = offset
        if key in msg_info:  # the broker's own offset of the message (equal to the record's)
            listed = [int(o) for o in msg_info[key].split(",")]
            index = sorted_offsets[key].index(offset)
            msg_offset = listed[index] if index < len(listed) else offset
        times = int(order_info[key]) if key in order_info and int(order_info[key]) > 0 else reconsume
        receipt = Receipt(ck_offset, pop_time, invisible, revive_qid, mark, broker, queue_id, msg_offset)
        position = locate(broker, queue_id, offset) if mark == NORMAL else None
        out.append(_message(topic, broker, row, receipt, times, int(store_ts), position))
    return out


def _message(
    topic: str,
    broker: str,
    row: dict[str, Any],
    receipt: Receipt,
    reconsume: int,
    store_ts: int,
    position: LogicPosition | None,
) -> PopMessage:
    return PopMessage(
        topic=topic,
        body=row["body"],
        key=row["key"],
        tags=row["tags"],
        properties=dict(row["properties"] or ()),
        queue_id=position.queue if position else NO_LOGIC_POSITION,
        queue_offset=position.offset if position else NO_LOGIC_POSITION,
        reconsume_times=reconsume,
        handle=receipt.handle(),
        broker=broker,
        born_timestamp=row["born_timestamp"],
        store_timestamp=store_ts,
        invisible_until=receipt.invisible_until,
        retried=receipt.retry != NORMAL,
    )
