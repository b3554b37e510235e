"""Group commit: concurrent sends share one fsync of the commit log."""

from __future__ import annotations

import threading
from collections.abc import Callable


class GroupCommit:
    """`wait(end)` returns once every byte below `end` is on disk.

    The first waiter to take the lock snapshots the written position, fsyncs, and publishes it
    as flushed; waiters queued behind it find their bytes already covered and return at once.
    """

    def __init__(self, written_pos: Callable[[], int], sync: Callable[[], None]) -> None:
        self._written_pos = written_pos
        self._sync = sync
        self._lock = threading.Lock()
        self.flushed = 0

    def wait(self, end: int) -> None:
        if self.flushed >= end:
            return
        with self._lock:
            if self.flushed >= end:
                return
            target = self._written_pos()
            self._sync()
            self.flushed = max(self.flushed, target)

    def flush_all(self) -> None:
        self.wait(self._written_pos())
