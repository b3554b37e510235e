"""RocketMQ's ExclusivePort (backends/exclusive_port.py) on static topics: the rebalance locks of
RocketMQ's orderly consumers, shared with them. The loop above the seam (client/exclusive_loop.py)
keeps the leases, positions and hand-overs; this port is a member of the group the way
`DefaultMQPushConsumer` with `MessageListenerOrderly` is:
- it sends HEART_BEAT as a consumer of the group (CONSUME_PASSIVELY, CLUSTERING, subscribed to the
  topic) to every broker of the route every 5 s, so every member sees it in GET_CONSUMER_LIST_BY_GROUP;
- the queues it should hold are those RocketMQ's averaged allocation gives it over the group's sorted
  client ids and the sorted logic queues (the loop asks every `retry_lock_s` and hands over the
  queues allocated elsewhere when members come or go);
- it locks each logic queue as MessageQueue(topic, "__syslo__global__", id) with LOCK_BATCH_MQ at
  the queue's leader and, after a remap, also at the brokers of its older segments: a queue is
  granted only when every one of them grants it (an old leader's lock is then this client's or
  expired), and refused when one refuses it - then it is let go at once where it was granted, or
  its owner would wait for the broker's expiry there;
- a lock is live for `lease_s` (at most 30 s, as RocketMQ's clients count it); the broker keeps it
  60 s after its last renewal, so a successor cannot lock the queue while this client may still
  hand out its messages;
- it pulls logic offsets from the leader and commits logic offsets there (a commit before the pull
  that carries it, as RocketMQ's pulls do not commit); it never sends messages back; a broker
  without the group (a consumer given `queues=` sends no heartbeat) gets it created once;
- leave() (on close, after UNLOCK_BATCH_MQ of every queue) unregisters the client.

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
from collections.abc import Mapping, Sequence

from staticmq_spark.backends.exclusive_port import ExclusiveSettings, LockAnswer, QueueKey
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
from staticmq_spark.errors import InvalidArgumentError, NotLeaderError, QueueNotFoundError, StaticMQError
from staticmq_spark.protocol.topics.names import validate_group, validate_topic
from staticmq_spark.protocol.topics.route_view import QueueAddress

log = logging.getLogger(__name__)

MAX_LEASE_S = 30.0  # RocketMQ's clients treat a lock as live 30 s; its brokers keep one 60 s
HEARTBEAT_S = 5.0  # heartbeats and route refreshes (a broker drops a client silent for 120 s)


class RocketMQExclusivePort:
    pull_renews_lease = False  # RocketMQ's pulls do not look at locks

    def __init__(self, instance: RocketMQClientInstance, group: str, topic: str, settings: ExclusiveSettings) -> None:
        """`instance`: the backend's client instance (connections, ACL keys, routes)."""
        validate_group(group)
        validate_topic(topic)
        lease_s = settings.lease_s
        if not 0.2 <= lease_s <= MAX_LEASE_S:
            raise InvalidArgumentError(
                f"lease_s must be 0.2..{MAX_LEASE_S:g} seconds on Apache RocketMQ, got {lease_s} (its brokers "
                "keep a queue lock 60 s after the last renewal; a client may count on half of that)"
            )
        self.group = group
        self.topic = topic
        self.client_id = settings.client_id or f"staticmq@{os.getpid()}@{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self._from_first = settings.init_mode == "earliest"
        self._client = instance.remoting.with_timeout(settings.request_timeout_s)
        self._pull = RocketMQPullConsumer(instance, group=group, request_timeout_s=settings.request_timeout_s)
        self._access = self._pull.access
        total = len(self._pull.queues(topic))  # a static topic, or a clear error now
        self._pinned = None if settings.queues is None else sorted(set(settings.queues))
        wrong = [q for q in self._pinned or [] if not 0 <= q < total]
        if wrong:
            raise QueueNotFoundError(f"static topic {topic!r} has {total} logic queues; queues {wrong} do not exist")
        self._next_refresh = 0.0
        self._sub_version = int(time.time() * 1000)
        self._segments: tuple[tuple[tuple[str, int], ...], dict[int, frozenset[str]]] | None = None
        self._locked_at: dict[int, frozenset[str]] = {}  # where each queue's lock was last granted
        self._group_made = False

    def key(self, queue: QueueAddress) -> QueueKey:
        return "", queue.queue_id  # a logic queue's lock follows it across a remap

    # ------------------------------------------------------------------ the group

    def wanted(self) -> list[QueueAddress] | None:
        now = time.monotonic()
        try:
            refresh = now >= self._next_refresh
            route = self._access.route(self.topic, refresh=refresh)
            if refresh:
                self._next_refresh = now + HEARTBEAT_S
                if self._pinned is None:
                    self._heartbeat(route)
            if self._pinned is not None:
                ids = [q for q in self._pinned if q < route.total_queues]
            else:
                ids = allocate_averagely(self.client_id, self._members(route), range(route.total_queues))
        except StaticMQError as exc:
            log.info("re-balancing %s of group %s: %s", self.topic, self.group, exc.message)
            return None
        return [self._address(route, q) for q in ids]

    def _address(self, route: TopicRoute, q: int) -> QueueAddress:
        leader = route.leaders.get(q, "")
        return QueueAddress(self.topic, q, leader, route.masters.get(leader, ""))

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
            from_first=self._from_first,
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

    def leave(self) -> None:
        if self._pinned is None:
            self._unregister()

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

    def lock(self, queues: Sequence[QueueAddress]) -> LockAnswer:
        wanted = sorted({q.queue_id for q in queues})
        answer = LockAnswer()
        try:
            route = self._access.route(self.topic)
            brokers = self._lock_brokers(route)
        except StaticMQError as exc:  # nothing refused: held leases run on until they end
            log.info("locking %s of group %s: %s", self.topic, self.group, exc.message)
            return answer
        need = {q: brokers[q] for q in wanted if brokers.get(q)}
        by_broker: dict[str, list[int]] = {}
        for q, names in need.items():
            for bname in names:
                by_broker.setdefault(bname, []).append(q)
        granted: dict[int, set[str]] = {q: set() for q in need}
        refused: set[int] = set()
        for bname, ids in sorted(by_broker.items()):
            body = lock_body(self.group, self.client_id, self.topic, ids)
            try:
                resp = self._client.call(route.masters[bname], RequestCode.LOCK_BATCH_MQ, {}, body)
                check_answer(resp, f"lock of {self.topic} queues {ids} for group {self.group!r}")
            except StaticMQError as exc:  # no answer: neither granted nor refused
                log.info("lock at %s: %s", bname, exc.message)
                continue
            ok = locked_queues(resp.body, self.topic)
            for q in ids:
                if q in ok:
                    granted[q].add(bname)
                else:
                    refused.add(q)
        partial: dict[str, list[int]] = {}
        for q in wanted:
            names = need.get(q, frozenset())
            if names and granted[q] >= names:
                self._locked_at[q] = names
                answer.granted.append(self._address(route, q))
            elif q in refused:  # held by another client at one of its brokers
                self._locked_at.pop(q, None)
                answer.refused.append(self._address(route, q))
                for bname in granted[q]:  # let go where it was granted, or its owner waits 60 s there
                    partial.setdefault(bname, []).append(q)
        if partial:
            self._unlock_at(partial, route.masters)
        return answer

    def unlock(self, queues: Sequence[QueueAddress]) -> None:
        by_broker: dict[str, list[int]] = {}
        for q in queues:
            for bname in self._locked_at.pop(q.queue_id, frozenset()):
                by_broker.setdefault(bname, []).append(q.queue_id)
        if not by_broker:
            return
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

    # ------------------------------------------------------------------ pulls and offsets

    def pull(
        self, queue: QueueAddress, offset: int, *, max_messages: int, wait_ms: int, commit: int | None
    ) -> PullResult | None:
        if commit is not None:
            self.commit(queue, commit)
        return self._pull.pull(self.topic, queue.queue_id, offset, max_messages=max_messages, wait_ms=wait_ms)

    def committed(self, queue: QueueAddress) -> int | None:
        q = queue.queue_id
        committed = self._access.committed_offset(self.group, self.topic, q)
        if committed is None:
            return None
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

    def min_offset(self, queue: QueueAddress) -> int:
        return self._access.min_offset(self.topic, queue.queue_id)

    def max_offset(self, queue: QueueAddress) -> int:
        return self._access.max_offset(self.topic, queue.queue_id)

    def commit(self, queue: QueueAddress, offset: int) -> bool:
        """Commit at the queue's leader (the brokers do not check locks: always True)."""
        q = queue.queue_id
        _bname, addr = self._access.route(self.topic).leader_addr(q)
        try:
            self._client.update_consumer_offset(addr, self.group, self.topic, q, offset)
        except NotLeaderError:
            # a remap moved the queue since the route was read: once more where the fresh route says
            _bname, leader = self._access.route(self.topic, refresh=True).leader_addr(q)
            if leader == addr:
                raise
            self._client.update_consumer_offset(leader, self.group, self.topic, q, offset)
        except RocketMQError as exc:
            # A broker without the group refuses it, also when the leader forwards the commit to an
            # older segment's broker (SYSTEM_ERROR then): members' heartbeats make the group on every
            # broker, a consumer given `queues=` makes it once here.
            missing = (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, ResponseCode.SYSTEM_ERROR)
            if exc.response_code not in missing or self._group_made:
                raise
            self._access.create_group(self.group)
            self._group_made = True
            self._client.update_consumer_offset(addr, self.group, self.topic, q, offset)
        return True

    def close(self) -> None:
        self._pull.close()
