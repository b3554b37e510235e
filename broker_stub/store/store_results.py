"""What the message store answers: the status of a read, and append / read / staged-record values.

A read's `ReadStatus` says why an offset moved (below the queue's min, above its max); everything
above the store sees it only as the pull status, converted once by `pull_status`."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from broker_stub.store.consume_queue import Entries, entries_for
from broker_stub.store.idempotency import StoredBatch
from staticmq_spark.errors import InvalidBatchError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.rows.codec import Int32Array


class ReadStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW = "OFFSET_OVERFLOW"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # a tag filter skipped every message read: go on at next_offset


def pull_status(status: ReadStatus) -> PullStatus:
    """The pull status of a store read (the one conversion): an offset below the queue's min or
    above its max is OFFSET_MOVED, and the read's next_offset is where the queue continues (its
    min, or its max)."""
    if status is ReadStatus.FOUND:
        return PullStatus.FOUND
    if status is ReadStatus.NO_NEW_MESSAGE:
        return PullStatus.NO_NEW_MESSAGE
    if status is ReadStatus.NO_MATCHED_MESSAGE:
        return PullStatus.RETRY_AT_NEXT
    return PullStatus.OFFSET_MOVED


@dataclass(frozen=True, slots=True)
class StagedRecord:
    """A staged record (FLAG_STAGED) that `link` makes visible: the file it is in (an index into
    link's `files`), its offset there, where its rows start (from the record start), and its
    message sizes."""

    source: int
    offset: int
    rows_offset: int
    sizes: Int32Array


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    count: int
    store_timestamp: int
    duplicate: bool = False
    end_pos: int = 0  # commit-log position after the record: durable once flushed past it


@dataclass(frozen=True, slots=True)
class ReadResult:
    status: ReadStatus
    next_offset: int
    min_offset: int
    max_offset: int
    base_offset: int = 0
    data: bytes = b""
    sizes: Int32Array | None = None
    store_timestamps: np.ndarray | None = None
    offsets: np.ndarray | None = None  # each message's queue offset when a tag filter left gaps

    @property
    def count(self) -> int:
        return 0 if self.sizes is None else int(self.sizes.shape[0])

    @property
    def pull_status(self) -> PullStatus:
        return pull_status(self.status)


def duplicate_of(seen: StoredBatch, topic: str, queue_id: int, count: int) -> AppendResult:
    """The answer to a batch resent with an idempotency key already stored."""
    if (seen.topic, seen.queue_id, seen.count) != (topic, queue_id, count):
        raise InvalidBatchError(
            f"idempotency key reused for a different batch (first stored as {seen.count} messages "
            f"in {seen.topic}/{seen.queue_id}, now {count} messages for {topic}/{queue_id})"
        )
    return AppendResult(seen.base_offset, seen.count, seen.store_timestamp, duplicate=True)


def plan_link(
    groups: Sequence[tuple[int, Sequence[StagedRecord]]],
    bases: Sequence[int],
    max_offset: Callable[[int], int],
    now: int,
) -> tuple[list[tuple[int, int, int, int]], dict[int, list[Entries]]]:
    """What one link record makes visible: its rows (queue, count, first offset, record position),
    each group's records taking the next offsets of its physical queue in order, and the
    consume-queue entries per queue. `bases[rec.source]` is where a staged record's file lies in
    the commit log; `max_offset(queue)` where its queue ends now."""
    link_rows: list[tuple[int, int, int, int]] = []
    pending: dict[int, list[Entries]] = {}
    next_offset: dict[int, int] = {}
    for queue, records in groups:
        offset = next_offset.get(queue, max_offset(queue))
        for rec in records:
            pos = bases[rec.source] + rec.offset
            count = int(rec.sizes.shape[0])
            link_rows.append((queue, count, offset, pos))
            pending.setdefault(queue, []).append(entries_for(pos + rec.rows_offset, rec.sizes, now))
            offset += count
        next_offset[queue] = offset
    return link_rows, pending
