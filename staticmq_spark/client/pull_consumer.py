"""The PullConsumer: pulls with explicit offsets (what the Spark source does), offset queries and
group offset commits, on any backend. Pulled messages arrive as one Arrow record batch per pull."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.types import ClientSecurity, PullResult, QueueAddress, QueueOffsets
from staticmq_spark.closing import Closeable
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.consume.tag_filter import tag_matches
from staticmq_spark.protocol.security.auth import Credentials

__all__ = ["PullConsumer", "QueueOffsets"]


class PullConsumer(Closeable):
    """`PullConsumer("host:port")` reads a staticmq cluster, `PullConsumer("rocketmq://host:port")`
    Apache RocketMQ. On a static topic, queue ids and offsets are logic ones."""

    def __init__(
        self,
        namesrv: str,
        *,
        group: str = "",
        request_timeout_s: float = 15.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        self._port = self._backend.pull_consumer(group=group, request_timeout_s=request_timeout_s)
        self.group = group

    def queues(self, topic: str, refresh: bool = False) -> list[QueueAddress]:
        """The topic's readable queues: logic queues for a static topic, else (broker, queue) pairs."""
        return self._port.queues(topic, refresh)

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
        tags: str = "",
    ) -> PullResult:
        """Pull from `offset`; long-polls up to `wait_ms` when nothing is there yet. `tags`: a tag
        expression (RocketMQ's `TagA || TagB`, `*` for all) applied by the broker; the messages
        skipped leave gaps in the offsets, and a pull that matched nothing answers RETRY_AT_NEXT
        with the offset to go on from."""
        wanted = parse_tag_expression(tags)
        result = self._port.pull(
            topic,
            queue_id,
            offset,
            max_messages=max_messages,
            max_bytes=max_bytes,
            wait_ms=wait_ms,
            broker=broker,
            subscription="" if wanted.takes_all else wanted.expression,
        )
        if wanted.takes_all or result.batch.num_rows == 0:
            return result
        return replace(result, batch=result.batch.filter(tag_matches(wanted, result.batch.column("tags"))))

    def offsets(self, topic: str) -> list[QueueOffsets]:
        """min/max offsets of every queue (logic offsets on a static topic)."""
        return self._port.offsets(topic)

    def min_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        return self._port.min_offset(topic, queue_id, broker)

    def max_offset(self, topic: str, queue_id: int, broker: str | None = None) -> int:
        return self._port.max_offset(topic, queue_id, broker)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int, broker: str | None = None) -> int:
        """The first offset stored at or after `timestamp_ms` (the max offset if none is)."""
        return self._port.offset_for_timestamp(topic, queue_id, timestamp_ms, broker)

    def commit(self, topic: str, queue_id: int, offset: int, broker: str | None = None) -> None:
        """Commit the group's offset for a queue (the next offset to consume)."""
        self._port.commit(topic, queue_id, offset, broker)

    def committed(self, topic: str, queue_id: int, broker: str | None = None) -> int | None:
        return self._port.committed(topic, queue_id, broker)

    def topic_is_static(self, topic: str) -> bool:
        """Whether `topic` is a static topic (queue ids and offsets are then logic ones)."""
        return self._port.topic_is_static(topic)

    def close(self) -> None:
        self._port.close()
        self._backend.close()
