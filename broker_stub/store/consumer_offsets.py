"""Committed consumer-group offsets of one broker's physical queues (config/consumer_offsets.json).

Commits land in memory and are persisted atomically by the broker's checkpoint thread (at most
one checkpoint interval of commits can be lost to a crash: consumers then re-read, never skip).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from broker_stub.store.atomic_file import atomic_write_json, read_json
from staticmq_spark.errors import DataDirError


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    group: str
    topic: str
    queue_id: int
    offset: int
    update_timestamp: int


class ConsumerOffsets:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, int], OffsetEntry] = {}
        self._dirty = False

    def load(self) -> None:
        try:
            raw = read_json(self._path)
        except ValueError as exc:
            raise DataDirError(f"{self._path} is not valid JSON: {exc}") from None
        if raw is None:
            return
        for item in raw.get("offsets", []):
            entry = OffsetEntry(**item)
            self._entries[(entry.group, entry.topic, entry.queue_id)] = entry

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._entries[(group, topic, queue_id)] = OffsetEntry(
                group, topic, queue_id, offset, int(time.time() * 1000)
            )
            self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        entry = self._entries.get((group, topic, queue_id))
        return None if entry is None else entry.offset

    def list(self, group: str = "", topic: str = "") -> list[OffsetEntry]:
        return sorted(
            (e for e in self._entries.values() if (not group or e.group == group) and (not topic or e.topic == topic)),
            key=lambda e: (e.group, e.topic, e.queue_id),
        )

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[1] == topic]:
                del self._entries[key]
            self._dirty = True

    def persist(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            snapshot = [_as_dict(e) for e in self._entries.values()]
            self._dirty = False
        atomic_write_json(self._path, {"version": 1, "offsets": snapshot})


def _as_dict(e: OffsetEntry) -> dict[str, object]:
    return {
        "group": e.group,
        "topic": e.topic,
        "queue_id": e.queue_id,
        "offset": e.offset,
        "update_timestamp": e.update_timestamp,
    }
