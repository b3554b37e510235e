"""Consumer progress of a group, as `consumerProgress` shows it: one row per queue clients see.

For a static topic that is one row per logic queue: the broker offset is the logic max, the
consumer offset the logic committed offset found by the double-read-check (the leader broker
asks the queue's segments newest to oldest), and the last commit time the newest commit stored
on any of the queue's segments. A dynamic topic gets one row per broker and physical queue.
A queue the group never committed on has no consumer offset and no lag (not "lag 0").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from staticmq_spark.errors import NotFoundError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

if TYPE_CHECKING:
    from staticmq_spark.client.admin import Admin
    from staticmq_spark.cluster.state import BrokerState
    from staticmq_spark.mapping import Chain

Commits = dict[tuple[str, str, int], pb.ConsumerOffsetEntry]  # (broker, topic, physical queue)


@dataclass(frozen=True, slots=True)
class ProgressRow:
    group: str
    topic: str
    queue_id: int  # the logic queue of a static topic, else the physical queue
    broker: str  # the leader broker of a static topic's logic queue
    broker_offset: int
    consumer_offset: int | None  # None: the group never committed on this queue
    last_commit: int  # ms since epoch, 0 without a commit
    lag: int | None  # messages stored after the consumer offset (logic jumps not counted)


def consumer_progress(admin: Admin, group: str, topic: str | None = None) -> list[ProgressRow]:
    """Rows for `topic` (or every topic the group committed on). A group that has no commit on
    any broker is unknown: NotFoundError."""
    commits: Commits = {}
    for b in admin.cluster_info():
        req = pb.ConsumerOffsetsRequest(group=group, topic="")
        for e in admin.call(b.name, admin.stub(b.addr).ListConsumerOffsets, req).entries:
            commits[(b.name, e.topic, e.queue_id)] = e
    if not commits:
        raise NotFoundError(f"consumer group {group!r} is unknown: no broker has a committed offset of it")
    topics = [topic] if topic else sorted({t for _, t, _ in commits})
    rows: list[ProgressRow] = []
    for t in topics:
        _, view = admin.topic_route(t)  # TopicNotFoundError for a missing topic
        rows += _static_rows(admin, group, t, commits) if view.is_static else _dynamic_rows(admin, group, t, commits)
    return rows


def _static_rows(admin: Admin, group: str, topic: str, commits: Commits) -> list[ProgressRow]:
    from staticmq_spark.client.static_admin import logic_bounds

    report, states = admin.static.status(topic)
    rows = []
    for q, chain in sorted(report.chains.items()):
        leader = chain[-1].bname
        _, high, _ = logic_bounds(chain, states)
        req = pb.QueryOffsetRequest(group=group, topic=topic, queue_id=q)
        found = admin.call(leader, admin.stub(states[leader].addr).QueryOffset, req)
        stamps = [commits[k].update_timestamp for i in chain if (k := (i.bname, topic, i.queue)) in commits]
        offset = found.offset if found.found else None
        lag = None if offset is None else _chain_lag(chain, states, offset)
        rows.append(ProgressRow(group, topic, q, leader, high, offset, max(stamps, default=0), lag))
    return rows


def _chain_lag(chain: Chain, states: dict[str, BrokerState], offset: int) -> int:
    """Messages of the logic queue at or after `offset`, summed over its decided segments (the
    jump between two segments' logic offsets holds no message)."""
    lag = 0
    for item in chain:
        if not item.decided:
            continue
        bounds = states[item.bname].physical.get(item.queue) if item.bname in states else None
        end = item.logic_end(bounds.max_offset if bounds is not None else item.start_offset)
        lag += max(0, end - max(item.logic_offset, offset))
    return lag


def _dynamic_rows(admin: Admin, group: str, topic: str, commits: Commits) -> list[ProgressRow]:
    rows = []
    for name, (addr, _) in sorted(admin.brokers_with_topic(topic).items()):
        for q in admin.call(name, admin.stub(addr).GetTopicOffsets, pb.TopicName(topic=topic)).queues:
            e = commits.get((name, topic, q.queue_id))
            rows.append(
                ProgressRow(
                    group,
                    topic,
                    q.queue_id,
                    name,
                    q.max_offset,
                    e.offset if e is not None else None,
                    e.update_timestamp if e is not None else 0,
                    None if e is None else max(0, q.max_offset - e.offset),
                )
            )
    return sorted(rows, key=lambda r: (r.queue_id, r.broker))
