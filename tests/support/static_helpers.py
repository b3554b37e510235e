"""Helpers for static-topic tests: read a logic queue to its end (through the client's pull
consumer, or through a backend's reader port as the Spark source does), send numbered messages."""

from __future__ import annotations

from staticmq_spark.backends.api import ClusterReader
from staticmq_spark.client import Producer, PullConsumer, PullStatus
from staticmq_spark.source.snapshot import take_snapshot


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


def read_through_reader(reader: ClusterReader, topic: str, queue: int) -> list[tuple[int, bytes]]:
    """Every (logic offset, body) of a logic queue, segment by segment along its chain, with the
    reader port's physical pulls (the path of the Spark source; every backend has it)."""
    snap = take_snapshot(reader, topic)
    out: list[tuple[int, bytes]] = []
    for item in (i for i in snap.chains[queue] if i.decided):
        offset = item.start_offset
        for _ in range(10_000):
            if 0 <= item.end_offset <= offset:
                break
            read = reader.pull_physical(topic, item.bname, snap.addrs[item.bname], item.queue, offset, 500, 10.0)
            if read.status is PullStatus.FOUND and read.messages is not None:
                bodies = read.messages.columns.column("body").to_pylist()
                for physical, body in zip(read.messages.queue_offsets.tolist(), bodies, strict=True):
                    if item.end_offset < 0 or physical < item.end_offset:
                        out.append((item.to_logic(physical), body))
            elif read.status is PullStatus.NO_NEW_MESSAGE or read.next_offset <= offset:
                break
            offset = read.next_offset
    return out


def send_numbered(producer: Producer, topic: str, queue: int, prefix: str, n: int) -> list[int]:
    """Send n messages "<prefix>-<i>" to one logic queue; returns their logic offsets."""
    offsets = []
    for i in range(n):
        r = producer.send(topic, f"{prefix}-{i}".encode(), queue=queue)
        offsets.append(r.queue_offset)
    return offsets
