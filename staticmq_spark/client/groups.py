"""Resetting a group's offsets (RocketMQ's `resetOffsetByTime`), written once for every backend:
to the earliest, the latest, the first message at or after a time, or an explicit offset, per
(logic) queue. A reset is a commit on each queue, read back (on a static topic the logic offset
is committed on the segment that holds it: a newer segment's later commit would win)."""

from __future__ import annotations

from staticmq_spark.backends.types import ResetRow
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.errors import ConflictError, NotFoundError, TopicNotFoundError

EARLIEST = "earliest"
LATEST = "latest"


def reset_offsets(consumer: PullConsumer, topic: str, to: str | int, *, by_time: bool = False) -> list[ResetRow]:
    """Commit `to` for every queue of `topic` with `consumer`'s group: EARLIEST, LATEST, an
    offset, or (`by_time`) the first offset stored at or after `to` ms since epoch."""
    rows = []
    queues = consumer.queues(topic)
    if not queues:
        raise TopicNotFoundError(f"topic {topic!r} has no queues")
    for q in queues:
        if not q.available:
            raise NotFoundError(f"queue {q.queue_id} of {topic!r} has no live broker; nothing was reset after it")
        broker = None if q.broker.startswith("__") else q.broker
        before = consumer.committed(topic, q.queue_id, broker)
        target = _target(consumer, topic, q.queue_id, broker, to, by_time)
        consumer.commit(topic, q.queue_id, target, broker)
        after = consumer.committed(topic, q.queue_id, broker)
        if after != target:
            raise ConflictError(
                f"queue {q.queue_id} of {topic!r}: reset to {target} reads back as {after} (a newer segment "
                "of the logic queue holds a later commit of the group)"
            )
        rows.append(ResetRow(topic, q.queue_id, q.broker, before, target))
    return rows


def _target(consumer: PullConsumer, topic: str, queue: int, broker: str | None, to: str | int, by_time: bool) -> int:
    if to == EARLIEST:
        return consumer.min_offset(topic, queue, broker)
    if to == LATEST:
        return consumer.max_offset(topic, queue, broker)
    if by_time:
        return consumer.offset_for_timestamp(topic, queue, int(to), broker)
    low, high = consumer.min_offset(topic, queue, broker), consumer.max_offset(topic, queue, broker)
    return min(max(int(to), low), high)
