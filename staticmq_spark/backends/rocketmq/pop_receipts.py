"""RocketMQ's pop receipt handles and the pop answer's offset headers, as its Java client builds
and reads them (`ExtraInfoUtil`, `MQClientAPIImpl.processPopResponse`, `BatchAck`). Pure.

A receipt handle ("extraInfo", the POP_CK property a Java consumer sees) is eight fields joined
by spaces:

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId queueOffset

`retry` is "0" for the topic itself, "1" for the group's retry topic `%RETRY%{group}_{topic}`,
"2" for its v2 name `%RETRY%{group}+{topic}`. Acks name the real topic (the retry topic when
`retry` is not "0") and go to `brokerName`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass

from staticmq_spark.errors import ReceiptHandleError

RETRY_PREFIX = "%RETRY%"
NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"
ORDER_REVIVE_QUEUE = 999  # KeyBuilder.POP_ORDER_REVIVE_QUEUE: the reviveQid of an order pop


def retry_mark(stored_topic: str) -> str:
    """ExtraInfoUtil.getRetry: which topic a popped message was stored in."""
    if stored_topic.startswith(RETRY_PREFIX):
        return RETRY_V2 if "+" in stored_topic else RETRY_V1
    return NORMAL


def real_topic(topic: str, group: str, mark: str) -> str:
    """ExtraInfoUtil.getRealTopic: the topic an ack or change of a handle names."""
    if mark == NORMAL:
        return topic
    if mark == RETRY_V1:
        return f"{RETRY_PREFIX}{group}_{topic}"
    if mark == RETRY_V2:
        return f"{RETRY_PREFIX}{group}+{topic}"
    raise ReceiptHandleError(f"receipt handle has retry mark {mark!r}: expected 0, 1 or 2")


@dataclass(frozen=True, slots=True)
class Receipt:
    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker: str
    queue_id: int  # physical queue of the topic or of its retry topic
    offset: int  # physical offset there

    def text(self) -> str:
        return " ".join(
            str(v)
            for v in (
                self.ck_offset,
                self.pop_time,
                self.invisible_time,
                self.revive_qid,
                self.retry,
                self.broker,
                self.queue_id,
                self.offset,
            )
        )

    def handle(self) -> bytes:
        return self.text().encode()

    @property
    def invisible_until(self) -> int:
        return self.pop_time + self.invisible_time


def parse_receipt(handle: bytes | str) -> Receipt:
    text = handle.decode(errors="replace") if isinstance(handle, bytes) else handle
    parts = text.split(" ")
    if len(parts) != 8:
        raise ReceiptHandleError(f"not a RocketMQ receipt handle (8 fields joined by spaces): {text[:120]!r}")
    try:
        return Receipt(
            int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5], int(parts[6]), int(parts[7])
        )
    except ValueError:
        raise ReceiptHandleError(f"not a RocketMQ receipt handle (a field is not a number): {text[:120]!r}") from None


def parse_offset_info(text: str | None) -> dict[tuple[str, int], str]:
    """startOffsetInfo / msgOffsetInfo / orderCountInfo: `retry queueId value` entries joined by
    ';' -> {(retry, queueId): value}."""
    out: dict[tuple[str, int], str] = {}
    for entry in (text or "").split(";"):
        if not entry:
            continue
        parts = entry.split(" ")
        if len(parts) != 3:
            raise ReceiptHandleError(f"malformed pop offset info entry {entry!r} in {text!r}")
        if parts[1].startswith("qo"):  # orderCountInfo's per-offset entries (qo{queue}%{offset})
            continue
        out[(parts[0], int(parts[1]))] = parts[2]
    return out


def batch_ack_body(group: str, topic: str, receipts: Iterable[Receipt]) -> bytes:
    """BATCH_ACK_MESSAGE's BatchAckMessageRequestBody: one BatchAck per (retry, queue, ck offset,
    pop time), its acked offsets a java.util.BitSet of (offset - ck offset) as base64 bytes."""
    merged: dict[tuple[str, int, int, int], tuple[Receipt, set[int]]] = {}
    broker = ""
    for r in receipts:
        broker = broker or r.broker
        key = (r.retry, r.queue_id, r.ck_offset, r.pop_time)
        merged.setdefault(key, (r, set()))[1].add(r.offset - r.ck_offset)
    acks = [
        {
            "c": group,
            "t": topic,
            "r": r.retry,
            "so": r.ck_offset,
            "q": r.queue_id,
            "rq": r.revive_qid,
            "pt": r.pop_time,
            "it": r.invisible_time,
            "b": base64.b64encode(java_bitset(bits)).decode(),
        }
        for r, bits in merged.values()
    ]
    return json.dumps({"acks": acks, "brokerName": broker}).encode()


def java_bitset(bits: set[int]) -> bytes:
    """java.util.BitSet.toByteArray: little-endian bytes, bit i of byte i // 8 for index i, no
    trailing zero bytes."""
    if any(b < 0 for b in bits):
        raise ReceiptHandleError(f"an acked offset lies before its checkpoint's start: {sorted(bits)[:5]}")
    if not bits:
        return b""
    value = sum(1 << b for b in bits)
    return value.to_bytes((value.bit_length() + 7) // 8, "little")
