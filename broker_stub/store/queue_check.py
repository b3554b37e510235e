"""Consume-queue checks at start: an index entry with impossible values, or a queue shorter than the
last checkpoint recorded, means a damaged index; the queue is then rebuilt from the commit log it
indexes, so no intact message is hidden and no acknowledged offset is handed out again."""

from __future__ import annotations

import logging

import numpy as np

from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueue
from broker_stub.store.redispatch import Redispatcher

log = logging.getLogger(__name__)
CHUNK = 1 << 16


def first_damaged_entry(cq: ConsumeQueue, log_end: int, max_size: int) -> int | None:
    """The first offset whose entry cannot be right (size, position or store time out of range)."""
    offset = cq.min_offset
    while offset < cq.max_offset:
        entries = cq.read(offset, min(CHUNK, cq.max_offset - offset))
        if len(entries) == 0:
            return offset  # an index file missing in the middle
        pos = entries["pos"].astype(np.int64)
        size = entries["size"].astype(np.int64)
        bad = (size <= 0) | (size > max_size) | (pos < 0) | (pos >= log_end) | (entries["store_ts"] <= 0)
        if bool(bad.any()):
            return offset + int(np.argmax(bad))
        offset += len(entries)
    return None


def queues_to_rebuild(
    queues: dict[tuple[str, int], ConsumeQueue], recorded: dict[str, int], log_end: int, max_size: int
) -> dict[tuple[str, int], int]:
    """(topic, queue) -> the offset its index is good up to, for every damaged queue."""
    damaged = {}
    for (topic, queue_id), cq in queues.items():
        first = first_damaged_entry(cq, log_end, max_size)
        expected = recorded.get(f"{topic}/{queue_id}", 0)
        if first is None and cq.max_offset >= expected:
            continue
        good_to = first if first is not None else cq.max_offset
        log.error(
            "consume queue %s/%d is damaged (%s): rebuilding it from the commit log",
            topic,
            queue_id,
            f"bad entry at offset {first}"
            if first is not None
            else f"ends at {cq.max_offset}, checkpoint had {expected}",
        )
        damaged[(topic, queue_id)] = good_to
    return damaged


def rebuild_from_log(
    commit_log: CommitLog,
    damaged: dict[tuple[str, int], int],
    queues: dict[tuple[str, int], ConsumeQueue],
    redispatch: Redispatcher,
) -> None:
    """Cut each damaged queue at its last good entry and re-dispatch the whole commit log (queues
    that are complete skip what they have)."""
    for key, good_to in damaged.items():
        queues[key].truncate_to(good_to)
    for pos, header, sizes in commit_log.scan(commit_log.min_pos):
        redispatch.record(pos, header, sizes)
    log.warning("rebuilt %d damaged consume queue(s): %d entries re-dispatched", len(damaged), redispatch.count)
