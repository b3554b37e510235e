"""The staticmq backend: a broker_stub cluster reached over gRPC. Everything protocol-specific is
in this package: channels and calls (rpc), routes, the selector, delivery, staging and the
two-phase commit of the sink, the static-topic admin (static_topics.py: create/grow and remap are
the shared steps of backends/static_topic_steps.py, switch-new, fence-old, settle-new)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.api import EXACTLY_ONCE, ProducerSettings, TaskWrite
from staticmq_spark.backends.pop_port import DEFAULT_POP, PopSettings
from staticmq_spark.backends.staticmq.admin import StaticMQAdmin
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pull_consumer import StaticMQPullConsumer
from staticmq_spark.backends.staticmq.reader import StaticMQReader
from staticmq_spark.backends.types import PLAIN, ClientSecurity, SinkRows, WriteSettings
from staticmq_spark.errors import InvalidOptionError

# The sink, producer and consumers are imported where they are first used: a source's planning
# process (pyspark's per-query runner) and its read tasks need only the reader, and every module
# less is CPU less at each query's start.
if TYPE_CHECKING:
    from staticmq_spark.backends.exclusive_port import ExclusivePort, ExclusiveSettings
    from staticmq_spark.backends.staticmq.pop_consumer import StaticMQPopPort
    from staticmq_spark.backends.staticmq.producer import StaticMQProducer
    from staticmq_spark.backends.staticmq.staging import SinkClients


class StaticMQSink:
    """Exactly once: tasks stage rows on each logic queue's leader; the driver's commit stores one
    decision per batch on the participants and commits it (idempotent, re-driven after a crash)."""

    guarantee = EXACTLY_ONCE

    def __init__(self, instance: StaticMQClientInstance) -> None:
        self._instance = instance
        self._clients: SinkClients | None = None
        self._lock = threading.Lock()

    def clients(self) -> SinkClients:
        from staticmq_spark.backends.staticmq.staging import SinkClients

        with self._lock:
            if self._clients is None:
                self._clients = SinkClients.of(self._instance)
            return self._clients

    def total_queues(self, topic: str) -> int:
        route = self._instance.routes.get(topic)
        if not route.is_static:
            raise InvalidOptionError(f"topic {topic!r} is not a static topic: the sink writes static topics")
        return route.total_queues

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
    ) -> TaskWrite:
        from staticmq_spark.backends.staticmq.staging import Stager
        from staticmq_spark.backends.staticmq.two_phase import StagedTask

        stager = Stager(self.clients(), settings, writer, batch)
        for placed in rows:
            stager.stage(placed)
        stager.flush()
        return TaskWrite(writer, batch, partition, stager.rows, StagedTask(stager.staging_id, stager.staged()))

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        from staticmq_spark.backends.staticmq.two_phase import commit_batch

        return commit_batch(self._instance, settings, writer, batch, tasks)

    def aborted(self) -> str:
        return "its staged rows are never made visible"

    def close(self) -> None:
        """Nothing to release: the connections and the detection are the backend's."""


class StaticMQBackend:
    """One client instance (channels, routes, detection) made here and handed to every port."""

    scheme = "staticmq"
    capabilities = StaticMQReader.capabilities

    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security
        self.instance = StaticMQClientInstance(address, security)
        self._reader: StaticMQReader | None = None
        self._sink: StaticMQSink | None = None
        self._lock = threading.Lock()

    def reader(self) -> StaticMQReader:
        with self._lock:
            if self._reader is None:
                self._reader = StaticMQReader(self.instance)
            return self._reader

    def sink(self, delivery: str = EXACTLY_ONCE) -> StaticMQSink:
        """Exactly once for either `delivery` (two-phase staging is this backend's only sink)."""
        with self._lock:
            if self._sink is None:
                self._sink = StaticMQSink(self.instance)
            return self._sink

    def admin(self, *, timeout_s: float = 10.0, wait_for_ready: bool = True) -> StaticMQAdmin:
        return StaticMQAdmin(self.instance, timeout_s=timeout_s, wait_for_ready=wait_for_ready)

    def producer(self, settings: ProducerSettings) -> StaticMQProducer:
        from staticmq_spark.backends.staticmq.producer import StaticMQProducer

        return StaticMQProducer(
            self.instance,
            order=settings.order,
            send_timeout_s=settings.send_timeout_s,
            request_timeout_s=settings.request_timeout_s,
            retries=settings.retries,
            active_detection=settings.active_detection,
            detection_interval_s=settings.detection_interval_s,
            max_request_bytes=settings.max_request_bytes,
        )

    def pull_consumer(self, *, group: str = "", request_timeout_s: float = 15.0) -> StaticMQPullConsumer:
        return StaticMQPullConsumer(self.instance, group=group, request_timeout_s=request_timeout_s)

    def pop_consumer(self, group: str, topic: str, settings: PopSettings = DEFAULT_POP) -> StaticMQPopPort:
        from staticmq_spark.backends.staticmq.pop_consumer import StaticMQPopPort

        return StaticMQPopPort(self.instance, group, topic, settings)

    def exclusive_consumer(self, group: str, topic: str, settings: ExclusiveSettings) -> ExclusivePort:
        """staticmq's pull locks (backends/staticmq/exclusive_consumer.py)."""
        from staticmq_spark.backends.staticmq.exclusive_consumer import StaticMQExclusivePort

        return StaticMQExclusivePort(self.instance, group, topic, settings)

    def close(self) -> None:
        with self._lock:
            reader, sink = self._reader, self._sink
            self._reader = self._sink = None
        if reader is not None:
            reader.close()
        if sink is not None:
            sink.close()
        self.instance.close()
