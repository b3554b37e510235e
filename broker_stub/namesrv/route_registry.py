"""The name server's registry: live brokers, their topics, and the routes clients ask for.

A broker that has not heartbeated for `broker_timeout_s` is expired and leaves every route.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from staticmq_spark.errors import TopicNotFoundError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

log = logging.getLogger(__name__)


@dataclass
class BrokerEntry:
    name: str
    cluster: str
    addr: str
    start_timestamp: int
    last_heartbeat: float
    last_heartbeat_wall_ms: int
    topics: dict[str, pb.TopicRouteEntry] = field(default_factory=dict)


class RouteRegistry:
    def __init__(self, broker_timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_timeout_s = broker_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._brokers: dict[str, BrokerEntry] = {}

    def register(self, request: pb.RegisterBrokerRequest) -> None:
        entry = BrokerEntry(
            name=request.name,
            cluster=request.cluster,
            addr=request.addr,
            start_timestamp=request.start_timestamp,
            last_heartbeat=self._clock(),
            last_heartbeat_wall_ms=int(time.time() * 1000),
            topics={t.config.name: t for t in request.topics},
        )
        with self._lock:
            old = self._brokers.get(request.name)
            self._brokers[request.name] = entry
        if old is None or old.addr != entry.addr:
            log.info("broker %s registered at %s (cluster %s)", entry.name, entry.addr, entry.cluster)

    def unregister(self, name: str) -> None:
        with self._lock:
            if self._brokers.pop(name, None) is not None:
                log.info("broker %s unregistered", name)

    def expire(self) -> list[str]:
        now = self._clock()
        with self._lock:
            dead = [n for n, b in self._brokers.items() if now - b.last_heartbeat > self.broker_timeout_s]
            for name in dead:
                del self._brokers[name]
        for name in dead:
            log.warning("broker %s expired: no heartbeat for %.1fs", name, self.broker_timeout_s)
        return dead

    def route(self, topic: str) -> pb.TopicRoute:
        with self._lock:
            brokers = sorted(self._brokers.values(), key=lambda b: b.name)
        queues = [
            pb.BrokerQueues(
                broker=b.name,
                addr=b.addr,
                cluster=b.cluster,
                config=b.topics[topic].config,
                leaders=b.topics[topic].leaders,
            )
            for b in brokers
            if topic in b.topics
        ]
        if not queues:
            raise TopicNotFoundError(f"no live broker serves topic {topic!r}")
        return pb.TopicRoute(topic=topic, brokers=queues)

    def cluster_info(self) -> pb.ClusterInfo:
        with self._lock:
            brokers = sorted(self._brokers.values(), key=lambda b: b.name)
        return pb.ClusterInfo(
            brokers=[
                pb.ClusterBroker(
                    name=b.name,
                    cluster=b.cluster,
                    addr=b.addr,
                    last_heartbeat=b.last_heartbeat_wall_ms,
                    start_timestamp=b.start_timestamp,
                )
                for b in brokers
            ]
        )
