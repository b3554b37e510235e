"""A cache of topic routes (protocol/route_view.py) fed by the name server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.staticmq.rpc import Channels, invoke
from staticmq_spark.errors import (
    BrokerUnavailableError,
    InvalidOptionError,
    NameServerUnreachableError,
    StaticMQError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.route_view import TopicRouteView
from staticmq_spark.protocol.route_wire import route_from_pb

T = TypeVar("T")


# Name-server addresses that answered this process at least once. One that never did fails fast
# (NameServerUnreachableError, not retriable); one that answered before and went away is retried.
_ANSWERED: set[str] = set()


class RouteCache:
    """Routes per topic, refreshed after `ttl_s` or on demand (stale route, failed send)."""

    def __init__(self, namesrv: str, channels: Channels, ttl_s: float = 30.0, timeout_s: float = 5.0) -> None:
        address = parse_address(namesrv)
        if address.scheme != "staticmq":
            raise InvalidOptionError(
                f"{namesrv!r} is an Apache RocketMQ address: this client speaks staticmq's own protocol. On RocketMQ "
                "use Producer, PullConsumer, the Spark source and sink, `staticmq send/pull` and the read-only "
                "`staticmq admin` commands; PopConsumer, ExclusiveConsumer and Admin are staticmq-only"
            )
        self.namesrv_addrs = list(address.hosts)
        self._channels = channels
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[float, TopicRouteView]] = {}

    def get(self, topic: str, refresh: bool = False) -> TopicRouteView:
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self._ttl_s:
            return cached[1]
        view = route_from_pb(self.fetch(topic))
        with self._lock:
            self._routes[topic] = (time.monotonic(), view)
        return view

    def invalidate(self, topic: str) -> None:
        with self._lock:
            self._routes.pop(topic, None)

    def fetch(self, topic: str) -> pb.TopicRoute:
        return self._ask(lambda stub: invoke("name server", stub.GetRoute, pb.TopicName(topic=topic), self._timeout_s))

    def cluster_info(self) -> pb.ClusterInfo:
        return self._ask(lambda stub: invoke("name server", stub.GetClusterInfo, pb.Empty(), self._timeout_s))

    def _ask(self, call: Callable[[pb_grpc.NameServerStub], T]) -> T:
        last: StaticMQError | None = None
        for addr in self.namesrv_addrs:
            try:
                answer = call(self._channels.namesrv(addr))
            except BrokerUnavailableError as exc:
                last = BrokerUnavailableError(f"name server {addr} is unavailable: {exc.message}")
            else:
                _ANSWERED.add(addr)
                return answer
        if not _ANSWERED.intersection(self.namesrv_addrs):
            tls = "" if self._channels.security.tls_ca else ", or whether the cluster serves TLS (--tls-ca / tlsCaFile)"
            raise NameServerUnreachableError(
                f"no name server at {';'.join(self.namesrv_addrs)} has answered: check the address "
                f"(-n / NAMESRV_ADDR / the namesrv option){tls}; last error: {last.message if last else 'none'}"
            )
        assert last is not None
        raise last
