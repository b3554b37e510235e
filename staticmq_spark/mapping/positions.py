"""From a physical position back to a logic one: which logic queue and logic offset a message
read physically (broker, physical queue, physical offset) holds, through the items of every
logic queue's chain. Pure; what a consumer that reads physical queues directly (RocketMQ's pop,
which never resolves mappings) needs to name its messages as a pull would.

    logic offset = segment's logic start + physical offset - segment's physical start
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from staticmq_spark.mapping.items import Chain, MappingItem


@dataclass(frozen=True, slots=True)
class LogicPosition:
    queue: int  # logic queue
    offset: int  # logic offset


@dataclass(frozen=True, slots=True)
class _Segment:
    logic_queue: int
    item: MappingItem


class PhysicalPositions:
    """Every decided segment of a static topic, by the physical queue it lives on."""

    def __init__(self, chains: Mapping[int, Chain]) -> None:
        self.chains = dict(chains)
        self._on: dict[tuple[str, int], list[_Segment]] = {}
        for q, chain in sorted(chains.items()):
            for item in chain:
                if item.decided:
                    self._on.setdefault((item.bname, item.queue), []).append(_Segment(q, item))
        for segments in self._on.values():
            segments.sort(key=lambda s: s.item.start_offset)

    def logic(self, bname: str, queue: int, offset: int) -> LogicPosition | None:
        """The logic position of physical `offset` of `bname`/`queue`; None when no decided
        segment holds it (a queue no chain names, an undecided leader, before a segment's start,
        at or past a fenced segment's end)."""
        found = None
        for segment in self._on.get((bname, queue), ()):
            item = segment.item
            if item.start_offset <= offset and (item.end_offset < 0 or offset < item.end_offset):
                found = segment  # a later segment of the same physical queue wins (it starts later)
        if found is None:
            return None
        return LogicPosition(found.logic_queue, found.item.to_logic(offset))

    def multi_segment_queues(self) -> list[int]:
        """The logic queues whose chain has more than one segment (each on its own physical queue)."""
        return sorted(q for q, chain in self.chains.items() if len(chain) > 1)


def freshest_chains(copies: Iterable[tuple[int, Mapping[int, Chain]]]) -> dict[int, Chain]:
    """One chain per logic queue from several brokers' copies `(epoch, hosted chains)`: the copy
    of the newest epoch wins; among copies of one epoch the longest chain (a broker that hosts
    only an old segment may know fewer items), then the one with the most decided items (on
    RocketMQ only the leader's copy holds its item's logic offset; the old brokers keep -1)."""
    best: dict[int, tuple[tuple[int, int, int], Chain]] = {}
    for epoch, hosted in copies:
        for q, chain in hosted.items():
            rank = (epoch, len(chain), sum(1 for i in chain if i.decided))
            if q not in best or rank > best[q][0]:
                best[q] = (rank, chain)
    return {q: chain for q, (_, chain) in sorted(best.items())}
