"""The one exclusive-consumption loop (client/exclusive_loop.py) over a port kept in memory: its
rules on leases, the lapsed-lease rule, the hand-over and the offsets, as both backends get them.
The backends' own calls are tested against real brokers (tests/integration/test_exclusive.py,
test_rocketmq_exclusive.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from staticmq_spark.backends.exclusive_port import ExclusivePort, LockAnswer, QueueKey
from staticmq_spark.backends.types import PullResult, PullStatus, QueueAddress, empty_pulled_batch
from staticmq_spark.client.exclusive_loop import ExclusiveLoop
from staticmq_spark.errors import AccessDeniedError, BrokerUnavailableError, InvalidArgumentError


class MemoryPort:
    """A cluster of one topic whose queues hold `ends[q]` messages and whose locks another client
    may take (`others`); records every call."""

    pull_renews_lease = False

    def __init__(self, queues: int = 2, lease_s: float = 1.0) -> None:
        self.group, self.topic, self.client_id, self.lease_s = "g", "t", "me", lease_s
        self.wanted_ids: list[int] | None = list(range(queues))
        self.ends = dict.fromkeys(range(queues), 10)
        self.offsets: dict[int, int] = {}
        self.others: set[int] = set()  # queues another client holds
        self.locks: set[int] = set()  # queues this client holds at the "broker"
        self.pulls: list[tuple[int, int, int | None]] = []
        self.unlocked: list[int] = []
        self.delay_s = 0.0
        self.fail: Exception | None = None
        self.left = False

    def _q(self, q: int) -> QueueAddress:
        return QueueAddress(self.topic, q, "b", "addr")

    def key(self, queue: QueueAddress) -> QueueKey:
        return "", queue.queue_id

    def wanted(self) -> list[QueueAddress] | None:
        return None if self.wanted_ids is None else [self._q(q) for q in self.wanted_ids]

    def lock(self, queues: Sequence[QueueAddress]) -> LockAnswer:
        answer = LockAnswer()
        for q in queues:
            if q.queue_id in self.others:
                answer.refused.append(q)
            else:
                self.locks.add(q.queue_id)
                answer.granted.append(q)
        return answer

    def committed(self, queue: QueueAddress) -> int | None:
        return self.offsets.get(queue.queue_id)

    def min_offset(self, queue: QueueAddress) -> int:
        return 0

    def max_offset(self, queue: QueueAddress) -> int:
        return self.ends[queue.queue_id]

    def pull(
        self, queue: QueueAddress, offset: int, *, max_messages: int, wait_ms: int, commit: int | None
    ) -> PullResult | None:
        q = queue.queue_id
        self.pulls.append((q, offset, commit))
        if self.fail is not None:
            raise self.fail
        if commit is not None:
            self.offsets[q] = commit
        time.sleep(self.delay_s)
        end = min(offset + max_messages, self.ends[q])
        status = PullStatus.FOUND if end > offset else PullStatus.NO_NEW_MSG
        return PullResult(status, self.topic, q, end, 0, self.ends[q], "b", 0, empty_pulled_batch())

    def commit(self, queue: QueueAddress, offset: int) -> bool:
        self.offsets[queue.queue_id] = offset
        return True

    def unlock(self, queues: Sequence[QueueAddress]) -> None:
        for q in queues:
            self.unlocked.append(q.queue_id)
            self.locks.discard(q.queue_id)

    def leave(self) -> None:
        self.left = True

    def close(self) -> None:
        """Nothing to release: the fake holds no connections."""


def _loop(port: MemoryPort, auto_commit: bool = True) -> ExclusiveLoop:
    typed: ExclusivePort = port  # the fake is a port as mypy sees it
    return ExclusiveLoop(typed, auto_commit=auto_commit, retry_lock_s=0.05)


def _handed(results: list[PullResult]) -> dict[int, int]:
    return {r.queue_id: r.next_offset for r in results}


def test_each_queue_starts_at_the_committed_offset_and_auto_commit_rides_on_the_next_pull() -> None:
    port = MemoryPort()
    port.offsets[0] = 4
    loop = _loop(port)
    assert _handed(loop.poll(max_messages=3, wait_s=0)) == {0: 7, 1: 3}
    assert port.pulls == [(0, 4, None), (1, 0, None)]
    loop.poll(max_messages=3, wait_s=0)
    assert port.pulls[2:] == [(0, 7, 7), (1, 3, 3)]


def test_a_lapsed_lease_hands_out_nothing_is_renewed_and_starts_again_from_the_committed_offset() -> None:
    port = MemoryPort(queues=1, lease_s=0.3)
    loop = _loop(port, auto_commit=False)
    assert _handed(loop.poll(max_messages=4, wait_s=0)) == {0: 4}  # handed out, not committed
    port.delay_s = 0.35  # the answer arrives after the lease ended
    assert loop.poll(max_messages=4, wait_s=0) == []
    assert loop.held == [] and port.unlocked == []  # lapsed, still known (its lock may be live)
    port.delay_s = 0.0
    assert _handed(loop.poll(max_messages=4, wait_s=0)) == {0: 4}  # granted again: from the commit (none: 0)
    assert port.pulls[-1] == (0, 0, None)


def test_a_queue_allocated_elsewhere_is_committed_and_unlocked_at_once() -> None:
    port = MemoryPort()
    loop = _loop(port)
    loop.poll(max_messages=5, wait_s=0)
    port.wanted_ids = [0]
    assert [q.queue_id for q in loop.renew()] == [0]
    assert port.offsets[1] == 5 and port.unlocked == [1]


def test_a_port_that_cannot_tell_the_wanted_queues_keeps_what_is_held() -> None:
    port = MemoryPort()
    loop = _loop(port)
    loop.renew()
    port.wanted_ids = None
    assert sorted(q.queue_id for q in loop.renew()) == [0, 1] and port.unlocked == []


def test_a_refused_queue_is_dropped_and_the_other_holder_keeps_it() -> None:
    port = MemoryPort()
    loop = _loop(port)
    loop.renew()
    port.others.add(1)
    assert [q.queue_id for q in loop.renew()] == [0]


def test_a_pull_without_a_verdict_hands_out_nothing_but_a_refused_access_is_raised() -> None:
    port = MemoryPort(queues=1)
    loop = _loop(port)
    port.fail = BrokerUnavailableError("down")
    assert loop.poll(wait_s=0) == [] and len(loop.held) == 1
    for error in (AccessDeniedError("no"), InvalidArgumentError("bad")):
        port.fail = error
        with pytest.raises(type(error)):
            loop.poll(wait_s=0)


def test_close_commits_unlocks_every_queue_and_leaves_the_group() -> None:
    port = MemoryPort()
    loop = _loop(port)
    loop.poll(max_messages=2, wait_s=0)
    loop.close()
    assert port.offsets == {0: 2, 1: 2} and sorted(port.unlocked) == [0, 1] and port.left
