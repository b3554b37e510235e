"""The ExclusiveConsumer: ordered consumption of queues it holds the broker-side lock of, on
staticmq clusters (pull locks the brokers enforce) and on Apache RocketMQ (the group's averaged
allocation and the rebalance locks RocketMQ's orderly consumers use, lease_s at most 30 s).

    with ExclusiveConsumer(namesrv, "group", "topic", lease_s=10) as consumer:
        for result in consumer.poll(max_messages=500, wait_s=1.0):
            handle(result.batch)            # Arrow, in queue order, one PullResult per queue
        consumer.commit()                   # or leave it to auto_commit on the next poll

The loop (locks, leases, hand-over, offsets) is client/exclusive_loop.py, written once over the
backend's ExclusivePort (backends/exclusive_port.py); what each backend does underneath is in
backends/staticmq/exclusive_consumer.py and backends/rocketmq/exclusive_consumer.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from staticmq_spark.backends import open_backend
from staticmq_spark.backends.exclusive_port import ExclusiveSettings
from staticmq_spark.backends.types import ClientSecurity, check_init_mode
from staticmq_spark.client.exclusive_loop import ExclusiveLoop
from staticmq_spark.protocol.security.auth import Credentials


class ExclusiveConsumer(ExclusiveLoop):
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
        check_init_mode(init_mode)
        self._backend = open_backend(namesrv, ClientSecurity.of(credentials, tls_ca))
        try:
            pinned = None if queues is None else tuple(queues)
            settings = ExclusiveSettings(pinned, lease_s, client_id, init_mode, request_timeout_s)
            port = self._backend.exclusive_consumer(group, topic, settings)
        except BaseException:
            self._backend.close()
            raise
        super().__init__(port, auto_commit=auto_commit, init_mode=init_mode, retry_lock_s=retry_lock_s)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._backend.close()
