"""The staticmq backend's one client instance: the connection state that every port of a backend
shares (admin, reader, producers, consumers, sink), like RocketMQ's MQClientInstance or
kafka-python's ClusterMetadata. It holds one gRPC channel per address, the route cache fed by the
name server and the active detection that probes brokers. Ports take the instance; only the backend
makes it and closes it, so a port never opens or closes connections of its own."""

from __future__ import annotations

import threading

from staticmq_spark.backends.address import ClusterAddress
from staticmq_spark.backends.staticmq.route import RouteCache
from staticmq_spark.backends.staticmq.rpc import Channels
from staticmq_spark.backends.staticmq.selector import ReachabilityDetector
from staticmq_spark.closing import Closeable
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity

# How long a cached route is used before the name server is asked again. A stale route costs at
# most one refused call: a fenced or moved queue's broker refuses, and the caller refreshes.
ROUTE_TTL_S = 10.0


class StaticMQClientInstance(Closeable):
    def __init__(self, address: ClusterAddress, security: ClientSecurity = PLAIN) -> None:
        self.address = address
        self.security = security
        self.channels = Channels(security)
        self.routes = RouteCache(str(address), self.channels, ttl_s=ROUTE_TTL_S)
        self._detectors: dict[float, ReachabilityDetector] = {}
        self._lock = threading.Lock()

    @property
    def namesrv(self) -> str:
        return str(self.address)

    def detector(self, *, enabled: bool = True, interval_s: float = 2.0) -> ReachabilityDetector:
        """The shared active detection probing brokers every `interval_s` (its thread starts when a
        port first asks it to watch brokers); with `enabled=False` one that finds every broker
        reachable and never probes."""
        if not enabled:
            return ReachabilityDetector(self.channels, enabled=False)
        with self._lock:
            found = self._detectors.get(interval_s)
            if found is None:
                found = self._detectors[interval_s] = ReachabilityDetector(self.channels, interval_s=interval_s)
            return found

    def close(self) -> None:
        with self._lock:
            detectors = list(self._detectors.values())
            self._detectors.clear()
        for detector in detectors:
            detector.stop()
        self.channels.close()
