"""staticmq's ExclusivePort (backends/exclusive_port.py): the broker-enforced pull locks of this
repo's brokers, over gRPC. The loop above the seam (client/exclusive_loop.py) does the rest.

- the queues to hold: every available queue of the topic (logic queues of a static topic, else
  (broker, queue) pairs), or the pinned ones; a held queue is keyed by (broker, queue), as each
  broker keeps its own locks;
- LockQueues per broker locks or renews them for `lease_s` (0.2..300 s); the brokers check the
  lock on every ExclusivePull (which renews it and carries the commit of the previous position)
  and ExclusiveCommit, and refuse a client that does not hold it (LockHeldError, or NotLeaderError
  once a remap moved the queue): the port then answers "not held";
- UnlockQueues per broker releases them at once; there is no group membership to leave.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from staticmq_spark.backends.exclusive_port import ExclusiveSettings, LockAnswer, QueueKey
from staticmq_spark.backends.staticmq.answers import pull_result
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pull_consumer import StaticMQPullConsumer
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import PullResult
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidArgumentError,
    LockHeldError,
    NotLeaderError,
    QueueUnavailableError,
    StaticMQError,
)
from staticmq_spark.protocol.pb import consume_pb2 as cpb
from staticmq_spark.protocol.pb.consume_pb2_grpc import ConsumeServiceStub
from staticmq_spark.protocol.topics.names import validate_group, validate_topic
from staticmq_spark.protocol.topics.route_view import QueueAddress


class StaticMQExclusivePort:
    pull_renews_lease = True  # ExclusivePull renews the lock it reads under

    def __init__(self, instance: StaticMQClientInstance, group: str, topic: str, settings: ExclusiveSettings) -> None:
        validate_group(group)
        validate_topic(topic)
        lease_s = settings.lease_s
        if not 0.2 <= lease_s <= 300:
            raise InvalidArgumentError(f"lease_s must be 0.2..300 seconds, got {lease_s}")
        self.group = group
        self.topic = topic
        self.client_id = settings.client_id or f"exclusive-{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self._pinned = None if settings.queues is None else sorted(set(settings.queues))
        self._timeout_s = settings.request_timeout_s
        self._channels = instance.channels
        self._pull = StaticMQPullConsumer(instance, group=group, request_timeout_s=settings.request_timeout_s)

    def key(self, queue: QueueAddress) -> QueueKey:
        return queue.broker, queue.queue_id

    def wanted(self) -> list[QueueAddress] | None:
        try:
            queues = [q for q in self._pull.queues(self.topic) if q.available]
        except (BrokerUnavailableError, QueueUnavailableError):
            return None
        if self._pinned is not None:
            queues = [q for q in queues if q.queue_id in self._pinned]
        return queues

    def lock(self, queues: Sequence[QueueAddress]) -> LockAnswer:
        answer = LockAnswer()
        for group in _by_broker(queues).values():
            request = cpb.LockRequest(
                group=self.group,
                topic=self.topic,
                client_id=self.client_id,
                queue_ids=[q.queue_id for q in group],
                lease_ms=int(self.lease_s * 1000),
            )
            try:
                resp = invoke(group[0].broker, self._stub(group[0]).LockQueues, request, self._timeout_s)
            except (BrokerUnavailableError, NotLeaderError, QueueUnavailableError):
                self._pull.routes.invalidate(self.topic)
                continue
            granted = set(resp.locked)
            for q in group:
                (answer.granted if q.queue_id in granted else answer.refused).append(q)
        return answer

    def _broker(self, queue: QueueAddress) -> str | None:
        """The broker to name in offset requests: none for a static topic's logic queue."""
        return None if self._pull.routes.get(self.topic).is_static else queue.broker

    def committed(self, queue: QueueAddress) -> int | None:
        return self._pull.committed(self.topic, queue.queue_id, self._broker(queue))

    def min_offset(self, queue: QueueAddress) -> int:
        return self._pull.min_offset(self.topic, queue.queue_id, self._broker(queue))

    def max_offset(self, queue: QueueAddress) -> int:
        return self._pull.max_offset(self.topic, queue.queue_id, self._broker(queue))

    def pull(
        self, queue: QueueAddress, offset: int, *, max_messages: int, wait_ms: int, commit: int | None
    ) -> PullResult | None:
        request = cpb.ExclusivePullRequest(
            group=self.group,
            topic=self.topic,
            client_id=self.client_id,
            queue_id=queue.queue_id,
            offset=offset,
            max_messages=max_messages,
            wait_ms=wait_ms,
            commit=commit is not None,
            commit_offset=offset if commit is None else commit,
            lease_ms=int(self.lease_s * 1000),
        )
        try:
            stub = self._stub(queue)
            resp = invoke(queue.broker, stub.ExclusivePull, request, self._timeout_s + wait_ms / 1000)
        except (LockHeldError, NotLeaderError):
            return None
        return pull_result(self.topic, queue.queue_id, resp.pull)

    def commit(self, queue: QueueAddress, offset: int) -> bool:
        request = cpb.ExclusiveCommitRequest(
            group=self.group, topic=self.topic, client_id=self.client_id, queue_id=queue.queue_id, offset=offset
        )
        try:
            invoke(queue.broker, self._stub(queue).ExclusiveCommit, request, self._timeout_s)
        except (LockHeldError, NotLeaderError):
            return False
        return True

    def unlock(self, queues: Sequence[QueueAddress]) -> None:
        for group in _by_broker(queues).values():
            request = cpb.UnlockRequest(
                group=self.group, topic=self.topic, client_id=self.client_id, queue_ids=[q.queue_id for q in group]
            )
            try:
                invoke(group[0].broker, self._stub(group[0]).UnlockQueues, request, self._timeout_s)
            except StaticMQError:
                pass  # the lease ends by itself

    def leave(self) -> None:
        """Nothing to leave: staticmq's brokers know a client only by its locks."""

    def close(self) -> None:
        self._pull.close()

    def _stub(self, q: QueueAddress) -> ConsumeServiceStub:
        return self._channels.consume(q.addr)


def _by_broker(queues: Sequence[QueueAddress]) -> dict[str, list[QueueAddress]]:
    out: dict[str, list[QueueAddress]] = {}
    for q in queues:
        out.setdefault(q.broker, []).append(q)
    return out
