"""Consumer progress of a group, as `consumerProgress` shows it: one row per queue clients see.

For a static topic that is one row per logic queue: the broker offset is the logic max, the
consumer offset the logic committed offset found by the double-read-check (the leader broker
asks the queue's segments newest to oldest), and the last commit time the newest commit stored
on any of the queue's segments. A dynamic topic gets one row per broker and physical queue.
A queue the group never committed on has no consumer offset and no lag (not "lag 0").
"""

from __future__ import annotations

from collections.abc import Callable

from staticmq_spark.backends.staticmq.rpc import BrokerCalls
from staticmq_spark.backends.staticmq.static_topics import StaticTopicAdmin
from staticmq_spark.backends.types import ProgressRow
from staticmq_spark.errors import NotFoundError
from staticmq_spark.mapping import chain_lag, logic_bounds
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

Commits = dict[tuple[str, str, int], pb.ConsumerOffsetEntry]  # (broker, topic, physical queue)


def consumer_progress(
    admin: BrokerCalls, static: StaticTopicAdmin, is_static: Callable[[str], bool], group: str, topic: str | None = None
) -> list[ProgressRow]:
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
        static_topic = is_static(t)  # TopicNotFoundError for a missing topic
        rows += (
            _static_rows(admin, static, group, t, commits) if static_topic else _dynamic_rows(admin, group, t, commits)
        )
    return rows


def _static_rows(
    admin: BrokerCalls, static: StaticTopicAdmin, group: str, topic: str, commits: Commits
) -> list[ProgressRow]:
    report, states = static.status(topic)
    rows = []
    for q, chain in sorted(report.chains.items()):
        leader = chain[-1].bname
        _, high, _ = logic_bounds(chain, states)
        req = pb.QueryOffsetRequest(group=group, topic=topic, queue_id=q)
        found = admin.call(leader, admin.stub(states[leader].addr).QueryOffset, req)
        stamps = [commits[k].update_timestamp for i in chain if (k := (i.bname, topic, i.queue)) in commits]
        offset = found.offset if found.found else None
        lag = None if offset is None else chain_lag(chain, states, offset)
        rows.append(ProgressRow(group, topic, q, leader, high, offset, max(stamps, default=0), lag))
    return rows


def _dynamic_rows(admin: BrokerCalls, group: str, topic: str, commits: Commits) -> list[ProgressRow]:
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
