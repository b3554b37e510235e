"""Reads of a logic queue: pull at a logic offset, min/max and search by time, walking the chain
of segments. Messages are answered unchanged with the segment's offset_delta.

Pull rules (by the segment the offset falls in):
- leader segment, offset > max         -> OFFSET_MOVED to max;
- leader or middle segment, offset < min -> go on at its min (not OFFSET_MOVED);
- earliest segment, offset < min        -> OFFSET_MOVED to min;
- a non-leader segment read to its end -> go on at once at the next decided segment;
- no next decided segment              -> NOT_FOUND (the new leader is not settled yet).
An undecided segment is never read and never used to compute an offset.

A segment's read answers the pull status; an OFFSET_MOVED read is below the segment's min when the
offset read is under its min_offset, else above its max.
"""

from __future__ import annotations

from broker_stub.broker.message_service import PullOutcome
from broker_stub.broker.segment_access import PhysicalRead, SegmentAccess
from staticmq_spark.errors import InternalError
from staticmq_spark.mapping import Chain, first_decided, locate, next_decided
from staticmq_spark.protocol.consume.pull_status import PullStatus


class StaticReads:
    def __init__(self, access: SegmentAccess) -> None:
        self.access = access

    # ------------------------------------------------------------------ bounds

    def min_logic(self, topic: str, chain: Chain) -> int:
        first = first_decided(chain)
        if first is None:
            return 0
        item = chain[first]
        return item.to_logic(self.access.bounds(topic, item).min_offset)

    def max_logic(self, topic: str, chain: Chain) -> int:
        last = _last_decided(chain)
        if last is None:
            return 0
        item = chain[last]
        end = item.end_offset if item.end_offset >= 0 else self.access.bounds(topic, item).max_offset
        return item.to_logic(end)

    def last_store_timestamp(self, topic: str, chain: Chain) -> int:
        last = _last_decided(chain)
        return 0 if last is None else self.access.bounds(topic, chain[last]).last_store_timestamp

    # ------------------------------------------------------------------ pull

    def pull(
        self,
        topic: str,
        chain: Chain,
        offset: int,
        max_messages: int,
        max_bytes: int,
        wait_ms: int,
        subscription: str = "",
    ) -> PullOutcome:
        first = first_decided(chain)
        if first is None:
            return self._answer(topic, chain, PullStatus.NOT_FOUND, offset)
        idx = locate(chain, offset)
        if idx < 0:
            return self._answer(topic, chain, PullStatus.OFFSET_MOVED, self.min_logic(topic, chain))
        for _ in range(2 * len(chain) + 2):
            item = chain[idx]
            nxt = next_decided(chain, idx)
            is_leader = idx == len(chain) - 1
            phys = item.to_physical(offset)
            limit = max_messages
            if item.end_offset >= 0:
                if phys >= item.end_offset:
                    if nxt is None:
                        return self._answer(topic, chain, PullStatus.NOT_FOUND, offset)
                    idx, offset = nxt, chain[nxt].logic_offset
                    continue
                limit = min(limit, item.end_offset - phys)
            read = self.access.read(topic, item, phys, limit, max_bytes, wait_ms if is_leader else 0, subscription)
            if read.status is PullStatus.FOUND:
                return self._found(topic, chain, idx, read)
            if read.status is PullStatus.RETRY_AT_NEXT:  # a tag filter skipped every message looked at
                at_end = nxt is not None and item.end_offset >= 0 and read.next_offset >= item.end_offset
                next_logic = chain[nxt].logic_offset if at_end and nxt is not None else item.to_logic(read.next_offset)
                return self._answer(topic, chain, PullStatus.RETRY_AT_NEXT, next_logic)
            moved = read.status is PullStatus.OFFSET_MOVED
            if moved and phys < read.min_offset:  # below the segment's min
                if idx == first:
                    return self._answer(topic, chain, PullStatus.OFFSET_MOVED, item.to_logic(read.min_offset))
                offset = item.to_logic(read.min_offset)
                continue
            if is_leader:
                if moved:  # above the leader's max
                    return self._answer(topic, chain, PullStatus.OFFSET_MOVED, item.to_logic(read.max_offset))
                return self._answer(topic, chain, PullStatus.NO_NEW_MESSAGE, offset)
            if nxt is None:
                return self._answer(topic, chain, PullStatus.NOT_FOUND, offset)
            idx, offset = nxt, chain[nxt].logic_offset
        raise InternalError(f"topic {topic!r}: the segment walk did not settle at offset {offset}")

    def _found(self, topic: str, chain: Chain, idx: int, read: PhysicalRead) -> PullOutcome:
        item = chain[idx]
        next_offset = item.to_logic(read.next_offset)
        nxt = next_decided(chain, idx)
        if nxt is not None and item.end_offset >= 0 and read.next_offset >= item.end_offset:
            next_offset = chain[nxt].logic_offset  # never stop at a boundary
        return PullOutcome(
            status=PullStatus.FOUND,
            next_offset=next_offset,
            min_offset=self.min_logic(topic, chain),
            max_offset=self._max_for_answer(topic, chain),
            base_offset=read.base_offset,
            offset_delta=item.offset_delta,
            data=read.data,
            sizes=read.sizes,
            store_timestamps=read.store_timestamps,
            bname=item.bname,
            physical_queue_id=item.queue,
            queue_offsets=read.queue_offsets,
        )

    def _answer(self, topic: str, chain: Chain, status: PullStatus, next_offset: int) -> PullOutcome:
        return PullOutcome(
            status=status,
            next_offset=next_offset,
            min_offset=self.min_logic(topic, chain),
            max_offset=self._max_for_answer(topic, chain),
        )

    def _max_for_answer(self, topic: str, chain: Chain) -> int:
        """The max offset, and at least the leader's logic offset once it is decided."""
        top = self.max_logic(topic, chain)
        return max(top, chain[-1].logic_offset) if chain[-1].decided else top

    # ------------------------------------------------------------------ search

    def search(self, topic: str, chain: Chain, timestamp: int) -> int:
        """The first logic offset stored at or after `timestamp`, segment by segment, skipping
        segments that ended earlier (timeOfEnd); the max offset when there is none."""
        last = _last_decided(chain)
        for idx, item in enumerate(chain):
            if not item.decided:
                continue
            final = idx == last
            if not final and 0 < item.time_of_end < timestamp:
                continue
            phys = self.access.search(topic, item, timestamp)
            end = item.end_offset if item.end_offset >= 0 else self.access.bounds(topic, item).max_offset
            if phys < end or final:
                return item.to_logic(phys)
        return self.max_logic(topic, chain)


def _last_decided(chain: Chain) -> int | None:
    for i in range(len(chain) - 1, -1, -1):
        if chain[i].decided:
            return i
    return None
