"""The ExclusiveConsumer: ordered consumption of queues it holds the broker-side lock of, on
staticmq clusters (backends/staticmq/exclusive_consumer.py: pull locks the brokers enforce) and on
Apache RocketMQ (backends/rocketmq/exclusive_consumer.py: the group's averaged allocation and the
rebalance locks RocketMQ's orderly consumers use, lease_s at most 30 s)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.types import ClientSecurity, PullResult, QueueAddress
from staticmq_spark.closing import Closeable
from staticmq_spark.protocol.security.auth import Credentials


class ExclusiveConsumer(Closeable):
    def __init__(
        self,
        namesrv: str,
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
        credentials: Credentials | tuple[str, str] | None = None,
        tls_ca: str | Path | None = None,
    ) -> None:
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        self._impl = self._backend.exclusive_consumer(
            group,
            topic,
            queues=queues,
            lease_s=lease_s,
            client_id=client_id,
            auto_commit=auto_commit,
            init_mode=init_mode,
            retry_lock_s=retry_lock_s,
            request_timeout_s=request_timeout_s,
        )
        self.group = group
        self.topic = topic
        self.client_id: str = self._impl.client_id

    @property
    def held(self) -> list[QueueAddress]:
        """Queues this consumer holds a live lease on now."""
        held: list[QueueAddress] = self._impl.held
        return held

    def poll(self, max_messages: int = 1024, wait_s: float = 1.0) -> list[PullResult]:
        found: list[PullResult] = self._impl.poll(max_messages, wait_s)
        return found

    def renew(self) -> list[QueueAddress]:
        renewed: list[QueueAddress] = self._impl.renew()
        return renewed

    def commit(self) -> None:
        self._impl.commit()

    def close(self) -> None:
        self._impl.close()
        self._backend.close()
