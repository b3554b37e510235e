"""The driver's view of a static topic at one moment: every logic queue's chain of segments and
its min/max logic offsets, gathered from each live broker directly (one call per broker)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from staticmq_spark.backends import BrokerState, ClusterReader
from staticmq_spark.errors import InvalidOptionError, QueueUnavailableError, StaticMQError, TopicNotFoundError
from staticmq_spark.mapping import (
    Chain,
    ConsistencyReport,
    Segment,
    SegmentTable,
    check_consistency,
    is_static_anywhere,
    logic_bounds,
)
from staticmq_spark.source.live_brokers import LiveBrokers, doubtful

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueBounds:
    min_offset: int
    max_offset: int
    avg_message_bytes: int


@dataclass(frozen=True)
class TopicSnapshot:
    topic: str
    total_queues: int
    chains: dict[int, Chain]
    bounds: dict[int, QueueBounds]
    addrs: dict[str, str]
    table: SegmentTable

    def latest(self) -> dict[int, int]:
        return {q: b.max_offset for q, b in self.bounds.items()}

    def earliest(self) -> dict[int, int]:
        return {q: b.min_offset for q, b in self.bounds.items()}

    def segments(self, starts: dict[int, int], ends: dict[int, int]) -> dict[int, list[Segment]]:
        """Segments of [starts[q], ends[q]) for every queue (holes between segments skipped)."""
        queues = np.array(sorted(starts), dtype=np.int64)
        resolved = self.table.resolve(
            queues,
            np.array([starts[int(q)] for q in queues], dtype=np.int64),
            np.array([ends[int(q)] for q in queues], dtype=np.int64),
        )
        grouped = resolved.by_range(len(queues))
        return {int(q): grouped[i] for i, q in enumerate(queues)}

    def covers(self, queue: int, end: int) -> bool:
        """Whether this view knows every segment below `end`: its newest decided item is still
        open, or ends at or past `end` (a stale view would otherwise plan too little)."""
        decided = [i for i in self.chains.get(queue, ()) if i.decided]
        if not decided:
            return end <= 0
        last = decided[-1]
        return last.end_offset < 0 or last.logic_end() >= end


def take_snapshot(access: ClusterReader, topic: str, live: LiveBrokers | None = None) -> TopicSnapshot:
    """The topic as every live broker has it now. With `live`, the brokers on its kept list are
    asked directly; an answer that may be missing a broker (`live_brokers.doubtful`) is dropped and
    the name server's list asked for, as it is without `live`."""
    kept = live.kept() if live is not None else None
    if kept is not None:
        try:
            states = access.gather(topic, kept)
        except StaticMQError as exc:
            log.debug("static topic %s: a broker on the kept list did not answer (%s)", topic, exc.message)
        else:
            if is_static_anywhere(states):
                report = _report(topic, states)
                if not doubtful(kept, states, report):
                    return _snapshot(topic, states, report)
    states = access.gather(topic, live.ask(access) if live is not None else None)
    if not is_static_anywhere(states):
        if any(s.config is not None for s in states.values()):
            raise InvalidOptionError(
                f"topic {topic!r} is not a static topic: the staticmq connector reads static topics "
                "(create one with `staticmq admin updateStaticTopic`)"
            )
        raise TopicNotFoundError(f"static topic {topic!r} does not exist")
    report = _report(topic, states)
    if report.problems:
        log.info("static topic %s: %s", topic, report.describe())
    return _snapshot(topic, states, report)


def _report(topic: str, states: dict[str, BrokerState]) -> ConsistencyReport:
    members = {n: s.mapping for n, s in states.items() if s.mapping is not None or s.config is not None}
    return check_consistency(topic, members, live=states)


def _snapshot(topic: str, states: dict[str, BrokerState], report: ConsistencyReport) -> TopicSnapshot:
    missing = [q for q in range(report.total_queues) if q not in report.chains]
    if missing:
        raise QueueUnavailableError(f"static topic {topic!r}: logic queue(s) {missing} have no live broker")
    bounds = {q: _bounds(chain, states) for q, chain in report.chains.items()}
    return TopicSnapshot(
        topic,
        report.total_queues,
        dict(report.chains),
        bounds,
        {n: s.addr for n, s in states.items()},
        SegmentTable(report.chains),
    )


def _bounds(chain: Chain, states: dict[str, BrokerState]) -> QueueBounds:
    low, high, _ = logic_bounds(chain, states)
    leader = chain[-1]
    phys = states[leader.bname].physical.get(leader.queue) if leader.bname in states else None
    return QueueBounds(low, high, phys.avg_message_bytes if phys is not None else 0)
