"""Pull locks: one holder per (topic, group, queue) with a lease. A lock is granted when it is
free or its lease is over, renewed by its holder (each exclusive pull and each explicit renew),
and released on unlock. Expiry is checked against a monotonic clock (injectable for tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from staticmq_spark.errors import LockHeldError

LockKey = tuple[str, str, int]  # topic, group, queue_id


@dataclass(frozen=True, slots=True)
class Lease:
    client_id: str
    expires_at: float  # monotonic seconds


class PullLocks:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._leases: dict[LockKey, Lease] = {}

    def acquire(self, key: LockKey, client_id: str, lease_s: float) -> bool:
        """Grant or renew the lock for `client_id`; False when another client holds it."""
        now = self._clock()
        with self._lock:
            held = self._leases.get(key)
            if held is not None and held.client_id != client_id and held.expires_at > now:
                return False
            self._leases[key] = Lease(client_id, now + lease_s)
            return True

    def refresh(self, key: LockKey, client_id: str, lease_s: float) -> None:
        """Renew a lock the client holds; LockHeldError when it does not (any more)."""
        now = self._clock()
        with self._lock:
            held = self._leases.get(key)
            if held is None or held.client_id != client_id or held.expires_at <= now:
                raise LockHeldError(_refusal(key, client_id, held, now))
            self._leases[key] = Lease(client_id, now + lease_s)

    def check(self, key: LockKey, client_id: str) -> None:
        """LockHeldError unless `client_id` holds the lock now."""
        now = self._clock()
        held = self._leases.get(key)
        if held is None or held.client_id != client_id or held.expires_at <= now:
            raise LockHeldError(_refusal(key, client_id, held, now))

    def release(self, key: LockKey, client_id: str) -> bool:
        with self._lock:
            held = self._leases.get(key)
            if held is None or held.client_id != client_id:
                return False
            del self._leases[key]
            return True

    def holder(self, key: LockKey) -> Lease | None:
        held = self._leases.get(key)
        return held if held is not None and held.expires_at > self._clock() else None


def _refusal(key: LockKey, client_id: str, held: Lease | None, now: float) -> str:
    topic, group, queue = key
    what = f"queue {queue} of {topic!r} for group {group!r}"
    if held is None or held.expires_at <= now:
        return f"client {client_id!r} does not hold the pull lock of {what}: its lease ended; lock it again"
    return f"the pull lock of {what} is held by client {held.client_id!r} for {held.expires_at - now:.1f}s more"
