"""The ExclusiveConsumer: ordered consumption of queues it holds the broker-side pull lock of.

    with ExclusiveConsumer(namesrv, "group", "topic", lease_s=10) as consumer:
        for result in consumer.poll(max_messages=500, wait_s=1.0):
            handle(result.batch)            # Arrow, in queue order, one PullResult per queue
        consumer.commit()                   # or leave it to auto_commit on the next poll

The consumer tries to lock every queue of the topic (or the ones it is given) and consumes those
it holds; the others it tries again every `retry_lock_s`, so it takes over a queue as soon as
the previous holder's lease ends. Every pull renews the lease of its queue, and held queues not
pulled lately are renewed explicitly before half their lease is gone.

Lease on the client side: a lease counts from when the request that granted or renewed it was
sent (never later than the broker counted it), minus a safety margin. A queue whose lease is
over hands out nothing more - its messages are dropped before they reach the caller - so a
successor that locks it after the broker-side expiry never overlaps this consumer.

Offsets: each queue starts at the group's committed offset (earliest or latest when none) and
moves past what poll handed out; with auto_commit the position is committed by the next pull of
that queue (and by commit() and close()): messages handed out but not yet committed are
delivered again to whoever holds the queue next. A consumer object is for one thread.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from staticmq_spark.backends.staticmq.answers import pull_result
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pull_consumer import StaticMQPullConsumer
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import PullResult
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidArgumentError,
    LockHeldError,
    NotLeaderError,
    QueueUnavailableError,
    StaticMQError,
)
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from staticmq_spark.protocol.topics.names import validate_group, validate_topic
from staticmq_spark.protocol.topics.route_view import QueueAddress

INIT_MODES = ("earliest", "latest")


@dataclass(slots=True)
class HeldQueue:
    queue: QueueAddress
    lease_until: float  # monotonic; nothing is handed out from this queue after it
    position: int | None = None  # next offset to hand out
    committed: int | None = None  # last offset committed by this consumer


class StaticMQExclusiveConsumer(Closeable):
    def __init__(
        self,
        instance: StaticMQClientInstance,
        group: str,
        topic: str,
        *,
        queues: Sequence[int] | None = None,
        lease_s: float = 10.0,
        client_id: str | None = None,
        auto_commit: bool = True,
        init_mode: str = "earliest",
        retry_lock_s: float | None = None,
        request_timeout_s: float = 15.0,
    ) -> None:
        validate_group(group)
        validate_topic(topic)
        if not 0.2 <= lease_s <= 300:
            raise InvalidArgumentError(f"lease_s must be 0.2..300 seconds, got {lease_s}")
        if init_mode not in INIT_MODES:
            raise InvalidArgumentError(f"init_mode must be one of {INIT_MODES}, got {init_mode!r}")
        self.group = group
        self.topic = topic
        self.client_id = client_id or f"exclusive-{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self._margin_s = min(0.5, 0.1 * lease_s)
        self._wanted = None if queues is None else sorted(set(queues))
        self._auto_commit = auto_commit
        self._init_mode = init_mode
        self._retry_lock_s = retry_lock_s if retry_lock_s is not None else min(1.0, lease_s / 4)
        self._timeout_s = request_timeout_s
        self._channels = instance.channels
        self._pull = StaticMQPullConsumer(instance, group=group, request_timeout_s=request_timeout_s)
        self._held: dict[tuple[str, int], HeldQueue] = {}
        self._next_lock_try = 0.0
        self._turn = 0

    # ------------------------------------------------------------------ public API

    @property
    def held(self) -> list[QueueAddress]:
        """Queues this consumer holds a live lease on now."""
        now = time.monotonic()
        return [h.queue for h in self._held.values() if h.lease_until > now]

    def poll(self, max_messages: int = 1024, wait_s: float = 1.0) -> list[PullResult]:
        """Messages from held queues (at most `max_messages` per queue), waiting up to `wait_s`
        when there are none. Locks free queues and renews leases as it goes."""
        deadline = time.monotonic() + wait_s
        while True:
            self._maintain()
            results = self._pull_all(max_messages, wait_ms=0)
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
        """Renew the leases of held queues and try to lock the free ones now."""
        self._next_lock_try = 0.0
        self._maintain(force_renew=True)
        return self.held

    def commit(self) -> None:
        """Commit the position of every held queue (what poll handed out is consumed)."""
        for held in self._live():
            if held.position is not None and held.position != held.committed:
                request = cpb.ExclusiveCommitRequest(
                    group=self.group,
                    topic=self.topic,
                    client_id=self.client_id,
                    queue_id=held.queue.queue_id,
                    offset=held.position,
                )
                try:
                    self._rpc(held.queue, "ExclusiveCommit", request)
                except (LockHeldError, NotLeaderError):
                    self._drop(held)
                    continue
                held.committed = held.position

    def close(self) -> None:
        """Commit (with auto_commit) and release every lock at once."""
        try:
            if self._auto_commit:
                self.commit()
            by_broker: dict[str, list[HeldQueue]] = {}
            for held in self._held.values():
                by_broker.setdefault(held.queue.broker, []).append(held)
            for group in by_broker.values():
                request = cpb.UnlockRequest(
                    group=self.group,
                    topic=self.topic,
                    client_id=self.client_id,
                    queue_ids=[h.queue.queue_id for h in group],
                )
                try:
                    self._rpc(group[0].queue, "UnlockQueues", request)
                except StaticMQError:
                    pass  # the lease ends by itself
            self._held.clear()
        finally:
            self._pull.close()

    # ------------------------------------------------------------------ locks

    def _maintain(self, force_renew: bool = False) -> None:
        now = time.monotonic()
        for held in list(self._held.values()):
            if held.lease_until <= now:
                self._drop(held)
        renew = [h.queue for h in self._held.values() if force_renew or h.lease_until - now < self.lease_s / 2]
        free: list[QueueAddress] = []
        if now >= self._next_lock_try:
            self._next_lock_try = now + self._retry_lock_s
            free = [q for q in self._candidates() if (q.broker, q.queue_id) not in self._held]
        if renew or free:
            self._lock([*renew, *free])

    def _candidates(self) -> list[QueueAddress]:
        try:
            queues = [q for q in self._pull.queues(self.topic) if q.available]
        except (BrokerUnavailableError, QueueUnavailableError):
            return []
        if self._wanted is not None:
            queues = [q for q in queues if q.queue_id in self._wanted]
        return queues

    def _lock(self, queues: list[QueueAddress]) -> None:
        by_broker: dict[str, list[QueueAddress]] = {}
        for q in queues:
            by_broker.setdefault(q.broker, []).append(q)
        for group in by_broker.values():
            request = cpb.LockRequest(
                group=self.group,
                topic=self.topic,
                client_id=self.client_id,
                queue_ids=[q.queue_id for q in group],
                lease_ms=int(self.lease_s * 1000),
            )
            sent = time.monotonic()
            try:
                resp = self._rpc(group[0], "LockQueues", request)
            except (BrokerUnavailableError, NotLeaderError, QueueUnavailableError):
                self._pull.routes.invalidate(self.topic)
                continue
            granted = set(resp.locked)
            for q in group:
                key = (q.broker, q.queue_id)
                if q.queue_id in granted:
                    held = self._held.get(key) or HeldQueue(q, 0.0)
                    held.lease_until = sent + self.lease_s - self._margin_s
                    self._held[key] = held
                elif key in self._held:
                    self._drop(self._held[key])

    def _drop(self, held: HeldQueue) -> None:
        self._held.pop((held.queue.broker, held.queue.queue_id), None)

    def _live(self) -> list[HeldQueue]:
        now = time.monotonic()
        return [h for h in self._held.values() if h.lease_until > now]

    # ------------------------------------------------------------------ pulls

    def _pull_all(self, max_messages: int, wait_ms: int) -> list[PullResult]:
        out = []
        for held in self._live():
            result = self._pull_one(held, max_messages, wait_ms)
            if result is not None:
                out.append(result)
        return out

    def _pull_one(self, held: HeldQueue, max_messages: int, wait_ms: int) -> PullResult | None:
        q = held.queue
        if held.position is None:
            held.position = self._start_offset(q)
            held.committed = held.position
        commit = self._auto_commit and held.position != held.committed
        request = cpb.ExclusivePullRequest(
            group=self.group,
            topic=self.topic,
            client_id=self.client_id,
            queue_id=q.queue_id,
            offset=held.position,
            max_messages=max_messages,
            wait_ms=wait_ms,
            commit=commit,
            commit_offset=held.position,
            lease_ms=int(self.lease_s * 1000),
        )
        sent = time.monotonic()
        try:
            resp = self._rpc(q, "ExclusivePull", request, extra_s=wait_ms / 1000)
        except (LockHeldError, NotLeaderError):
            self._drop(held)
            return None
        held.lease_until = sent + self.lease_s - self._margin_s
        if commit:
            held.committed = request.commit_offset
        result = pull_result(self.topic, q.queue_id, resp.pull)
        if result.status is PullStatus.FOUND:
            if time.monotonic() >= held.lease_until:
                self._drop(held)  # the lease ended while the answer travelled: hand nothing out
                return None
            held.position = result.next_offset
            return result
        if result.status is PullStatus.OFFSET_MOVED:
            held.position = result.next_offset
        return None

    def _start_offset(self, q: QueueAddress) -> int:
        broker = None if self._pull.routes.get(self.topic).is_static else q.broker
        committed = self._pull.committed(self.topic, q.queue_id, broker)
        if committed is not None:
            return committed
        if self._init_mode == "earliest":
            return self._pull.min_offset(self.topic, q.queue_id, broker)
        return self._pull.max_offset(self.topic, q.queue_id, broker)

    def _rpc(self, q: QueueAddress, method: str, request: object, extra_s: float = 0.0) -> Any:
        stub = self._channels.consume(q.addr)
        return invoke(q.broker, getattr(stub, method), request, self._timeout_s + extra_s)
