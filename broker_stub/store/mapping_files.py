"""TopicQueueMapping files of one broker (config/mappings/<topic>.json), apart from topic configs.

File isolation: every file names the broker it belongs to (`bname`). A file naming another
broker - copied here by mistake - is reported and ignored: it is never served or overwritten
silently (a write for that topic replaces it only after the admin's consistency check).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from broker_stub.store.atomic_file import atomic_write_bytes, fsync_path
from staticmq_spark.errors import MappingRejectedError
from staticmq_spark.mapping import TopicQueueMapping

log = logging.getLogger(__name__)


class MappingFiles:
    def __init__(self, directory: Path, broker: str) -> None:
        self._dir = directory
        self._broker = broker
        self._lock = threading.Lock()
        self._mappings: dict[str, TopicQueueMapping] = {}
        self.foreign: dict[str, str] = {}  # topic -> the bname a misplaced file names

    def load(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self._dir.glob("*.json")):
            try:
                mapping = TopicQueueMapping.from_json(path.read_bytes())
            except MappingRejectedError as exc:
                log.error("mapping file %s is unreadable and ignored: %s", path, exc.message)
                self.foreign[path.stem] = "(unreadable)"
                continue
            if mapping.bname != self._broker:
                log.error(
                    "mapping file %s belongs to broker %r, not %r (copied by mistake?): ignored, never served",
                    path,
                    mapping.bname,
                    self._broker,
                )
                self.foreign[mapping.topic] = mapping.bname
                continue
            if mapping.topic != path.stem:
                log.error("mapping file %s describes topic %r: ignored", path, mapping.topic)
                continue
            self._mappings[mapping.topic] = mapping

    def get(self, topic: str) -> TopicQueueMapping | None:
        return self._mappings.get(topic)

    def all(self) -> list[TopicQueueMapping]:
        return [self._mappings[t] for t in sorted(self._mappings)]

    def save(self, mapping: TopicQueueMapping) -> None:
        with self._lock:
            atomic_write_bytes(self._dir / f"{mapping.topic}.json", mapping.to_json().encode())
            self._mappings[mapping.topic] = mapping
            self.foreign.pop(mapping.topic, None)

    def delete(self, topic: str) -> None:
        with self._lock:
            path = self._dir / f"{topic}.json"
            if path.exists():
                path.unlink()
                fsync_path(self._dir)
            self._mappings.pop(topic, None)
            self.foreign.pop(topic, None)
