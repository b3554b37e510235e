"""Pop locks `topic@group@queue`: pops of one queue for one group are serialised, so a start
offset in flight is never handed out twice. Try-lock only: a pop skips a busy queue."""

from __future__ import annotations

import threading


class QueueLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @staticmethod
    def key(topic: str, group: str, queue_id: int) -> str:
        return f"{topic}@{group}@{queue_id}"

    def try_acquire(self, key: str) -> threading.Lock | None:
        """The key's lock, acquired; None when another pop holds it."""
        lock = self._locks.get(key)
        if lock is None:
            with self._guard:
                lock = self._locks.setdefault(key, threading.Lock())
        return lock if lock.acquire(blocking=False) else None
