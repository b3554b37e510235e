"""The staticmq backend: a broker_stub cluster reached over gRPC. Everything protocol-specific is
in this package: channels and calls (rpc), routes, the selector, delivery, staging and the
two-phase commit of the sink, the remap protocol (remap.py: switch-new, fence-old, settle-new)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.api import EXACTLY_ONCE, ProducerSettings, TaskWrite
from staticmq_spark.backends.staticmq.admin import StaticMQAdmin
from staticmq_spark.backends.staticmq.pull_consumer import StaticMQPullConsumer
from staticmq_spark.backends.staticmq.reader import StaticMQReader
from staticmq_spark.backends.types import PLAIN, Capabilities, ClientSecurity, WriteSettings

# The sink, producer and consumers are imported where they are first used: a source's planning
# process (pyspark's per-query runner) and its read tasks need only the reader, and every module
# less is CPU less at each query's start.
if TYPE_CHECKING:
    from staticmq_spark.backends.staticmq.exclusive_consumer import StaticMQExclusiveConsumer
    from staticmq_spark.backends.staticmq.pop_consumer import StaticMQPopConsumer
    from staticmq_spark.backends.staticmq.producer import StaticMQProducer
    from staticmq_spark.backends.staticmq.staging import SinkClients


class StaticMQSink:
    """Exactly once: tasks stage rows on each logic queue's leader; the driver's commit stores one
    decision per batch on the participants and commits it (idempotent, re-driven after a crash)."""

    guarantee = EXACTLY_ONCE

    def __init__(self, address: ClusterAddress, security: ClientSecurity) -> None:
        self._address = address
        self._security = security
        self._clients: dict[bool, SinkClients] = {}
        self._lock = threading.Lock()

    def clients(self, active_detection: bool) -> SinkClients:
        from staticmq_spark.backends.staticmq.staging import SinkClients

        with self._lock:
            found = self._clients.get(active_detection)
            if found is None:
                found = self._clients[active_detection] = SinkClients.open(
                    str(self._address), self._security, active_detection
                )
            return found

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, batches: Iterator[pa.RecordBatch]
    ) -> TaskWrite:
        from staticmq_spark.backends.staticmq.staging import Stager
        from staticmq_spark.backends.staticmq.two_phase import StagedTask

        stager = Stager(self.clients(settings.active_detection), settings, writer, batch)
        for rb in batches:
            stager.stage_arrow(rb)
        stager.flush()
        return TaskWrite(writer, batch, partition, stager.rows, StagedTask(stager.staging_id, stager.staged()))

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        from staticmq_spark.backends.staticmq.two_phase import commit_batch

        return commit_batch(self.clients(settings.active_detection).channels, settings, writer, batch, tasks)

    def aborted(self) -> str:
        return "its staged rows are never made visible"

    def close(self) -> None:
        with self._lock:
            for clients in self._clients.values():
                clients.detector.stop()
                clients.channels.close()
            self._clients.clear()


class StaticMQBackend:
    scheme = "staticmq"
    capabilities = Capabilities(two_phase_staging=True, pop=True)

    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security
        self._reader: StaticMQReader | None = None
        self._sink: StaticMQSink | None = None
        self._lock = threading.Lock()

    def reader(self) -> StaticMQReader:
        with self._lock:
            if self._reader is None:
                self._reader = StaticMQReader(self.address, self.security)
            return self._reader

    def sink(self, delivery: str = EXACTLY_ONCE) -> StaticMQSink:
        """Exactly once for either `delivery` (two-phase staging is this backend's only sink)."""
        with self._lock:
            if self._sink is None:
                self._sink = StaticMQSink(self.address, self.security)
            return self._sink

    def admin(self, *, timeout_s: float = 10.0, wait_for_ready: bool = True) -> StaticMQAdmin:
        s = self.security
        return StaticMQAdmin(
            str(self.address),
            timeout_s=timeout_s,
            wait_for_ready=wait_for_ready,
            credentials=s.credentials,
            tls_ca=s.tls_ca,
        )

    def producer(self, settings: ProducerSettings) -> StaticMQProducer:
        from staticmq_spark.backends.staticmq.producer import StaticMQProducer

        return StaticMQProducer(
            str(self.address),
            order=settings.order,
            send_timeout_s=settings.send_timeout_s,
            request_timeout_s=settings.request_timeout_s,
            retries=settings.retries,
            active_detection=settings.active_detection,
            detection_interval_s=settings.detection_interval_s,
            max_request_bytes=settings.max_request_bytes,
            credentials=self.security.credentials,
            tls_ca=self.security.tls_ca,
        )

    def pull_consumer(self, *, group: str = "", request_timeout_s: float = 15.0) -> StaticMQPullConsumer:
        return StaticMQPullConsumer(
            str(self.address),
            group=group,
            request_timeout_s=request_timeout_s,
            credentials=self.security.credentials,
            tls_ca=self.security.tls_ca,
        )

    def pop_consumer(self, group: str, topic: str, **options: Any) -> StaticMQPopConsumer:
        from staticmq_spark.backends.staticmq.pop_consumer import StaticMQPopConsumer

        return StaticMQPopConsumer(
            str(self.address),
            group,
            topic,
            credentials=self.security.credentials,
            tls_ca=self.security.tls_ca,
            **options,
        )

    def exclusive_consumer(self, group: str, topic: str, **options: Any) -> StaticMQExclusiveConsumer:
        from staticmq_spark.backends.staticmq.exclusive_consumer import StaticMQExclusiveConsumer

        return StaticMQExclusiveConsumer(
            str(self.address),
            group,
            topic,
            credentials=self.security.credentials,
            tls_ca=self.security.tls_ca,
            **options,
        )

    def close(self) -> None:
        with self._lock:
            reader, sink = self._reader, self._sink
            self._reader = self._sink = None
        if reader is not None:
            reader.close()
        if sink is not None:
            sink.close()
