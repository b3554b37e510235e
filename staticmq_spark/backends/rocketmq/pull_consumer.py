"""Logic-queue pulls and group offsets on a RocketMQ static topic (`PullConsumer("rocketmq://…")`).

A pull goes to the logic queue's leader without `lo`: the broker resolves the mapping, forwards
reads of older segments, and answers physical offsets plus `offsetDelta`; they become logic here.
"""

from __future__ import annotations

from typing import Any

from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.reader import RocketMQReader
from staticmq_spark.backends.rocketmq.wire.remoting import DEFAULT_PULL_GROUP
from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored
from staticmq_spark.backends.types import PullResult, QueueOffsets, empty_pulled_batch, pulled_columns
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import QueueNotFoundError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.topics.names import validate_group
from staticmq_spark.protocol.topics.route_view import QueueAddress

MOCK_BROKER = "__syslo__global__"


class RocketMQPullConsumer(Closeable):
    def __init__(
        self,
        instance: RocketMQClientInstance,
        *,
        group: str = "",
        request_timeout_s: float = 15.0,
    ) -> None:
        """`instance`: the backend's client instance (connections, ACL keys, routes)."""
        if group:
            validate_group(group)
        self.group = group
        self.access = RocketMQReader(instance.with_timeout(request_timeout_s))

    def queues(self, topic: str, refresh: bool = False) -> list[QueueAddress]:
        route = self.access.route(topic, refresh)
        if not route.is_static:
            raise QueueNotFoundError(f"topic {topic!r} is not a static topic: the staticmq client reads static topics")
        return [
            QueueAddress(topic, q, route.leaders.get(q, ""), route.masters.get(route.leaders.get(q, ""), ""))
            for q in range(route.total_queues)
        ]

    def _check(self, topic: str, queue_id: int) -> None:
        total = self.access.route(topic).total_queues
        if not 0 <= queue_id < total:
            raise QueueNotFoundError(
                f"static topic {topic!r} has {total} logic queues; queue {queue_id} does not exist"
            )

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
        """Pull logic offsets from `offset`; long-polls up to `wait_ms` when nothing is there yet."""
        self._check(topic, queue_id)
        group = self.group or DEFAULT_PULL_GROUP
        client = self.access.client

        def ask(bname: str, addr: str) -> tuple[str, Any]:
            return bname, client.pull(
                addr,
                topic,
                queue_id,
                offset,
                max_messages,
                logic=True,
                group=group,
                bname=MOCK_BROKER,
                suspend_ms=wait_ms,
                subscription=subscription,
            )

        bname, answer = self.access.on_leader(topic, queue_id, ask)
        batch = empty_pulled_batch()
        if answer.status is PullStatus.FOUND:
            batch = pulled_columns(decode_stored(answer.body), answer.offset_delta)
        return PullResult(
            status=answer.status,
            topic=topic,
            queue_id=queue_id,
            next_offset=answer.next_offset,
            min_offset=answer.min_offset,
            max_offset=answer.max_offset,
            broker=bname,
            offset_delta=answer.offset_delta,
            batch=batch,
        )

    def offsets(self, topic: str) -> list[QueueOffsets]:
        out = []
        for q in self.queues(topic):
            out.append(QueueOffsets(q, self.min_offset(topic, q.queue_id), self.max_offset(topic, q.queue_id), 0))
        return out

    def min_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        self._check(topic, queue_id)
        return self.access.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        self._check(topic, queue_id)
        return self.access.max_offset(topic, queue_id)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int, broker: str | None = None) -> int:
        self._check(topic, queue_id)
        return self.access.offset_for_timestamp(topic, queue_id, timestamp_ms)

    def commit(self, topic: str, queue_id: int, offset: int, broker: str | None = None) -> None:
        self._check(topic, queue_id)
        self.access.commit_offset(self._require_group(), topic, queue_id, offset)

    def committed(self, topic: str, queue_id: int, broker: str | None = None) -> int | None:
        self._check(topic, queue_id)
        return self.access.committed_offset(self._require_group(), topic, queue_id)

    def _require_group(self) -> str:
        if not self.group:
            raise QueueNotFoundError("this consumer has no group: pass group= to commit or query offsets")
        return self.group

    def topic_is_static(self, topic: str) -> bool:
        return self.access.route(topic).is_static

    def close(self) -> None:
        self.access.close()
