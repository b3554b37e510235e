"""Idempotency keys of recently stored records: a batch sent twice with one key is stored once.

The key travels inside the record (its attributes), so the index needs no file of its own: at
start-up it is rebuilt from the record headers of the newest commit-log segments. The window is
bounded both by count (oldest keys forgotten first) and by those segments.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoredBatch:
    topic: str
    queue_id: int
    base_offset: int
    count: int
    store_timestamp: int


class IdempotencyIndex:
    def __init__(self, window: int) -> None:
        self._window = window
        self._keys: OrderedDict[bytes, StoredBatch] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> StoredBatch | None:
        return self._keys.get(key)

    def add(self, key: bytes, stored: StoredBatch) -> None:
        with self._lock:
            self._keys[key] = stored
            self._keys.move_to_end(key)
            while len(self._keys) > self._window:
                self._keys.popitem(last=False)

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k, v in self._keys.items() if v.topic == topic]:
                del self._keys[key]

    def __len__(self) -> int:
        return len(self._keys)
