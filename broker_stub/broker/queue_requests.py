"""The request families that address a queue (send, pull, offsets and search by time, commit and
query of a consumer offset), in one shape: the servicer decodes a request, `QueueRouter.route`
decides once which queues it addresses, that side's handler answers, the servicer encodes.

- LogicQueues: a static topic's logic queues, served through its mapping (StaticTopicService);
- BrokerQueues: this broker's queues as they are (MessageService and the consumer offsets): a plain
  topic's queues, or, for a request that names a physical queue (broker to broker), one physical
  queue of a static topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker_stub.broker.message_service import MessageService, PullOutcome, PullQuery, QueueOffsetInfo, SendOutcome
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.broker.topic_service import TopicService
from broker_stub.store.consumer_offsets import ConsumerOffsets
from staticmq_spark.errors import InvalidArgumentError, QueueNotFoundError
from staticmq_spark.protocol.rows.codec import PackedBatch


@dataclass(frozen=True, slots=True)
class SendQuery:
    topic: str
    queue_id: int
    batch: PackedBatch
    idempotency_key: bytes = b""
    dedup_across_segments: bool = False


class QueueRequests(Protocol):
    """What each request family asks of the queues a request addresses."""

    def send(self, send: SendQuery) -> SendOutcome: ...

    def pull(self, query: PullQuery) -> PullOutcome: ...

    def topic_offsets(self, topic: str) -> list[QueueOffsetInfo]: ...

    def search(self, topic: str, queue_id: int, timestamp: int) -> int: ...

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...

    def committed(self, group: str, topic: str, queue_id: int) -> int | None: ...


class LogicQueues:
    """A static topic's logic queues, through its mapping (offsets are logic offsets)."""

    def __init__(self, static: StaticTopicService, topics: TopicService) -> None:
        self._static = static
        self._topics = topics

    def send(self, send: SendQuery) -> SendOutcome:
        return self._static.send(
            send.topic,
            send.queue_id,
            send.batch,
            send.idempotency_key,
            dedup_across_segments=send.dedup_across_segments,
        )

    def pull(self, query: PullQuery) -> PullOutcome:
        return self._static.pull(query)

    def topic_offsets(self, topic: str) -> list[QueueOffsetInfo]:
        return self._static.logic_offsets(topic)

    def search(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self._static.search(topic, queue_id, timestamp)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        cfg = self._topics.require(topic)
        check_commit(topic, queue_id, offset, cfg.total_queues, "logic queues")
        self._static.commit_offset(group, topic, queue_id, offset)

    def committed(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._static.query_offset(group, topic, queue_id)


class BrokerQueues:
    """This broker's queues as they are; `physical`: the requests name a physical queue (a static
    topic's ones are readable then, never writable)."""

    def __init__(
        self, messages: MessageService, topics: TopicService, offsets: ConsumerOffsets, *, physical: bool
    ) -> None:
        self._messages = messages
        self._topics = topics
        self._offsets = offsets
        self.physical = physical

    def send(self, send: SendQuery) -> SendOutcome:
        return self._messages.send(send.topic, send.queue_id, send.batch, send.idempotency_key)

    def pull(self, query: PullQuery) -> PullOutcome:
        return self._messages.pull(query)

    def topic_offsets(self, topic: str) -> list[QueueOffsetInfo]:
        return self._messages.topic_offsets(topic)

    def search(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self._messages.search_offset(topic, queue_id, timestamp, physical=self.physical)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        cfg = self._topics.require(topic)
        check_commit(topic, queue_id, offset, max(cfg.read_queues, cfg.write_queues), "queues on this broker")
        self._offsets.commit(group, topic, queue_id, offset)

    def committed(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._offsets.query(group, topic, queue_id)


class QueueRouter:
    """Which queues a request addresses, decided once per request."""

    def __init__(
        self, static: StaticTopicService, messages: MessageService, topics: TopicService, offsets: ConsumerOffsets
    ) -> None:
        self._static = static
        self.logic = LogicQueues(static, topics)
        self.plain = BrokerQueues(messages, topics, offsets, physical=False)
        self.physical = BrokerQueues(messages, topics, offsets, physical=True)

    def route(self, topic: str, physical: bool = False) -> QueueRequests:
        """A static topic's logic queues, unless the request names a physical queue; else this
        broker's queues as they are."""
        if self._static.is_static(topic) and not physical:
            return self.logic
        return self.physical if physical else self.plain


def check_commit(topic: str, queue_id: int, offset: int, queues: int, kind: str) -> None:
    """A consumer offset commit's checks: the offset is >= 0 and the queue is one of the topic's
    `queues` (`kind`: what they are, for the error)."""
    if offset < 0:
        raise InvalidArgumentError(f"committed offset must be >= 0, got {offset}")
    if not 0 <= queue_id < queues:
        raise QueueNotFoundError(f"topic {topic!r} has {queues} {kind}: queue {queue_id} does not exist")
