"""The one exclusive-consumption loop, above the seam: lock, renew, poll, commit and hand over the
queues of one topic over a backend's ExclusivePort (backends/exclusive_port.py), which answers
with its own calls only (staticmq's pull locks, RocketMQ's rebalance locks and allocation).

Queues: every `retry_lock_s` the loop asks the port which queues this client should hold now,
hands over (see below) the held ones it should not, and tries to lock the others; held queues
not pulled lately are renewed before half their lease is gone.

Lease on the client side: a lease counts from when the request that granted or renewed it was
sent (never later than the broker counted it), minus a safety margin (min(0.5 s, lease_s / 10)).
A queue whose lease is over hands out nothing more - an answer that arrives after it is dropped
before it reaches the caller - so a successor that locks it after the broker-side expiry never
overlaps this consumer.

The lapsed-lease rule (both backends): a queue whose lease lapsed stays known to the loop, not
live (nothing is handed out from it, nothing committed): the broker may still keep its lock for
this client (RocketMQ's brokers keep one 60 s), so it is renewed with the live ones while it is
wanted - granted again, it starts over from the group's committed offset, as anything handed out
since may have gone to another holder meanwhile - and unlocked when it is not wanted any more or
another client holds it. Forgotten at once, its lock would keep its new owner out until the
broker let it go.

Hand-over of a queue no longer wanted (allocated to another member, or gone from the route):
commit its position (with auto_commit, while its lease is live; a commit that fails is logged,
and what it would have committed is delivered again to the next holder), stop handing it out,
unlock it at once.

Offsets: each queue starts at the group's committed offset (earliest or latest when none) and
moves past what poll handed out (and past a hole or an offset outside the queue); with
auto_commit the position is committed with the next pull of that queue (and by commit(), the
hand-over and close()): messages handed out but not yet committed are delivered again to
whoever holds the queue next. Pull failures without a verdict hand out nothing this time
(logged); a refused access or an invalid request is raised. One loop is for one thread.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from staticmq_spark.backends.exclusive_port import ExclusivePort, QueueKey
from staticmq_spark.backends.types import PullResult, PullStatus, QueueAddress, check_init_mode
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import AccessDeniedError, InvalidArgumentError, StaticMQError

log = logging.getLogger(__name__)

_MOVES = (PullStatus.FOUND, PullStatus.OFFSET_MOVED, PullStatus.RETRY_AT_NEXT)


@dataclass(slots=True)
class HeldQueue:
    queue: QueueAddress  # where it is now (a remap may move a RocketMQ logic queue's leader)
    lease_until: float  # monotonic; nothing is handed out from this queue after it
    position: int | None = None  # next offset to hand out (None: read the committed one first)
    committed: int | None = None  # last offset committed by this consumer


class ExclusiveLoop(Closeable):
    def __init__(
        self,
        port: ExclusivePort,
        *,
        auto_commit: bool = True,
        init_mode: str = "earliest",
        retry_lock_s: float | None = None,
    ) -> None:
        self.port = port
        self.group = port.group
        self.topic = port.topic
        self.client_id = port.client_id
        self.lease_s = port.lease_s
        self._margin_s = min(0.5, 0.1 * self.lease_s)
        self._auto_commit = auto_commit
        self._init_mode = check_init_mode(init_mode)
        self._retry_lock_s = retry_lock_s if retry_lock_s is not None else min(1.0, self.lease_s / 4)
        self._held: dict[QueueKey, HeldQueue] = {}  # live and lapsed (the lapsed-lease rule)
        self._next_round = 0.0
        self._turn = 0

    # ------------------------------------------------------------------ public API

    @property
    def held(self) -> list[QueueAddress]:
        """Queues this consumer holds a live lease on now."""
        return [h.queue for h in self._live()]

    def poll(self, max_messages: int = 1024, wait_s: float = 1.0) -> list[PullResult]:
        """Messages from held queues (at most `max_messages` per queue, one PullResult per queue),
        waiting up to `wait_s` when there are none. Hands over, locks and renews as it goes."""
        deadline = time.monotonic() + wait_s
        while True:
            self._maintain()
            results = [r for h in self._live() if (r := self._pull_one(h, max_messages, 0)) is not None]
            remaining = deadline - time.monotonic()
            if results or remaining <= 0:
                return results
            live = self._live()
            if not live:
                time.sleep(min(remaining, self._retry_lock_s))
                continue
            held = live[self._turn % len(live)]
            self._turn += 1
            wait_ms = int(min(remaining, self.lease_s / 4) * 1000)
            one = self._pull_one(held, max_messages, wait_ms)
            if one is not None:
                return [one]

    def renew(self) -> list[QueueAddress]:
        """Renew the leases of held queues, hand over and lock the free ones now."""
        self._next_round = 0.0
        self._maintain(force_renew=True)
        return self.held

    def commit(self) -> None:
        """Commit the position of every held queue (what poll handed out is consumed)."""
        for held in self._live():
            self._commit_one(held)

    def close(self) -> None:
        """Commit (with auto_commit), unlock every queue at once and leave the group."""
        try:
            if self._auto_commit:
                self.commit()
        finally:
            try:
                self.port.unlock([h.queue for h in self._held.values()])
                self._held.clear()
                self.port.leave()
            finally:
                self.port.close()

    # ------------------------------------------------------------------ locks

    def _maintain(self, force_renew: bool = False) -> None:
        now = time.monotonic()
        free: list[QueueAddress] = []
        if now >= self._next_round:
            self._next_round = now + self._retry_lock_s
            wanted = self.port.wanted()
            if wanted is not None:
                by_key = {self.port.key(q): q for q in wanted}
                gone = [h for k, h in self._held.items() if k not in by_key]
                if gone:
                    self._hand_over(gone)
                free = [q for k, q in by_key.items() if k not in self._held]
        renew = [h.queue for h in self._held.values() if force_renew or h.lease_until - now < self.lease_s / 2]
        if renew or free:
            self._lock([*renew, *free])

    def _lock(self, queues: list[QueueAddress]) -> None:
        sent = time.monotonic()
        answer = self.port.lock(queues)
        for q in answer.granted:
            key = self.port.key(q)
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = HeldQueue(q, 0.0)
            elif held.lease_until <= sent:  # lapsed: start again from the committed offset
                held.position = held.committed = None
            held.queue = q
            held.lease_until = sent + self.lease_s - self._margin_s
        for q in answer.refused:  # another client's now
            self._held.pop(self.port.key(q), None)

    def _hand_over(self, queues: list[HeldQueue]) -> None:
        """Let go of queues this client should not hold: commit, stop, unlock."""
        for held in queues:
            if self._auto_commit:
                try:
                    self._commit_one(held)
                except StaticMQError as exc:
                    log.warning(
                        "handing over %s/%d of group %s without its commit: %s",
                        self.topic,
                        held.queue.queue_id,
                        self.group,
                        exc.message,
                    )
            self._drop(held)
        self.port.unlock([h.queue for h in queues])

    def _drop(self, held: HeldQueue) -> None:
        self._held.pop(self.port.key(held.queue), None)

    def _live(self) -> list[HeldQueue]:
        now = time.monotonic()
        return [h for h in self._held.values() if h.lease_until > now]

    # ------------------------------------------------------------------ pulls and offsets

    def _pull_one(self, held: HeldQueue, max_messages: int, wait_ms: int) -> PullResult | None:
        q = held.queue
        try:
            if held.position is None:
                held.position = held.committed = self._start_offset(q)
            live = time.monotonic() < held.lease_until  # a commit after the lease could move a successor's
            commit = held.position if self._auto_commit and held.position != held.committed and live else None
            sent = time.monotonic()
            result = self.port.pull(q, held.position, max_messages=max_messages, wait_ms=wait_ms, commit=commit)
        except (AccessDeniedError, InvalidArgumentError):
            raise
        except StaticMQError as exc:
            log.info("pull of %s/%d for group %s: %s", self.topic, q.queue_id, self.group, exc.message)
            return None
        if result is None:  # the broker says the lock is someone else's
            self._drop(held)
            return None
        if self.port.pull_renews_lease:
            held.lease_until = sent + self.lease_s - self._margin_s
        if commit is not None:
            held.committed = commit
        if time.monotonic() >= held.lease_until:
            return None  # the lease ended while the answer travelled: hand nothing out
        if result.status in _MOVES:  # handed out, outside the queue, or a hole between two segments
            held.position = result.next_offset
        return result if result.status is PullStatus.FOUND else None

    def _start_offset(self, q: QueueAddress) -> int:
        committed = self.port.committed(q)
        if committed is not None:
            return committed
        return self.port.min_offset(q) if self._init_mode == "earliest" else self.port.max_offset(q)

    def _commit_one(self, held: HeldQueue) -> None:
        """Commit the queue's position while its lease is live (a commit after it could move a
        successor's offset)."""
        position = held.position
        if position is None or position == held.committed or time.monotonic() >= held.lease_until:
            return
        if self.port.commit(held.queue, position):
            held.committed = position
        else:
            self._drop(held)
