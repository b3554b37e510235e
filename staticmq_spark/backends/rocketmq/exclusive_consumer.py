"""The ExclusiveConsumer on Apache RocketMQ static topics: ordered consumption of the logic queues
this client holds RocketMQ's rebalance lock of, shared with RocketMQ's own orderly consumers.

How it behaves as a member of its group (like `DefaultMQPushConsumer` with `MessageListenerOrderly`):
- it sends HEART_BEAT as a consumer of the group (CONSUME_PASSIVELY, CLUSTERING, subscribed to the
  topic) to every broker of the route, so every member sees it in GET_CONSUMER_LIST_BY_GROUP;
- it takes the logic queues RocketMQ's averaged allocation gives it over the group's sorted client
  ids and the sorted logic queues, looks again every `retry_lock_s`, and lets go of (commits and
  unlocks) the queues allocated elsewhere when members come or go;
- it locks each logic queue as MessageQueue(topic, "__syslo__global__", id) with LOCK_BATCH_MQ at
  the queue's leader and, after a remap, also at the brokers of its older segments: a queue is held
  only while every one of them grants it (an old leader's lock is then this client's or expired);
- a lock is live for `lease_s` (at most 30 s, as RocketMQ's clients count it) from the request that
  granted it, and renewed when half of that is gone; the broker keeps it 60 s after its last
  renewal, so a successor cannot lock the queue while this client may still hand out its messages.
  A queue whose lease is over hands out nothing more;
- it pulls logic offsets from the leader and commits logic offsets there (`auto_commit`: with the next
  pull of the queue, on commit() and close()); it never sends messages back;
- close() commits, unlocks with UNLOCK_BATCH_MQ and unregisters the client.

Given `queues=`, it is not a member of the allocation: it locks only those queues, and the member
they are allocated to consumes them whenever this client does not hold them.

What RocketMQ does not give: the brokers do not check locks on pulls or commits (exclusivity holds
among clients that lock, as RocketMQ's orderly consumers and this one do), and a broker keeps its
locks in memory only (a restarted broker grants any queue at once). A consumer object is for one
thread; each needs a backend of its own (the brokers know a client by its connection).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.consumer_groups import (
    allocate_averagely,
    consumer_ids,
    heartbeat_body,
    lock_body,
    locked_queues,
)
from staticmq_spark.backends.rocketmq.pull_consumer import RocketMQPullConsumer
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode, ResponseCode
from staticmq_spark.backends.rocketmq.wire.remoting import RocketMQError, check_answer
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute
from staticmq_spark.backends.types import PullResult
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import InvalidArgumentError, NotLeaderError, QueueNotFoundError, StaticMQError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.topics.names import validate_group, validate_topic
from staticmq_spark.protocol.topics.route_view import QueueAddress

log = logging.getLogger(__name__)

INIT_MODES = ("earliest", "latest")
MAX_LEASE_S = 30.0  # RocketMQ's clients treat a lock as live 30 s; its brokers keep one 60 s
HEARTBEAT_S = 5.0  # heartbeats and route refreshes (a broker drops a client silent for 120 s)


@dataclass(slots=True)
class HeldQueue:
    queue: QueueAddress
    lease_until: float  # monotonic; nothing is handed out from this queue after it
    brokers: frozenset[str]  # where its lock is held: the leader and its older segments' brokers
    position: int | None = None  # next logic offset to hand out
    committed: int | None = None  # last logic offset committed by this consumer


class RocketMQExclusiveConsumer(Closeable):
    def __init__(
        self,
        instance: RocketMQClientInstance,
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
        """`instance`: the backend's client instance (connections, ACL keys, routes)."""
        validate_group(group)
        validate_topic(topic)
        if not 0.2 <= lease_s <= MAX_LEASE_S:
            raise InvalidArgumentError(
                f"lease_s must be 0.2..{MAX_LEASE_S:g} seconds on Apache RocketMQ, got {lease_s} (its brokers "
                "keep a queue lock 60 s after the last renewal; a client may count on half of that)"
            )
        if init_mode not in INIT_MODES:
            raise InvalidArgumentError(f"init_mode must be one of {INIT_MODES}, got {init_mode!r}")
        self.group = group
        self.topic = topic
        self.client_id = client_id or f"staticmq@{os.getpid()}@{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self._margin_s = min(0.5, 0.1 * lease_s)
        self._auto_commit = auto_commit
        self._init_mode = init_mode
        self._retry_lock_s = retry_lock_s if retry_lock_s is not None else min(1.0, lease_s / 4)
        self._client = instance.remoting.with_timeout(request_timeout_s)
        self._pull = RocketMQPullConsumer(instance, group=group, request_timeout_s=request_timeout_s)
        self._access = self._pull.access
        total = len(self._pull.queues(topic))  # a static topic, or a clear error now
        self._pinned = None if queues is None else sorted(set(queues))
        wrong = [q for q in self._pinned or [] if not 0 <= q < total]
        if wrong:
            raise QueueNotFoundError(f"static topic {topic!r} has {total} logic queues; queues {wrong} do not exist")
        self._held: dict[int, HeldQueue] = {}
        self._next_round = 0.0
        self._next_refresh = 0.0
        self._sub_version = int(time.time() * 1000)
        self._segments: tuple[tuple[tuple[str, int], ...], dict[int, frozenset[str]]] | None = None
        self._turn = 0
        self._group_made = False

    # ------------------------------------------------------------------ public API

    @property
    def held(self) -> list[QueueAddress]:
        """Queues this consumer holds a live lease on now."""
        return [h.queue for h in self._live()]

    def poll(self, max_messages: int = 1024, wait_s: float = 1.0) -> list[PullResult]:
        """Messages from held queues (at most `max_messages` per queue), waiting up to `wait_s`
        when there are none. Re-balances, locks and renews as it goes."""
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
        """Renew the leases of held queues and re-balance now."""
        self._next_round = 0.0
        self._maintain(force_renew=True)
        return self.held

    def commit(self) -> None:
        """Commit the position of every held queue (what poll handed out is consumed)."""
        for held in self._live():
            self._commit_one(held)

    def close(self) -> None:
        """Commit (with auto_commit), unlock every queue and leave the group."""
        try:
            if self._auto_commit:
                self.commit()
        finally:
            try:
                self._unlock(list(self._held.values()))
                self._held.clear()
                if self._pinned is None:
                    self._unregister()
            finally:
                self._pull.close()

    # ------------------------------------------------------------------ the group

    def _maintain(self, force_renew: bool = False) -> None:
        # A queue whose lease lapsed stays in `_held` (not live: nothing is handed out from it):
        # the broker may still keep its lock for this client, so the re-balance below unlocks it
        # when it is allocated elsewhere and the renewal takes it again when it is not. Forgotten
        # here, its lock would keep its new owner out until the broker lets it go (60 s).
        now = time.monotonic()
        if now >= self._next_round:
            self._next_round = now + self._retry_lock_s
            self._rebalance(now)
        renew = [q for q, h in self._held.items() if force_renew or h.lease_until - now < self.lease_s / 2]
        if renew:
            self._lock(renew)

    def _rebalance(self, now: float) -> None:
        try:
            refresh = now >= self._next_refresh
            route = self._access.route(self.topic, refresh=refresh)
            if refresh:
                self._next_refresh = now + HEARTBEAT_S
                if self._pinned is None:
                    self._heartbeat(route)
            wanted = self._wanted(route)
        except StaticMQError as exc:
            log.info("re-balancing %s of group %s: %s", self.topic, self.group, exc.message)
            return
        gone = [h for q, h in self._held.items() if q not in wanted]
        if gone:
            self._release(gone)
        free = [q for q in wanted if q not in self._held]
        if free:
            self._lock(free)

    def _wanted(self, route: TopicRoute) -> list[int]:
        if self._pinned is not None:
            return [q for q in self._pinned if q < route.total_queues]
        return allocate_averagely(self.client_id, self._members(route), range(route.total_queues))

    def _members(self, route: TopicRoute) -> list[str]:
        """The group's client ids, from the first broker of the route that answers."""
        error: StaticMQError | None = None
        for bname in sorted(route.masters):
            try:
                resp = self._client.call(
                    route.masters[bname], RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}
                )
            except StaticMQError as exc:
                error = exc
                continue
            if resp.code == ResponseCode.SYSTEM_ERROR:  # "no consumer for this group" (yet)
                return []
            check_answer(resp, f"consumer list of group {self.group!r}")
            return consumer_ids(resp.body)
        if error is not None:
            raise error
        return []

    def _heartbeat(self, route: TopicRoute) -> None:
        body = heartbeat_body(
            self.client_id,
            self.group,
            self.topic,
            from_first=self._init_mode == "earliest",
            sub_version=self._sub_version,
        )
        for bname, addr in sorted(route.masters.items()):
            try:
                resp = self._client.call(addr, RequestCode.HEART_BEAT, {}, body)
            except StaticMQError as exc:
                log.info("heartbeat of %s to %s: %s", self.client_id, bname, exc.message)
                continue
            if resp.code != ResponseCode.SUCCESS:
                log.warning("heartbeat of group %s to %s answered %d: %s", self.group, bname, resp.code, resp.remark)

    def _unregister(self) -> None:
        try:
            masters = self._access.route(self.topic).masters
        except StaticMQError:
            return  # the brokers drop a silent client after 120 s
        for addr in masters.values():
            try:
                self._client.call(
                    addr, RequestCode.UNREGISTER_CLIENT, {"clientID": self.client_id, "consumerGroup": self.group}
                )
            except StaticMQError:
                pass  # that broker drops this silent client after 120 s

    # ------------------------------------------------------------------ locks

    def _lock_brokers(self, route: TopicRoute) -> dict[int, frozenset[str]]:
        """Per logic queue, the brokers its lock is taken at: the leader and every broker of an
        older segment that is still in the route (from the leaders' mapping details, read again
        when an epoch changes)."""
        key = tuple(sorted(route.epochs.items()))
        if self._segments is None or self._segments[0] != key:
            found: dict[int, frozenset[str]] = {}
            for bname in sorted(set(route.leaders.values())):
                addr = route.masters.get(bname)
                config = self._client.topic_config(addr, self.topic) if addr else None
                mapping = config[1] if config is not None else None
                for q, chain in (mapping.hosted if mapping is not None else {}).items():
                    if route.leaders.get(q) == bname:
                        found[q] = frozenset(i.bname for i in chain) | {bname}
            self._segments = (key, found)
        chains = self._segments[1]
        return {
            q: frozenset(b for b in chains.get(q, frozenset()) | {leader} if b in route.masters)
            for q, leader in route.leaders.items()
        }

    def _lock(self, queue_ids: Iterable[int]) -> None:
        wanted = sorted(set(queue_ids))
        try:
            route = self._access.route(self.topic)
            brokers = self._lock_brokers(route)
        except StaticMQError as exc:  # nothing refused: held leases run on until they end
            log.info("locking %s of group %s: %s", self.topic, self.group, exc.message)
            return
        need = {q: brokers[q] for q in wanted if brokers.get(q)}
        by_broker: dict[str, list[int]] = {}
        for q, names in need.items():
            for bname in names:
                by_broker.setdefault(bname, []).append(q)
        sent = time.monotonic()
        granted: dict[int, set[str]] = {q: set() for q in need}
        refused: set[int] = set()
        for bname, queues in sorted(by_broker.items()):
            body = lock_body(self.group, self.client_id, self.topic, queues)
            try:
                resp = self._client.call(route.masters[bname], RequestCode.LOCK_BATCH_MQ, {}, body)
                check_answer(resp, f"lock of {self.topic} queues {queues} for group {self.group!r}")
            except StaticMQError as exc:  # no answer: neither granted nor refused
                log.info("lock at %s: %s", bname, exc.message)
                continue
            ok = locked_queues(resp.body, self.topic)
            for q in queues:
                if q in ok:
                    granted[q].add(bname)
                else:
                    refused.add(q)
        partial: dict[str, list[int]] = {}
        for q in wanted:
            names = need.get(q, frozenset())
            if names and granted[q] >= names:
                leader = route.leaders[q]
                held = self._held.get(q)
                address = QueueAddress(self.topic, q, leader, route.masters[leader])
                if held is None:
                    held = self._held[q] = HeldQueue(address, 0.0, names)
                elif held.lease_until <= sent:  # lapsed: start again from the committed offset
                    held.position = held.committed = None
                held.queue, held.brokers = address, names
                held.lease_until = sent + self.lease_s - self._margin_s
            elif q in refused:  # held by another client at one of its brokers
                if q in self._held:
                    self._drop(self._held[q])
                for bname in granted[q]:  # let go where it was granted, or its owner waits 60 s there
                    partial.setdefault(bname, []).append(q)
        if partial:
            self._unlock_at(partial, route.masters)

    def _release(self, queues: list[HeldQueue]) -> None:
        """Let go of queues allocated to another member: commit, stop, unlock."""
        for held in queues:
            if self._auto_commit:
                self._commit_one(held)
            self._drop(held)
        self._unlock(queues)

    def _unlock(self, queues: list[HeldQueue]) -> None:
        by_broker: dict[str, list[int]] = {}
        for held in queues:
            for bname in held.brokers:
                by_broker.setdefault(bname, []).append(held.queue.queue_id)
        try:
            masters = self._access.route(self.topic).masters
        except StaticMQError:
            return  # the locks end by themselves
        self._unlock_at(by_broker, masters)

    def _unlock_at(self, by_broker: dict[str, list[int]], masters: Mapping[str, str]) -> None:
        """UNLOCK_BATCH_MQ of these logic queues at these brokers (best effort: a lock not
        released ends by itself on the broker)."""
        for bname, ids in by_broker.items():
            addr = masters.get(bname)
            if addr is None:
                continue
            try:
                body = lock_body(self.group, self.client_id, self.topic, ids)
                self._client.call(addr, RequestCode.UNLOCK_BATCH_MQ, {}, body)
            except StaticMQError:
                pass  # the lock ends by itself

    def _drop(self, held: HeldQueue) -> None:
        self._held.pop(held.queue.queue_id, None)

    def _live(self) -> list[HeldQueue]:
        now = time.monotonic()
        return [h for h in self._held.values() if h.lease_until > now]

    # ------------------------------------------------------------------ pulls and offsets

    def _pull_one(self, held: HeldQueue, max_messages: int, wait_ms: int) -> PullResult | None:
        q = held.queue.queue_id
        try:
            if held.position is None:
                held.position = held.committed = self._start_offset(q)
            if self._auto_commit:
                self._commit_one(held)
            result = self._pull.pull(self.topic, q, held.position, max_messages=max_messages, wait_ms=wait_ms)
        except StaticMQError as exc:
            log.info("pull of %s/%d for group %s: %s", self.topic, q, self.group, exc.message)
            return None
        if time.monotonic() >= held.lease_until:
            return None  # the lease ended while the answer travelled: hand nothing out
        if result.status is PullStatus.FOUND:
            held.position = result.next_offset
            return result
        if result.status in (PullStatus.OFFSET_MOVED, PullStatus.RETRY_AT_NEXT):
            held.position = result.next_offset  # outside the queue, or a hole between two segments
        return None

    def _start_offset(self, q: int) -> int:
        committed = self._access.committed_offset(self.group, self.topic, q)
        if committed is not None:
            end = self._access.max_offset(self.topic, q)
            if committed <= end:
                return committed
            # Past the queue's end: RocketMQ stores the commit offset a Java consumer's pull carries
            # (a logic offset) on a remapped queue's new segment without converting it to a physical
            # one, so it reads back one segment start too far. Going on from the end would skip what
            # that consumer had not consumed: read the queue again from its start instead.
            log.warning(
                "group %s's committed offset %d of %s/%d is past its end %d (a RocketMQ Java consumer's "
                "unconverted commit on a remapped static topic); consuming it again from its start",
                self.group,
                committed,
                self.topic,
                q,
                end,
            )
            return self._access.min_offset(self.topic, q)
        if self._init_mode == "earliest":
            return self._access.min_offset(self.topic, q)
        return self._access.max_offset(self.topic, q)

    def _commit_one(self, held: HeldQueue) -> None:
        """Commit the queue's position at its leader while the lease is live (a commit after it
        could move a successor's offset)."""
        position = held.position
        if position is None or position == held.committed or time.monotonic() >= held.lease_until:
            return
        q = held.queue.queue_id
        route = self._access.route(self.topic)
        _bname, addr = route.leader_addr(q)
        try:
            self._client.update_consumer_offset(addr, self.group, self.topic, q, position)
        except NotLeaderError:
            # a remap moved the queue since the route was read: once more where the fresh route says
            _bname, leader = self._access.route(self.topic, refresh=True).leader_addr(q)
            if leader == addr or time.monotonic() >= held.lease_until:
                raise
            self._client.update_consumer_offset(leader, self.group, self.topic, q, position)
        except RocketMQError as exc:
            # A broker without the group refuses it, also when the leader forwards the commit to an
            # older segment's broker (SYSTEM_ERROR then): members' heartbeats make the group on every
            # broker, a consumer given `queues=` makes it once here.
            missing = (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.SYSTEM_ERROR)
            if exc.response_code not in missing or self._group_made:
                raise
            self._access.create_group(self.group)
            self._group_made = True
            self._client.update_consumer_offset(addr, self.group, self.topic, q, position)
        held.committed = position
