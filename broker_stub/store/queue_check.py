"""Consume-queue checks at start: an index entry with impossible values, a queue shorter than the
last checkpoint recorded, or a queue a read found pointing at the wrong bytes (report_misaligned)
means a damaged index; the queue is then rebuilt from the commit log it indexes, so no intact
message is hidden and no acknowledged offset is handed out again."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from broker_stub.metrics import CORRUPT_RECORDS
from broker_stub.store.atomic_file import atomic_write_json, read_json
from broker_stub.store.commit_log import CommitLog
from broker_stub.store.consume_queue import ConsumeQueue
from broker_stub.store.redispatch import Redispatcher
from staticmq_spark.errors import DataCorruptError

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


REPORTED_FILE = "damaged_queues.json"


def report_misaligned(store_dir: Path, topic: str, queue_id: int, offset: int) -> DataCorruptError:
    """An index entry found pointing at bytes that are not its message (a read's row check): the
    read is refused, the queue is recorded so the next start rebuilds it from the commit log."""
    path = store_dir / REPORTED_FILE
    reported: dict[str, int] = read_json(path) or {}
    key = f"{topic}/{queue_id}"
    reported[key] = min(reported.get(key, offset), offset)
    atomic_write_json(path, reported)
    CORRUPT_RECORDS.inc()
    message = (
        f"consume queue {key}: the entry of offset {offset} points at bytes that are not its message "
        "(a damaged index); nothing from it is served, and the broker rebuilds this index from the "
        "commit log at its next start"
    )
    log.error(message)
    return DataCorruptError(message)


def reported_misaligned(store_dir: Path, queues: dict[tuple[str, int], ConsumeQueue]) -> dict[tuple[str, int], int]:
    """Queues a read found damaged (see report_misaligned) -> the offset their index is good up to."""
    reported: dict[str, int] = read_json(store_dir / REPORTED_FILE) or {}
    out = {}
    for key, offset in reported.items():
        topic, _, queue = key.rpartition("/")
        if (topic, int(queue)) in queues:
            log.error("consume queue %s was found damaged at offset %d by a read: rebuilding it", key, offset)
            out[(topic, int(queue))] = int(offset)
    return out


def forget_reported(store_dir: Path) -> None:
    (store_dir / REPORTED_FILE).unlink(missing_ok=True)


def check_queues(
    store_dir: Path,
    commit_log: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    recorded: dict[str, int],
    max_size: int,
    redispatch: Redispatcher,
) -> None:
    """At start: find every damaged queue (impossible entries, shorter than the checkpoint says, or
    reported by a read) and rebuild it from the commit log."""
    damaged = queues_to_rebuild(queues, recorded, commit_log.written_pos, max_size)
    for key, good_to in reported_misaligned(store_dir, queues).items():
        damaged[key] = min(damaged.get(key, good_to), good_to)
    if damaged:
        rebuild_from_log(commit_log, damaged, queues, redispatch)
    forget_reported(store_dir)
