"""Topic and consumer-group listings, and resetting a group's offsets (RocketMQ's
`resetOffsetByTime`): to the earliest, the latest, the first message at or after a time, or
an explicit offset, per (logic) queue. A reset is a commit on each queue; on a static topic the
logic offset is committed on the segment that holds it, then read back (double-read-check)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.client.rpc import Channels
from staticmq_spark.errors import ConflictError, NotFoundError, TopicNotFoundError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

if TYPE_CHECKING:
    from staticmq_spark.client.admin import Admin

EARLIEST = "earliest"
LATEST = "latest"


@dataclass(frozen=True, slots=True)
class TopicSummary:
    topic: str
    static: bool
    total_queues: int  # logic queues of a static topic, else the sum of write queues
    brokers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    topics: tuple[str, ...]
    last_commit: int


@dataclass(frozen=True, slots=True)
class ResetRow:
    topic: str
    queue_id: int
    broker: str
    before: int | None
    after: int


def topic_list(admin: Admin) -> list[TopicSummary]:
    found: dict[str, list[tuple[str, int, bool, int]]] = {}
    for b in admin.cluster_info():
        for cfg in admin.topic_configs(b.addr):
            found.setdefault(cfg.name, []).append((b.name, cfg.write_queues, cfg.is_static, cfg.total_queues))
    out = []
    for topic, held in sorted(found.items()):
        static = any(s for _, _, s, _ in held)
        total = max(t for *_, t in held) if static else sum(w for _, w, _, _ in held)
        out.append(TopicSummary(topic, static, total, tuple(sorted(n for n, *_ in held))))
    return out


def group_list(admin: Admin) -> list[GroupSummary]:
    topics: dict[str, set[str]] = {}
    last: dict[str, int] = {}
    for b in admin.cluster_info():
        req = pb.ConsumerOffsetsRequest(group="", topic="")
        for e in admin.call(b.name, admin.stub(b.addr).ListConsumerOffsets, req).entries:
            topics.setdefault(e.group, set()).add(e.topic)
            last[e.group] = max(last.get(e.group, 0), e.update_timestamp)
    return [GroupSummary(g, tuple(sorted(t)), last[g]) for g, t in sorted(topics.items())]


def reset_offsets(
    namesrv: str, group: str, topic: str, to: str | int, *, by_time: bool = False, channels: Channels | None = None
) -> list[ResetRow]:
    """Commit `to` for every queue of `topic`: EARLIEST, LATEST, an offset, or (`by_time`) the
    first offset stored at or after `to` ms since epoch."""
    rows = []
    with PullConsumer(namesrv, group=group, channels=channels) as consumer:
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
