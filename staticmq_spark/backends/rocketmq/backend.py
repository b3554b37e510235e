"""The Apache RocketMQ backend: a RocketMQ 5 cluster reached over its remoting protocol (pure
Python, no JVM). Static topics are read physically through each broker's mapping; the sink is
exactly once by staging rows and forwarding them after a recorded decision (staged_sink, the
default), exactly once with transactional half messages (transactional_sink, deliveryGuarantee
exactly-once-transactional), or at least once with direct sends and a dedup key per row (direct_sink)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.api import AT_LEAST_ONCE, EXACTLY_ONCE, EXACTLY_ONCE_TRANSACTIONAL, ProducerSettings
from staticmq_spark.backends.pop_port import DEFAULT_POP, PopSettings
from staticmq_spark.backends.rocketmq.admin import RocketMQAdmin
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.reader import RocketMQReader
from staticmq_spark.backends.types import DEFAULT_REQUEST_BYTES, PLAIN, ClientSecurity
from staticmq_spark.errors import InvalidArgumentError

# The sinks, producer and pull consumer are imported where they are first used: a source's
# planning process (pyspark's per-query runner) and its read tasks need only the reader and admin.
if TYPE_CHECKING:
    from staticmq_spark.backends.exclusive_port import ExclusivePort, ExclusiveSettings
    from staticmq_spark.backends.rocketmq.pop_consumer import RocketMQPopPort
    from staticmq_spark.backends.rocketmq.producer import RocketMQProducer
    from staticmq_spark.backends.rocketmq.pull_consumer import RocketMQPullConsumer
    from staticmq_spark.backends.rocketmq.sinks.direct_sink import RocketMQDirectSink
    from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink
    from staticmq_spark.backends.rocketmq.sinks.transactional_sink import RocketMQTransactionalSink

# Producer settings a RocketMQ producer cannot honour, with their defaults: one set otherwise is
# refused. (active_detection and detection_interval_s tune staticmq's probing of brokers for keyless
# rows; a RocketMQ producer never probes, so either value holds trivially.)
_STATICMQ_ONLY_PRODUCER = {"order": None, "retries": 2, "max_request_bytes": DEFAULT_REQUEST_BYTES}


class RocketMQBackend:
    scheme = "rocketmq"
    capabilities = RocketMQReader.capabilities

    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security
        # The backend's one client instance: connections, routes and leaders, shared by every port
        # (each port may take a view of it with its own call timeout).
        self.instance = RocketMQClientInstance(address, security)
        self._reader: RocketMQReader | None = None
        self._sink: RocketMQDirectSink | None = None
        self._transactional: RocketMQTransactionalSink | None = None
        self._staged: RocketMQStagedSink | None = None
        self._lock = threading.Lock()

    def reader(self) -> RocketMQReader:
        with self._lock:
            if self._reader is None:
                self._reader = RocketMQReader(self.instance)
            return self._reader

    def sink(self, delivery: str = EXACTLY_ONCE) -> RocketMQStagedSink | RocketMQDirectSink | RocketMQTransactionalSink:
        with self._lock:
            if delivery == AT_LEAST_ONCE:
                if self._sink is None:
                    from staticmq_spark.backends.rocketmq.sinks.direct_sink import RocketMQDirectSink

                    self._sink = RocketMQDirectSink(self.instance)
                return self._sink
            if delivery == EXACTLY_ONCE_TRANSACTIONAL:
                if self._transactional is None:
                    from staticmq_spark.backends.rocketmq.sinks.transactional_sink import RocketMQTransactionalSink

                    self._transactional = RocketMQTransactionalSink(self.instance)
                return self._transactional
            if delivery != EXACTLY_ONCE:
                raise InvalidArgumentError(
                    f"delivery guarantee {delivery!r}: use {EXACTLY_ONCE}, {EXACTLY_ONCE_TRANSACTIONAL} "
                    f"or {AT_LEAST_ONCE}"
                )
            if self._staged is None:
                from staticmq_spark.backends.rocketmq.sinks.staged_sink import RocketMQStagedSink

                self._staged = RocketMQStagedSink(self.instance)
            return self._staged

    def admin(self, *, timeout_s: float = 10.0, wait_for_ready: bool = True) -> RocketMQAdmin:
        return RocketMQAdmin(RocketMQReader(self.instance.with_timeout(timeout_s)))

    def producer(self, settings: ProducerSettings) -> RocketMQProducer:
        from staticmq_spark.backends.rocketmq.producer import RocketMQProducer

        differs = sorted(k for k, v in _STATICMQ_ONLY_PRODUCER.items() if getattr(settings, k) != v)
        if differs:
            raise InvalidArgumentError(
                f"Producer option(s) {differs} are staticmq-only: an Apache RocketMQ producer sends keyed rows to "
                "murmur3(key) mod totalQueues and keyless rows round-robin, without order strategies or a selector"
            )
        return RocketMQProducer(
            self.instance,
            send_timeout_s=settings.send_timeout_s,
            request_timeout_s=settings.request_timeout_s,
            producer_group=settings.producer_group,
        )

    def pull_consumer(self, *, group: str = "", request_timeout_s: float = 15.0) -> RocketMQPullConsumer:
        from staticmq_spark.backends.rocketmq.pull_consumer import RocketMQPullConsumer

        return RocketMQPullConsumer(self.instance, group=group, request_timeout_s=request_timeout_s)

    def pop_consumer(self, group: str, topic: str, settings: PopSettings = DEFAULT_POP) -> RocketMQPopPort:
        from staticmq_spark.backends.rocketmq.pop_consumer import RocketMQPopPort

        return RocketMQPopPort(self.instance, group, topic, settings)

    def exclusive_consumer(self, group: str, topic: str, settings: ExclusiveSettings) -> ExclusivePort:
        """RocketMQ's rebalance locks and allocation (backends/rocketmq/exclusive_consumer.py)."""
        from staticmq_spark.backends.rocketmq.exclusive_consumer import RocketMQExclusivePort

        return RocketMQExclusivePort(self.instance, group, topic, settings)

    def close(self) -> None:
        with self._lock:
            reader, sinks = self._reader, (self._sink, self._transactional, self._staged)
            self._reader = self._sink = self._transactional = self._staged = None
        if reader is not None:
            reader.close()
        for sink in sinks:
            if sink is not None:
                sink.close()
        self.instance.close()
