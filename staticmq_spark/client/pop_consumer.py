"""The PopConsumer: shared consumption, on staticmq clusters (backends/staticmq/pop_consumer.py) and
on Apache RocketMQ static topics (backends/rocketmq/pop_consumer.py; docs/rocketmq.md).

with PopConsumer(namesrv, "group", "topic") as consumer:
    messages = consumer.receive(max_messages=32, invisible_time=30.0)
    consumer.ack_batch(messages)                            # or consumer.ack(m) one by one
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.types import AckResult, ClientSecurity, PopMessage
from staticmq_spark.closing import Closeable
from staticmq_spark.protocol.security.auth import Credentials


class PopConsumer(Closeable):
    def __init__(
        self,
        namesrv: str,
        group: str,
        topic: str,
        *,
        order: bool = False,
        init_mode: str = "earliest",
        wait_s: float = 5.0,
        request_timeout_s: float = 15.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        self._impl = self._backend.pop_consumer(
            group, topic, order=order, init_mode=init_mode, wait_s=wait_s, request_timeout_s=request_timeout_s
        )
        self.group = group
        self.topic = topic
        self.order = order

    def receive(
        self, max_messages: int = 32, invisible_time: float = 60.0, *, wait_s: float | None = None
    ) -> list[PopMessage]:
        """Pop up to `max_messages`, invisible to other consumers for `invisible_time` seconds."""
        found: list[PopMessage] = self._impl.receive(max_messages, invisible_time, wait_s=wait_s)
        return found

    def ack(self, message: PopMessage) -> None:
        self._impl.ack(message)

    def ack_batch(self, messages: Iterable[PopMessage]) -> AckResult:
        result: AckResult = self._impl.ack_batch(messages)
        return result

    def change_invisible_time(self, message: PopMessage, seconds: float) -> PopMessage:
        changed: PopMessage = self._impl.change_invisible_time(message, seconds)
        return changed

    def close(self) -> None:
        self._impl.close()
        self._backend.close()
