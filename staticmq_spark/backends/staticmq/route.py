"""A cache of topic routes (protocol/topics/route_view.py) fed by the name server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from staticmq_spark.backends.address import parse_address
from staticmq_spark.backends.first_contact import AnsweredAddresses
from staticmq_spark.backends.staticmq.rpc import Channels, first_call, invoke
from staticmq_spark.errors import (
    BrokerUnavailableError,
    FirstContactError,
    InvalidOptionError,
    NameServerUnreachableError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.topics.route_view import TopicRouteView
from staticmq_spark.protocol.wire.topic_route import route_from_pb

T = TypeVar("T")


# Name servers (address, CA file or None) that answered this process at least once. A first call
# to one that never did is not waited for and names the cause (rpc.first_call); a list none of
# whose addresses ever answered fails at once (NameServerUnreachableError, not retriable); one
# that answered before and went away is retried.
_ANSWERED = AnsweredAddresses()


class RouteCache:
    """Routes per topic, refreshed after `ttl_s` or on demand (stale route, failed send)."""

    def __init__(self, namesrv: str, channels: Channels, ttl_s: float = 30.0, timeout_s: float = 5.0) -> None:
        address = parse_address(namesrv)
        if address.scheme != "staticmq":
            raise InvalidOptionError(
                f"{namesrv!r} is an Apache RocketMQ address: this client speaks staticmq's own protocol. On RocketMQ "
                "use the client classes (Producer, PullConsumer, PopConsumer, ExclusiveConsumer, Admin), the Spark "
                "source and sink, and `staticmq send/pull/admin`"
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
        return self._ask(lambda stub: stub.GetRoute, pb.TopicName(topic=topic))

    def cluster_info(self) -> pb.ClusterInfo:
        return self._ask(lambda stub: stub.GetClusterInfo, pb.Empty())

    def _ask(self, method: Callable[[pb_grpc.NameServerStub], Callable[..., T]], request: Any) -> T:
        """`method(stub)(request)` on the first name server that answers, in list order."""
        ca = self._channels.security.tls_ca  # an answer over plain text, or with another CA, proves nothing
        last: BrokerUnavailableError | None = None
        causes: list[str] = []
        for addr in self.namesrv_addrs:
            call = method(self._channels.namesrv(addr))
            try:
                if (addr, ca) in _ANSWERED:
                    answer = invoke("name server", call, request, self._timeout_s)
                else:
                    answer = first_call(addr, call, request, self._timeout_s, tls=bool(ca))
            except (BrokerUnavailableError, FirstContactError) as exc:
                last = BrokerUnavailableError(f"name server {addr} is unavailable: {exc.message}")
                causes.append(exc.message)
            else:
                _ANSWERED.mark((addr, ca))
                return answer
        if not any((addr, ca) in _ANSWERED for addr in self.namesrv_addrs):
            raise NameServerUnreachableError(
                f"no name server at {';'.join(self.namesrv_addrs)} has answered: {'; '.join(causes)}"
            )
        assert last is not None
        raise last
