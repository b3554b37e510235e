"""Pull locks: one holder per queue, leases renewed by the holder and ended by time or release."""

from __future__ import annotations

import pytest

from broker_stub.broker.exclusive.pull_locks import PullLocks
from staticmq_spark.errors import LockHeldError

KEY = ("orders", "g", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_held_lock_is_refused_to_others_until_its_lease_ends() -> None:
    clock = Clock()
    locks = PullLocks(clock)
    assert locks.acquire(KEY, "a", 10)
    assert not locks.acquire(KEY, "b", 10)
    clock.now += 9.9
    assert not locks.acquire(KEY, "b", 10)
    clock.now += 0.2
    assert locks.acquire(KEY, "b", 10)
    assert locks.holder(KEY) is not None and locks.holder(KEY).client_id == "b"  # type: ignore[union-attr]


def test_refresh_extends_the_lease_of_the_holder_only() -> None:
    clock = Clock()
    locks = PullLocks(clock)
    locks.acquire(KEY, "a", 10)
    clock.now += 8
    locks.refresh(KEY, "a", 10)
    clock.now += 8
    assert not locks.acquire(KEY, "b", 10)
    with pytest.raises(LockHeldError, match="held by client 'a'"):
        locks.refresh(KEY, "b", 10)


def test_a_holder_whose_lease_ended_cannot_refresh() -> None:
    clock = Clock()
    locks = PullLocks(clock)
    locks.acquire(KEY, "a", 1)
    clock.now += 1
    with pytest.raises(LockHeldError, match="lease ended"):
        locks.refresh(KEY, "a", 1)


def test_release_frees_the_lock_at_once_but_only_for_the_holder() -> None:
    locks = PullLocks(Clock())
    locks.acquire(KEY, "a", 10)
    assert not locks.release(KEY, "b")
    assert locks.release(KEY, "a")
    assert locks.acquire(KEY, "b", 10)
