"""Topic configurations of one broker, persisted in their own file (config/topics.json)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

from broker_stub.store.atomic_file import atomic_write_json, read_json
from staticmq_spark.errors import DataDirError
from staticmq_spark.protocol.topics.config import TopicConfig


def new_uid() -> int:
    """A topic incarnation id: nanoseconds since epoch, unique per creation on a broker."""
    return time.time_ns()


class TopicConfigs:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}

    def load(self) -> None:
        try:
            raw = read_json(self._path)
        except ValueError as exc:
            raise DataDirError(f"{self._path} is not valid JSON: {exc}") from None
        if raw is None:
            return
        try:
            self._topics = {name: TopicConfig(**cfg) for name, cfg in raw.get("topics", {}).items()}
        except TypeError as exc:
            raise DataDirError(f"{self._path} holds a malformed topic config: {exc}") from None

    def get(self, name: str) -> TopicConfig | None:
        return self._topics.get(name)

    def all(self) -> list[TopicConfig]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def uids(self) -> dict[str, int]:
        return {name: cfg.uid for name, cfg in self._topics.items()}

    def put(self, cfg: TopicConfig) -> TopicConfig:
        """Store `cfg`; a new topic (or one with uid 0) gets a fresh uid."""
        with self._lock:
            old = self._topics.get(cfg.name)
            if cfg.uid == 0:
                cfg = replace(cfg, uid=old.uid if old else new_uid())
            topics = dict(self._topics)
            topics[cfg.name] = cfg
            self._save(topics)
            self._topics = topics
            return cfg

    def delete(self, name: str) -> bool:
        with self._lock:
            if name not in self._topics:
                return False
            topics = dict(self._topics)
            del topics[name]
            self._save(topics)
            self._topics = topics
            return True

    def _save(self, topics: dict[str, TopicConfig]) -> None:
        atomic_write_json(self._path, {"version": 1, "topics": {n: asdict(c) for n, c in topics.items()}})
