"""The pull boundary rules of a static topic (SPEC section 10), one row per rule, at the seam under
`StaticReads`: the segments' physical queues are in memory (a `SegmentAccess` stand-in answering
pull statuses, as a store read or a remote read does), so every rule is checked without a broker process.

The chain: earliest segment broker-a/0 (logic 0, fenced at physical 10, retention removed 0..1),
middle segment broker-b/1 (logic 10000, fenced at 5, physical min 1), leader broker-a/2
(logic 20000, open, physical 2..7)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from broker_stub.broker.segment_access import Bounds, PhysicalRead
from broker_stub.broker.static_reads import StaticReads
from staticmq_spark.mapping import Chain, MappingItem
from staticmq_spark.protocol.consume.pull_status import PullStatus

EARLIEST = MappingItem(0, "broker-a", 0, 0, end_offset=10)
MIDDLE = MappingItem(1, "broker-b", 1, 10000, end_offset=5)
LEADER = MappingItem(2, "broker-a", 2, 20000)
CHAIN: Chain = (EARLIEST, MIDDLE, LEADER)


@dataclass
class InMemorySegments:
    """Physical queues (bname, queue) -> [min, max) with the store's answers at each boundary."""

    queues: dict[tuple[str, int], tuple[int, int]]

    def read(
        self,
        topic: str,
        item: MappingItem,
        offset: int,
        max_messages: int,
        max_bytes: int,
        wait_ms: int,
        subscription: str = "",
    ):  # type: ignore[no-untyped-def]
        lo, hi = self.queues[(item.bname, item.queue)]
        if offset < lo:
            return PhysicalRead(PullStatus.OFFSET_MOVED, lo, lo, hi)
        if offset > hi:
            return PhysicalRead(PullStatus.OFFSET_MOVED, hi, lo, hi)
        if offset == hi:
            return PhysicalRead(PullStatus.NO_NEW_MESSAGE, offset, lo, hi)
        end = min(hi, offset + max_messages)
        return PhysicalRead(PullStatus.FOUND, end, lo, hi, base_offset=offset)

    def bounds(self, topic: str, item: MappingItem) -> Bounds:
        lo, hi = self.queues[(item.bname, item.queue)]
        return Bounds(lo, hi, 0)

    def search(self, topic: str, item: MappingItem, timestamp: int) -> int:
        return self.queues[(item.bname, item.queue)][0]


def reads(leader: tuple[int, int] = (2, 7)) -> StaticReads:
    segments = InMemorySegments({("broker-a", 0): (2, 10), ("broker-b", 1): (1, 5), ("broker-a", 2): leader})
    return StaticReads(segments)  # type: ignore[arg-type]


# (rule, logic offset asked) -> (status, logic offset of the first message or next offset)
RULES = [
    ("earliest segment, offset below its min: OFFSET_MOVED to min", 1, PullStatus.OFFSET_MOVED, 2),
    ("earliest segment, offset inside: found from there", 3, PullStatus.FOUND, 3),
    ("earliest segment read to its end: go on at the next segment (its min)", 10, PullStatus.FOUND, 10001),
    ("the hole between segments: go on at the next segment", 500, PullStatus.FOUND, 10001),
    ("middle segment, offset below its min: go on at its min, not OFFSET_MOVED", 10000, PullStatus.FOUND, 10001),
    ("middle segment, offset inside: found from there", 10002, PullStatus.FOUND, 10002),
    ("middle segment read to its end: go on at the leader's logic offset (its min)", 10005, PullStatus.FOUND, 20002),
    ("leader segment, offset below its min: go on at its min, not OFFSET_MOVED", 20000, PullStatus.FOUND, 20002),
    ("leader segment, offset inside: found from there", 20004, PullStatus.FOUND, 20004),
    ("leader segment at its max: no new message", 20007, PullStatus.NO_NEW_MESSAGE, 20007),
    ("leader segment, offset above its max: OFFSET_MOVED to max", 20050, PullStatus.OFFSET_MOVED, 20007),
]


@pytest.mark.parametrize(("rule", "offset", "status", "expected"), RULES, ids=[r[0] for r in RULES])
def test_pull_boundary_rule(rule: str, offset: int, status: PullStatus, expected: int) -> None:
    outcome = reads().pull("orders", CHAIN, offset, max_messages=100, max_bytes=1 << 20, wait_ms=0)
    assert outcome.status is status, rule
    if status is PullStatus.FOUND:
        assert outcome.base_offset + outcome.offset_delta == expected, rule
    else:
        assert outcome.next_offset == expected, rule


def test_a_found_answer_never_stops_at_a_segment_boundary() -> None:
    outcome = reads().pull("orders", CHAIN, 8, max_messages=100, max_bytes=1 << 20, wait_ms=0)
    assert (outcome.status, outcome.base_offset + outcome.offset_delta) == (PullStatus.FOUND, 8)
    assert outcome.next_offset == 10000, "read to the fenced end: the next pull starts at the next segment"


def test_min_and_max_of_the_logic_queue_span_every_segment() -> None:
    outcome = reads().pull("orders", CHAIN, 20004, max_messages=1, max_bytes=1 << 20, wait_ms=0)
    assert (outcome.min_offset, outcome.max_offset) == (2, 20007)


def test_the_answered_max_is_at_least_the_leaders_logic_offset() -> None:
    outcome = reads(leader=(0, 0)).pull("orders", CHAIN, 20000, max_messages=1, max_bytes=1 << 20, wait_ms=0)
    assert outcome.status is PullStatus.NO_NEW_MESSAGE and outcome.max_offset == 20000


def test_no_next_decided_segment_is_not_found() -> None:
    undecided = (EARLIEST, MIDDLE, MappingItem(2, "broker-a", 2, -1))
    outcome = reads().pull("orders", undecided, 10005, max_messages=1, max_bytes=1 << 20, wait_ms=0)
    assert outcome.status is PullStatus.NOT_FOUND


def test_search_by_time_walks_the_segments_to_the_first_that_has_the_time() -> None:
    assert reads().search("orders", CHAIN, 0) == 2
