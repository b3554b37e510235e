"""Deferred closing of file descriptors of deleted files, so a concurrent read never sees a
descriptor number that the kernel has already handed to another file."""

from __future__ import annotations

import os
import threading
import time

GRACE_S = 60.0


class RetiredFds:
    def __init__(self, grace_s: float = GRACE_S) -> None:
        self._grace_s = grace_s
        self._items: list[tuple[float, int]] = []
        self._lock = threading.Lock()

    def retire(self, fd: int) -> None:
        with self._lock:
            self._items.append((time.monotonic(), fd))

    def close_expired(self, *, everything: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            keep = []
            for retired_at, fd in self._items:
                if everything or now - retired_at > self._grace_s:
                    os.close(fd)
                else:
                    keep.append((retired_at, fd))
            self._items = keep
