"""The read-ahead table of a reader: the next pull of a planned range, sent before the caller asks
for it, kept under (topic, broker, physical queue, offset) until the caller's pull takes it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
Key = tuple[str, str, int, int]  # topic, broker name, physical queue, physical offset
LIMIT = 64  # reads abandoned half-way (a failed task) leave entries: past this many, all are dropped


class ReadAhead(Generic[T]):
    def __init__(self, drop: Callable[[T], object] = lambda _pending: None) -> None:
        """`drop` is called on each pending read thrown away (e.g. to cancel its future)."""
        self._drop = drop
        self._pending: dict[Key, T] = {}
        self._lock = threading.Lock()

    def take(self, key: Key) -> T | None:
        with self._lock:
            return self._pending.pop(key, None)

    def put(self, key: Key, pending: T) -> None:
        with self._lock:
            if len(self._pending) >= LIMIT:
                self._clear()
            self._pending[key] = pending

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        for stale in self._pending.values():
            self._drop(stale)
        self._pending.clear()
