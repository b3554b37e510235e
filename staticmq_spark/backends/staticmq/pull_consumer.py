"""The PullConsumer: pulls with explicit offsets (what the Spark source does), offsets queries and
group offset commits. Pulled messages arrive as one Arrow record batch per pull."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.backends.staticmq.answers import pull_result
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import PullResult, QueueOffsets
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidArgumentError,
    NotLeaderError,
    QueueNotFoundError,
    QueueUnavailableError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topics.names import validate_group
from staticmq_spark.protocol.topics.route_view import QueueAddress

T = TypeVar("T")


class StaticMQPullConsumer(Closeable):
    def __init__(self, instance: StaticMQClientInstance, *, group: str = "", request_timeout_s: float = 15.0) -> None:
        if group:
            validate_group(group)
        self.group = group
        self._channels = instance.channels
        self.routes = instance.routes
        self._timeout_s = request_timeout_s

    # ------------------------------------------------------------------ queues

    def queues(self, topic: str, refresh: bool = False) -> list[QueueAddress]:
        """The topic's readable queues: logic queues for a static topic, else (broker, queue) pairs."""
        return list(self.routes.get(topic, refresh).read_queues)

    def resolve(self, topic: str, queue_id: int, broker: str | None = None, refresh: bool = False) -> QueueAddress:
        route = self.routes.get(topic, refresh)
        if route.is_static:
            if not 0 <= queue_id < route.total_queues:
                raise QueueNotFoundError(f"static topic {topic!r} has {route.total_queues} logic queues; no {queue_id}")
            q = route.read_queues[queue_id]
            if not q.available:
                raise QueueUnavailableError(f"logic queue {queue_id} of {topic!r} has no live broker")
            return q
        matches = [q for q in route.read_queues if q.queue_id == queue_id and (broker is None or q.broker == broker)]
        if not matches:
            raise QueueNotFoundError(
                f"topic {topic!r} has no readable queue {queue_id}" + (f" on {broker}" if broker else "")
            )
        if len(matches) > 1:
            names = ", ".join(q.broker for q in matches)
            raise InvalidArgumentError(f"topic {topic!r} has queue {queue_id} on several brokers ({names}); name one")
        return matches[0]

    # ------------------------------------------------------------------ pull

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = 1024,
        max_bytes: int = 0,
        wait_ms: int = 0,
        broker: str | None = None,
        subscription: str = "",
    ) -> PullResult:
        """Pull from `offset`; long-polls up to `wait_ms` when nothing is there yet."""
        request = pb.PullRequest(
            subscription=subscription,
            topic=topic,
            queue_id=queue_id,
            offset=offset,
            max_messages=max_messages,
            max_bytes=max_bytes,
            wait_ms=wait_ms,
            group=self.group,
        )
        timeout = self._timeout_s + wait_ms / 1000
        response = self._on_queue(
            topic,
            queue_id,
            broker,
            lambda q: invoke(q.broker, self._channels.broker(q.addr).Pull, _with_queue(request, q), timeout),
        )
        return pull_result(topic, queue_id, response)

    # ------------------------------------------------------------------ offsets

    def offsets(self, topic: str) -> list[QueueOffsets]:
        """min/max offsets of every queue (logic offsets on a static topic)."""
        route = self.routes.get(topic)
        found: dict[tuple[str, int], pb.QueueOffsets] = {}
        for name, addr in sorted(route.brokers.items()):
            resp = invoke(name, self._channels.broker(addr).GetTopicOffsets, pb.TopicName(topic=topic), self._timeout_s)
            for qo in resp.queues:
                found[(name, qo.queue_id)] = qo
        out = []
        for q in route.read_queues:
            hit = found.get((q.broker, q.queue_id))
            if hit is not None:
                out.append(QueueOffsets(q, hit.min_offset, hit.max_offset, hit.last_store_timestamp))
        return out

    def min_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        return self._queue_offsets(topic, queue_id, broker).min_offset

    def max_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        return self._queue_offsets(topic, queue_id, broker).max_offset

    def _queue_offsets(self, topic: str, queue_id: int, broker: str | None) -> pb.QueueOffsets:
        def ask(q: QueueAddress) -> pb.QueueOffsets:
            resp = invoke(
                q.broker, self._channels.broker(q.addr).GetTopicOffsets, pb.TopicName(topic=topic), self._timeout_s
            )
            for qo in resp.queues:
                if qo.queue_id == q.queue_id:
                    return qo
            raise QueueNotFoundError(f"broker {q.broker} reports no queue {q.queue_id} of {topic!r}")

        return self._on_queue(topic, queue_id, broker, ask)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int, broker: str | None = None) -> int:
        """The first offset stored at or after `timestamp_ms` (the max offset if none is)."""

        def ask(q: QueueAddress) -> int:
            req = pb.SearchOffsetRequest(topic=topic, queue_id=q.queue_id, timestamp=timestamp_ms)
            return invoke(q.broker, self._channels.broker(q.addr).SearchOffset, req, self._timeout_s).offset

        return self._on_queue(topic, queue_id, broker, ask)

    def commit(self, topic: str, queue_id: int, offset: int, broker: str | None = None) -> None:
        """Commit the group's offset for a queue (the next offset to consume)."""
        group = self._require_group()

        def ask(q: QueueAddress) -> None:
            req = pb.CommitOffsetRequest(group=group, topic=topic, queue_id=q.queue_id, offset=offset)
            invoke(q.broker, self._channels.broker(q.addr).CommitOffset, req, self._timeout_s)

        self._on_queue(topic, queue_id, broker, ask)

    def committed(self, topic: str, queue_id: int, broker: str | None = None) -> int | None:
        group = self._require_group()

        def ask(q: QueueAddress) -> int | None:
            req = pb.QueryOffsetRequest(group=group, topic=topic, queue_id=q.queue_id)
            resp = invoke(q.broker, self._channels.broker(q.addr).QueryOffset, req, self._timeout_s)
            return resp.offset if resp.found else None

        return self._on_queue(topic, queue_id, broker, ask)

    def _require_group(self) -> str:
        if not self.group:
            raise InvalidArgumentError("this PullConsumer has no group: pass group=... to commit offsets")
        return self.group

    def _on_queue(self, topic: str, queue_id: int, broker: str | None, call: Callable[[QueueAddress], T]) -> T:
        """Run `call` against the queue's broker; a stale route is refreshed and tried once more."""
        q = self.resolve(topic, queue_id, broker)
        try:
            return call(q)
        except (NotLeaderError, BrokerUnavailableError, QueueUnavailableError):
            return call(self.resolve(topic, queue_id, broker, refresh=True))

    def topic_is_static(self, topic: str) -> bool:
        return self.routes.get(topic).is_static

    def close(self) -> None:
        """Nothing to release: the connections are the backend's (its client instance)."""


def _with_queue(request: pb.PullRequest, q: QueueAddress) -> pb.PullRequest:
    request.queue_id = q.queue_id
    return request
