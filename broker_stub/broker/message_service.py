"""Send, pull (with long polling) and offset queries on the physical queues of one broker."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from broker_stub import metrics
from broker_stub.broker.long_poll import ArrivalNotifier
from broker_stub.broker.pull_limits import pull_limits
from broker_stub.broker.topic_service import TopicService
from broker_stub.config import BrokerConfig
from broker_stub.store.message_store import MessageStore
from broker_stub.store.store_results import ReadResult
from staticmq_spark.errors import InvalidArgumentError, QueueNotFoundError, StaticTopicRefusedError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.consume.tag_filter import filter_codes
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import validate_batch
from staticmq_spark.protocol.topics.config import TopicConfig


@dataclass(frozen=True, slots=True)
class SendOutcome:
    queue_id: int
    base_offset: int
    count: int
    physical_base_offset: int
    store_timestamp: int
    duplicate: bool
    end_pos: int = 0


@dataclass(frozen=True, slots=True)
class PullQuery:
    topic: str
    queue_id: int
    offset: int
    max_messages: int
    max_bytes: int
    wait_ms: int = 0
    group: str = ""
    physical: bool = False
    subscription: str = ""  # a tag expression (protocol.consume.tag_filter); "" or "*": every message


@dataclass(frozen=True, slots=True)
class PullOutcome:
    status: PullStatus  # FOUND, NO_NEW_MESSAGE, OFFSET_MOVED or NOT_FOUND (static topics)
    next_offset: int
    min_offset: int
    max_offset: int
    base_offset: int = 0
    offset_delta: int = 0
    data: bytes = b""
    sizes: bytes = b""
    store_timestamps: bytes = b""
    bname: str = ""
    physical_queue_id: int = -1
    queue_offsets: bytes = b""  # little-endian int64 physical offset per message, when a filter left gaps


@dataclass(frozen=True, slots=True)
class QueueOffsetInfo:
    queue_id: int
    min_offset: int
    max_offset: int
    last_store_timestamp: int
    avg_message_bytes: int = 0


class MessageService:
    def __init__(
        self, config: BrokerConfig, topics: TopicService, store: MessageStore, notifier: ArrivalNotifier
    ) -> None:
        self._config = config
        self._topics = topics
        self._store = store
        self._notifier = notifier

    # ------------------------------------------------------------------ send

    def send(self, topic: str, queue_id: int, batch: PackedBatch, idempotency_key: bytes = b"") -> SendOutcome:
        """Send to a plain topic's queue; a static topic's physical queues never take sends."""
        cfg = self._topics.require(topic)
        if cfg.is_static:
            raise StaticTopicRefusedError(
                f"topic {topic!r} is static: sends address logic queues, never physical queues"
            )
        if not cfg.writable:
            raise InvalidArgumentError(f"topic {topic!r} is not writable on this broker (perm {cfg.perm})")
        _check_queue(cfg, queue_id, cfg.write_queues, "write")
        return self.append_physical(topic, queue_id, batch, idempotency_key)

    def append_physical(
        self,
        topic: str,
        queue_id: int,
        batch: PackedBatch,
        idempotency_key: bytes = b"",
        delta: int | None = 0,
        *,
        durable: bool = True,
        validated: bool = False,
    ) -> SendOutcome:
        """Validate and store a batch in a physical queue. `delta` converts the answer to logic
        space (None: the logic offset is not decided yet, the answer says -1). `validated`: the
        rows were checked by this broker already (sink rows staged here), so they are not again."""
        header = None if validated else validate_batch(batch, self._config.store.max_message_bytes)
        result = self._store.append(topic, queue_id, batch, idempotency_key, durable=durable, header=header)
        if not result.duplicate:
            metrics.record_in(topic, result.count, len(batch.data))
        logic = -1 if delta is None else result.base_offset + delta
        return SendOutcome(
            queue_id, logic, result.count, result.base_offset, result.store_timestamp, result.duplicate, result.end_pos
        )

    # ------------------------------------------------------------------ pull

    def pull(self, query: PullQuery) -> PullOutcome:
        """Pull a plain topic's queue, or (query.physical) one physical queue of a static topic."""
        cfg = self._topics.require(query.topic)
        if not query.physical:
            self._plain_only(cfg)
        if not cfg.readable:
            raise InvalidArgumentError(f"topic {query.topic!r} is not readable on this broker (perm {cfg.perm})")
        _check_queue(cfg, query.queue_id, cfg.read_queues, "read")
        result = self.read_physical(self.limit(query))
        return to_outcome(result, query.queue_id, self._config.name, delta=0)

    def limit(self, query: PullQuery) -> PullQuery:
        """The query checked and capped by this broker's pull limits (pull_limits.py): every pull
        it serves, of any queue, passes here once before anything is read."""
        limits = pull_limits(
            query.offset, query.max_messages, query.max_bytes, query.wait_ms, self._config.max_long_poll_ms
        )
        return replace(query, max_messages=limits.max_messages, max_bytes=limits.max_bytes, wait_ms=limits.wait_ms)

    def read_physical(self, query: PullQuery) -> ReadResult:
        """Read a physical queue, waiting up to `wait_ms` (long polling) when nothing is there.
        The query is within the pull limits already (`limit`)."""
        max_messages, max_bytes = query.max_messages, query.max_bytes
        tags = parse_tag_expression(query.subscription)
        codes = None if tags.takes_all else filter_codes(tags)
        result = self._store.read(query.topic, query.queue_id, query.offset, max_messages, max_bytes, codes)
        if result.pull_status is not PullStatus.NO_NEW_MESSAGE or query.wait_ms <= 0:
            metrics.record_out(query.topic, result.count, len(result.data))
            return result
        deadline = time.monotonic() + query.wait_ms / 1000
        while result.pull_status is PullStatus.NO_NEW_MESSAGE:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._notifier.wait(
                query.topic,
                query.queue_id,
                remaining,
                lambda: self._store.offsets(query.topic, query.queue_id)[1] <= query.offset,
            )
            result = self._store.read(query.topic, query.queue_id, query.offset, max_messages, max_bytes, codes)
        metrics.record_out(query.topic, result.count, len(result.data))
        return result

    # ------------------------------------------------------------------ offsets

    def topic_offsets(self, topic: str) -> list[QueueOffsetInfo]:
        cfg = self._topics.require(topic)
        self._plain_only(cfg)
        return [self.physical_offsets(topic, q) for q in range(max(cfg.read_queues, cfg.write_queues))]

    def physical_offsets(self, topic: str, queue_id: int) -> QueueOffsetInfo:
        lo, hi = self._store.offsets(topic, queue_id)
        return QueueOffsetInfo(
            queue_id,
            lo,
            hi,
            self._store.last_store_timestamp(topic, queue_id),
            self._store.average_message_size(topic, queue_id),
        )

    def search_offset(self, topic: str, queue_id: int, timestamp: int, physical: bool = False) -> int:
        cfg = self._topics.require(topic)
        if not physical:
            self._plain_only(cfg)
        _check_queue(cfg, queue_id, cfg.read_queues, "read")
        return self._store.offset_for_timestamp(topic, queue_id, timestamp)

    @staticmethod
    def _plain_only(cfg: TopicConfig) -> None:
        if cfg.is_static:
            raise StaticTopicRefusedError(
                f"topic {cfg.name!r} is static: its queues are logic queues served through the mapping"
            )


def to_outcome(result: ReadResult, physical_queue_id: int, bname: str, delta: int) -> PullOutcome:
    """A store read as a pull answer; offsets stay physical except next/min/max (shifted by delta)."""
    sizes = b"" if result.sizes is None else result.sizes.astype("<i4").tobytes()
    stamps = b"" if result.store_timestamps is None else np.asarray(result.store_timestamps, "<i8").tobytes()
    return PullOutcome(
        status=result.pull_status,
        next_offset=result.next_offset + delta,
        min_offset=result.min_offset + delta,
        max_offset=result.max_offset + delta,
        base_offset=result.base_offset,
        offset_delta=delta,
        data=result.data,
        sizes=sizes,
        store_timestamps=stamps,
        bname=bname,
        physical_queue_id=physical_queue_id,
        queue_offsets=b"" if result.offsets is None else np.asarray(result.offsets, "<i8").tobytes(),
    )


def _check_queue(cfg: TopicConfig, queue_id: int, count: int, what: str) -> None:
    if not 0 <= queue_id < count:
        raise QueueNotFoundError(
            f"topic {cfg.name!r} has {count} {what} queues on this broker; queue {queue_id} does not exist"
        )
