"""Long polling: pulls that found nothing wait for the next append to their queue."""

from __future__ import annotations

import threading
from collections.abc import Callable


class ArrivalNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[tuple[str, int], set[threading.Event]] = {}

    def wait(self, topic: str, queue_id: int, timeout_s: float, still_empty: Callable[[], bool]) -> None:
        """Block up to `timeout_s` unless a message arrives; `still_empty` is checked after
        registering, so an append between the caller's read and this wait is never missed."""
        self.wait_any([(topic, queue_id)], timeout_s, still_empty)

    def wait_any(self, keys: list[tuple[str, int]], timeout_s: float, still_empty: Callable[[], bool]) -> None:
        """Like `wait`, for an arrival on any of several (topic, queue) keys."""
        event = threading.Event()
        with self._lock:
            for key in keys:
                self._waiters.setdefault(key, set()).add(event)
        try:
            if still_empty():
                event.wait(timeout_s)
        finally:
            with self._lock:
                for key in keys:
                    waiters = self._waiters.get(key)
                    if waiters is not None:
                        waiters.discard(event)
                        if not waiters:
                            del self._waiters[key]

    def notify(self, topic: str, queue_id: int) -> None:
        with self._lock:
            waiters = list(self._waiters.get((topic, queue_id), ()))
        for event in waiters:
            event.set()

    def notify_all(self) -> None:
        with self._lock:
            waiters = [e for group in self._waiters.values() for e in group]
        for event in waiters:
            event.set()
