"""Helpers for static-topic tests: read a logic queue to its end, send numbered messages."""

from __future__ import annotations

from staticmq_spark.client import Producer, PullConsumer, PullStatus


def read_queue(
    consumer: PullConsumer, topic: str, queue: int, start: int = 0, tags: str = ""
) -> list[tuple[int, bytes]]:
    """Every (logic offset, body) from `start` to the end, following segment jumps (with `tags`,
    only the messages the tag expression takes)."""
    out: list[tuple[int, bytes]] = []
    offset = start
    for _ in range(10_000):
        res = consumer.pull(topic, queue, offset, max_messages=500, tags=tags)
        if res.status is PullStatus.FOUND:
            out.extend(
                zip(res.batch.column("queue_offset").to_pylist(), res.batch.column("body").to_pylist(), strict=True)
            )
            offset = res.next_offset
        elif res.status in (PullStatus.OFFSET_MOVED, PullStatus.RETRY_AT_NEXT) and res.next_offset > offset:
            offset = res.next_offset
        else:
            return out
    raise AssertionError("read_queue did not finish")


def send_numbered(producer: Producer, topic: str, queue: int, prefix: str, n: int) -> list[int]:
    """Send n messages "<prefix>-<i>" to one logic queue; returns their logic offsets."""
    offsets = []
    for i in range(n):
        r = producer.send(topic, f"{prefix}-{i}".encode(), queue=queue)
        offsets.append(r.queue_offset)
    return offsets
